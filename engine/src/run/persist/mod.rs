//! The checkpoint pipeline: the head checkpoint of a level, the checkpoint writes on their
//! way to the saver, and what is not yet stored (changes and pending writes held back under
//! durability `exit`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, FieldPart, FieldWrite, Namespace, PendingWrite,
    PutCheckpoint, Saver, Source, ThreadId, WriteKind,
};
use stategraph_reducers::{Change, Stored};

use super::config::{Durability, MAX_INFLIGHT};
use super::pending::input_task;
use super::superstep::RunLoop;
use crate::event::{EventKind, Shared};
use crate::replay::RESUMED_KEY;
use crate::state::Field;
use crate::{RunError, State};
use stategraph_checkpoints::sync::Unpoisoned;

/// Under durability `async`, checkpoints go to a saver that does not order batches (see
/// [`Saver::queues_in_call_order`]) in batches of at least this many (but for the last of a
/// run): more when the batch before is still being stored.
const ASYNC_BATCH: usize = 16;

/// A checkpoint write's outcome, once the saver has it.
type WriteDone = BoxFuture<'static, Result<(), RunError>>;

/// A checkpoint write handed to the saver: how many checkpoints, and its outcome. (The
/// future sits in a mutex only to keep the run loop `Sync`; it is reached through `&mut`.)
struct InflightWrite {
    puts: usize,
    done: Mutex<WriteDone>,
}

/// How checkpoints reach the saver under durability `async`. Both modes live here because
/// the [`Saver`] trait lets a saver that does not order batches store concurrent batches
/// out of order: only a saver that orders them can be handed each checkpoint as it is made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AsyncWrites {
    /// The saver queues batches in call order: each checkpoint is handed over as it is made,
    /// saying more follow ([`Saver::put_streamed`]), so a grouping saver stores them while
    /// the run goes on and commits them together; [`Saver::flush`] commits what it holds.
    Streamed,
    /// Any other saver: checkpoints are buffered and sent as one batch once the batch before
    /// it is stored and [`ASYNC_BATCH`] are buffered. While the batch before is still being
    /// stored, the buffer keeps growing (to [`MAX_INFLIGHT`] with the batch in flight), so a
    /// store slower than the steps gets fewer, larger batches, each paying its round trip and
    /// commit once (decision 0065).
    Batched,
}

/// The head checkpoint of a level and the checkpoint writes not yet confirmed.
pub(super) struct CheckpointPipeline {
    saver: Option<Arc<dyn Saver>>,
    durability: Durability,
    async_writes: AsyncWrites,
    /// The checkpoint the current step starts from (also its id when not yet stored).
    head: Option<CheckpointId>,
    /// The newest checkpoint actually stored (differs from `head` under durability exit).
    stored_head: Option<CheckpointId>,
    /// The step of `head`.
    head_step: i64,
    /// Where the head checkpoint came from (for the final checkpoint under durability exit).
    head_source: Source,
    /// Changes not yet stored (durability exit), per field.
    unsaved: Vec<Change>,
    /// Checkpoint writes handed to the saver and not yet confirmed (durability async), oldest
    /// first.
    inflight: VecDeque<InflightWrite>,
    /// Checkpoints in `inflight`.
    inflight_puts: usize,
    /// Checkpoints not yet handed to the saver (durability async, batched).
    buffer: Vec<PutCheckpoint>,
    /// Pending writes held back until the final checkpoint (durability exit).
    deferred_pending: Vec<PendingWrite>,
}

impl CheckpointPipeline {
    /// The pipeline of a level that stores in `saver` (if any) a state of `fields` fields.
    pub(super) fn new(
        saver: Option<Arc<dyn Saver>>,
        durability: Durability,
        fields: usize,
    ) -> Self {
        let async_writes = match &saver {
            Some(s) if s.queues_in_call_order() => AsyncWrites::Streamed,
            _ => AsyncWrites::Batched,
        };
        CheckpointPipeline {
            saver,
            durability,
            async_writes,
            head: None,
            stored_head: None,
            head_step: -1,
            head_source: Source::Loop,
            unsaved: vec![Change::Unchanged; fields],
            inflight: VecDeque::new(),
            inflight_puts: 0,
            buffer: Vec::new(),
            deferred_pending: Vec::new(),
        }
    }

    /// The checkpoint the current step starts from.
    pub(super) fn head(&self) -> Option<CheckpointId> {
        self.head
    }

    /// The newest checkpoint stored.
    pub(super) fn stored_head(&self) -> Option<CheckpointId> {
        self.stored_head
    }

    /// The step of the head checkpoint.
    pub(super) fn head_step(&self) -> i64 {
        self.head_step
    }

    /// Start from a checkpoint loaded from the saver.
    pub(super) fn load_head(&mut self, checkpoint: &Checkpoint) {
        self.head = Some(checkpoint.id);
        self.stored_head = self.head;
        self.head_source = checkpoint.source;
        self.head_step = checkpoint.step;
    }

