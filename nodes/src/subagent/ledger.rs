//! The delegation ledger: the [`Delegation`] entry a finished delegation writes into
//! `ThreadState.delegations` (through the `task` tool's command; the `merge_delegations`
//! reducer upserts by id, never lets a terminal entry regress, keeps `created_at` and the
//! last 50).

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use stategraph::checkpoints::sync::Unpoisoned;

use crate::state::{Delegation, DelegationStatus};

use super::status::{brief, sha256_hex, SubagentOutcome};

/// Where a lead's delegation tools leave the ledger entries of delegations whose tool call
/// was dropped before it answered (the lead was cancelled, or its step failed), for the run's
/// settlement to write into the thread's ledger. Clones share one list; an agent gives each
/// invocation an empty one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Unanswered(Arc<Mutex<Vec<Delegation>>>);

impl Unanswered {
    /// Keeps `entries`.
    pub(crate) fn extend(&self, entries: impl IntoIterator<Item = Delegation>) {
        self.0.lock().unpoisoned().extend(entries);
    }

    /// The entries kept so far (taken).
    pub(crate) fn take(&self) -> Vec<Delegation> {
        std::mem::take(&mut *self.0.lock().unpoisoned())
    }
}

/// The longest description kept in a ledger entry, in chars.
pub const MAX_DESCRIPTION: usize = 200;

/// Milliseconds since the epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// What identifies one delegation in the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerKey {
    /// The delegation's id (the `task` call's id; `<call>/<i>` inside `multi_task`).
    pub id: String,
    /// The delegating run.
    pub run_id: Option<String>,
    /// The short label.
    pub description: String,
    /// The subagent type.
    pub subagent_type: String,
}

/// An `in_progress` entry for `key`, created now.
pub fn in_progress(key: &LedgerKey) -> Delegation {
    Delegation {
        id: key.id.clone(),
        run_id: key.run_id.clone(),
        description: key.description.chars().take(MAX_DESCRIPTION).collect(),
        subagent_type: key.subagent_type.clone(),
        status: DelegationStatus::InProgress,
        created_at: now_ms(),
        ..Delegation::default()
    }
}

/// The terminal entry for `key` after `outcome`.
pub fn finished(key: &LedgerKey, outcome: &SubagentOutcome) -> Delegation {
    let result = outcome.result.as_deref().filter(|r| !r.trim().is_empty());
    Delegation {
        status: outcome.status.into(),
        result_brief: result.map(brief),
        result_sha256: result.map(sha256_hex),
        stop_reason: outcome.stop_reason.map(|r| r.as_str().to_owned()),
        ..in_progress(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::merge_delegations;

    fn key(id: &str) -> LedgerKey {
        LedgerKey {
            id: id.into(),
            run_id: Some("r1".into()),
            description: "d".repeat(300),
            subagent_type: "researcher".into(),
        }
    }

    #[test]
    fn a_finished_entry_replaces_its_in_progress_one_and_keeps_created_at() {
        let mut ledger = vec![Delegation {
            created_at: 7,
            ..in_progress(&key("c1"))
        }];
        merge_delegations(
            &mut ledger,
            vec![finished(&key("c1"), &SubagentOutcome::completed("done"))],
        );
        assert_eq!(ledger.len(), 1);
        assert_eq!(ledger[0].status, DelegationStatus::Completed);
        assert_eq!(ledger[0].created_at, 7);
        assert_eq!(ledger[0].description.chars().count(), MAX_DESCRIPTION);
        assert_eq!(ledger[0].result_brief.as_deref(), Some("done"));
        merge_delegations(&mut ledger, vec![in_progress(&key("c1"))]);
        assert_eq!(ledger[0].status, DelegationStatus::Completed);
    }
}
