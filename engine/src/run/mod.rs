//! Running a graph: the superstep runner (plan, execute, apply, checkpoint) and the thread
//! API.
//!
//! A run is one `RunLoop` per graph level (the root graph and each subgraph a task runs).
//! Each step is planned (`plan`), its tasks executed (`execute`; `task`: one task's
//! attempts), their writes and routing applied (`apply`), and its checkpoint handed to the
//! level's `CheckpointPipeline` (`persist`). `open` starts or resumes a level; `control` is
//! its control state; `pending` what a failed or interrupted step keeps; `thread` the
//! thread API ([`CompiledGraph::update_state`], [`CompiledGraph::get_state`],
//! [`CompiledGraph::get_state_history`]); `branch` a thread's branches
//! ([`CompiledGraph::fork`], [`CompiledGraph::history_tree`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;

use stategraph_checkpoints::{Checkpoint, CheckpointId, Namespace, Saver, ThreadId, TokenUsage};

use crate::command::ParentCommand;
use crate::event::{EventSink, StreamMode};
use crate::graph::CompiledGraph;
use crate::node::{CancelToken, ResumeInput};
use crate::replay::RUN_INTERRUPTS_KEY;
use crate::stream::RunStream;
use crate::{Command, Interrupt, RunError, State};

mod answers;
mod apply;
mod branch;
mod cache;
mod checkpoint_event;
mod config;
mod control;
mod decode;
mod execute;
mod handler;
mod open;
mod pending;
mod persist;
mod plan;
pub(crate) mod subtask;
mod superstep;
mod task;
mod thread;
mod usage;

pub(crate) use answers::TaskAnswers;
pub use config::{Durability, RunConfig, DEFAULT_RECURSION_LIMIT, MAX_INFLIGHT};
pub(crate) use pending::{input_task, INPUT_NODE};
pub use superstep::is_static_interrupt;
pub(crate) use superstep::RunLoop;
pub(crate) use usage::RunUsage;
pub use usage::UsageMeter;

/// What a run starts from.
pub enum Input<S: State> {
    /// New input: applied by the `__start__` step, then the entry edges run.
    Update(S::Update),
    /// A command: resume interrupts, update the state and/or route, then continue.
    Command(Command<S>),
    /// Continue where the thread stopped (after a failure or a static interrupt).
    Continue,
}

impl<S: State> std::fmt::Debug for Input<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Update(_) => f.write_str("Input::Update(..)"),
            Input::Command(_) => f.write_str("Input::Command(..)"),
            Input::Continue => f.write_str("Input::Continue"),
        }
    }
}

impl<S: State> From<Command<S>> for Input<S> {
    fn from(value: Command<S>) -> Self {
        Input::Command(value)
    }
}

/// How a run ended (an interrupt is an outcome, not an error).
#[derive(Debug, Clone)]
pub struct RunOutcome<S> {
    /// The state at the end.
    pub state: Arc<S>,
    /// Pending interrupts, if the run paused.
    pub interrupts: Vec<Interrupt>,
    /// The last checkpoint written, if the graph has a checkpointer.
    pub checkpoint: Option<CheckpointId>,
    /// Supersteps run by this invocation.
    pub steps: usize,
    /// The tokens this invocation's model calls used, and how many calls (every level of
    /// the run: its subgraphs' calls count too); what nodes recorded through
    /// [`NodeContext::record_usage`](crate::NodeContext::record_usage).
    pub usage: TokenUsage,
}

impl<S> RunOutcome<S> {
    /// Whether the run paused on an interrupt.
    pub fn is_interrupted(&self) -> bool {
        !self.interrupts.is_empty()
    }
}

/// A thread's state at one checkpoint, as `get_state` shows it.
#[derive(Debug, Clone)]
pub struct StateSnapshot<S> {
    /// The state values.
    pub values: Arc<S>,
    /// Nodes the next step would run.
    pub next: Vec<String>,
    /// The checkpoint's header.
    pub checkpoint: Checkpoint,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// Errors of tasks that failed in the step after this checkpoint: (node, message).
    pub errors: Vec<(String, String)>,
}

/// Run-wide context shared by every task and subgraph level.
pub(crate) struct RunShared {
    pub(crate) resume: Arc<Mutex<ResumeInput>>,
    pub(crate) cancel: CancelToken,
    pub(crate) sink: Option<EventSink>,
    pub(crate) thread: Option<ThreadId>,
    pub(crate) durability: Durability,
    pub(crate) recursion_limit: usize,
    pub(crate) metadata: BTreeMap<String, serde_json::Value>,
    pub(crate) interrupt_before: Vec<String>,
    pub(crate) interrupt_after: Vec<String>,
    /// Replay: the root level ends (as done) before planning a step after this one.
    pub(crate) until_step: Option<i64>,
    /// Resume values that finished tasks of any level consumed in the root's current step:
    /// recorded with the root step's checkpoint, so a replay can give the same answers.
    pub(crate) answers: Mutex<Vec<TaskAnswers>>,
    /// The token usage the run's model calls recorded.
    pub(crate) usage: RunUsage,
    /// The root graph's node cache, which its subgraphs use.
    pub(crate) cache: Option<crate::cache::GraphCache>,
    /// The run's context (never checkpointed), the same at every level.
    pub(crate) context: Option<crate::ContextValue>,
}

