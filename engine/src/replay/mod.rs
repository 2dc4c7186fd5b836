//! Replay: run one branch of a thread again from one of its checkpoints with the current
//! node code, feeding it what the recording took from outside (state edits, forks, new
//! input, answers to interrupts), and report the first step where the new run differs from
//! the recorded one.
//!
//! A replay runs on a scratch thread that holds a copy of the branch up to the starting
//! checkpoint; the thread itself is never touched, and the scratch thread is deleted
//! afterwards. Along the recorded branch:
//!
//! - a checkpoint a step made (source `loop`) is made again by running the graph;
//! - a checkpoint made from outside — `update_state` (source `update`), a fork with its set
//!   values (`fork`), new input (`input`) — is re-applied as recorded: the same values, and
//!   what it left to run;
//! - a step that was resumed is given the recorded answers: each task's resume values and
//!   the resuming command's update, which every resumed step records in its checkpoint's
//!   metadata under [`RESUMED_KEY`];
//! - each run pauses where the recorded run paused: a run's own static interrupts are
//!   recorded with its checkpoints under [`RUN_INTERRUPTS_KEY`] and given to the replayed
//!   run again.
//!
//! Each replayed checkpoint is compared with its recorded twin: the state, the pending
//! interrupts, and what runs next. Model calls are node code like any other; a node that
//! should not call its model again can be given the recorded replies (the agent runtime's
//! `RecordedReplies` in `stategraph-nodes` does this).

mod compare;
mod drive;

use stategraph_checkpoints::{CheckpointError, CheckpointId, Namespace, Saver, ThreadId};

use crate::diff::StateDiff;
use crate::{CompiledGraph, RunError, State};

pub use compare::DivergenceKind;
use drive::{branch_path, scratch_thread, Replay};

/// The metadata key under which a step that was resumed records what it was given: `tasks`,
/// a list of `{"node": …, "id": …, "values": [...]}` (the resume values each task consumed,
/// in order, under the id of its interrupts; no `id` in entries recorded before it was)
/// and, if the resuming command carried an update or routing, `command` (its stored form).
pub const RESUMED_KEY: &str = "resumed";

/// The metadata key under which every checkpoint of a run given its own static interrupts
/// ([`RunConfig::interrupt_before`](crate::RunConfig::interrupt_before) and
/// [`RunConfig::interrupt_after`](crate::RunConfig::interrupt_after)) records them:
/// `{"before": [...], "after": [...]}`, node names. A replay runs each recorded run with the
/// interrupts its first checkpoint records, so it pauses where that run paused; a checkpoint
/// without the key (a run without its own interrupts, or one stored before the key existed)
/// replays with the graph's compiled interrupts only.
pub const RUN_INTERRUPTS_KEY: &str = "run_interrupts";

/// Where a replay first differed from the recorded branch.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The superstep.
    pub step: i64,
    /// The node whose write made the difference: for a state difference, the node that
    /// wrote the first changed field in that step; for a failure, the node that failed; for
    /// different interrupts, the first node that paused on one side only.
    pub node: Option<String>,
    /// The recorded checkpoint of that step (`None` if the recording ended earlier).
    pub recorded: Option<CheckpointId>,
    /// The replayed checkpoint of that step (`None` if the replay ended earlier).
    pub replayed: Option<CheckpointId>,
    /// What differs.
    pub kind: DivergenceKind,
    /// How the replayed state differs from the recorded one (empty unless `kind` is
    /// [`DivergenceKind::State`]), its fields in the order the step changed them: first
    /// those the replayed step wrote, in the order the engine merged its tasks' writes (by
    /// writing node in declaration order — not the order the tasks finished —, the fields of
    /// one update in declaration order), then the others in declaration order.
    pub diff: StateDiff,
}

impl Divergence {
    /// The field that changed first in the diverging step (see [`Divergence::diff`] for the
    /// order), if the states differ.
    pub fn field(&self) -> Option<&str> {
        self.diff.fields.first().map(|f| f.field.as_str())
    }
}

