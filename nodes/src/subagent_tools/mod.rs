//! The delegation tools of a lead agent: [`TaskTool`] (`task`, one delegation) and
//! [`MultiTaskTool`] (`multi_task`, several in parallel), and the [`DelegationLog`] where both
//! keep every [`DelegationReport`].

use std::sync::{Arc, Mutex};

use stategraph::checkpoints::sync::Unpoisoned;
use stategraph::reducers::MessagesUpdate;
use stategraph::Command;

use crate::message::Message;
use crate::state::ThreadState;
use crate::subagent::ledger::{self, Unanswered};
use crate::subagent::{DelegationReport, DelegationRequest, Subagents};
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

/// A delegation a tool call started, and its report once it ended.
struct Started {
    id: String,
    request: DelegationRequest,
    report: Option<DelegationReport>,
}

/// Armed while a tool call's delegations run. Dropped armed — the call's future was dropped
/// before it answered: the lead was cancelled, or its step failed — it records every
/// delegation the call started: one that ended with its report, every other as cancelled
/// (its child, if started, is told to stop), in the log and as ledger entries the run's
/// settlement writes into the thread.
struct AnswerGuard {
    started: Mutex<Vec<Started>>,
    run_id: Option<String>,
    unanswered: Option<Unanswered>,
    log: DelegationLog,
    armed: bool,
}

impl Drop for AnswerGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let started = std::mem::take(&mut *self.started.lock().unpoisoned());
        let mut entries = Vec::with_capacity(started.len());
        for s in started {
            let report = s
                .report
                .unwrap_or_else(|| DelegationReport::abandoned(&s.id, s.request));
            entries.push(ledger::finished(
                &report.ledger_key(self.run_id.clone()),
                &report.outcome,
            ));
            self.log.push(report);
        }
        if let Some(unanswered) = &self.unanswered {
            unanswered.extend(entries);
        }
    }
}

/// Runs the delegations `requests` (id, request) of one tool call in parallel and returns
/// their reports in order. If the returned future is dropped first, every one of them is
/// still recorded ([`AnswerGuard`]).
async fn delegate_all(
    subagents: &Subagents,
    requests: Vec<(String, DelegationRequest)>,
    cx: &ToolContext,
    log: &DelegationLog,
) -> Vec<DelegationReport> {
    let started: Vec<Started> = requests
        .iter()
        .map(|(id, request)| Started {
            id: id.clone(),
            request: request.clone(),
            report: None,
        })
        .collect();
    let mut guard = AnswerGuard {
        started: Mutex::new(started),
        run_id: cx.run.run_id.clone(),
        unanswered: cx.unanswered.clone(),
        log: log.clone(),
        armed: true,
    };
    let runs = requests.into_iter().enumerate().map(|(i, (id, request))| {
        let started = &guard.started;
        async move {
            let report = subagents.delegate(&id, request, cx).await;
            if let Some(s) = started.lock().unpoisoned().get_mut(i) {
                s.report = Some(report);
            }
        }
    });
    futures::future::join_all(runs).await;
    guard.armed = false;
    let started = std::mem::take(&mut *guard.started.lock().unpoisoned());
    started
        .into_iter()
        .map(|s| {
            s.report
                .unwrap_or_else(|| DelegationReport::abandoned(&s.id, s.request))
        })
        .collect()
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