/// One graph level of a run (the root graph, or a subgraph run by a task of its parent):
/// where it checkpoints, and whether it is the root.
pub(crate) struct GraphLevel {
    pub(crate) ns: Namespace,
    pub(crate) saver: Option<Arc<dyn Saver>>,
    /// Checkpointing disabled for this subgraph (interrupts are an error).
    pub(crate) ephemeral: bool,
    pub(crate) is_root: bool,
    /// The long-term store its nodes see: the root graph's, inherited by each subgraph (a
    /// subgraph's own only when its parent has none).
    pub(crate) store: Option<Arc<dyn stategraph_store::Store>>,
    /// The node cache its nodes use: the root graph's, inherited like the store.
    pub(crate) cache: Option<crate::cache::GraphCache>,
}

impl GraphLevel {
    /// The root graph's level, checkpointing in `saver`, its nodes seeing `store`.
    pub(crate) fn root(
        saver: Option<Arc<dyn Saver>>,
        store: Option<Arc<dyn stategraph_store::Store>>,
    ) -> Self {
        GraphLevel {
            ns: Namespace::root(),
            saver,
            ephemeral: false,
            is_root: true,
            store,
            cache: None,
        }
    }
}

/// How a graph level's run ended.
pub(crate) enum GraphLevelEnd<S: State> {
    /// It finished or paused.
    Done(RunOutcome<S>),
    /// A task sent these commands to the parent graph.
    ToParent(Vec<ParentCommand>),
}

/// The metadata every checkpoint of a run configured by `config` records: the config's own,
/// and the run's static interrupts if it has any (see [`RUN_INTERRUPTS_KEY`]).
fn recorded_metadata(config: &RunConfig) -> BTreeMap<String, serde_json::Value> {
    let mut metadata = config.metadata.clone();
    if !config.interrupt_before.is_empty() || !config.interrupt_after.is_empty() {
        metadata.insert(
            RUN_INTERRUPTS_KEY.to_owned(),
            serde_json::json!({
                "before": config.interrupt_before,
                "after": config.interrupt_after,
            }),
        );
    }
    metadata
}

impl<S: State> CompiledGraph<S> {
    /// The run-wide context of a run configured by `config`.
    fn shared(
        &self,
        config: &RunConfig,
        cancel: CancelToken,
        sink: Option<EventSink>,
    ) -> Result<Arc<RunShared>, RunError> {
        Ok(Arc::new(RunShared {
            resume: Arc::new(Mutex::new(ResumeInput::default())),
            cancel,
            sink,
            thread: config.thread_id()?,
            durability: config.durability,
            recursion_limit: config.recursion_limit,
            metadata: recorded_metadata(config),
            interrupt_before: config.interrupt_before.clone(),
            interrupt_after: config.interrupt_after.clone(),
            until_step: config.until_step,
            answers: Mutex::default(),
            usage: RunUsage::new(config.usage_meters.clone()),
            cache: self.cache.clone(),
            context: config.context.clone(),
        }))
    }

    pub(crate) async fn run_root(
        &self,
        input: Input<S>,
        config: &RunConfig,
        sink: Option<EventSink>,
        cancel: CancelToken,
    ) -> Result<RunOutcome<S>, RunError> {
        let shared = self.shared(config, cancel, sink)?;
        let shape_write = match (&self.saver, &shared.thread) {
            (Some(saver), Some(thread)) => {
                let mut write = self.shape_write(saver, thread);
                match (&mut write).now_or_never() {
                    Some(done) => done.map(|()| None)?,
                    None => Some(write),
                }
            }
            _ => None,
        };
        let mut level = GraphLevel::root(self.saver.clone(), self.store.clone());
        level.cache = self.cache.clone();
        let mut lp = RunLoop::start(self, shared, level, input, config.checkpoint).await?;
        if let Some(write) = shape_write {
            lp.persist.track(write)?;
        }
        match lp.run().await? {
            GraphLevelEnd::Done(outcome) => Ok(outcome),
            GraphLevelEnd::ToParent(_) => Err(RunError::ParentCommand {
                node: "?".to_owned(),
                reason: "there is no parent graph".to_owned(),
            }),
        }
    }

    /// Run the graph to its end (or an interrupt).
    ///
    /// # Errors
    /// A [`RunError`]: a node failure, a reducer conflict, the recursion limit, a bad resume,
    /// a storage error. Tasks that finished in a failed step keep their writes (with a
    /// checkpointer), so a later [`Input::Continue`] does not run them again.
    pub async fn invoke(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
    ) -> Result<RunOutcome<S>, RunError> {
        self.run_root(input.into(), config, None, config.cancel.clone())
            .await
    }

    /// Run the graph, streaming its events (see [`RunStream`]).
    pub fn stream(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
        mode: StreamMode,
    ) -> RunStream<S> {
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        let graph = self.clone();
        let config = config.clone();
        let input = input.into();
        // Dropping the stream cancels the run (at its next step boundary, so it stops cleanly).
        let cancel = config.cancel.child();
        let run_cancel = cancel.clone();
        let handle = tokio::spawn(async move {
            graph
                .run_root(input, &config, Some(EventSink { tx, mode }), run_cancel)
                .await
        });
        RunStream::new(rx, handle, cancel)
    }
}