/// The result of [`CompiledGraph::replay`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// The branch end replayed to.
    pub to: CheckpointId,
    /// Checkpoints compared, recorded against replayed.
    pub steps_compared: usize,
    /// Recorded edits, forks and inputs re-applied.
    pub inputs_applied: usize,
    /// Steps given recorded answers to their interrupts.
    pub answers_given: usize,
    /// The first difference, if any.
    pub divergence: Option<Divergence>,
}

impl<S: State> CompiledGraph<S> {
    /// Run the branch of `thread` that ends at `to` (by default the thread's newest
    /// checkpoint) again from its checkpoint `from`, with this graph's node code, and compare
    /// each checkpoint it makes with the recorded one (see the [module docs](self) for what
    /// is re-applied and compared). Reports the first step, node and field that diverged.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use stategraph::prelude::*;
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Doc { draft: String, score: u32 }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let build = |bonus: u32| StateGraph::<Doc>::new()
    ///     .add_node("write", |_s: Arc<Doc>, _ctx: NodeContext| async move {
    ///         Ok::<_, BoxError>(Doc::update().draft("v1".to_owned()))
    ///     })
    ///     .add_node("grade", move |s: Arc<Doc>, _ctx: NodeContext| async move {
    ///         Ok::<_, BoxError>(Doc::update().score(s.draft.len() as u32 + bonus))
    ///     })
    ///     .add_edge(START, "write")
    ///     .add_edge("write", "grade")
    ///     .add_edge("grade", END)
    ///     .compile();
    /// let saver = Arc::new(MemorySaver::new());
    /// let graph = build(0)?.with_checkpointer(saver.clone());
    /// graph.invoke(Doc::update(), &RunConfig::new().thread("t")).await?;
    /// let first = graph.get_state_history("t", Default::default()).await?.pop().unwrap();
    ///
    /// // The same code replays without a difference...
    /// let report = graph.replay("t", first.checkpoint.id, None).await?;
    /// assert_eq!(report.divergence, None);
    /// // ...changed code is caught at the step, node and field it changed.
    /// let changed = build(1)?.with_checkpointer(saver);
    /// let d = changed.replay("t", first.checkpoint.id, None).await?.divergence.unwrap();
    /// assert_eq!((d.node.as_deref(), d.field()), (Some("grade"), Some("score")));
    /// # Ok::<(), stategraph::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] if the thread has no checkpoint `to`, or `from` is not on
    /// the branch that ends at `to`; [`RunError::MissingThread`] without a checkpointer;
    /// storage and decode errors. A replayed step that fails is a divergence
    /// ([`DivergenceKind::Failed`]), not an error.
    pub async fn replay(
        &self,
        thread: &str,
        from: CheckpointId,
        to: Option<CheckpointId>,
    ) -> Result<ReplayReport, RunError> {
        self.replay_in(thread, from, to, None).await
    }

    /// [`CompiledGraph::replay`], the replayed runs given `context` (see
    /// [`CompiledGraph::replay_with_context`]).
    pub(crate) async fn replay_in(
        &self,
        thread: &str,
        from: CheckpointId,
        to: Option<CheckpointId>,
        context: Option<crate::ContextValue>,
    ) -> Result<ReplayReport, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let root = Namespace::root();
        let to = match to {
            Some(to) => to,
            None => saver
                .head(&thread_id, &root)
                .await?
                .map(|h| h.checkpoint.id)
                .ok_or_else(|| not_found(&thread_id, from))?,
        };
        let recorded = branch_path(saver.as_ref(), &thread_id, from, to).await?;
        let scratch = scratch_thread(thread, from, to)?;
        saver.delete_thread(&scratch).await?;
        saver.copy_branch(&thread_id, &scratch, from).await?;
        let mut replay = Replay::new(self, saver.as_ref(), thread_id, scratch.clone());
        replay.context = context;
        let result = replay.run(from, to, &recorded).await;
        saver.delete_thread(&scratch).await?;
        result
    }
}

/// `id` is not a checkpoint of `thread` (or not on the branch asked for).
fn not_found(thread: &ThreadId, id: CheckpointId) -> RunError {
    RunError::Checkpoint(CheckpointError::NotFound {
        thread: thread.clone(),
        ns: Namespace::root(),
        id,
    })
}

/// The saver, as the replay's helpers take it.
type SaverRef<'a> = &'a dyn Saver;

#[cfg(test)]
mod tests;
