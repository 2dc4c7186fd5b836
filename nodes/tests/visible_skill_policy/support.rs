//! Shared helpers of these tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::{Skill, SkillRegistry, SkillStore, SkillToolPolicy, FRAMEWORK_TOOLS};
use stategraph_nodes::state::SkillRef;
use stategraph_nodes::{BoxError, ToolPolicy};

pub(crate) type TestResult = Result<(), BoxError>;

pub(crate) fn path(name: &str) -> String {
    format!("/mnt/skills/public/{name}/SKILL.md")
}

pub(crate) fn skill(name: &str, allowed: Option<&[&str]>) -> Skill {
    Skill {
        name: name.to_owned(),
        path: path(name),
        description: format!("The {name} skill"),
        allowed_tools: allowed.map(|a| a.iter().map(|s| s.to_string()).collect()),
        secrets: Vec::new(),
        enabled: true,
    }
}

pub(crate) fn skill_md(name: &str, allowed_line: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill\n{allowed_line}---\n# {name}\n")
}

pub(crate) fn reading(names: &[&str]) -> ThreadState {
    ThreadState {
        skill_context: names
            .iter()
            .map(|n| SkillRef {
                name: n.to_string(),
                path: path(n),
                ..SkillRef::default()
            })
            .collect(),
        ..ThreadState::default()
    }
}

pub(crate) fn policy(skills: Vec<Skill>) -> SkillToolPolicy {
    SkillToolPolicy::new(Arc::new(SkillRegistry::new(skills)), None)
}

pub(crate) fn framework() -> Vec<String> {
    let mut names: Vec<String> = FRAMEWORK_TOOLS.iter().map(|s| s.to_string()).collect();
    names.sort();
    names
}

pub(crate) fn with_framework(extra: &[&str]) -> Vec<String> {
    let mut names = framework();
    names.extend(extra.iter().map(|s| s.to_string()));
    names.sort();
    names.dedup();
    names
}

/// A store counting its loads, optionally failing.
pub(crate) struct CountingStore {
    pub(crate) loads: Arc<AtomicUsize>,
    pub(crate) fail: bool,
    pub(crate) skills: Vec<Skill>,
}

impl SkillStore for CountingStore {
    fn load_all(&self) -> Result<Vec<Skill>, BoxError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            Err("storage offline".into())
        } else {
            Ok(self.skills.clone())
        }
    }
}

pub(crate) fn config_specs(names: &[&str]) -> Vec<ToolSpec> {
    names
        .iter()
        .map(|n| ToolSpec::new(*n, "", ToolSource::Config))
        .collect()
}

pub(crate) fn kept(
    policy: &SkillToolPolicy,
    names: &[&str],
    state: &ThreadState,
    run: &RunContext,
) -> Vec<String> {
    let specs = config_specs(names);
    specs
        .iter()
        .zip(policy.visible(&specs.iter().collect::<Vec<_>>(), state, run))
        .filter(|(_, v)| v.is_none())
        .map(|(s, _)| s.name.clone())
        .collect()
}
