//! How a delegation ended: one [`SubagentStatus`] with an optional [`StopReason`], the
//! model-visible wording of each, and the [`StatusCell`] where the first terminal status wins.

use std::fmt;
use std::sync::Mutex;

use serde::Serialize;
use sha2::{Digest, Sha256};
use stategraph::checkpoints::sync::Unpoisoned;

use crate::state::DelegationStatus;

/// The longest result or error excerpt kept in metadata and the ledger, in chars.
pub const MAX_BRIEF: usize = 2000;

/// A delegation's terminal status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SubagentStatus {
    /// The child finished with a result.
    Completed,
    /// The child failed (or could not start).
    Failed,
    /// The child was cancelled (its parent was).
    Cancelled,
    /// The child ran past its wall-clock limit.
    TimedOut,
}

impl SubagentStatus {
    /// The snake-case name (`completed`, `timed_out`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentStatus::Completed => "completed",
            SubagentStatus::Failed => "failed",
            SubagentStatus::Cancelled => "cancelled",
            SubagentStatus::TimedOut => "timed_out",
        }
    }
}

impl From<SubagentStatus> for DelegationStatus {
    fn from(s: SubagentStatus) -> Self {
        match s {
            SubagentStatus::Completed => DelegationStatus::Completed,
            SubagentStatus::Failed => DelegationStatus::Failed,
            SubagentStatus::Cancelled => DelegationStatus::Cancelled,
            SubagentStatus::TimedOut => DelegationStatus::TimedOut,
        }
    }
}

/// Which cap stopped a child. A cap never is a status of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The token budget.
    TokenCapped,
    /// The turn budget (`max_turns`).
    TurnCapped,
    /// A repeated tool-call loop.
    LoopCapped,
}

impl StopReason {
    /// The snake-case name (`turn_capped`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::TokenCapped => "token_capped",
            StopReason::TurnCapped => "turn_capped",
            StopReason::LoopCapped => "loop_capped",
        }
    }

    /// The label the model reads (`turn budget`, ...).
    pub fn label(self) -> &'static str {
        match self {
            StopReason::TokenCapped => "token budget",
            StopReason::TurnCapped => "turn budget",
            StopReason::LoopCapped => "repeated tool-call loop",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A delegation's end: status, stop reason, and the result or the error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubagentOutcome {
    /// The status.
    pub status: SubagentStatus,
    /// The cap that stopped it, if one did.
    pub stop_reason: Option<StopReason>,
    /// The result (completed only).
    pub result: Option<String>,
    /// The error (every other status).
    pub error: Option<String>,
}

impl SubagentOutcome {
    /// Completed with `result` (`"No response generated"` when it is blank).
    pub fn completed(result: impl Into<String>) -> Self {
        let result = result.into();
        let result = if result.trim().is_empty() {
            "No response generated".to_owned()
        } else {
            result
        };
        SubagentOutcome {
            status: SubagentStatus::Completed,
            stop_reason: None,
            result: Some(result),
            error: None,
        }
    }

    /// Failed with `error`.
    pub fn failed(error: impl Into<String>) -> Self {
        Self::ended(SubagentStatus::Failed, error.into())
    }

    /// Cancelled (`Cancelled by user`).
    pub fn cancelled() -> Self {
        Self::ended(SubagentStatus::Cancelled, "Cancelled by user".to_owned())
    }

    /// Timed out after `seconds`.
    pub fn timed_out(seconds: u64) -> Self {
        Self::ended(
            SubagentStatus::TimedOut,
            format!("Execution timed out after {seconds} seconds"),
        )
    }

    /// The turn budget ran out: completed with the partial answer when there is one, else
    /// failed with `Reached max_turns=<n>`.
    pub fn turn_capped(partial: Option<String>, max_turns: usize) -> Self {
        let mut outcome = match partial.filter(|p| !p.trim().is_empty()) {
            Some(p) => Self::completed(p),
            None => Self::failed(format!("Reached max_turns={max_turns}")),
        };
        outcome.stop_reason = Some(StopReason::TurnCapped);
        outcome
    }

    fn ended(status: SubagentStatus, error: String) -> Self {
        SubagentOutcome {
            status,
            stop_reason: None,
            result: None,
            error: (!error.trim().is_empty()).then_some(error),
        }
    }

