//! Run queues: runs submitted to threads, leased by workers, one running run per thread,
//! stopped on request, taken over when their worker dies. One contract, [`RunQueue`], and
//! two backends that keep it: [`SqliteRunQueue`] (a table of a SQLite file, for one machine)
//! and, with feature `postgres`, the PostgreSQL saver's queue
//! ([`PostgresRunQueue`](stategraph_checkpoints::RunQueue), decision 0058), for any number of
//! machines. The conformance suite in `runs/tests/` runs the same behaviours on both.
//!
//! ```
//! use std::time::Duration;
//! use stategraph_checkpoints::{Multitask, RunEnd, RunId, RunStatus, ThreadId};
//! use stategraph_runs::{RunQueue, SqliteRunQueue};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir()?;
//! let queue = SqliteRunQueue::open(dir.path().join("runs.db"))?;
//! let (run, thread) = (RunId::generate(), ThreadId::new("t-1")?);
//! queue.submit_as(&run, &thread, &serde_json::json!({"n": 1}), Multitask::Enqueue).await?;
//! let lease = queue.lease("worker-a", Duration::from_secs(30)).await?.expect("runnable");
//! assert_eq!(lease.run, run);
//! queue.finish(&lease, RunEnd::Success).await?;
//! assert_eq!(queue.run(&run).await?.map(|r| r.status), Some(RunStatus::Success));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Inside: `sqlite` the SQLite backend; `postgres` the contract kept by the saver's queue;
//! `wakeups` the notifications waiters wait on; `heartbeat` what keeps a lease.

mod heartbeat;
#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;
mod wakeups;

use std::time::Duration;

use futures::future::BoxFuture;
pub use heartbeat::{Beat, Heartbeat};
use serde_json::Value;
pub use sqlite::{wait_for_the_lock, SqliteRunQueue};
#[cfg(feature = "postgres")]
pub use stategraph_checkpoints::RunQueue as PostgresRunQueue;
pub use stategraph_checkpoints::{
    CheckpointError, Lease, Multitask, QueuedRun, RunEnd, RunId, RunStatus, StopRequest, ThreadId,
    TokenUsage,
};
pub use wakeups::Wakeups;

/// A queue of runs, as every backend keeps it.
///
/// - Runs of one thread run one at a time, in the order they were submitted; runs of
///   different threads run side by side.
/// - A submission makes way under its [`Multitask`] strategy: `reject` refuses it
///   ([`CheckpointError::ThreadBusy`]) while the thread has an unfinished run; `interrupt`
///   and `rollback` ask the running run to stop and end the pending ones (`cancelled`).
/// - A lease lasts `lease_for` from its last heartbeat. A running run whose lease ended is
///   leased again, with the next epoch and one more attempt; the old lease's heartbeat and
///   finish then fail with [`CheckpointError::LeaseLost`] and change nothing.
/// - A stop asked of a pending run ends it at once; of a running one, it is seen by its
///   worker at the next heartbeat.
pub trait RunQueue: Send + Sync + std::fmt::Debug {
    /// Queue run `run` of `thread` with `input` (any JSON its workers read), making way as
    /// `strategy` says; the pending runs it ended to make way (a running one is asked to
    /// stop, and ends when its worker stops it).
    fn submit_as<'a>(
        &'a self,
        run: &'a RunId,
        thread: &'a ThreadId,
        input: &'a Value,
        strategy: Multitask,
    ) -> BoxFuture<'a, Result<Vec<RunId>, CheckpointError>>;

    /// Lease the oldest runnable run for `worker`: the oldest unfinished run of a thread
    /// with no running run, or a running run whose lease ended. `None` when none is
    /// runnable now.
    fn lease<'a>(
        &'a self,
        worker: &'a str,
        lease_for: Duration,
    ) -> BoxFuture<'a, Result<Option<Lease>, CheckpointError>>;

    /// Extend `lease` by `lease_for` from now; the stop asked of its run, if any.
    fn heartbeat<'a>(
        &'a self,
        lease: &'a Lease,
        lease_for: Duration,
    ) -> BoxFuture<'a, Result<Option<StopRequest>, CheckpointError>>;

    /// End the run of `lease` as `end` says (a rollback on PostgreSQL also deletes the
    /// checkpoints the run wrote, in the same transaction; on SQLite that is the caller's).
    fn finish<'a>(
        &'a self,
        lease: &'a Lease,
        end: RunEnd,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.finish_with(lease, end, None)
    }

    /// [`RunQueue::finish`], also storing the run's token usage when given: the run then
    /// reads with it ([`QueuedRun::usage`]).
    fn finish_with<'a>(
        &'a self,
        lease: &'a Lease,
        end: RunEnd,
        usage: Option<TokenUsage>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>>;

    /// Ask `run` to stop: a pending run ends now (`interrupted` for an interrupt, else
    /// `cancelled`); a running one is asked. Its status after the call.
    fn stop<'a>(
        &'a self,
        run: &'a RunId,
        request: StopRequest,
    ) -> BoxFuture<'a, Result<RunStatus, CheckpointError>>;

    /// The run, as the queue holds it.
    fn run<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<QueuedRun>, CheckpointError>>;

    /// A thread's runs, oldest first.
    fn runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<QueuedRun>, CheckpointError>>;

    /// Delete an ended run; whether it was deleted (a pending or running one is not).
    fn forget<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<bool, CheckpointError>>;

    /// Notifications naming each run submitted, stopped or ended (a backend that cannot
    /// notify gives [`Wakeups::polling`]: its waiters wake on the clock).
    fn wakeups(&self) -> BoxFuture<'_, Wakeups>;
}
