//! Visible and Executed: skills and the skill tool policy (deerflow-runtime semantics §6).
//! (Being implemented.)

use std::sync::Arc;

use crate::middleware::{Denial, ToolPolicy};
use crate::tool::ToolSpec;
use crate::{BoxError, RunContext, ThreadState, ToolCall};

/// Tools no skill policy removes.
pub const FRAMEWORK_TOOLS: [&str; 4] = [
    "describe_skill",
    "read_file",
    "review_skill_package",
    "tool_search",
];

/// A skill: a SKILL.md with frontmatter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// Its name.
    pub name: String,
    /// Its container path (`/mnt/skills/<category>/<name>/SKILL.md`).
    pub path: String,
    /// Its description.
    pub description: String,
    /// The tools it allows (`None`: it declares nothing, a legacy skill).
    pub allowed_tools: Option<Vec<String>>,
    /// Whether it is enabled.
    pub enabled: bool,
}

/// Where skills are loaded from.
pub trait SkillStore: Send + Sync + 'static {
    /// Every skill, enabled or not.
    ///
    /// # Errors
    /// Any failure to read the store; the policy then fails closed.
    fn load_all(&self) -> Result<Vec<Skill>, BoxError>;
}

/// The skill tool policy.
#[derive(Clone)]
pub struct SkillToolPolicy {
    store: Arc<dyn SkillStore>,
    available: Option<Vec<String>>,
}

impl SkillToolPolicy {
    /// A policy over the skills of `store`.
    /// `available` restricts which skills may be active (by name; `None`: all).
    pub fn new(store: Arc<dyn SkillStore>, available: Option<Vec<String>>) -> Self {
        SkillToolPolicy { store, available }
    }
}

impl ToolPolicy for SkillToolPolicy {
    fn name(&self) -> &str {
        "skill_tool_policy"
    }

    fn visible(
        &self,
        tools: &[ToolSpec],
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Vec<Option<String>> {
        let _ = (&self.store, &self.available);
        vec![None; tools.len()]
    }

    fn check_call(
        &self,
        _call: &ToolCall,
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Result<(), Denial> {
        Ok(())
    }
}
