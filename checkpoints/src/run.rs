//! Runs and their delivery receipts: one `invoke`/`stream` of a graph on a thread, its
//! status with the rule of how a status may change, and the one receipt it leaves.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::id::{text_id_impls, text_id_problem};
use crate::{CheckpointError, ThreadId, TokenUsage};

/// A run's id: non-empty, at most [`MAX_THREAD_ID_LEN`](crate::MAX_THREAD_ID_LEN) bytes, no
/// control characters (the rule of [`ThreadId`]). Unique in a store, across threads.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(Arc<str>);

impl RunId {
    /// Validate and wrap a run id.
    ///
    /// # Errors
    /// [`CheckpointError::InvalidRunId`] if empty, too long or holding control characters.
    pub fn new(id: impl Into<String>) -> Result<Self, CheckpointError> {
        let id: String = id.into();
        match text_id_problem(&id) {
            Some(reason) => Err(CheckpointError::InvalidRunId {
                id: id.chars().take(64).collect(),
                reason,
            }),
            None => Ok(RunId(id.into())),
        }
    }

    /// A new id, `run-` and 32 hex digits, time-ordered like a
    /// [`CheckpointId`](crate::CheckpointId) (so newer runs of a process sort later).
    pub fn generate() -> Self {
        RunId(format!("run-{}", crate::CheckpointId::generate()).into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

text_id_impls!(RunId);

/// Where a run stands. Stored and serialised in snake case (`"pending"`, `"timeout"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted, not started.
    Pending,
    /// The graph is running.
    Running,
    /// Finished normally (and its delivery, if any, was satisfied).
    Success,
    /// Failed (an error, or an unsatisfied delivery).
    Error,
    /// Stopped by an interrupt or an abort.
    Interrupted,
    /// Cancelled.
    Cancelled,
    /// Ran out of time.
    Timeout,
}

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Success,
        RunStatus::Error,
        RunStatus::Interrupted,
        RunStatus::Cancelled,
        RunStatus::Timeout,
    ];

