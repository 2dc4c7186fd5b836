//! The agent builder: a model node, a tool node and the routing between them, over
//! [`ThreadState`], assembled for one run (catalog → authorization → deferred catalog → policy
//! layers) and recorded in a [`CapabilityTrace`].

use std::fmt;
use std::sync::Arc;

use stategraph::checkpoints::sync::Unpoisoned;
use stategraph::{CompileError, CompiledGraph, Input, RunConfig, RunError};

use crate::catalog::Catalog;
use crate::context::RunContext;
use crate::deferred::DeferredSetup;
use crate::model::ChatModel;
use crate::state::ThreadState;
use crate::trace::CapabilityTrace;

mod admission;
mod as_node;
mod assemble;
pub(crate) mod batches;
mod builder;
mod delivered;
mod graph;
mod left;
mod node;
mod outcome;
mod outputs;
mod owner;
mod record;
mod run;
mod stream;

pub use as_node::AgentNode;
pub use builder::AgentBuilder;
pub use left::LEFT_RUNNING_REASON;
use node::AgentCore;
pub use outcome::{
    AgentOutcome, AgentRunError, DeliveryFailure, Recorded, Settlement, RECEIPT_NOT_STORED,
};
pub use outputs::OutputsError;
pub use owner::OWNER_KEY;
pub use record::{RECEIPT_RETRY_DELAYS, TRACE_KEY};
pub use run::DROPPED_REASON;
pub use stream::AgentStream;

/// The model node's name.
pub const MODEL_NODE: &str = "model";
/// The tool node's name.
pub const TOOL_NODE: &str = "tools";
/// The node running `before_agent` observers (present when the agent has observers).
pub const BEFORE_AGENT_NODE: &str = "before_agent";
/// The node running `after_agent` observers (present when the agent has observers).
pub const AFTER_AGENT_NODE: &str = "after_agent";
/// The node acquiring the sandbox before the first step (present with eager acquisition).
pub const ACQUIRE_SANDBOX_NODE: &str = "acquire_sandbox";

/// The model node refused another model call: the run already made `max_turns` since the
/// last human message. The run fails with this as the model node's error; its settlement's
/// stop reason is [`TURN_CAPPED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the agent reached its limit of {max_turns} model turns")]
pub struct TurnLimitReached {
    /// The agent's limit ([`AgentBuilder::max_turns`]).
    pub max_turns: usize,
}

/// The stop reason of a run that reached its turn limit.
pub const TURN_CAPPED: &str = "turn_capped";

impl TurnLimitReached {
    /// The limit `error` reports, if it is a run failed at its turn limit.
    pub fn in_run_error(error: &RunError) -> Option<TurnLimitReached> {
        match error {
            RunError::Node { source, .. } => source.downcast_ref::<TurnLimitReached>().copied(),
            _ => None,
        }
    }
}

/// Building an agent failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent's graph did not compile (a bug of this crate if it ever happens).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// Deferral is enabled and deferrable tools exist, but the deferred setup left these out
    /// (all of them when none could be built): fail closed rather than bind their schemas.
    #[error("deferred tools {0:?} exist but the deferred catalog could not be built with them")]
    DeferredSetup(Vec<String>),
    /// A deferred setup supplied with
    /// [`AgentBuilder::deferred_setup`](crate::AgentBuilder::deferred_setup) defers these
    /// tools, which are not among the agent's authorized tools (the prompt would list them).
    #[error(
        "the deferred catalog names tools {0:?} that are not among the agent's authorized tools"
    )]
    DeferredNotCandidates(Vec<String>),
}

/// An agent assembled for one run: its graph, catalog and capability trace.
pub struct Agent {
    graph: CompiledGraph<ThreadState>,
    core: Arc<AgentCore>,
    catalog: Catalog,
    deferred: Option<DeferredSetup>,
    max_turns: usize,
    delegation_log: Option<crate::subagent_tools::DelegationLog>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("catalog", &self.catalog)
            .field("tools", &self.tool_names())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Start configuring an agent around `model`.
    pub fn builder(model: impl ChatModel) -> AgentBuilder {
        AgentBuilder::new(model)
    }

    /// The compiled graph (attach a checkpointer with
    /// [`CompiledGraph::with_checkpointer`], or embed it as a subgraph).
    pub fn graph(&self) -> &CompiledGraph<ThreadState> {
        &self.graph
    }

    /// The candidate catalog (before authorization), with skipped duplicates and failed sources.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The deferred catalog, if the agent has one.
    pub fn deferred(&self) -> Option<&DeferredSetup> {
        self.deferred.as_ref()
    }

    /// The reports of every delegation the agent's `task` and `multi_task` tools made, when
    /// they were wired by [`AgentBuilder::subagents`] (`None` otherwise).
    pub fn delegation_log(&self) -> Option<&crate::subagent_tools::DelegationLog> {
        self.delegation_log.as_ref()
    }

    /// Holds `permit` (a subagent's global slot) for as long as the agent lives: past the
    /// last handle, while a task still runs its graph.
    pub(crate) fn hold_slot(&self, permit: crate::subagent::SubagentPermit) {
        *self.core.invocation.slot.lock().unpoisoned() = Some(permit);
    }

