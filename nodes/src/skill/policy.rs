//! The skill tool policy: which skills are active for a request or call, and which tools they
//! allow.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use super::registry::{normalize_skill_path, SkillStore};
use super::search::narrow_search;
use super::Skill;
use crate::deferred::TOOL_SEARCH;
use crate::middleware::{Denial, ToolPolicy};
use crate::tool::{ToolOutput, ToolSpec};
use crate::{BoxError, RunContext, ThreadState, ToolCall};

/// Tools no skill policy removes.
pub const FRAMEWORK_TOOLS: [&str; 4] = [
    "describe_skill",
    "read_file",
    "review_skill_package",
    "tool_search",
];

/// Where the active skill policy comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicySource {
    /// The run's slash-activated skill.
    Slash,
    /// The skills the model has read (`skill_context`).
    SkillContext,
    /// No active skill: no filtering.
    Passive,
}

impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicySource::Slash => "slash",
            PolicySource::SkillContext => "skill_context",
            PolicySource::Passive => "passive",
        })
    }
}

/// The policy in force for one request or call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyDecision {
    /// Where it comes from.
    pub source: PolicySource,
    /// The active skill paths, as given (empty when passive).
    pub paths: Vec<String>,
    /// The allowed tool names, sorted; `None`: every tool.
    pub allowed: Option<Vec<String>>,
}

impl PolicyDecision {
    /// Whether `tool` may be used under this decision.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|names| names.binary_search_by(|n| n.as_str().cmp(tool)).is_ok())
    }

    pub(super) fn reason(&self) -> String {
        format!(
            "not allowed by the active skill policy (source {}, skills {:?})",
            self.source, self.paths
        )
    }
}

/// The skill tool policy: hides the tools the active skills do not allow, refuses calls to
/// them, and narrows `tool_search` results to allowed tools (see the module docs).
#[derive(Clone)]
pub struct SkillToolPolicy {
    store: Arc<dyn SkillStore>,
    available: Option<Vec<String>>,
    /// The framework tools that get the exemption (by default all of [`FRAMEWORK_TOOLS`]).
    framework: Vec<String>,
}

impl fmt::Debug for SkillToolPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillToolPolicy")
            .field("available", &self.available)
            .finish_non_exhaustive()
    }
}

