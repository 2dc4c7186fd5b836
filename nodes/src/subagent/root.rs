//! The root agent's merge rules: its effective tools and skills for one request, from the
//! top-level options, the constructor's capabilities and a per-request override.
//!
//! Here a **capability entry overrides a top-level entry of the same name** (later wins in the
//! dedup). This is not the catalog's rule: [`Catalog`](crate::Catalog) assembly keeps the
//! *first* tool of each name by source priority (config, built-in, MCP, other). The two apply
//! at different places: this merge decides, within one kind (connection tools, custom tools),
//! which definition the root agent is given; the catalog then resolves names across kinds.

use std::fmt;
use std::sync::Arc;

use crate::tool::Tool;

/// A list of shared tools.
type Tools = Vec<Arc<dyn Tool>>;

/// The root agent's capability fields (each `None`: fall back to the top-level behaviour).
#[derive(Clone, Default)]
pub struct RootCapabilities {
    /// Connection tools added after the top-level pool.
    pub connection_tools: Option<Vec<Arc<dyn Tool>>>,
    /// Custom tools added after the top-level ones.
    pub custom_tools: Option<Vec<Arc<dyn Tool>>>,
    /// Skills replacing the registry's view.
    pub skills: Option<Vec<String>>,
}

impl fmt::Debug for RootCapabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootCapabilities")
            .field(
                "connection_tools",
                &self.connection_tools.as_deref().map(names),
            )
            .field("custom_tools", &self.custom_tools.as_deref().map(names))
            .field("skills", &self.skills)
            .finish()
    }
}

/// The root agent's top-level options.
#[derive(Clone, Default)]
pub struct RootOptions {
    /// The top-level connection pool.
    pub connection_tools: Vec<Arc<dyn Tool>>,
    /// The top-level custom tools.
    pub custom_tools: Vec<Arc<dyn Tool>>,
    /// The skill registry's view (every enabled skill).
    pub registry_skills: Vec<String>,
}

impl fmt::Debug for RootOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootOptions")
            .field("connection_tools", &names(&self.connection_tools))
            .field("custom_tools", &names(&self.custom_tools))
            .field("registry_skills", &self.registry_skills)
            .finish()
    }
}

/// The root agent's effective tools and skills for one request.
#[derive(Clone)]
pub struct EffectiveRoot {
    /// Connection tools: the top-level pool, then the capability's (same name: the
    /// capability's wins).
    pub connection_tools: Vec<Arc<dyn Tool>>,
    /// Custom tools, merged the same way.
    pub custom_tools: Vec<Arc<dyn Tool>>,
    /// The skills.
    pub skills: Vec<String>,
}

impl fmt::Debug for EffectiveRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EffectiveRoot")
            .field("connection_tools", &names(&self.connection_tools))
            .field("custom_tools", &names(&self.custom_tools))
            .field("skills", &self.skills)
            .finish()
    }
}

fn names(tools: &[Arc<dyn Tool>]) -> Vec<String> {
    tools.iter().map(|t| t.spec().name.clone()).collect()
}

/// The effective definition of one request: the request's override beats the constructor's
/// capabilities field by field; an unset field falls back to the top-level options.
pub fn effective_root(
    options: &RootOptions,
    constructor: &RootCapabilities,
    request: Option<&RootCapabilities>,
) -> EffectiveRoot {
    let pick = |f: fn(&RootCapabilities) -> Option<&Tools>| {
        request.and_then(f).or_else(|| f(constructor)).cloned()
    };
    let connection = pick(|c| c.connection_tools.as_ref());
    let custom = pick(|c| c.custom_tools.as_ref());
    let skills = request
        .and_then(|r| r.skills.clone())
        .or_else(|| constructor.skills.clone())
        .unwrap_or_else(|| options.registry_skills.clone());
    EffectiveRoot {
        connection_tools: later_wins(&options.connection_tools, connection.unwrap_or_default()),
        custom_tools: later_wins(&options.custom_tools, custom.unwrap_or_default()),
        skills,
    }
}

/// `base` then `overrides`, deduplicated by name: an override replaces the base entry of the
/// same name in place; new names are appended.
fn later_wins(base: &[Arc<dyn Tool>], overrides: Vec<Arc<dyn Tool>>) -> Vec<Arc<dyn Tool>> {
    let mut out: Vec<Arc<dyn Tool>> = Vec::with_capacity(base.len() + overrides.len());
    for tool in base.iter().cloned().chain(overrides) {
        match out.iter_mut().find(|t| t.spec().name == tool.spec().name) {
            Some(slot) => *slot = tool,
            None => out.push(tool),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolMessage;
    use crate::tool::{FnTool, ToolSource, ToolSpec};

    fn tool(name: &str, description: &str) -> Arc<dyn Tool> {
        Arc::new(FnTool::new(
            ToolSpec::new(name, description, ToolSource::Other),
            |call, _cx| async move { Ok(ToolMessage::new(call.id, "t", "ok").into()) },
        ))
    }

    fn descriptions(tools: &[Arc<dyn Tool>]) -> Vec<String> {
        tools
            .iter()
            .map(|t| format!("{}={}", t.spec().name, t.spec().description))
            .collect()
    }

    #[test]
    fn a_capability_entry_overrides_the_top_level_entry_of_the_same_name() {
        let options = RootOptions {
            custom_tools: vec![tool("a", "top"), tool("b", "top")],
            ..RootOptions::default()
        };
        let ctor = RootCapabilities {
            custom_tools: Some(vec![tool("b", "cap"), tool("c", "cap")]),
            ..RootCapabilities::default()
        };
        let eff = effective_root(&options, &ctor, None);
        assert_eq!(descriptions(&eff.custom_tools), ["a=top", "b=cap", "c=cap"]);
    }

    #[test]
    fn a_per_request_override_beats_the_constructor_and_unset_fields_fall_back() {
        let options = RootOptions {
            connection_tools: vec![tool("m", "top")],
            registry_skills: vec!["all".into()],
            ..RootOptions::default()
        };
        let ctor = RootCapabilities {
            connection_tools: Some(vec![tool("m", "ctor")]),
            skills: Some(vec!["ctor-skill".into()]),
            ..RootCapabilities::default()
        };
        let request = RootCapabilities {
            connection_tools: Some(vec![tool("m", "request")]),
            ..RootCapabilities::default()
        };
        let eff = effective_root(&options, &ctor, Some(&request));
        assert_eq!(descriptions(&eff.connection_tools), ["m=request"]);
        assert_eq!(eff.skills, ["ctor-skill"]);
        let bare = effective_root(&options, &RootCapabilities::default(), None);
        assert_eq!(descriptions(&bare.connection_tools), ["m=top"]);
        assert_eq!(bare.skills, ["all"]);
    }
}
