//! Subagents: ephemeral delegated agents with explicit, isolated capabilities.
//!
//! A lead agent delegates through the `task` and `multi_task` tools
//! ([`crate::subagent_tools`]). Each delegation compiles a **new** agent graph over the same
//! [`ThreadState`](crate::ThreadState) schema with **no checkpointer** (no child checkpoint is
//! written, there is no resumable child thread), runs it from a fresh state whose messages are
//! the task prompt, and returns the child's answer as the tool message of the lead's call.
//!
//! - [`SubagentSpec`]: a subagent type (name, prompt, model or inherit, limits, capabilities).
//! - [`Subagents`]: the runtime-global environment (model, built-in tool implementations,
//!   sandbox provider, skills store, authorization, the global limiter) and the registered
//!   types.
//! - [`resolve_pool`] / [`ResolvedPool`]: capability resolution, with why each tool was left
//!   out; [`root`]: the root agent's merge rules.
//! - [`SubagentOutcome`], [`StatusCell`]: status normalisation (first terminal status wins).
//! - [`SubagentLimiter`], [`DelegationLimit`]: global and per-run capacity.
//! - [`ledger`]: the `ThreadState.delegations` entries.

use std::fmt;
use std::sync::Arc;

use crate::authz::Authorization;
use crate::model::ChatModel;
use crate::sandbox::{SandboxOptions, SandboxProvider};
use crate::skill::SkillStore;
use crate::tool::{Tool, ToolSpec};

mod builtin;
mod capacity;
mod executor;
pub mod ledger;
mod pool;
pub mod root;
mod spec;
mod status;

pub use builtin::{
    BASH, BASH_MAX_TURNS, BASH_TOOLS, BUILTIN_DENIED, GENERAL_PURPOSE, GENERAL_PURPOSE_MAX_TURNS,
};
pub use capacity::{
    prior_delegations, CapacityError, DelegationLimit, RunStopReason, SubagentLimiter,
    SubagentPermit, LIMIT_NOTICE,
};
pub use executor::{DelegationReport, DelegationRequest, SUBAGENT_EVENT};
pub use pool::{
    is_shell, resolve_pool, Excluded, Exclusion, Granted, PoolOrigin, ResolvedPool,
    MULTI_TASK_TOOL, TASK_TOOL,
};
pub use spec::{Capabilities, ModelChoice, SubagentSpec, DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT};
pub use status::{
    brief, sha256_hex, StatusCell, StopReason, SubagentOutcome, SubagentStatus, MAX_BRIEF,
};

/// The `task` calls of one model turn a lead wired with
/// [`AgentBuilder::subagents`](crate::AgentBuilder::subagents) keeps by default.
pub const DEFAULT_TASKS_PER_TURN: usize = 3;
/// The delegations one run of such a lead may make by default.
pub const DEFAULT_DELEGATIONS_PER_RUN: usize = 6;

/// The runtime environment every subagent of a lead shares (runtime-global), and the
/// subagent types it may delegate to.
///
/// Runtime-global: the model (for [`ModelChoice::Inherit`]), the built-in tool
/// implementations, the sandbox provider, the skill store, the long-term store (given only to
/// the types whose spec grants memory), the authorization and the global
/// [`SubagentLimiter`]. Everything agent-local (custom and connection tools, skills, allow and
/// deny lists, prompt, max turns) comes from each [`SubagentSpec`] only: the parent's own tools
/// are known here by their specs alone ([`Subagents::parent_tool`]), so a child cannot reach
/// their implementations.
pub struct Subagents {
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) builtins: Vec<Arc<dyn Tool>>,
    pub(crate) parent_local: Vec<ToolSpec>,
    pub(crate) sandbox: Option<(Arc<dyn SandboxProvider>, SandboxOptions)>,
    pub(crate) skills: Option<Arc<dyn SkillStore>>,
    pub(crate) store: Option<Arc<dyn stategraph::store::Store>>,
    pub(crate) authorization: Option<Authorization>,
    pub(crate) host_bash: bool,
    pub(crate) defer: bool,
    pub(crate) limiter: SubagentLimiter,
    pub(crate) delegation_limit: DelegationLimit,
    pub(crate) specs: Vec<Arc<SubagentSpec>>,
}