    /// The text the delegating model reads, in the status contract's wording.
    pub fn content(&self) -> String {
        let capped = self
            .stop_reason
            .map(|r| format!(" (capped: {})", r.label()))
            .unwrap_or_default();
        let error = self
            .error
            .as_deref()
            .map(|e| format!(" Error: {e}"))
            .unwrap_or_default();
        match self.status {
            SubagentStatus::Completed => format!(
                "Task Succeeded{capped}. Result: {}",
                self.result.as_deref().unwrap_or_default()
            ),
            SubagentStatus::Failed => format!("Task failed{capped}.{error}"),
            SubagentStatus::Cancelled => format!("Task cancelled by user.{error}"),
            SubagentStatus::TimedOut => format!("Task timed out.{error}"),
        }
    }

    /// The tool message metadata: `subagent_status`, `subagent_stop_reason`, and the bounded
    /// result brief with the SHA-256 of the full result, or the bounded error.
    pub fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("subagent_status".into(), self.status.as_str().into());
        if let Some(r) = self.stop_reason {
            m.insert("subagent_stop_reason".into(), r.as_str().into());
        }
        if let Some(result) = self.result.as_deref().filter(|r| !r.trim().is_empty()) {
            m.insert("subagent_result_brief".into(), brief(result).into());
            m.insert("subagent_result_sha256".into(), sha256_hex(result).into());
        }
        if self.status != SubagentStatus::Completed {
            if let Some(e) = self.error.as_deref() {
                m.insert("subagent_error".into(), brief(e).into());
            }
        }
        m
    }
}

/// `text` bounded to [`MAX_BRIEF`] chars: its first two thirds, `\n...\n`, and its end.
pub fn brief(text: &str) -> String {
    let n = text.chars().count();
    if n <= MAX_BRIEF {
        return text.to_owned();
    }
    let marker = "\n...\n";
    let room = MAX_BRIEF - marker.len();
    let head = room * 2 / 3;
    let tail = room - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start}{marker}{end}")
}

/// The SHA-256 of `text`, lowercase hex.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where a delegation's terminal status is set, once: the first terminal status wins, later
/// ones (a completion arriving after a timeout, a timeout after a cancel) are ignored.
#[derive(Debug, Default)]
pub struct StatusCell(Mutex<Option<SubagentOutcome>>);

impl StatusCell {
    /// A cell with no status yet.
    pub fn new() -> Self {
        StatusCell::default()
    }

    /// Set `outcome` if no terminal status is set yet; whether it was.
    pub fn settle(&self, outcome: SubagentOutcome) -> bool {
        let mut slot = self.0.lock().unpoisoned();
        if slot.is_some() {
            return false;
        }
        *slot = Some(outcome);
        true
    }

    /// The status set, if any.
    pub fn get(&self) -> Option<SubagentOutcome> {
        self.0.lock().unpoisoned().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wording_follows_the_status_contract() {
        assert_eq!(
            SubagentOutcome::completed("42").content(),
            "Task Succeeded. Result: 42"
        );
        assert_eq!(
            SubagentOutcome::turn_capped(Some("half".into()), 3).content(),
            "Task Succeeded (capped: turn budget). Result: half"
        );
        assert_eq!(
            SubagentOutcome::turn_capped(None, 3).content(),
            "Task failed (capped: turn budget). Error: Reached max_turns=3"
        );
        assert_eq!(SubagentOutcome::failed("").content(), "Task failed.");
        assert_eq!(
            SubagentOutcome::cancelled().content(),
            "Task cancelled by user. Error: Cancelled by user"
        );
        assert_eq!(
            SubagentOutcome::timed_out(5).content(),
            "Task timed out. Error: Execution timed out after 5 seconds"
        );
    }

    #[test]
    fn a_late_completion_after_a_timeout_stays_timed_out() {
        let cell = StatusCell::new();
        assert!(cell.settle(SubagentOutcome::timed_out(1)));
        assert!(!cell.settle(SubagentOutcome::completed("late")));
        assert_eq!(cell.get().map(|o| o.status), Some(SubagentStatus::TimedOut));
    }

    #[test]
    fn brief_keeps_head_and_tail_within_the_bound_and_hash_covers_the_full_text() {
        let long: String = (0..5000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let b = brief(&long);
        assert_eq!(b.chars().count(), MAX_BRIEF);
        assert!(b.contains("\n...\n"));
        assert!(long.starts_with(&b[..100]));
        let meta = SubagentOutcome::completed(long.clone()).metadata();
        assert_eq!(
            meta.get("subagent_result_sha256").and_then(|v| v.as_str()),
            Some(sha256_hex(&long).as_str())
        );
        assert_eq!(sha256_hex("abc").len(), 64);
        assert!(sha256_hex("abc").starts_with("ba7816bf"));
    }
}
