//! The thread API: writing a state update into a thread, and reading its state and
//! history as snapshots.

use std::collections::HashMap;
use std::sync::Arc;

use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, ListOptions, LoadedCheckpoint, Namespace,
    PendingWrite, Source, StepChanges, TaskId, ThreadId, WriteKind,
};

use super::control::ControlState;
use super::decode::{apply_changes, decode_state};
use super::open::OlderStart;
use super::plan::{PlannedTask, TaskTrigger};
use super::superstep::RunLoop;
use super::{Durability, GraphLevel, Input, RunConfig, StateSnapshot};
use crate::command::START;
use crate::graph::{CompiledGraph, TaskOutput};
use crate::{Interrupt, RunError, State};

impl<S: State> CompiledGraph<S> {
    /// Write `update` into the thread as if node `as_node` had returned it, on top of its
    /// newest checkpoint (or of `checkpoint`, starting a new branch from there). The update
    /// goes through the reducers; the next step runs what `as_node`'s edges lead to. Returns
    /// the new checkpoint (source `update`).
    ///
    /// # Errors
    /// [`RunError::UnknownNode`] for a node the graph does not have; reducer, routing and
    /// storage errors; [`RunError::MissingThread`] without a checkpointer.
    pub async fn update_state(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
        update: S::Update,
        as_node: &str,
    ) -> Result<CheckpointId, RunError> {
        if self.saver.is_none() {
            return Err(RunError::MissingThread);
        }
        let node = *self
            .inner
            .index
            .get(as_node)
            .ok_or_else(|| RunError::UnknownNode {
                name: as_node.to_owned(),
                from: "update_state".to_owned(),
                step: -1,
            })?;
        let mut lp = self.open_for_write(thread, checkpoint).await?;
        // What was left to run is replaced by what `as_node`'s edges lead to.
        lp.control.branches.iter_mut().for_each(|b| *b = false);
        lp.control.sends.clear();
        lp.pending.clear();
        let task = PlannedTask {
            id: TaskId::derive(&[b"update", as_node.as_bytes()]),
            node: Some(node),
            trigger: TaskTrigger::Edge,
            arg: None,
        };
        let out = TaskOutput {
            updates: vec![update],
            goto: Vec::new(),
            parents: Vec::new(),
            handled: None,
        };
        lp.apply(std::slice::from_ref(&task), vec![(0, out)])?;
        let writes = lp.take_unsaved()?;
        lp.put(Source::Update, lp.step, writes).await?;
        lp.flush().await?;
        lp.persist.head().ok_or(RunError::MissingThread)
    }

    /// Write `update` into the thread's newest checkpoint as writes of no node, keeping what
    /// the thread had left to run: the update goes through the reducers (as a command's
    /// update does), and the new checkpoint (source `update`) runs next what its parent would
    /// have run. For recording what a run learned after its last step — a cancelled run's
    /// unfinished work, say — without choosing a node to write as.
    ///
    /// ```
    /// use stategraph::checkpoints::MemorySaver;
    /// use stategraph::{BoxError, NodeContext, RunConfig, State, StateGraph, END, START};
    /// use std::sync::Arc;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { #[reduce(append)] notes: Vec<String> }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("a", |_s: Arc<S>, _c: NodeContext| async {
    ///         Ok::<_, BoxError>(S::update().notes(vec!["a".into()]))
    ///     })
    ///     .add_edge(START, "a").add_edge("a", END)
    ///     .compile()?
    ///     .with_checkpointer(Arc::new(MemorySaver::new()));
    /// let config = RunConfig::new().thread("t").interrupt_before(["a"]);
    /// graph.invoke(S::update(), &config).await?;
    /// graph.amend_state("t", S::update().notes(vec!["note".into()])).await?;
    /// let snapshot = graph.get_state("t", None).await?.ok_or("no state")?;
    /// assert_eq!(snapshot.next, ["a"]);
    /// assert_eq!(snapshot.values.notes, ["note"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`RunError::MissingThread`] without a checkpointer or a checkpoint on `thread`;
    /// [`RunError::RecordedWrites`] when the newest checkpoint holds writes of an unfinished
    /// step (a new checkpoint would make that step's finished tasks run again); reducer and
    /// storage errors.
    pub async fn amend_state(
        &self,
        thread: &str,
        update: S::Update,
    ) -> Result<CheckpointId, RunError> {
        if self.saver.is_none() {
            return Err(RunError::MissingThread);
        }
        let mut lp = self.open_for_write(thread, None).await?;
        let head = lp.persist.head().ok_or(RunError::MissingThread)?;
        if !lp.pending.is_empty() {
            return Err(RunError::RecordedWrites {
                thread: lp.shared.thread.clone(),
                checkpoint: head,
                writes: lp.pending.len(),
            });
        }
        lp.apply_input_command(TaskOutput {
            updates: vec![update],
            goto: Vec::new(),
            parents: Vec::new(),
            handled: None,
        })?;
        let writes = lp.take_unsaved()?;
        lp.put(Source::Update, lp.step, writes).await?;
        lp.flush().await?;
        lp.persist.head().ok_or(RunError::MissingThread)
    }

