//! The [`Saver`] trait: where a graph's checkpoints go.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::graph_shape::GraphShape;

use crate::{
    Checkpoint, CheckpointError, CheckpointId, DeliveryReceipt, ListOptions, LoadedCheckpoint,
    Namespace, NamespaceInfo, PendingWrite, PutCheckpoint, Retention, RunId, RunRecord,
    StepChanges, ThreadId, ThreadInfo,
};

/// The error of a run operation a saver does not implement.
fn runs_unsupported<'a, T: Send + 'a>() -> BoxFuture<'a, Result<T, CheckpointError>> {
    Box::pin(async { Err(CheckpointError::Unsupported { what: "runs" }) })
}

/// A thread's newest checkpoint with its pending writes, without field values (see
/// [`Saver::head`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// The newest checkpoint's header.
    pub checkpoint: Checkpoint,
    /// The writes recorded against it by tasks of a failed or interrupted step.
    pub pending: Vec<PendingWrite>,
}

/// A checkpoint store. Savers store bytes and versions; they know no node code.
///
/// Contract (the conformance tests hold every saver to it):
/// - [`Saver::put`] of a `loop` or `input` checkpoint succeeds only if its parent is the
///   current head of `(thread, ns)` (none for a new thread); otherwise it fails with
///   [`CheckpointError::StaleParent`] and stores nothing. `update` and `fork` checkpoints may
///   branch from any stored checkpoint.
/// - A put stores the checkpoint and its field writes atomically.
/// - A `loop` checkpoint settles its parent's step: the task outputs
///   ([`WriteKind::Output`](crate::WriteKind::Output)) recorded against the parent while that
///   step ran are in the new checkpoint and are dropped with its put (the SQLite saver drops
///   those its own writer recorded); errors, interrupts and resume values stay.
/// - [`Saver::get`] without an id returns the newest checkpoint (greatest id).
/// - [`Saver::list`] returns newest first.
/// - Runs: [`Saver::put_run`] follows [`RunStatus::may_become`](crate::RunStatus::may_become);
///   [`Saver::put_receipt_if_absent`] stores at most one receipt per run, for a stored run.
/// - [`Saver::delete_thread`] deletes the thread's runs and their receipts too;
///   [`Saver::copy_thread`] and [`Saver::prune`] leave runs alone (a run id names one
///   execution, of the thread it ran on).
pub trait Saver: Send + Sync + 'static {
    /// Store a checkpoint and the fields its step changed.
    ///
    /// # Errors
    /// [`CheckpointError::StaleParent`] if another writer moved the thread; storage errors.
    fn put(&self, put: PutCheckpoint) -> BoxFuture<'_, Result<(), CheckpointError>>;

    /// Record pending writes of finished tasks against checkpoint `id` (tasks that finished
    /// while their step still runs, or a step that failed or was interrupted). The writes
    /// given for a task replace all writes recorded for that task before; tasks not named
    /// keep theirs.
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] if the checkpoint does not exist; storage errors.
    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>>;

    /// Load a checkpoint (the newest when `id` is `None`) with its field values and pending
    /// writes.
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] for an unknown `id`; storage and integrity errors.
    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<LoadedCheckpoint>, CheckpointError>>;

    /// List checkpoint headers of `(thread, ns)`, newest first.
    ///
    /// # Errors
    /// [`CheckpointError::InvalidFilterKey`] for a bad filter key; storage errors.
    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>>;

    /// Delete every checkpoint of a thread, in every namespace, and its runs and their
    /// receipts.
    ///
    /// # Errors
    /// Storage errors.
    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>>;

    /// Every thread with checkpoints in its root namespace, by thread id. A stored name that
    /// is not a valid [`ThreadId`] (only an edit of the file makes one) is left out rather
    /// than failing the whole list.
    ///
    /// # Errors
    /// Storage and integrity errors.
    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>>;

    /// Every namespace of `thread` with checkpoints (the root one and each subgraph's), by
    /// namespace text, the root first; empty for an unknown thread. The default answers
    /// [`CheckpointError::Unsupported`].
    ///
    /// # Errors
    /// Storage and integrity errors; `Unsupported` from a saver that cannot list them.
    fn list_namespaces<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<NamespaceInfo>, CheckpointError>> {
        let _ = thread;
        Box::pin(async {
            Err(CheckpointError::Unsupported {
                what: "listing a thread's namespaces",
            })
        })
    }

    /// Copy every checkpoint and pending write of `from` into the empty thread `to` (not its
    /// runs: they ran on `from`).
    ///
    /// # Errors
    /// [`CheckpointError::StaleParent`] if `to` already has checkpoints; storage errors.
    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>>;

    /// Copy one branch of `from` into the empty thread `to`: the root-namespace checkpoints
    /// from the root of the branch to `head` (each keeping its id, parent and stored parts)
    /// and their pending writes. Other branches, subgraph namespaces and runs stay behind.
    ///
    /// The default reports [`CheckpointError::Unsupported`] (a saver written before it).
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] if `from` has no root checkpoint `head`;
    /// [`CheckpointError::StaleParent`] if `to` already has checkpoints; storage errors.
    fn copy_branch<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
        head: CheckpointId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let _ = (from, to, head);
        Box::pin(async {
            Err(CheckpointError::Unsupported {
                what: "copying a branch",
            })
        })
    }

    /// Delete the checkpoints of `thread` that `retention` does not keep. A kept checkpoint
    /// stays loadable and resumable; one whose parent is deleted becomes a root. Returns how
    /// many checkpoints were deleted.
    ///
    /// # Errors
    /// Storage errors.
    fn prune<'a>(
        &'a self,
        thread: &'a ThreadId,
        retention: Retention,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>>;

    /// What checkpoint `id` changed since its parent (all its fields for a root), with its
    /// pending writes: what a reader needs to move a state it has from the parent to `id`
    /// without decoding it whole.
    ///
    /// The default loads both checkpoints and compares their parts.
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] for an unknown id; storage and integrity errors.
    fn changes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
    ) -> BoxFuture<'a, Result<StepChanges, CheckpointError>> {
        Box::pin(async move {
            let child =
                self.get(thread, ns, Some(id))
                    .await?
                    .ok_or_else(|| CheckpointError::NotFound {
                        thread: thread.clone(),
                        ns: ns.clone(),
                        id,
                    })?;
            let parent = match child.checkpoint.parent {
                Some(p) => self.get(thread, ns, Some(p)).await.ok().flatten(),
                None => None,
            };
            Ok(StepChanges::between(parent.as_ref(), &child))
        })
    }

    /// [`Saver::changes`] of several checkpoints of one thread, in the order given: for
    /// readers that walk a history (one round trip instead of one per checkpoint).
    ///
    /// # Errors
    /// As [`Saver::changes`].
    fn changes_many<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        ids: Vec<CheckpointId>,
    ) -> BoxFuture<'a, Result<Vec<StepChanges>, CheckpointError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                out.push(self.changes(thread, ns, id).await?);
            }
            Ok(out)
        })
    }

    /// The newest checkpoint of `(thread, ns)` with its pending writes, without field values
    /// (for a reader that already holds the state at that checkpoint).
    ///
    /// # Errors
    /// Storage and integrity errors.
    fn head<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
    ) -> BoxFuture<'a, Result<Option<Head>, CheckpointError>> {
        Box::pin(async move {
            Ok(self.get(thread, ns, None).await?.map(|l| Head {
                checkpoint: l.checkpoint,
                pending: l.pending,
            }))
        })
    }

    /// Whether batches given to [`Saver::put_many`] are stored in the order of the calls even
    /// when their futures run at the same time (the call itself queues the batch, as the
    /// SQLite saver's writer thread does). The engine then keeps several batches in flight;
    /// otherwise it waits for one batch to be stored before handing over the next. Such a
    /// saver's batch futures must also need no polling for the batch to be stored (the engine
    /// keeps them without spawning a task), and under durability `async` the engine hands it
    /// each checkpoint as soon as it is made, with [`Saver::put_streamed`]. The default
    /// (`false`) is always safe.
    fn queues_in_call_order(&self) -> bool {
        false
    }

    /// Store several checkpoints, in order (each one's parent is stored before it). A saver
    /// that groups writes commits them together. The first error is returned; checkpoints
    /// after a failed one fail too (their parent is missing).
    ///
    /// # Errors
    /// As [`Saver::put`].
    fn put_many(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            for put in puts {
                self.put(put).await?;
            }
            Ok(())
        })
    }

    /// As [`Saver::put_many`], and more checkpoints of the same run follow at once: a saver
    /// that groups writes may keep its commit open a little for them, so that storing them
    /// overlaps the steps that make them. The future still resolves only once these are
    /// stored. [`Saver::flush`] (or any other write) asks for a prompt commit. The default is
    /// [`Saver::put_many`].
    ///
    /// # Errors
    /// As [`Saver::put`].
    fn put_streamed(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_many(puts)
    }

    /// Commit promptly what [`Saver::put_streamed`] handed over; resolves once it is stored.
    /// The default has nothing to do.
    ///
    /// # Errors
    /// As [`Saver::put`].
    fn flush(&self) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async { Ok(()) })
    }

    /// Store a run, or update a stored one's status, reasons, update time and metadata (its
    /// creation time stays the first put's).
    ///
    /// # Errors
    /// [`CheckpointError::InvalidRunTransition`] if the stored status may not become the new
    /// one; [`CheckpointError::RunOfAnotherThread`] if the run is stored for another thread;
    /// [`CheckpointError::Unsupported`] from a saver without runs (the default); storage
    /// errors.
    fn put_run(&self, run: RunRecord) -> BoxFuture<'_, Result<(), CheckpointError>> {
        let _ = run;
        runs_unsupported()
    }

    /// A stored run; with `thread`, only if it runs on that thread.
    ///
    /// # Errors
    /// [`CheckpointError::Unsupported`] (the default); storage and integrity errors.
    fn get_run<'a>(
        &'a self,
        thread: Option<&'a ThreadId>,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, CheckpointError>> {
        let _ = (thread, run);
        runs_unsupported()
    }

    /// The runs of a thread, newest first (by creation time, then run id).
    ///
    /// # Errors
    /// [`CheckpointError::Unsupported`] (the default); storage and integrity errors.
    fn list_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        let _ = thread;
        runs_unsupported()
    }

    /// The runs of a thread whose status is [`RunStatus::Running`](crate::RunStatus::Running),
    /// newest first: what is looked at when the thread is next opened for a run, to find runs
    /// left running. The default filters [`Saver::list_runs`]; a saver that can select them
    /// in storage reads only those.
    ///
    /// # Errors
    /// As [`Saver::list_runs`].
    fn list_running_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        Box::pin(async move {
            let mut runs = self.list_runs(thread).await?;
            runs.retain(|r| r.status == crate::RunStatus::Running);
            Ok(runs)
        })
    }

    /// Store the delivery receipt of a stored run unless it has one: `true` if this put
    /// stored it, `false` (storing nothing) if the run already had a receipt. Of several
    /// concurrent puts for one run exactly one returns `true`.
    ///
    /// # Errors
    /// [`CheckpointError::RunNotFound`] if the run is not stored;
    /// [`CheckpointError::Unsupported`] (the default); storage errors.
    fn put_receipt_if_absent<'a>(
        &'a self,
        run: &'a RunId,
        receipt: DeliveryReceipt,
    ) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        let _ = (run, receipt);
        runs_unsupported()
    }

    /// A run's delivery receipt, if it has one.
    ///
    /// # Errors
    /// [`CheckpointError::Unsupported`] (the default); storage and integrity errors.
    fn get_receipt<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<DeliveryReceipt>, CheckpointError>> {
        let _ = run;
        runs_unsupported()
    }

    /// Record that `thread`'s checkpoints from now on are made by the graph of `shape`: a
    /// compiled graph calls it when it starts a run on the thread. A saver stores each shape
    /// once (by [`GraphShape::key`]) and the thread's pointer to it only when the shape
    /// differs from the one the thread ran last. The default stores nothing.
    ///
    /// # Errors
    /// Storage errors.
    fn put_graph<'a>(
        &'a self,
        thread: &'a ThreadId,
        shape: Arc<GraphShape>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let _ = (thread, shape);
        Box::pin(async { Ok(()) })
    }

    /// The shape of the graph that made `checkpoint` of `thread` (in any namespace; the
    /// newest checkpoint when `None`): the shape recorded last before it was made. `None`
    /// when none was recorded (a file from an older build, or the default).
    ///
    /// # Errors
    /// Storage and integrity errors.
    fn graph_of<'a>(
        &'a self,
        thread: &'a ThreadId,
        checkpoint: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<GraphShape>, CheckpointError>> {
        let _ = (thread, checkpoint);
        Box::pin(async { Ok(None) })
    }
}