    /// The snake-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Success => "success",
            RunStatus::Error => "error",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Timeout => "timeout",
        }
    }

    /// The status a stored name stands for.
    pub fn parse(name: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the run is over (every status but pending and running).
    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Pending | RunStatus::Running)
    }

    /// The transition rule: a run only moves forward. Pending may become anything; running
    /// anything but pending; a terminal status stays as it is (putting it again is allowed,
    /// to update the reason or metadata). So a cancellation stored first wins over a late
    /// success.
    pub fn may_become(self, next: RunStatus) -> bool {
        match self {
            RunStatus::Pending => true,
            RunStatus::Running => next != RunStatus::Pending,
            terminal => next == terminal,
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run as a saver stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run.
    pub run_id: RunId,
    /// The thread it runs on.
    pub thread: ThreadId,
    /// Where it stands.
    pub status: RunStatus,
    /// Why it ended as it did (an error's message), if said.
    pub reason: Option<String>,
    /// What stopped it early (a guard's stamp such as `loop_capped`), if anything.
    pub stop_reason: Option<String>,
    /// When the run was first stored (ms since the Unix epoch); kept by later puts.
    pub created_at_ms: u64,
    /// When its status was last put (ms since the Unix epoch).
    pub updated_at_ms: u64,
    /// Caller metadata.
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// The tokens its model calls used and how many calls it made, once it has ended
    /// (`None` before, and for a run stored without them).
    #[serde(default)]
    pub usage: Option<TokenUsage>,
}

impl RunRecord {
    /// A run of `thread` with `status`, created and updated at `at_ms`, without reasons or
    /// metadata.
    pub fn new(run_id: RunId, thread: ThreadId, status: RunStatus, at_ms: u64) -> Self {
        RunRecord {
            run_id,
            thread,
            status,
            reason: None,
            stop_reason: None,
            created_at_ms: at_ms,
            updated_at_ms: at_ms,
            metadata: BTreeMap::new(),
            usage: None,
        }
    }

    /// `next` as the update of this stored run: checked against the transition rule and the
    /// thread, with this run's creation time, and this run's usage if `next` has none.
    ///
    /// # Errors
    /// [`CheckpointError::RunOfAnotherThread`] if `next` names another thread;
    /// [`CheckpointError::InvalidRunTransition`] if the rule forbids the status change.
    pub fn updated_by(&self, mut next: RunRecord) -> Result<RunRecord, CheckpointError> {
        if next.thread != self.thread {
            return Err(CheckpointError::RunOfAnotherThread {
                run: next.run_id,
                stored: self.thread.clone(),
                given: next.thread,
            });
        }
        if !self.status.may_become(next.status) {
            return Err(CheckpointError::InvalidRunTransition {
                run: next.run_id,
                from: self.status,
                to: next.status,
            });
        }
        next.created_at_ms = self.created_at_ms;
        next.usage = next.usage.or(self.usage);
        Ok(next)
    }
}

/// A run's delivery receipt, kept as the JSON it is.
///
/// Its shape belongs to the agent (`stategraph-nodes`' `delivery` module: what was
/// presented, produced and matched); this crate stores and returns it without reading it,
/// so checkpoints need not depend on nodes, and a receipt written by a newer agent still
/// round-trips unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeliveryReceipt(serde_json::Value);

impl DeliveryReceipt {
    /// A receipt holding `json`.
    pub fn new(json: serde_json::Value) -> Self {
        DeliveryReceipt(json)
    }

    /// The receipt's JSON.
    pub fn as_json(&self) -> &serde_json::Value {
        &self.0
    }

    /// The receipt's JSON, owned.
    pub fn into_json(self) -> serde_json::Value {
        self.0
    }
}

/// Newest first: by creation time, then by run id, both descending.
pub(crate) fn newest_first(a: &RunRecord, b: &RunRecord) -> std::cmp::Ordering {
    (b.created_at_ms, &b.run_id).cmp(&(a.created_at_ms, &a.run_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), CheckpointError>;

    #[test]
    fn statuses_serialise_in_snake_case_and_parse_back() -> Result<(), serde_json::Error> {
        for s in RunStatus::ALL {
            assert_eq!(serde_json::to_string(&s)?, format!("\"{}\"", s.as_str()));
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(RunStatus::parse("done"), None);
        Ok(())
    }

    #[test]
    fn generated_run_ids_are_valid_distinct_and_time_ordered() -> TestResult {
        let (a, b) = (RunId::generate(), RunId::generate());
        assert!(a.as_str().starts_with("run-") && a.as_str().len() == 36);
        assert_eq!(RunId::new(a.as_str())?, a);
        assert!(a < b, "{a} then {b}");
        Ok(())
    }

    #[test]
    fn a_run_only_moves_forward() {
        use RunStatus::*;
        assert!(Pending.may_become(Running) && Pending.may_become(Cancelled));
        assert!(Running.may_become(Success) && Running.may_become(Running));
        assert!(!Running.may_become(Pending));
        for terminal in [Success, Error, Interrupted, Cancelled, Timeout] {
            assert!(terminal.is_terminal());
            assert!(terminal.may_become(terminal));
            assert!(!terminal.may_become(Running) && !terminal.may_become(Pending));
        }
        assert!(!Cancelled.may_become(Success));
    }

    #[test]
    fn an_update_keeps_the_creation_time_and_checks_the_thread() -> TestResult {
        let (run, t) = (RunId::new("r1")?, ThreadId::new("t")?);
        let stored = RunRecord::new(run.clone(), t.clone(), RunStatus::Running, 10);
        let done = stored.updated_by(RunRecord::new(run.clone(), t, RunStatus::Success, 20))?;
        assert_eq!((done.created_at_ms, done.updated_at_ms), (10, 20));
        let other = RunRecord::new(run, ThreadId::new("u")?, RunStatus::Success, 30);
        assert!(matches!(
            stored.updated_by(other),
            Err(CheckpointError::RunOfAnotherThread { .. })
        ));
        assert!(matches!(
            done.updated_by(RunRecord::new(
                done.run_id.clone(),
                done.thread.clone(),
                RunStatus::Running,
                40
            )),
            Err(CheckpointError::InvalidRunTransition {
                from: RunStatus::Success,
                to: RunStatus::Running,
                ..
            })
        ));
        Ok(())
    }

    #[test]
    fn run_ids_are_validated_like_thread_ids() {
        assert!(RunId::new("run-1").is_ok());
        for bad in [String::new(), "a\nb".to_owned(), "x".repeat(257)] {
            assert!(matches!(
                RunId::new(bad),
                Err(CheckpointError::InvalidRunId { .. })
            ));
        }
    }
}
