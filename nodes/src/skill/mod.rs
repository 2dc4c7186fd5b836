//! Visible and Executed: skills and the skill tool policy (deerflow-runtime semantics §6).
//!
//! A skill is a `SKILL.md` whose frontmatter may declare `allowed-tools`
//! ([`parse_skill_md`]). Enabling a skill only makes it discoverable; its policy is **active**
//! when the user slash-activates it for the run ([`RunContext::slash_skill`](crate::RunContext::slash_skill)) or when the model
//! has read it (it is then in [`ThreadState::skill_context`](crate::ThreadState::skill_context)). [`SkillToolPolicy`] resolves the
//! active policy for every model request and again for every tool call:
//!
//! 1. **slash**: the run's slash skill, alone; it dominates, `skill_context` is ignored, so
//!    reading a second skill cannot widen the slash skill's authority;
//! 2. else **skill_context**: the paths of the read skills, in state order (an entry with an
//!    empty path still counts: it resolves to no skill, so on its own it fails closed);
//! 3. else **passive**: no filtering at all, and the skill store is not read.
//!
//! For an active policy every skill is loaded from the [`SkillStore`]; an active path is
//! skipped if no skill has it, the skill is disabled, outside the agent's available skills, or
//! has the name of a skill already kept. A store error or no surviving skill fails closed to the
//! [`FRAMEWORK_TOOLS`]; when no surviving skill declares `allowed-tools` (all legacy) every tool
//! is allowed; otherwise the union of the declarations plus the framework tools.
//!
//! **Deliberate change from DeerFlow:** there is no owner token and no stored policy decision.
//! DeerFlow writes the slash activation and the model-call decision into a mutable run context,
//! so it must check a per-chain token to ignore forged entries and validate the stored decision
//! at call time. Our [`RunContext`](crate::RunContext) is immutable and set by the application before the run, so
//! neither a tool nor the model can forge a slash activation, and the call-time check always
//! recomputes the policy from the current state: there is no stale decision to validate.

mod frontmatter;
mod policy;
mod registry;
mod search;

pub use frontmatter::{parse_skill_md, SkillParseError, SkillParseErrorKind};
pub use policy::{PolicyDecision, PolicySource, SkillToolPolicy, FRAMEWORK_TOOLS};
pub use registry::{normalize_skill_path, SkillRegistry, SkillStore};
pub use search::{NO_PERMITTED_MATCH, UNVALIDATED_SEARCH};

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
    /// The secrets it needs (environment variable names). A tool that declares one receives
    /// it only while this skill is enabled, available to the agent and active
    /// (see [`crate::secret`]).
    pub secrets: Vec<String>,
    /// Whether it is enabled.
    pub enabled: bool,
}
