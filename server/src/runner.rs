//! What the server runs: a compiled graph, or anything that runs one and does more around
//! each run, such as an agent that records, settles and delivers its runs
//! (`stategraph_nodes::Agent`, with the `agent` feature).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::StreamExt;
use stategraph::checkpoints::Saver;
use stategraph::StreamMode;
use stategraph::{CompiledGraph, Event, Input, RunConfig, RunError, RunOutcome, RunStream, State};

/// Runs of one graph, as the server starts them. The server reads state, history and shape
/// through [`Runner::graph`], and starts every run through [`Runner::start`].
pub trait Runner<S: State>: Send + Sync + 'static {
    /// The same runner, checkpointing into the server's `saver`.
    fn with_saver(self, saver: Arc<dyn Saver>) -> Self
    where
        Self: Sized;
    /// The same runner again, checkpointing into `saver` (on PostgreSQL, a saver fenced by
    /// the lease of the one run it is for), or `None` if it cannot be bound twice: its runs
    /// then write through the server's saver, unfenced. A compiled graph can.
    fn rebind(&self, saver: Arc<dyn Saver>) -> Option<Self>
    where
        Self: Sized,
    {
        let _ = saver;
        None
    }
    /// The same runner, its nodes given the server's long-term `store` (the one `/store/*`
    /// serves) through `NodeContext::store`. By default the runner is left as it is.
    fn with_store(self, store: Arc<dyn stategraph_store::Store>) -> Self
    where
        Self: Sized,
    {
        let _ = store;
        self
    }
    /// The graph it runs (bound to the server's saver).
    fn graph(&self) -> &CompiledGraph<S>;
    /// Start run `run` (the server's id of it, also in the config's `run_id` metadata): its
    /// events, then its end.
    fn start(
        &self,
        run: &str,
        input: Input<S>,
        config: &RunConfig,
        mode: StreamMode,
    ) -> Box<dyn RunEvents<S>>;
}

/// A started run: its events, then how it ended.
pub trait RunEvents<S>: Send {
    /// The next event; `None` once the run has ended.
    fn next_event(&mut self) -> BoxFuture<'_, Option<Event>>;
    /// How the run ended (after its events).
    fn end(self: Box<Self>) -> BoxFuture<'static, Result<RunOutcome<S>, RunFailure>>;
}

/// Why a run did not end well.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunFailure {
    /// The engine's error (a node failure, the recursion limit, cancellation, storage).
    Engine(RunError),
    /// Something the runner does around the graph failed (an agent's delivery, say).
    Other {
        /// The kind, as the `error` event names it.
        kind: String,
        /// What happened.
        message: String,
    },
}

impl<S: State> Runner<S> for CompiledGraph<S> {
    fn with_saver(self, saver: Arc<dyn Saver>) -> Self {
        self.with_checkpointer(saver)
    }

    fn rebind(&self, saver: Arc<dyn Saver>) -> Option<Self> {
        Some(self.clone().with_checkpointer(saver))
    }

    /// A graph compiled with a store of its own keeps it; one without gets the server's.
    fn with_store(self, store: Arc<dyn stategraph_store::Store>) -> Self {
        if self.store().is_some() {
            return self;
        }
        CompiledGraph::with_store(&self, store)
    }

    fn graph(&self) -> &CompiledGraph<S> {
        self
    }

    fn start(
        &self,
        _run: &str,
        input: Input<S>,
        config: &RunConfig,
        mode: StreamMode,
    ) -> Box<dyn RunEvents<S>> {
        Box::new(self.stream(input, config, mode))
    }
}

impl<S: State> RunEvents<S> for RunStream<S> {
    fn next_event(&mut self) -> BoxFuture<'_, Option<Event>> {
        Box::pin(self.next())
    }

    fn end(self: Box<Self>) -> BoxFuture<'static, Result<RunOutcome<S>, RunFailure>> {
        Box::pin(async move { self.outcome().await.map_err(RunFailure::Engine) })
    }
}

#[cfg(feature = "agent")]
mod agent {
    use std::sync::Arc;

    use futures::future::BoxFuture;
    use futures::StreamExt;
    use stategraph::checkpoints::{RunId, Saver};
    use stategraph::{CompiledGraph, Event, Input, RunConfig, RunOutcome, StreamMode};
    use stategraph_nodes::{Agent, AgentRunError, AgentStream, ThreadState};

    use super::{RunEvents, RunFailure, Runner};

    /// An agent's runs go through [`Agent::stream`]: each is recorded, its sandbox released,
    /// its delivery checked and its receipt stored, as [`Agent::invoke`] does.
    impl Runner<ThreadState> for Agent {
        fn with_saver(self, saver: Arc<dyn Saver>) -> Self {
            self.with_checkpointer(saver)
        }

        fn graph(&self) -> &CompiledGraph<ThreadState> {
            Agent::graph(self)
        }

        fn start(
            &self,
            run: &str,
            input: Input<ThreadState>,
            config: &RunConfig,
            mode: StreamMode,
        ) -> Box<dyn RunEvents<ThreadState>> {
            match RunId::new(run) {
                Ok(run) => Box::new(self.stream_as(run, input, config, mode)),
                Err(_) => Box::new(self.stream(input, config, mode)),
            }
        }
    }

    impl RunEvents<ThreadState> for AgentStream {
        fn next_event(&mut self) -> BoxFuture<'_, Option<Event>> {
            Box::pin(self.next())
        }

        fn end(self: Box<Self>) -> BoxFuture<'static, Result<RunOutcome<ThreadState>, RunFailure>> {
            Box::pin(async move {
                match self.outcome().await {
                    Ok(o) => Ok(o.into_run_outcome()),
                    Err(AgentRunError::Run { error, .. }) => Err(RunFailure::Engine(error)),
                    Err(e @ AgentRunError::Delivery { .. }) => Err(RunFailure::Other {
                        kind: "DeliveryError".to_owned(),
                        message: e.to_string(),
                    }),
                    Err(e) => Err(RunFailure::Other {
                        kind: "AgentError".to_owned(),
                        message: e.to_string(),
                    }),
                }
            })
        }
    }
}
