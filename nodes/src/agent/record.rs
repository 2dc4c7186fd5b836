//! Storing a run: its `running` record before the graph starts, then its receipt
//! (put-if-absent, three attempts) and, after the receipt, its terminal status.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stategraph::checkpoints::{
    CheckpointError, DeliveryReceipt as StoredReceipt, RunId, RunRecord, RunStatus, Saver, ThreadId,
};

use super::left;
use super::outcome::Recorded;
use super::owner::{LiveRun, Owner, OWNER_KEY};
use crate::delivery::DeliveryReceipt;
use crate::trace::TraceEntry;

/// The run metadata key that holds the run's capability trace (a JSON array of entries).
pub const TRACE_KEY: &str = "capability_trace";

/// The pauses before the second and third attempt to store a receipt.
pub const RECEIPT_RETRY_DELAYS: [Duration; 2] =
    [Duration::from_millis(100), Duration::from_millis(500)];

/// Where a run is stored: the agent's checkpointer and the run's thread; while it (or a
/// clone) lives, the run counts as in progress in this process.
#[derive(Clone)]
pub(super) struct RunStore {
    saver: Arc<dyn Saver>,
    thread: ThreadId,
    _live: Arc<LiveRun>,
}

/// Milliseconds since the Unix epoch, now.
pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How a run ended, as its terminal record stores it.
pub(super) struct RunEnding {
    /// Its terminal status.
    pub(super) status: RunStatus,
    /// Its reason and stop reason.
    pub(super) reasons: (Option<String>, Option<String>),
    /// Its token usage.
    pub(super) usage: stategraph::TokenUsage,
}

impl RunStore {
    /// Opens `thread` for `run`: first stores the thread's runs left `running` as `cancelled`
    /// ([`left::cancel_left_runs`]), then records `run` as running, stamped with this process
    /// as its owner (run metadata [`OWNER_KEY`]) and held as in progress here. `Ok(None)` when
    /// the saver keeps no runs ([`CheckpointError::Unsupported`]): the run goes unrecorded.
    ///
    /// # Errors
    /// The saver's error: an id already used by a finished run
    /// ([`CheckpointError::InvalidRunTransition`]), a run of another thread, storage.
    pub(super) async fn start(
        saver: Arc<dyn Saver>,
        thread: ThreadId,
        run: &RunId,
    ) -> Result<Option<RunStore>, CheckpointError> {
        left::cancel_left_runs(&saver, &thread).await;
        let mut record = RunRecord::new(run.clone(), thread.clone(), RunStatus::Running, now_ms());
        record
            .metadata
            .insert(OWNER_KEY.to_owned(), Owner::this().to_json());
        // Held before the record is stored: a look at the thread never finds it unheld.
        let live = Arc::new(LiveRun::hold(run));
        match saver.put_run(record).await {
            Ok(()) => Ok(Some(RunStore {
                saver,
                thread,
                _live: live,
            })),
            Err(CheckpointError::Unsupported { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The run's thread.
    pub(super) fn thread(&self) -> &ThreadId {
        &self.thread
    }

    /// Stores the receipt once (a receipt already stored for the run counts as stored),
    /// trying again after each of [`RECEIPT_RETRY_DELAYS`].
    ///
    /// # Errors
    /// Every attempt's error, in order, when none succeeded.
    pub(super) async fn put_receipt(
        &self,
        run: &RunId,
        receipt: &DeliveryReceipt,
    ) -> Result<(), Vec<CheckpointError>> {
        let json = StoredReceipt::new(receipt.to_json());
        let mut errors = Vec::new();
        for attempt in 0..=RECEIPT_RETRY_DELAYS.len() {
            if let Some(delay) = attempt.checked_sub(1).map(|i| RECEIPT_RETRY_DELAYS[i]) {
                tokio::time::sleep(delay).await;
            }
            match self.saver.put_receipt_if_absent(run, json.clone()).await {
                Ok(_) => return Ok(()),
                Err(e) => {
                    tracing::warn!(run = %run, attempt, error = %e, "delivery receipt not stored");
                    errors.push(e);
                }
            }
        }
        Err(errors)
    }

    /// Stores the run's terminal status with its reasons, its token usage and its capability
    /// trace (run metadata `capability_trace`, read by `stategraph studio`); `errors` are the
    /// receipt's failed attempts.
    pub(super) async fn finish(
        &self,
        run: &RunId,
        ended: RunEnding,
        trace: &[TraceEntry],
        mut errors: Vec<CheckpointError>,
    ) -> Recorded {
        let mut record = RunRecord::new(run.clone(), self.thread.clone(), ended.status, now_ms());
        (record.reason, record.stop_reason) = ended.reasons;
        record.usage = Some(ended.usage);
        if let Ok(entries) = serde_json::to_value(trace) {
            record.metadata.insert(TRACE_KEY.to_owned(), entries);
        }
        if let Err(e) = self.saver.put_run(record).await {
            errors.push(e);
        }
        if errors.is_empty() {
            Recorded::Stored
        } else {
            Recorded::Failed(errors)
        }
    }
}