    /// Make `id` the head; returns the head before it.
    fn advance_head(
        &mut self,
        id: CheckpointId,
        source: Source,
        step: i64,
    ) -> Option<CheckpointId> {
        self.head_source = source;
        self.head_step = step;
        self.head.replace(id)
    }

    /// Field `index` changed by `change` since the last stored checkpoint.
    pub(super) fn note_change(&mut self, index: usize, change: Change) {
        self.unsaved[index] = self.unsaved[index].then(change);
    }

    /// Store `put`: at once (durability `sync`, or `wait`), else handed over in the
    /// background, bounded to [`MAX_INFLIGHT`] checkpoints.
    async fn submit(&mut self, put: PutCheckpoint, wait: bool) -> Result<(), RunError> {
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        if self.durability != Durability::Async || wait {
            self.drain().await?;
            return saver.put(put).await.map_err(RunError::from);
        }
        match self.async_writes {
            AsyncWrites::Streamed => self.hand_over(
                1,
                Box::pin(
                    async move { saver.put_streamed(vec![put]).await.map_err(RunError::from) },
                ),
                false,
            )?,
            AsyncWrites::Batched => self.buffer.push(put),
        }
        // Surface finished writes (and their errors) early; bound what is in flight.
        while let Some(front) = self.inflight.front_mut() {
            let done = front.done.get_mut().unpoisoned();
            match done.now_or_never() {
                Some(done) => {
                    self.pop_inflight();
                    done?;
                }
                None => break,
            }
        }
        while self.inflight_puts + self.buffer.len() > MAX_INFLIGHT {
            match self.pop_inflight() {
                Some(front) => front.await?,
                None => break,
            }
        }
        if self.buffer.len() >= ASYNC_BATCH && self.inflight.is_empty() {
            self.send_buffer().await?;
        }
        Ok(())
    }

    fn push_inflight(&mut self, puts: usize, done: WriteDone) {
        self.inflight_puts += puts;
        self.inflight.push_back(InflightWrite {
            puts,
            done: Mutex::new(done),
        });
    }

    /// The oldest write in flight, taken off the queue.
    fn pop_inflight(&mut self) -> Option<WriteDone> {
        let front = self.inflight.pop_front()?;
        self.inflight_puts -= front.puts;
        Some(front.done.into_inner().unpoisoned())
    }

    /// Hand the buffered checkpoints (only a batched saver has any) to the saver as one
    /// batch, once the last batch is stored: such a saver may store concurrent batches out
    /// of order.
    async fn send_buffer(&mut self) -> Result<(), RunError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let Some(saver) = self.saver.clone() else {
            return Ok(());
        };
        while let Some(front) = self.pop_inflight() {
            front.await?;
        }
        let puts = std::mem::take(&mut self.buffer);
        let n = puts.len();
        self.hand_over(
            n,
            Box::pin(async move { saver.put_many(puts).await.map_err(RunError::from) }),
            true,
        )
    }

    /// Poll a write of `n` checkpoints once (which hands it to the saver) and keep it in
    /// flight unless it is done; `spawn`: as a task of its own, for a saver whose future must
    /// be polled to make progress. A saver that completes at once (in memory) needs no task.
    /// An error that arrives at once still waits its turn behind the writes sent before it:
    /// the run reports the first failure in checkpoint order, not whichever finished first.
    fn hand_over(&mut self, n: usize, mut write: WriteDone, spawn: bool) -> Result<(), RunError> {
        match (&mut write).now_or_never() {
            Some(Ok(())) => {}
            Some(Err(e)) if self.inflight.is_empty() => return Err(e),
            Some(Err(e)) => self.push_inflight(n, Box::pin(futures::future::ready(Err(e)))),
            None if spawn => {
                let task = tokio::spawn(write);
                self.push_inflight(n, Box::pin(async move { joined(task.await) }));
            }
            None => self.push_inflight(n, write),
        }
        Ok(())
    }

    /// Send what is buffered and wait for every checkpoint write in flight, asking the saver
    /// to commit at once what is still in flight (what it was told more would follow).
    pub(super) async fn drain(&mut self) -> Result<(), RunError> {
        if let Some(saver) = self.saver.clone() {
            self.send_buffer().await?;
            if !self.inflight.is_empty() {
                self.hand_over(
                    0,
                    Box::pin(async move { saver.flush().await.map_err(RunError::from) }),
                    false,
                )?;
            }
        }
        while let Some(front) = self.pop_inflight() {
            front.await?;
        }
        Ok(())
    }

    /// Keep a write handed to the saver outside the checkpoints (the graph's shape) with the
    /// checkpoint writes in flight: its outcome surfaces with theirs, and the run's end waits
    /// for it.
    pub(super) fn track(&mut self, write: WriteDone) -> Result<(), RunError> {
        let spawn = self.async_writes != AsyncWrites::Streamed;
        self.hand_over(0, write, spawn)
    }

    /// Record finished tasks' writes against the head checkpoint while the rest of their
    /// step still runs, so that a crash re-runs only the tasks that had not finished. Handed
    /// over like a checkpoint write, without waiting for it: a saver that queues in call
    /// order gets it behind the checkpoints handed over before it; any other saver once those
    /// are stored (it may store concurrent writes out of order), on a task of its own. Its
    /// outcome surfaces with the next write.
    pub(super) async fn record_task_writes(
        &mut self,
        thread: &ThreadId,
        ns: &Namespace,
        writes: Vec<PendingWrite>,
    ) -> Result<(), RunError> {
        let (Some(saver), Some(head)) = (self.saver.clone(), self.head) else {
            return Ok(());
        };
        let queued = self.async_writes == AsyncWrites::Streamed;
        if !queued {
            self.send_buffer().await?;
            while let Some(front) = self.pop_inflight() {
                front.await?;
            }
        }
        let (thread, ns) = (thread.clone(), ns.clone());
        let write: WriteDone = Box::pin(async move {
            saver
                .put_writes(&thread, &ns, head, writes)
                .await
                .map_err(RunError::from)
        });
        self.hand_over(0, write, !queued)
    }
}

