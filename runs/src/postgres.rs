//! The contract, kept by the PostgreSQL saver's queue (decision 0058): its leases are timed
//! by the server's clock, its notifications come through `LISTEN`, and its rollback deletes
//! the run's checkpoints in the run's end's transaction.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::{
    CheckpointError, Lease, Multitask, PostgresRunQueue, QueuedRun, RunEnd, RunId, RunQueue,
    RunStatus, StopRequest, ThreadId, TokenUsage, Wakeups,
};

impl RunQueue for PostgresRunQueue {
    fn submit_as<'a>(
        &'a self,
        run: &'a RunId,
        thread: &'a ThreadId,
        input: &'a Value,
        strategy: Multitask,
    ) -> BoxFuture<'a, Result<Vec<RunId>, CheckpointError>> {
        Box::pin(PostgresRunQueue::submit_as(
            self, run, thread, input, strategy,
        ))
    }

    fn lease<'a>(
        &'a self,
        worker: &'a str,
        lease_for: Duration,
    ) -> BoxFuture<'a, Result<Option<Lease>, CheckpointError>> {
        Box::pin(PostgresRunQueue::lease(self, worker, lease_for))
    }

    fn heartbeat<'a>(
        &'a self,
        lease: &'a Lease,
        lease_for: Duration,
    ) -> BoxFuture<'a, Result<Option<StopRequest>, CheckpointError>> {
        Box::pin(PostgresRunQueue::heartbeat(self, lease, lease_for))
    }

    fn finish_with<'a>(
        &'a self,
        lease: &'a Lease,
        end: RunEnd,
        usage: Option<TokenUsage>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(PostgresRunQueue::finish_with(self, lease, end, usage))
    }

    fn stop<'a>(
        &'a self,
        run: &'a RunId,
        request: StopRequest,
    ) -> BoxFuture<'a, Result<RunStatus, CheckpointError>> {
        Box::pin(PostgresRunQueue::stop(self, run, request))
    }

    fn run<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<QueuedRun>, CheckpointError>> {
        Box::pin(PostgresRunQueue::run(self, run))
    }

    fn runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<QueuedRun>, CheckpointError>> {
        Box::pin(PostgresRunQueue::runs(self, thread))
    }

    fn forget<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        Box::pin(PostgresRunQueue::forget(self, run))
    }

    fn wakeups(&self) -> BoxFuture<'_, Wakeups> {
        Box::pin(async move { Wakeups::postgres(PostgresRunQueue::wakeups(self).await) })
    }
}
