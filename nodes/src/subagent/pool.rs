//! Capability resolution: a derived agent's tool pool from the runtime's built-in tools and its
//! own capabilities, in the fixed order of the capability model, with for every tool left out
//! the rule that left it out ([`ResolvedPool`]).
//!
//! 1. built-in tools (runtime-global) + `custom_tools` + `connection_tools` (agent-local; the
//!    parent's agent-local tools never come along)
//! 2. the allow list, over built-in tools only
//! 3. the deny list, over the whole pool
//! 4. no `task` / `multi_task` (depth one)
//! 5. exploring: read-only tools (an MCP read-only hint counts) and the shell only
//! 6. the deferred split (done by the child's own assembly: its own deferred registry)

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::tool::{Tool, ToolSpec};

use super::spec::SubagentSpec;

/// The delegation tool's name.
pub const TASK_TOOL: &str = "task";
/// The parallel delegation tool's name.
pub const MULTI_TASK_TOOL: &str = "multi_task";

/// Where a tool of a pool comes from, in the capability model's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolOrigin {
    /// A built-in tool implementation of the runtime (runtime-global).
    BuiltIn,
    /// One of the parent's own tools (agent-local to the parent).
    ParentLocal,
    /// One of the child's custom tools.
    Custom,
    /// One of the child's connection tools.
    Connection,
    /// A memory tool, granted by the child's spec
    /// ([`Capabilities::memory`](super::Capabilities::memory)); the allow list over built-ins
    /// does not apply to it, the deny list and the exploring rule do.
    Memory,
}

/// Why a tool is not in a child's pool: the rule that took it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exclusion {
    /// An agent-local tool of the parent: capabilities are never inherited.
    AgentLocal,
    /// A built-in tool not on the child's allow list.
    NotAllowed,
    /// On the child's deny list.
    Denied,
    /// `task` or `multi_task`: a derived agent cannot delegate (depth one).
    NoRecursion,
    /// Neither read-only nor the shell, in an exploring agent.
    NotReadOnly,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Exclusion::AgentLocal => "agent-local to the parent (never inherited)",
            Exclusion::NotAllowed => "built-in tool not on the allow list",
            Exclusion::Denied => "on the deny list",
            Exclusion::NoRecursion => "delegation tools are not given to a subagent (depth one)",
            Exclusion::NotReadOnly => "not read-only, and the agent is exploring",
        })
    }
}

/// A tool the child got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Granted {
    /// Its name.
    pub name: String,
    /// Where it comes from.
    pub origin: PoolOrigin,
    /// Whether it is read-only.
    pub read_only: bool,
    /// Whether it goes into the child's deferred catalog (found through its `tool_search`).
    pub deferred: bool,
}

/// A tool the child did not get, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Excluded {
    /// Its name.
    pub name: String,
    /// Where it comes from.
    pub origin: PoolOrigin,
    /// The rule that took it out.
    pub reason: Exclusion,
}

/// A child's pool as resolved: what it got and, for every candidate it did not get, why.
#[derive(Clone, Default, Serialize)]
pub struct ResolvedPool {
    /// The tools granted, in candidate order.
    pub granted: Vec<Granted>,
    /// The tools left out, in candidate order.
    pub excluded: Vec<Excluded>,
    #[serde(skip)]
    tools: Vec<Arc<dyn Tool>>,
}

impl fmt::Debug for ResolvedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedPool")
            .field("granted", &self.granted)
            .field("excluded", &self.excluded)
            .finish()
    }
}

impl ResolvedPool {
    /// The names granted.
    pub fn names(&self) -> Vec<&str> {
        self.granted.iter().map(|g| g.name.as_str()).collect()
    }

    /// Why `name` was left out (`None`: granted, or never a candidate).
    pub fn why_not(&self, name: &str) -> Option<Exclusion> {
        self.excluded
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.reason)
    }

    /// The granted tool implementations (what the child's agent is built with).
    pub(crate) fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// One line per tool: `+ name (origin)` or `- name: reason`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for g in &self.granted {
            let deferred = if g.deferred { ", deferred" } else { "" };
            out.push_str(&format!("+ {} ({:?}{deferred})\n", g.name, g.origin));
        }
        for e in &self.excluded {
            out.push_str(&format!("- {}: {}\n", e.name, e.reason));
        }
        out
    }
}

/// Whether `spec` is the shell (exploring agents keep it).
pub fn is_shell(spec: &ToolSpec) -> bool {
    spec.name == "bash" || spec.group.as_deref() == Some("bash")
}

/// Resolve the pool of a child of type `spec`: `builtins` are the runtime's built-in tool
/// implementations, `parent_local` the specs of the parent's own tools (listed only to say
/// why they do not come along: their implementations are never reachable from here).
pub fn resolve_pool(
    builtins: &[Arc<dyn Tool>],
    parent_local: &[ToolSpec],
    spec: &SubagentSpec,
) -> ResolvedPool {
    let caps = &spec.capabilities;
    let mut pool = ResolvedPool::default();
    for local in parent_local {
        pool.excluded.push(Excluded {
            name: local.name.clone(),
            origin: PoolOrigin::ParentLocal,
            reason: Exclusion::AgentLocal,
        });
    }
    let memory = if caps.memory {
        crate::memory::memory_tools()
    } else {
        Vec::new()
    };
    let candidates = builtins
        .iter()
        .map(|t| (PoolOrigin::BuiltIn, t))
        .chain(caps.custom_tools.iter().map(|t| (PoolOrigin::Custom, t)))
        .chain(
            caps.connection_tools
                .iter()
                .map(|t| (PoolOrigin::Connection, t)),
        )
        .chain(memory.iter().map(|t| (PoolOrigin::Memory, t)));
    for (origin, tool) in candidates {
        let s = tool.spec();
        match exclusion(origin, s, spec) {
            Some(reason) => pool.excluded.push(Excluded {
                name: s.name.clone(),
                origin,
                reason,
            }),
            None => {
                pool.granted.push(Granted {
                    name: s.name.clone(),
                    origin,
                    read_only: s.read_only,
                    deferred: s.deferrable,
                });
                pool.tools.push(Arc::clone(tool));
            }
        }
    }
    pool
}

/// The first rule (in resolution order) that takes `tool` out of the pool of `spec`.
fn exclusion(origin: PoolOrigin, tool: &ToolSpec, spec: &SubagentSpec) -> Option<Exclusion> {
    let caps = &spec.capabilities;
    if origin == PoolOrigin::BuiltIn {
        if let Some(allowed) = &caps.allowed_tools {
            if !allowed.contains(&tool.name) {
                return Some(Exclusion::NotAllowed);
            }
        }
    }
    if caps.disallowed_tools.contains(&tool.name) {
        return Some(Exclusion::Denied);
    }
    if tool.name == TASK_TOOL || tool.name == MULTI_TASK_TOOL {
        return Some(Exclusion::NoRecursion);
    }
    if spec.exploring && !tool.read_only && !is_shell(tool) {
        return Some(Exclusion::NotReadOnly);
    }
    None
}
