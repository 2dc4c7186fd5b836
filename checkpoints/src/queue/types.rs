//! What a run queue hands out and reports: strategies, stop requests, leases, runs and the
//! log of fenced writes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{CheckpointId, RunId, RunStatus, ThreadId};

/// What [`RunQueue::submit`](crate::RunQueue::submit) does when the thread already has an
/// unfinished (pending or running) run. Serialised as LangGraph names it (`"reject"`, …),
/// as an Agent Server's `multitask_strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Multitask {
    /// Refuse the new run with [`CheckpointError::ThreadBusy`](crate::CheckpointError::ThreadBusy).
    Reject,
    /// Queue it behind the thread's other runs (the default).
    #[default]
    Enqueue,
    /// Stop the running run at its next step boundary (status `interrupted`, its
    /// checkpoints kept), end runs still pending before the new one (`cancelled`), and run
    /// the new one next.
    Interrupt,
    /// As [`Multitask::Interrupt`], and delete every checkpoint the stopped run wrote: the
    /// thread is as it was before that run (status `cancelled`).
    Rollback,
}

impl Multitask {
    /// The strategy's name, as LangGraph spells it (`reject`, `enqueue`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Multitask::Reject => "reject",
            Multitask::Enqueue => "enqueue",
            Multitask::Interrupt => "interrupt",
            Multitask::Rollback => "rollback",
        }
    }
}

/// A stop asked of a running run, seen by its worker at the next heartbeat (or wake-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopRequest {
    /// Stop at the next step boundary, keep the checkpoints (status `interrupted`).
    Interrupt,
    /// Stop, then delete the checkpoints the run wrote (status `cancelled`).
    Rollback,
    /// Stop at the next step boundary (status `cancelled`).
    Cancel,
}

impl StopRequest {
    /// As stored in `sg_run_queue.stop`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopRequest::Interrupt => "interrupt",
            StopRequest::Rollback => "rollback",
            StopRequest::Cancel => "cancel",
        }
    }

    /// The request a stored name stands for.
    pub fn parse(name: &str) -> Option<StopRequest> {
        [
            StopRequest::Interrupt,
            StopRequest::Rollback,
            StopRequest::Cancel,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

impl fmt::Display for StopRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run leased by a worker: it runs it, heart-beats the lease, and writes through
/// [`PostgresSaver::fenced`](crate::PostgresSaver::fenced) with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// The run.
    pub run: RunId,
    /// Its thread.
    pub thread: ThreadId,
    /// This lease's epoch: one more than the run's previous lease. Writes under an older
    /// epoch fail.
    pub epoch: u64,
    /// The worker holding it.
    pub worker: String,
    /// The input the run was submitted with (JSON `null`: continue the thread).
    pub input: serde_json::Value,
    /// The command a run was submitted with instead of an input
    /// ([`RunQueue::submit_command`](crate::RunQueue::submit_command) or
    /// [`submit_resume`](crate::RunQueue::submit_resume)).
    pub command: Option<crate::QueuedCommand>,
    /// How many times the run was leased, this time included.
    pub attempt: u32,
    /// Whether an earlier lease of the run wrote checkpoints: the run goes on from the
    /// thread's newest checkpoint instead of applying its input again.
    pub resumed: bool,
    /// A stop asked of the run before this lease (its last worker died before seeing it).
    pub stop: Option<StopRequest>,
    /// When the run was submitted (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// Why the run's stored input or command does not read, if it does not (a row a newer
    /// build wrote, or a damaged one; `input` is then `null` or `command` `None`). A worker
    /// ends such a run as `error` with this reason instead of running it; it is leased all
    /// the same, so the queue goes on past it.
    pub unreadable: Option<String>,
}

/// How a leased run ended, as its worker reports it to
/// [`RunQueue::finish`](crate::RunQueue::finish).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// The graph ran to its end (`success`).
    Success,
    /// The graph paused at an interrupt (`interrupted`).
    Paused,
    /// The graph failed (`error`, with the error's message).
    Failed(String),
    /// The run stopped because it was asked to.
    Stopped(StopRequest),
}

impl RunEnd {
    /// The status a run that ended so gets.
    pub fn status(&self) -> RunStatus {
        match self {
            RunEnd::Success => RunStatus::Success,
            RunEnd::Paused | RunEnd::Stopped(StopRequest::Interrupt) => RunStatus::Interrupted,
            RunEnd::Failed(_) => RunStatus::Error,
            RunEnd::Stopped(StopRequest::Cancel | StopRequest::Rollback) => RunStatus::Cancelled,
        }
    }

    /// The reason stored with it, when it is the end's own (a stopped run's is the stop's).
    pub fn reason(&self) -> Option<String> {
        match self {
            RunEnd::Paused => Some("paused at an interrupt".to_owned()),
            RunEnd::Failed(message) => Some(message.clone()),
            RunEnd::Success | RunEnd::Stopped(_) => None,
        }
    }
}

/// A queued run as the queue holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedRun {
    /// The run.
    pub run: RunId,
    /// Its thread.
    pub thread: ThreadId,
    /// Where it stands: pending, running, success, error, interrupted or cancelled.
    pub status: RunStatus,
    /// Why it ended as it did, if said (an error's message, who stopped it).
    pub reason: Option<String>,
    /// Its current (or last) lease epoch; 0 before its first lease.
    pub epoch: u64,
    /// The worker holding (or that last held) it.
    pub worker: Option<String>,
    /// How many times it was leased.
    pub attempts: u32,
    /// A stop asked of it, if any.
    pub stop: Option<StopRequest>,
    /// When it was submitted (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// When it last changed (ms since the Unix epoch).
    pub updated_at_ms: u64,
    /// A running run whose lease ended (by the server's clock) without a heartbeat: its
    /// worker stopped, and the next lease any worker takes will be this run's takeover.
    pub lease_expired: bool,
    /// The input it was submitted with (JSON `null` for a command, or for one that does not
    /// read).
    pub input: serde_json::Value,
    /// The tokens its model calls used and how many calls it made, as its worker ended it
    /// (`None` before its end, or when the worker did not say).
    pub usage: Option<crate::TokenUsage>,
}

/// One fenced write transaction, as logged in it (`sg_run_writes`): which run wrote, under
/// which lease epoch, from which worker. Its order (`seq`) is the order in which the writes
/// took their fence.
#[derive(Debug, Clone, PartialEq)]
pub struct FencedWrite {
    /// Position in the log.
    pub seq: i64,
    /// The run.
    pub run: RunId,
    /// The lease epoch it wrote under.
    pub epoch: u64,
    /// The worker.
    pub worker: String,
    /// `checkpoints` (a put; [`FencedWrite::checkpoints`] lists them), `writes` (pending
    /// writes against one checkpoint) or `end` (the run's end).
    pub kind: String,
    /// The checkpoints the transaction was given.
    pub checkpoints: Vec<CheckpointId>,
}