impl SkillToolPolicy {
    /// A policy over the skills of `store`.
    /// `available` restricts which skills may be active (by name; `None`: all).
    pub fn new(store: Arc<dyn SkillStore>, available: Option<Vec<String>>) -> Self {
        SkillToolPolicy {
            store,
            available,
            framework: FRAMEWORK_TOOLS.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Grant the framework exemption only to the [`FRAMEWORK_TOOLS`] among `names` — the
    /// agent passes its built-in tools, so a server tool that happens to be called `read_file`
    /// is not exempt.
    pub fn trusted_framework_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        let names: BTreeSet<String> = names.into_iter().collect();
        self.framework = FRAMEWORK_TOOLS
            .iter()
            .filter(|f| names.contains(**f))
            .map(|f| f.to_string())
            .collect();
        self
    }

    /// The policy in force for `state` and `run`: slash skill, else `skill_context` paths in
    /// state order, else passive (the store is then not read).
    pub fn decide(&self, state: &ThreadState, run: &RunContext) -> PolicyDecision {
        let paths = self.active_paths(state, run);
        let source = match (&run.slash_skill, paths.is_empty()) {
            (Some(_), _) => PolicySource::Slash,
            (None, false) => PolicySource::SkillContext,
            (None, true) => {
                return PolicyDecision {
                    source: PolicySource::Passive,
                    paths,
                    allowed: None,
                }
            }
        };
        let allowed = self.allowed_for(&paths);
        PolicyDecision {
            source,
            paths,
            allowed,
        }
    }

    /// The active skills for `state` and `run` that survive resolution, in order: the paths
    /// of [`SkillToolPolicy::decide`], each resolved to an enabled skill available to this
    /// agent, duplicates by name dropped. Passive (no active path): none, and the store is
    /// not read.
    ///
    /// # Errors
    /// The skill store's error (callers fail closed).
    pub fn active_skills(
        &self,
        state: &ThreadState,
        run: &RunContext,
    ) -> Result<Vec<Skill>, BoxError> {
        let paths = self.active_paths(state, run);
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let skills = self.store.load_all()?;
        Ok(self
            .survivors(&paths, &skills)
            .into_iter()
            .cloned()
            .collect())
    }

    /// The active paths: the slash skill alone, else the `skill_context` paths in state order,
    /// else none (passive).
    fn active_paths(&self, state: &ThreadState, run: &RunContext) -> Vec<String> {
        match &run.slash_skill {
            Some(path) => vec![path.clone()],
            None => state.skill_context.iter().map(|s| s.path.clone()).collect(),
        }
    }

    /// The allowed names for the active `paths` (sorted; `None`: every tool).
    fn allowed_for(&self, paths: &[String]) -> Option<Vec<String>> {
        let framework_only = || Some(sorted(self.framework.iter().cloned()));
        let skills = match self.store.load_all() {
            Ok(skills) => skills,
            Err(e) => {
                tracing::warn!(error = %e, "skill store failed: only framework tools allowed");
                return framework_only();
            }
        };
        let active = self.survivors(paths, &skills);
        if active.is_empty() {
            return framework_only();
        }
        if active.iter().all(|s| s.allowed_tools.is_none()) {
            return None;
        }
        Some(sorted(
            active
                .iter()
                .filter_map(|s| s.allowed_tools.as_ref())
                .flatten()
                .cloned()
                .chain(self.framework.iter().cloned()),
        ))
    }

    /// The skills of `skills` the active `paths` resolve to: unresolvable, disabled,
    /// unavailable and duplicate-name paths skipped (each with a warning).
    fn survivors<'s>(&self, paths: &[String], skills: &'s [Skill]) -> Vec<&'s Skill> {
        let mut active: Vec<&Skill> = Vec::new();
        for path in paths {
            let wanted = normalize_skill_path(path);
            let Some(skill) = skills
                .iter()
                .find(|s| normalize_skill_path(&s.path) == wanted)
            else {
                tracing::warn!(path = %path, "active skill skipped: no skill at this path");
                continue;
            };
            if !skill.enabled {
                tracing::warn!(path = %path, "active skill skipped: disabled");
                continue;
            }
            if let Some(available) = &self.available {
                if !available.contains(&skill.name) {
                    tracing::warn!(path = %path, "active skill skipped: not available to this agent");
                    continue;
                }
            }
            if active.iter().any(|s| s.name == skill.name) {
                tracing::warn!(path = %path, "active skill skipped: duplicate name");
                continue;
            }
            active.push(skill);
        }
        active
    }
}

fn sorted(names: impl Iterator<Item = String>) -> Vec<String> {
    names.collect::<BTreeSet<String>>().into_iter().collect()
}

impl ToolPolicy for SkillToolPolicy {
    fn name(&self) -> &str {
        "skill_tool_policy"
    }

    fn visible(
        &self,
        tools: &[&ToolSpec],
        state: &ThreadState,
        run: &RunContext,
    ) -> Vec<Option<String>> {
        let decision = self.decide(state, run);
        if decision.allowed.is_none() {
            return vec![None; tools.len()];
        }
        let reason = decision.reason();
        tools
            .iter()
            .map(|t| (!decision.allows(&t.name)).then(|| reason.clone()))
            .collect()
    }

    fn check_call(
        &self,
        call: &ToolCall,
        _spec: Option<&ToolSpec>,
        state: &ThreadState,
        run: &RunContext,
    ) -> Result<(), Denial> {
        let decision = self.decide(state, run);
        if decision.allows(&call.name) {
            Ok(())
        } else {
            Err(Denial::new(
                decision.reason(),
                format!(
                    "Error: Tool '{}' is not allowed by the active skill policy.",
                    call.name
                ),
            ))
        }
    }

    /// Everything here: [`filter_output`](ToolPolicy::filter_output) narrows `tool_search`
    /// results to the active skills' tools itself, with the skill policy's own wording.
    fn search_visible(
        &self,
        found: &[&ToolSpec],
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Vec<Option<String>> {
        vec![None; found.len()]
    }

    fn filter_output(
        &self,
        call: &ToolCall,
        output: ToolOutput,
        state: &ThreadState,
        run: &RunContext,
    ) -> ToolOutput {
        if call.name != TOOL_SEARCH {
            return output;
        }
        let decision = self.decide(state, run);
        if decision.allowed.is_none() {
            return output;
        }
        narrow_search(call, output, &decision)
    }
}