impl fmt::Debug for Subagents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subagents")
            .field("model", &self.model.name())
            .field("builtins", &self.builtins.len())
            .field("types", &self.type_names())
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl Subagents {
    /// Subagents running on `model` by default, with no built-in tools, no types, deferral
    /// on, the default global limiter (3 concurrent, 60 s wait), and per run at most
    /// [`DEFAULT_TASKS_PER_TURN`] `task` calls a turn and [`DEFAULT_DELEGATIONS_PER_RUN`]
    /// delegations (applied by [`AgentBuilder::subagents`](crate::AgentBuilder::subagents)).
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Subagents {
            model,
            builtins: Vec::new(),
            parent_local: Vec::new(),
            sandbox: None,
            skills: None,
            store: None,
            authorization: None,
            host_bash: false,
            defer: true,
            limiter: SubagentLimiter::default(),
            delegation_limit: DelegationLimit::new(
                DEFAULT_TASKS_PER_TURN,
                DEFAULT_DELEGATIONS_PER_RUN,
            ),
            specs: Vec::new(),
        }
    }

    /// Register the built-in types: [`SubagentSpec::general_purpose`] and
    /// [`SubagentSpec::bash`].
    pub fn builtin_types(self) -> Self {
        self.register(SubagentSpec::general_purpose())
            .register(SubagentSpec::bash())
    }

    /// At most `per_turn` `task` calls per model turn and `total` delegations per run of a
    /// lead wired with [`AgentBuilder::subagents`](crate::AgentBuilder::subagents) (each at
    /// least 1).
    pub fn delegation_limit(mut self, per_turn: usize, total: usize) -> Self {
        self.delegation_limit = DelegationLimit::new(per_turn, total);
        self
    }

    /// Register a subagent type.
    pub fn register(mut self, spec: SubagentSpec) -> Self {
        self.specs.push(Arc::new(spec));
        self
    }

    /// Add a built-in tool implementation (runtime-global: every child may get it).
    pub fn builtin(mut self, tool: Arc<dyn Tool>) -> Self {
        self.builtins.push(tool);
        self
    }

    /// Name one of the parent's own (agent-local) tools, for the resolved pool's record of why
    /// it did not come along. Only its spec is kept.
    pub fn parent_tool(mut self, spec: ToolSpec) -> Self {
        self.parent_local.push(spec);
        self
    }

    /// Children open the parent's sandbox (the id in the parent's state) through `provider`.
    pub fn sandbox(mut self, provider: Arc<dyn SandboxProvider>, options: SandboxOptions) -> Self {
        self.sandbox = Some((provider, options));
        self
    }

    /// The skill store children's skill lists refer to.
    pub fn skill_store(mut self, store: Arc<dyn SkillStore>) -> Self {
        self.skills = Some(store);
        self
    }

    /// The long-term store, runtime-global, given by reference to each child whose spec
    /// grants it ([`SubagentSpec::memory`]); a child without the grant has no store and no
    /// memory tools.
    pub fn store(mut self, store: Arc<dyn stategraph::store::Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Filter every child's pool by `authz` for the propagated identity.
    pub fn authorization(mut self, authz: Authorization) -> Self {
        self.authorization = Some(authz);
        self
    }

    /// Allow config tools of group `bash` in children (as the parent's builder does).
    pub fn allow_host_bash(mut self, allow: bool) -> Self {
        self.host_bash = allow;
        self
    }

    /// Whether children defer deferrable tools behind their own `tool_search` (default on).
    pub fn defer_tools(mut self, on: bool) -> Self {
        self.defer = on;
        self
    }

    /// Share `limiter` (the process-wide limit on concurrent subagents).
    pub fn limiter(mut self, limiter: SubagentLimiter) -> Self {
        self.limiter = limiter;
        self
    }

    /// The registered type names, in order.
    pub fn type_names(&self) -> Vec<&str> {
        self.specs.iter().map(|s| s.name.as_str()).collect()
    }

    /// The registered type `name`.
    pub fn spec(&self, name: &str) -> Option<&Arc<SubagentSpec>> {
        self.specs.iter().find(|s| s.name == name)
    }

    /// The pool a child of type `spec` gets.
    pub fn pool_for(&self, spec: &SubagentSpec) -> ResolvedPool {
        resolve_pool(&self.builtins, &self.parent_local, spec)
    }
}
