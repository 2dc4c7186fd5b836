//! The capability trace's last stage: a `Delivered` entry for each path a run presented —
//! passed when the settlement matched it to a file the run produced, unverified (and why)
//! otherwise.

use stategraph::checkpoints::RunStatus;

use super::outcome::RECEIPT_NOT_STORED;
use crate::delivery::{covers, DeliveryReceipt, PRESENT_FILES};
use crate::trace::{CapabilityTrace, Stage, TraceEntry, Verdict};

/// A path a tool call returned as an artifact during a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Presented {
    /// The tool.
    pub(crate) tool: String,
    /// Its call.
    pub(crate) call_id: String,
    /// The virtual path.
    pub(crate) path: String,
}

/// How far a run's delivery check got.
#[derive(Debug, Clone, Copy)]
pub(super) enum Checked<'a> {
    /// The run did not complete normally (it ended with this status): nothing was verified.
    NotRun(RunStatus),
    /// The check ran, but its receipt could not be stored.
    Lost,
    /// The check ran and its receipt was kept.
    Done(&'a DeliveryReceipt),
}

/// Why `p` was not delivered, or `None` if it was.
fn why_not(p: &Presented, checked: Checked<'_>) -> Option<String> {
    if p.tool != PRESENT_FILES {
        return Some(format!(
            "an artifact of {}; only {PRESENT_FILES} delivers",
            p.tool
        ));
    }
    let receipt = match checked {
        Checked::NotRun(status) => {
            return Some(format!("the run ended {status}: delivery was not verified"))
        }
        Checked::Lost => return Some(RECEIPT_NOT_STORED.to_owned()),
        Checked::Done(receipt) => receipt,
    };
    let Some(verdict) = &receipt.verdict else {
        return Some("the run produced no file under the outputs: nothing to verify".to_owned());
    };
    if verdict.matched_paths.iter().any(|m| covers(&p.path, m)) {
        None
    } else {
        Some("it covers no file the run produced".to_owned())
    }
}

/// Records a `Delivered` entry per presented path.
pub(super) fn record(trace: &CapabilityTrace, presented: &[Presented], checked: Checked<'_>) {
    for p in presented {
        let verdict = match why_not(p, checked) {
            None => Verdict::Passed,
            Some(reason) => Verdict::Unverified { reason },
        };
        trace.record(
            TraceEntry::new(&p.tool, Stage::Delivered, verdict)
                .for_call(&p.call_id)
                .for_path(&p.path),
        );
    }
}
