//! Runs left `running`: found when their thread is next opened for a run, and stored as
//! `cancelled` with a reason that says why (the rule of [`owner`](super::owner) decides
//! which runs are left).

use std::sync::Arc;

use stategraph::checkpoints::{CheckpointError, RunRecord, RunStatus, Saver, ThreadId};

use super::owner::{self, Left};
use super::record::now_ms;

/// How the reason of a run found left `running` begins; it goes on to say whose invocation
/// left it and which thread's opening found it.
pub const LEFT_RUNNING_REASON: &str =
    "the run was left running by an invocation that ended without settling it";

/// The reason stored for a run `left` running, found when `thread` was next opened.
fn reason(left: Left, thread: &ThreadId) -> String {
    let by = match left {
        Left::ByThisProcess => "in this process".to_owned(),
        Left::ByEndedProcess(pid) => format!("in process {pid}, which has ended"),
    };
    format!("{LEFT_RUNNING_REASON} ({by}); found when thread `{thread}` was next opened")
}

/// Stores every run of `thread` that is `running` but left (see [`owner::left`]) as
/// `cancelled`, with the reason. Best effort: a store that keeps no runs has none, and a
/// failure to read or store is logged, not returned — it must not stop the run opening the
/// thread.
pub(super) async fn cancel_left_runs(saver: &Arc<dyn Saver>, thread: &ThreadId) {
    let runs = match saver.list_running_runs(thread).await {
        Ok(runs) => runs,
        Err(CheckpointError::Unsupported { .. }) => return,
        Err(e) => {
            tracing::warn!(thread = %thread, error = %e, "runs left running not looked for");
            return;
        }
    };
    for run in runs.into_iter().filter(|r| r.status == RunStatus::Running) {
        if let Some(left) = owner::left(&run) {
            cancel(saver.as_ref(), run, left, thread).await;
        }
    }
}

async fn cancel(saver: &dyn Saver, run: RunRecord, left: Left, thread: &ThreadId) {
    let id = run.run_id.clone();
    let cancelled = RunRecord {
        status: RunStatus::Cancelled,
        reason: Some(reason(left, thread)),
        updated_at_ms: now_ms(),
        ..run
    };
    match saver.put_run(cancelled).await {
        Ok(()) => tracing::info!(run = %id, thread = %thread, "a run left running was cancelled"),
        // Settled meanwhile (by another process's look at the thread): its status stands.
        Err(CheckpointError::InvalidRunTransition { .. }) => {}
        Err(e) => tracing::warn!(run = %id, error = %e, "a run left running not cancelled"),
    }
}