    /// The thread at its newest checkpoint (or at `checkpoint`, as a new branch), opened to
    /// write one checkpoint from outside a run (`sync`).
    async fn open_for_write(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<RunLoop<S>, RunError> {
        let config = RunConfig::new().thread(thread).durability(Durability::Sync);
        let shared = self.shared(&config, config.cancel.clone(), None)?;
        let level = GraphLevel::root(self.saver.clone(), self.store.clone());
        RunLoop::start_at(
            self,
            shared,
            level,
            Input::Continue,
            checkpoint,
            OlderStart::Branch,
        )
        .await
    }

    /// The thread's state at its newest checkpoint (or at `checkpoint`).
    ///
    /// # Errors
    /// [`RunError::MissingThread`] without a checkpointer's thread; storage and decode errors.
    pub async fn get_state(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<Option<StateSnapshot<S>>, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let Some(loaded) = saver
            .get(&thread_id, &Namespace::root(), checkpoint)
            .await?
        else {
            return Ok(None);
        };
        self.snapshot(loaded, &Some(thread_id)).map(Some)
    }

    /// The thread's checkpoints, newest first, as snapshots.
    ///
    /// # Errors
    /// Storage and decode errors; [`CheckpointError::InvalidFilterKey`] for a bad filter key.
    pub async fn get_state_history(
        &self,
        thread: &str,
        options: ListOptions,
    ) -> Result<Vec<StateSnapshot<S>>, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let root = Namespace::root();
        let headers = saver.list(&thread_id, &root, options).await?;
        let t = Some(thread_id.clone());
        // Oldest first: a checkpoint whose parent was just rebuilt is that state plus what its
        // step changed (cloned and extended, not decoded whole).
        let mut out: Vec<StateSnapshot<S>> = Vec::with_capacity(headers.len());
        let oldest_first: Vec<Checkpoint> = headers.into_iter().rev().collect();
        // What each checkpoint's step changed, for those whose parent is the one before it
        // in the list: fetched in one round trip.
        let chained: Vec<CheckpointId> = oldest_first
            .windows(2)
            .filter(|w| w[1].parent == Some(w[0].id))
            .map(|w| w[1].id)
            .collect();
        let mut changes: HashMap<CheckpointId, StepChanges> = chained
            .iter()
            .copied()
            .zip(
                saver
                    .changes_many(&thread_id, &root, chained.clone())
                    .await?,
            )
            .collect();
        let mut prev: Option<(CheckpointId, Arc<S>)> = None;
        for h in oldest_first {
            let mut rebuilt = None;
            if let (Some((pid, ps)), Some(parent)) = (&prev, h.parent) {
                if *pid == parent {
                    if let Some(step) = changes.remove(&h.id) {
                        let mut state = (**ps).clone();
                        if apply_changes(&mut state, &step.fields).is_ok() {
                            rebuilt = Some((Arc::new(state), step.pending));
                        }
                    }
                }
            }
            let (values, pending) = match rebuilt {
                Some(r) => r,
                None => {
                    let loaded =
                        saver
                            .get(&thread_id, &root, Some(h.id))
                            .await?
                            .ok_or_else(|| CheckpointError::NotFound {
                                thread: thread_id.clone(),
                                ns: root.clone(),
                                id: h.id,
                            })?;
                    (Arc::new(decode_state::<S>(&loaded, &t)?), loaded.pending)
                }
            };
            prev = Some((h.id, values.clone()));
            out.push(self.snapshot_of(h, values, &pending, &t)?);
        }
        out.reverse();
        Ok(out)
    }

    fn snapshot(
        &self,
        loaded: LoadedCheckpoint,
        thread: &Option<ThreadId>,
    ) -> Result<StateSnapshot<S>, RunError> {
        let values = Arc::new(decode_state::<S>(&loaded, thread)?);
        self.snapshot_of(loaded.checkpoint, values, &loaded.pending, thread)
    }

    fn snapshot_of(
        &self,
        checkpoint: Checkpoint,
        values: Arc<S>,
        pending: &[PendingWrite],
        thread: &Option<ThreadId>,
    ) -> Result<StateSnapshot<S>, RunError> {
        let (next, interrupts) = self.next_and_interrupts(&checkpoint, pending, thread)?;
        let errors = pending
            .iter()
            .filter_map(|w| match &w.kind {
                WriteKind::Error(e) => Some((w.node.clone(), e.clone())),
                _ => None,
            })
            .collect();
        Ok(StateSnapshot {
            values,
            next,
            checkpoint,
            interrupts,
            errors,
        })
    }

    /// What runs after `checkpoint` (its header's control record) and the interrupts pending
    /// there (its pending writes): a snapshot's `next` and `interrupts`, without the state.
    pub(crate) fn next_and_interrupts(
        &self,
        checkpoint: &Checkpoint,
        pending: &[PendingWrite],
        thread: &Option<ThreadId>,
    ) -> Result<(Vec<String>, Vec<Interrupt>), RunError> {
        let control = ControlState::<S>::from_control(&self.inner, &checkpoint.control, thread)?;
        let mut next: Vec<String> = Vec::new();
        if control.start.is_some() {
            next.push(START.to_owned());
        }
        for (i, n) in self.inner.nodes.iter().enumerate() {
            if control.is_triggered(&self.inner, i) {
                next.push(n.name.to_string());
            }
        }
        next.extend(
            control
                .sends
                .iter()
                .map(|s| self.inner.nodes[s.node].name.to_string()),
        );
        let interrupts = pending
            .iter()
            .filter_map(|w| match &w.kind {
                WriteKind::Interrupt { id, value } => Some(Interrupt {
                    id: id.clone(),
                    value: value.clone(),
                    node: w.node.clone(),
                }),
                _ => None,
            })
            .collect();
        Ok((next, interrupts))
    }
}