/// A spawned checkpoint write's outcome.
fn joined(r: Result<Result<(), RunError>, tokio::task::JoinError>) -> Result<(), RunError> {
    match r {
        Ok(r) => r,
        Err(e) => Err(RunError::Checkpoint(CheckpointError::Storage(
            format!("checkpoint writer failed: {e}").into(),
        ))),
    }
}

impl<S: State> RunLoop<S> {
    /// Store the applied step's checkpoint and show its values.
    pub(super) async fn commit_step(&mut self) -> Result<(), RunError> {
        let field_writes = self.encode_changes()?;
        self.put(Source::Loop, self.step, field_writes).await?;
        if self.wants(|m| m.values) {
            self.emit(EventKind::Values(Shared::state(self.state.clone())))
                .await;
        }
        Ok(())
    }

    /// Encode the fields changed since the last stored checkpoint (nothing without a saver).
    pub(super) fn encode_changes(&mut self) -> Result<Vec<FieldWrite>, RunError> {
        if self.level.saver.is_none() || self.shared.durability == Durability::Exit {
            return Ok(Vec::new());
        }
        self.take_unsaved()
    }

    /// Encode every field changed since the last stored checkpoint, and forget the changes.
    pub(super) fn take_unsaved(&mut self) -> Result<Vec<FieldWrite>, RunError> {
        let mut writes = Vec::new();
        for f in S::Field::ALL {
            let change = std::mem::replace(&mut self.persist.unsaved[f.index()], Change::Unchanged);
            if change.is_changed() {
                let stored =
                    self.state
                        .encode_field(*f, change)
                        .map_err(|source| RunError::Encode {
                            field: f.name(),
                            source,
                        })?;
                let part = match stored {
                    Stored::Whole(b) => FieldPart::Whole(b),
                    Stored::Tail(b) => FieldPart::Tail(b),
                };
                writes.push(FieldWrite {
                    field: f.name().to_owned(),
                    part,
                });
            }
        }
        Ok(writes)
    }

    /// The header of checkpoint `id` of the current state.
    fn checkpoint_header(
        &self,
        id: CheckpointId,
        parent: Option<CheckpointId>,
        step: i64,
        source: Source,
    ) -> Result<Checkpoint, RunError> {
        Ok(Checkpoint {
            id,
            parent,
            step,
            source,
            created_at_ms: id.created_at_ms(),
            control: self.control.to_control(&self.g)?,
            metadata: self.shared.metadata.clone(),
        })
    }

    /// What a step that commits took from outside: the resume values its tasks consumed and
    /// the resuming command's update and routing, as the `resumed` metadata entry (see
    /// [`RESUMED_KEY`]); `None` for a step that resumed nothing. Both are cleared.
    fn take_resumed(&mut self) -> Option<serde_json::Value> {
        if !self.level.is_root {
            // A subgraph's answers are the root step's: it records them when it commits.
            self.input_writes.clear();
            return None;
        }
        let mut answers = std::mem::take(&mut *self.shared.answers.lock().unpoisoned());
        let command = self.input_writes.drain(..).find_map(|w| match w.kind {
            WriteKind::Output(v) if w.task_id == input_task() => Some(v),
            _ => None,
        });
        if answers.is_empty() && command.is_none() {
            return None;
        }
        // Tasks finish in any order: sorted, the entry is the same on every run.
        answers.sort_by(|a, b| (&a.node, &a.interrupt).cmp(&(&b.node, &b.interrupt)));
        let tasks: Vec<serde_json::Value> = answers.into_iter().map(|a| a.to_json()).collect();
        let mut entry = serde_json::json!({ "tasks": tasks });
        if let Some(command) = command {
            entry["command"] = command;
        }
        Some(entry)
    }

