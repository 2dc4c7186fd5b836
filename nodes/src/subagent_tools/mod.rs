//! The delegation tools of a lead agent: [`TaskTool`] (`task`, one delegation) and
//! [`MultiTaskTool`] (`multi_task`, several in parallel), and the [`DelegationLog`] where both
//! keep every [`DelegationReport`].

use std::sync::{Arc, Mutex};

use stategraph::checkpoints::sync::Unpoisoned;
use stategraph::reducers::MessagesUpdate;
use stategraph::Command;

use crate::message::Message;
use crate::state::ThreadState;
use crate::subagent::{ledger, DelegationReport};
use crate::tool::ToolContext;
use crate::trace::{CapabilityTrace, Stage, TraceEntry, Verdict};

mod multi_task;
mod task;

pub use multi_task::{MultiTaskArgs, MultiTaskTool};
pub use task::TaskTool;

/// Every delegation report of the tools sharing it, in the order they finished (clones share
/// one log).
#[derive(Clone, Debug, Default)]
pub struct DelegationLog(Arc<Mutex<Vec<DelegationReport>>>);

impl DelegationLog {
    /// An empty log.
    pub fn new() -> Self {
        DelegationLog::default()
    }

    /// The reports so far.
    pub fn reports(&self) -> Vec<DelegationReport> {
        self.0.lock().unpoisoned().clone()
    }

    fn push(&self, report: DelegationReport) {
        self.0.lock().unpoisoned().push(report);
    }
}

/// Records a delegation in the lead's trace under its call `call_id`: each tool the child's
/// pool left out (removed at Available, with the rule), then the child's own entries.
fn record_child(trace: &CapabilityTrace, report: &DelegationReport, call_id: &str) {
    let excluded = report.pool.iter().flat_map(|pool| &pool.excluded);
    for excluded in excluded {
        trace.record(
            TraceEntry::new(
                &excluded.name,
                Stage::Available,
                Verdict::removed(POOL_RESOLUTION, excluded.reason.to_string()),
            )
            .under_call(call_id),
        );
    }
    for entry in &report.trace {
        trace.record(entry.clone().under_call(call_id));
    }
}

/// Who removes a tool from a child's pool, as the trace names it.
pub const POOL_RESOLUTION: &str = "subagent_pool";

/// The command a delegation tool returns: one tool message per report (answering `call_id`
/// of `tool`) and one ledger entry per report.
fn delegation_command(
    reports: &[DelegationReport],
    call_id: &str,
    tool: &str,
    cx: &ToolContext,
) -> Command<ThreadState> {
    if let Some(trace) = cx.trace() {
        for report in reports {
            record_child(trace, report, call_id);
        }
    }
    let run_id = cx.run.run_id.clone();
    let messages: Vec<Message> = reports
        .iter()
        .map(|r| Message::Tool(r.tool_message(call_id, tool)))
        .collect();
    let entries = reports
        .iter()
        .map(|r| ledger::finished(&r.ledger_key(run_id.clone()), &r.outcome))
        .collect();
    Command::new().update(
        ThreadState::update()
            .messages(MessagesUpdate::from(messages))
            .delegations(entries),
    )
}