    /// The names of the tools the agent can execute (authorized, plus `tool_search`).
    pub fn tool_names(&self) -> Vec<String> {
        self.core.schemas.iter().map(|s| s.name.clone()).collect()
    }

    /// The agent's capability trace: the assembly's entries, then every run's (each entry
    /// names its run).
    pub fn trace(&self) -> &CapabilityTrace {
        &self.core.trace
    }

    /// The capability trace of one run (with the assembly's entries), as
    /// [`AgentOutcome::settlement`]'s `run_id` names it.
    pub fn run_trace(&self, run: &stategraph::checkpoints::RunId) -> Vec<crate::TraceEntry> {
        self.core.trace.for_run(run.as_str())
    }

    /// The capability trace of one thread (with the assembly's): the entries of every run of
    /// the agent on `thread`, through [`Agent::invoke`] or [`Agent::as_node`], and none of
    /// another thread's.
    ///
    /// ```
    /// use stategraph_nodes::prelude::*;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let model = ScriptedModel::new("m", [AiMessage::text("a"), AiMessage::text("b")]);
    /// let agent = AgentBuilder::new(model.clone()).assemble(RunContext::default()).await?;
    /// for thread in ["t1", "t2"] {
    ///     let config = agent.run_config().thread(thread);
    ///     agent.invoke(ThreadState::human_input("hi"), &config).await?;
    /// }
    /// let t1 = agent.thread_trace("t1");
    /// assert!(t1.iter().all(|e| e.thread_id.as_deref() != Some("t2")));
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    pub fn thread_trace(&self, thread: &str) -> Vec<crate::TraceEntry> {
        self.core.trace.for_thread(thread)
    }

    /// The run context the agent was assembled for.
    pub fn run_context(&self) -> &RunContext {
        &self.core.run
    }

    /// A run configuration for this agent. Its turns are capped by the model node
    /// ([`TurnLimitReached`]); the recursion limit is only a safety net above it (a turn takes
    /// one step per batch of its tool calls).
    pub fn run_config(&self) -> RunConfig {
        let steps = self.max_turns.saturating_mul(2).saturating_add(2);
        RunConfig::new().recursion_limit(steps.max(stategraph::DEFAULT_RECURSION_LIMIT))
    }

    /// Run the agent on `input` with `config`, as one run that is settled when it ends.
    ///
    /// - **One at a time**: an invocation waits until the agent's previous one is settled.
    /// - **The run**: its id is the run context's, or a generated one; with a checkpointer and
    ///   a thread, it is recorded as `running` before the graph starts, in the thread's store.
    /// - **Release**: a sandbox the run acquired is released exactly once when it ends — after
    ///   success or error, or when this future is dropped (cancelled) before it finished.
    /// - **Settlement**: the outputs are captured before and after the run; a run that
    ///   completed and produced files must have presented one of them
    ///   ([`DeliveryFailure::Incomplete`] otherwise). Exactly one receipt is stored per run
    ///   (also for errors, interrupts and cancellation; three attempts), before the run's
    ///   terminal status. The trace gets a `Delivered` entry per presented path.
    ///
    /// # Errors
    /// [`AgentRunError::Start`] if the run could not be recorded (nothing ran);
    /// [`AgentRunError::Run`] with the engine's error (a model failure, a reducer conflict, the
    /// recursion limit, cancellation); [`AgentRunError::Delivery`] when the graph finished but
    /// its delivery failed (the state is committed; the run is an error).
    pub async fn invoke(
        &self,
        input: impl Into<Input<ThreadState>>,
        config: &RunConfig,
    ) -> Result<AgentOutcome, AgentRunError> {
        let scope = run::RunScope::begin(&self.core, &self.graph, config).await?;
        let result = self.graph.invoke(input, &scope.metered(config)).await;
        scope.finish(result).await
    }

    /// The same agent, checkpointing into `saver` (runs through [`Agent::invoke`] keep the
    /// sandbox lifecycle; a run through [`Agent::graph`] directly does not release).
    pub fn with_checkpointer(
        mut self,
        saver: std::sync::Arc<dyn stategraph::checkpoints::Saver>,
    ) -> Self {
        self.graph = self.graph.with_checkpointer(saver);
        self
    }

    /// The errors releasing a sandbox gave at the end of past invocations (taken; a release
    /// failure does not fail the run it ends).
    pub fn take_sandbox_release_errors(&self) -> Vec<crate::sandbox::SandboxError> {
        self.core
            .sandbox
            .as_ref()
            .map(|rt| rt.take_release_errors())
            .unwrap_or_default()
    }

    /// Run the agent on one human message, with [`Agent::run_config`] (and the context's
    /// thread, if any).
    ///
    /// # Errors
    /// As [`Agent::invoke`].
    pub async fn ask(&self, text: impl Into<String>) -> Result<AgentOutcome, AgentRunError> {
        let mut config = self.run_config();
        if let Some(thread) = &self.core.run.thread_id {
            config = config.thread(thread.clone());
        }
        self.invoke(ThreadState::human_input(text), &config).await
    }
}
