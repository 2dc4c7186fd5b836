//! The agent builder: a model node, a tool node and the routing between them, over
//! [`ThreadState`], assembled for one run (catalog → authorization → deferred catalog → policy
//! layers) and recorded in a [`CapabilityTrace`].

use std::fmt;
use std::sync::Arc;

use stategraph::{CompileError, CompiledGraph, Input, RunConfig, RunError, RunOutcome};

use crate::catalog::Catalog;
use crate::context::RunContext;
use crate::deferred::DeferredSetup;
use crate::model::ChatModel;
use crate::state::ThreadState;
use crate::trace::CapabilityTrace;

mod admission;
mod assemble;
mod builder;
mod graph;
mod node;

pub use builder::AgentBuilder;
use node::AgentCore;

/// The model node's name.
pub const MODEL_NODE: &str = "model";
/// The tool node's name.
pub const TOOL_NODE: &str = "tools";
/// The node running `before_agent` observers (present when the agent has observers).
pub const BEFORE_AGENT_NODE: &str = "before_agent";
/// The node running `after_agent` observers (present when the agent has observers).
pub const AFTER_AGENT_NODE: &str = "after_agent";

/// Building an agent failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent's graph did not compile (a bug of this crate if it ever happens).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// Deferral is enabled and deferrable tools exist, but no deferred setup could be built:
    /// fail closed rather than bind their schemas.
    #[error("deferred tools {0:?} exist but the deferred catalog could not be built")]
    DeferredSetup(Vec<String>),
}

/// An agent assembled for one run: its graph, catalog and capability trace.
pub struct Agent {
    graph: CompiledGraph<ThreadState>,
    core: Arc<AgentCore>,
    catalog: Catalog,
    deferred: Option<DeferredSetup>,
    max_turns: usize,
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

    /// The names of the tools the agent can execute (authorized, plus `tool_search`).
    pub fn tool_names(&self) -> Vec<String> {
        self.core.schemas.iter().map(|s| s.name.clone()).collect()
    }

    /// The run's capability trace.
    pub fn trace(&self) -> &CapabilityTrace {
        &self.core.trace
    }

    /// The run context the agent was assembled for.
    pub fn run_context(&self) -> &RunContext {
        &self.core.run
    }

    /// A run configuration whose recursion limit allows `max_turns` model turns.
    pub fn run_config(&self) -> RunConfig {
        RunConfig::new().recursion_limit(self.max_turns.saturating_mul(2).saturating_add(2))
    }

    /// Run the agent on `input` with `config`.
    ///
    /// # Errors
    /// The engine's [`RunError`]: a model failure, a reducer conflict, the recursion limit.
    pub async fn invoke(
        &self,
        input: impl Into<Input<ThreadState>>,
        config: &RunConfig,
    ) -> Result<RunOutcome<ThreadState>, RunError> {
        self.graph.invoke(input, config).await
    }

    /// Run the agent on one human message, with [`Agent::run_config`] (and the context's
    /// thread, if any).
    ///
    /// # Errors
    /// As [`Agent::invoke`].
    pub async fn ask(&self, text: impl Into<String>) -> Result<RunOutcome<ThreadState>, RunError> {
        let mut config = self.run_config();
        if let Some(thread) = &self.core.run.thread_id {
            config = config.thread(thread.clone());
        }
        self.invoke(ThreadState::human_input(text), &config).await
    }
}