    /// Write a checkpoint at `step` (or, under durability exit, only advance the head).
    pub(super) async fn put(
        &mut self,
        source: Source,
        step: i64,
        writes: Vec<FieldWrite>,
    ) -> Result<(), RunError> {
        let id = CheckpointId::generate();
        if matches!(source, Source::Fork | Source::Update) {
            self.control.anchor = Some(id);
        }
        let parent = self.persist.advance_head(id, source, step);
        self.step = step;
        self.pending.clear();
        let resumed = if source == Source::Loop {
            // The resuming command's update is now part of the committed state.
            self.take_resumed()
        } else {
            None
        };
        let handled = std::mem::take(&mut self.handled);
        let (Some(_), Some(thread)) = (&self.level.saver, &self.shared.thread) else {
            return Ok(());
        };
        let exit = self.shared.durability == Durability::Exit;
        if exit && source != Source::Fork {
            return Ok(());
        }
        let parent = if exit {
            self.persist.stored_head
        } else {
            parent
        };
        let mut checkpoint = self.checkpoint_header(id, parent, step, source)?;
        if let Some(resumed) = resumed {
            checkpoint.metadata.insert(RESUMED_KEY.to_owned(), resumed);
        }
        if source == Source::Loop && !self.cache_hits.is_empty() {
            let hits = std::mem::take(&mut self.cache_hits);
            let key = crate::cache::CACHED_KEY.to_owned();
            checkpoint
                .metadata
                .insert(key, serde_json::Value::Array(hits));
        }
        if !handled.is_empty() {
            let entry = crate::HandledFailure::to_metadata(&handled);
            checkpoint
                .metadata
                .insert(crate::HANDLED_ERRORS_KEY.to_owned(), entry);
        }
        let event = self
            .wants(|m| m.checkpoints)
            .then(|| self.checkpoint_event(&checkpoint));
        let put = PutCheckpoint {
            thread: thread.clone(),
            ns: self.level.ns.clone(),
            checkpoint,
            writes,
        };
        self.persist.stored_head = Some(id);
        // A fork or an update is stored before anything runs on it. New input is not waited
        // for under `async`: its anchor is derived from the input itself (see
        // `input_anchor`), so if it is lost in a crash and given again, the steps computed
        // again keep their task ids.
        let wait = matches!(source, Source::Fork | Source::Update);
        self.persist.submit(put, wait).await?;
        if let Some(event) = event {
            self.emit(EventKind::Checkpoint(Box::new(event))).await;
        }
        Ok(())
    }

    /// Store what must be stored before the run reports: the in-flight checkpoint, and under
    /// durability exit the final one.
    pub(super) async fn flush(&mut self) -> Result<(), RunError> {
        self.persist.drain().await?;
        if self.shared.durability != Durability::Exit || self.poisoned {
            // A step that failed while being applied left the state partly updated: under
            // durability exit the thread stays at its checkpoint from before the run.
            return Ok(());
        }
        let (Some(saver), Some(thread), Some(id)) = (
            self.level.saver.clone(),
            self.shared.thread.clone(),
            self.persist.head,
        ) else {
            return Ok(());
        };
        if self.persist.head != self.persist.stored_head {
            let writes = self.take_unsaved()?;
            let (parent, step, source) = (
                self.persist.stored_head,
                self.persist.head_step,
                self.persist.head_source,
            );
            let put = PutCheckpoint {
                thread: thread.clone(),
                ns: self.level.ns.clone(),
                checkpoint: self.checkpoint_header(id, parent, step, source)?,
                writes,
            };
            saver.put(put).await?;
            self.persist.stored_head = Some(id);
        }
        if !self.persist.deferred_pending.is_empty() {
            let writes = std::mem::take(&mut self.persist.deferred_pending);
            saver
                .put_writes(&thread, &self.level.ns, id, writes)
                .await?;
        }
        Ok(())
    }

    /// Record the pending writes of a failed or interrupted step on the head checkpoint
    /// (under durability exit: with the final checkpoint).
    pub(super) async fn record_pending(
        &mut self,
        writes: Vec<PendingWrite>,
    ) -> Result<(), RunError> {
        self.pending = writes.clone();
        if self.shared.durability == Durability::Exit {
            self.persist.deferred_pending = writes;
            return Ok(());
        }
        self.persist.drain().await?;
        if let (Some(saver), Some(thread), Some(head)) =
            (&self.level.saver, &self.shared.thread, self.persist.head)
        {
            saver
                .put_writes(thread, &self.level.ns, head, writes)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
