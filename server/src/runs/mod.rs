//! Runs: submitted to the run queue under their thread's multitask rule (each with its
//! ticket as its queued input), leased by a server's worker and run on its tasks, their
//! frames going to a [`RunLog`], stopped on request, taken over when the server that ran
//! them died. The queue is a [`RunQueue`](stategraph_runs::RunQueue): a table of the SQLite
//! file, or the PostgreSQL saver's, which any number of servers share; there a client's
//! frames are relayed from the server that runs its run (`pg`, `relay`).
//!
//! Inside: `worker` leasing and running; `execute` one run on its graph; `frames` stream
//! modes and the frames of an event; `log` a run's event log; `kept` the logs kept in the
//! file or database; `pg` and `relay` frames through PostgreSQL.

mod execute;
pub(crate) mod frames;
mod kept;
pub(crate) mod log;
pub(crate) mod messages;
#[cfg(feature = "postgres")]
pub(crate) mod pg;
#[cfg(feature = "postgres")]
mod relay;
mod worker;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};
use stategraph::CancelToken;
use stategraph_runs::{CheckpointError, RunId, StopRequest, ThreadId};

use crate::error::{ApiError, ApiResult};
use crate::ids::{now_ms, uuid4, uuid7};
use crate::store::{RunRow, RunStatus, Ticket};
use crate::wire::{Multitask, RunCreate};
use crate::Shared;
pub(crate) use log::{Frame, Next, RunLog};
pub(crate) use worker::Worker;

/// The payload of a notification that a run has new frames: this prefix and the run's id
/// (a run's own id is the queue's: its state changed).
pub(crate) const FRAMES: &str = "frames:";

/// Whether a notification only says a run has new frames (which workers ignore).
pub(crate) fn is_frames_payload(payload: &str) -> bool {
    payload.starts_with(FRAMES)
}

/// How a running run is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopAction {
    /// Stop at the next step boundary; its checkpoints stay.
    Interrupt,
    /// Stop and undo: the run is deleted and the thread goes back to where it was before it.
    Rollback,
}

/// A run this server is running.
#[derive(Debug)]
pub(crate) struct Active {
    /// The run's record, as its lease gave it.
    pub(crate) row: RunRow,
    pub(crate) cancel: CancelToken,
    pub(crate) stop: Mutex<Option<StopAction>>,
    pub(crate) log: Arc<RunLog>,
    /// The run's token usage, however it ends (its graph run's config feeds it).
    pub(crate) usage: stategraph::UsageMeter,
}

/// The logs this server's clients read.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    inner: Mutex<RunsInner>,
}

#[derive(Debug, Default)]
struct RunsInner {
    /// Per run not yet ended that this server runs or will run (on SQLite, every run of the
    /// file): its log.
    logs: HashMap<String, Arc<RunLog>>,
    /// Logs of ended runs, newest last, kept for late readers (bounded).
    ended: VecDeque<(String, Arc<RunLog>)>,
}

/// Most logs of ended runs kept for `join`/`stream` requests that come after the end...
const ENDED_LOGS: usize = 256;
/// ...and most bytes of frames they keep together.
const ENDED_BYTES: usize = 256 * 1024 * 1024;

/// Keep an ended run's log, dropping the oldest kept ones beyond the budgets.
fn keep_ended(g: &mut RunsInner, run: &str, log: Arc<RunLog>) {
    // Only this log: a later attempt's, registered since, stays.
    if g.logs.get(run).is_some_and(|l| Arc::ptr_eq(l, &log)) {
        g.logs.remove(run);
    }
    g.ended.push_back((run.to_owned(), log));
    let mut bytes: usize = g.ended.iter().map(|(_, l)| l.bytes()).sum();
    while g.ended.len() > ENDED_LOGS || (bytes > ENDED_BYTES && g.ended.len() > 1) {
        if let Some((_, old)) = g.ended.pop_front() {
            bytes -= old.bytes();
        }
    }
}

impl Runs {
    fn lock(&self) -> MutexGuard<'_, RunsInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The log of a run, not ended or recently ended.
    fn log(&self, run: &str) -> Option<Arc<RunLog>> {
        let g = self.lock();
        g.logs.get(run).cloned().or_else(|| {
            g.ended
                .iter()
                .rev()
                .find(|(id, _)| id == run)
                .map(|(_, l)| l.clone())
        })
    }

    /// The log of `row`'s run, made (empty, for its attempt) if there is none.
    fn log_or_new(&self, row: &RunRow) -> Arc<RunLog> {
        if let Some(log) = self.log(&row.run_id) {
            return log;
        }
        let mut g = self.lock();
        g.logs
            .entry(row.run_id.clone())
            .or_insert_with(|| {
                RunLog::new(row.request.stream_resumable.unwrap_or(false), row.attempt)
            })
            .clone()
    }

    /// The log a leased run writes to: the one its clients already wait on if it is of this
    /// attempt, else a new one (a run taken over numbers its frames anew).
    fn log_for_attempt(&self, row: &RunRow) -> Arc<RunLog> {
        let mut g = self.lock();
        if let Some(log) = g.logs.get(&row.run_id) {
            if log.attempt == row.attempt && !log.is_done() {
                return log.clone();
            }
            // A log of an earlier attempt ends: its readers reconnect to this one.
            log.finish();
        }
        let log = RunLog::new(row.request.stream_resumable.unwrap_or(false), row.attempt);
        g.logs.insert(row.run_id.clone(), log.clone());
        log
    }

    /// A run ended: its log goes to the ended ones, for late readers.
    fn ended(&self, run: &str, log: &Arc<RunLog>) {
        log.finish();
        keep_ended(&mut self.lock(), run, log.clone());
    }
}

/// A request for a run, checked and resolved.
#[derive(Debug)]
pub(crate) struct NewRun {
    pub(crate) thread_id: String,
    pub(crate) graph_id: String,
    pub(crate) assistant_id: String,
    pub(crate) request: RunCreate,
    pub(crate) stateless: bool,
}

impl Shared {
    /// Accept a run: queue it under its thread's multitask rule (the queue takes the busy
    /// check and the run's place together, so two runs submitted at once under `reject`
    /// cannot both be accepted). Returns its record and the log its client reads.
    pub(crate) async fn submit(self: &Arc<Self>, new: NewRun) -> ApiResult<(RunRow, Arc<RunLog>)> {
        let row = run_row(new);
        let ticket = serde_json::to_value(Ticket::of(&row))
            .map_err(|e| ApiError::Internal(format!("encoding a run: {e}")))?;
        let (run, thread) = (RunId::new(&row.run_id)?, ThreadId::new(&row.thread_id)?);
        let superseded = match self
            .queue
            .submit_as(&run, &thread, &ticket, row.multitask)
            .await
        {
            Ok(superseded) => superseded,
            Err(CheckpointError::ThreadBusy { run: other, .. }) => {
                return Err(ApiError::Conflict(format!(
                    "thread {} is busy with run {other}; multitask_strategy reject refuses \
                     another",
                    row.thread_id
                )))
            }
            Err(e) => return Err(e.into()),
        };
        for other in &superseded {
            self.ended_unstarted(other, row.multitask == Multitask::Rollback)
                .await;
        }
        // A worker that leased the run already writes to this log (or ended it): the
        // client reads it from the start either way.
        let log = self.log_of(&row).await;
        self.lease_now().await;
        Ok((row, log))
    }

    /// A run ended before it started (stopped, or superseded by a submission): its waiting
    /// log ends, and under a rollback it is deleted, as on LangGraph's server.
    async fn ended_unstarted(&self, run: &RunId, rollback: bool) {
        if rollback {
            let _ = self.queue.forget(run).await;
        }
        // (The registry's lock is let go before the log ends, which takes it again.)
        let waiting = self.runs.lock().logs.get(run.as_str()).cloned();
        if let Some(log) = waiting {
            self.runs.ended(run.as_str(), &log);
        }
    }

    /// The log a client reads `row`'s run from: this server's, or on PostgreSQL the run's
    /// frames relayed from the server that runs it.
    pub(crate) async fn log_of(self: &Arc<Self>, row: &RunRow) -> Arc<RunLog> {
        #[cfg(feature = "postgres")]
        if let Some(frames) = &self.frames {
            return self.relay(frames, row);
        }
        if let Some(log) = self.runs.log(&row.run_id) {
            return log;
        }
        if row.status.is_terminal() {
            // Ended before this process kept its log (or long ago): the log the file kept.
            return self.stored_log(row);
        }
        let log = self.runs.log_or_new(row);
        // The run may have ended since `row` was read (stopped before it started): then no
        // worker will ever end this log.
        let now = match RunId::new(&row.run_id) {
            Ok(id) => self.queue.run(&id).await.ok().flatten(),
            Err(_) => None,
        };
        if now.is_none_or(|r| r.status.is_terminal()) {
            self.runs.ended(&row.run_id, &log);
        }
        log
    }

    /// Ask a pending or running run to stop; whether the queue held it unfinished. A pending
    /// run ends at once (a rolled-back one is deleted); a running one stops at its next step
    /// boundary, told by its heartbeat.
    pub(crate) async fn stop(&self, run: &str, action: StopAction) -> ApiResult<bool> {
        let Ok(id) = RunId::new(run) else {
            return Ok(false);
        };
        let request = match action {
            StopAction::Interrupt => StopRequest::Interrupt,
            StopAction::Rollback => StopRequest::Rollback,
        };
        let status = match self.queue.stop(&id, request).await {
            Ok(status) => status,
            Err(CheckpointError::RunNotFound { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if status.is_terminal() {
            self.ended_unstarted(&id, action == StopAction::Rollback)
                .await;
        }
        Ok(true)
    }

    /// [`Shared::stop`] from where nothing can wait (a client's stream being dropped).
    pub(crate) fn stop_soon(self: &Arc<Self>, run: &str, action: StopAction) {
        let (shared, run) = (self.clone(), run.to_owned());
        tokio::spawn(async move {
            let _ = shared.stop(&run, action).await;
        });
    }

    /// The run `run`, as the queue holds it.
    pub(crate) async fn run_record(&self, run: &str) -> ApiResult<Option<RunRow>> {
        crate::store::run(self.queue.as_ref(), run).await
    }

    /// A thread's runs, newest first.
    pub(crate) async fn runs_of(
        &self,
        thread: &str,
        page: (usize, usize),
        status: Option<RunStatus>,
    ) -> ApiResult<Vec<RunRow>> {
        crate::store::runs_of(self.queue.as_ref(), thread, page, status).await
    }

    /// Delete an ended run, and what is kept of its log.
    pub(crate) async fn delete_run(&self, run: &str) -> ApiResult<bool> {
        self.forget_run(run, false).await
    }

    /// Delete an ended run; with `keep_log`, what is kept of its log stays until it is
    /// trimmed (a relay may still be reading it: a run that just ended).
    pub(crate) async fn forget_run(&self, run: &str, keep_log: bool) -> ApiResult<bool> {
        let gone = self.queue.forget(&RunId::new(run)?).await?;
        if gone && !keep_log {
            self.delete_kept(run).await?;
        }
        Ok(gone)
    }

    /// Delete the records of a thread's runs (after its runs stopped); `keep_log` as for
    /// [`Shared::forget_run`].
    pub(crate) async fn forget_runs(&self, thread: &str, keep_log: bool) -> ApiResult<()> {
        for r in self.queue.runs(&ThreadId::new(thread)?).await? {
            self.forget_run(r.run.as_str(), keep_log).await?;
        }
        Ok(())
    }

    /// A thread id for a run without one (`POST /runs/stream`): a thread of its own, deleted
    /// when the run ends.
    pub(crate) async fn stateless_thread(&self) -> ApiResult<String> {
        let id = uuid4();
        let mut metadata = Map::new();
        metadata.insert("stateless".to_owned(), Value::Bool(true));
        self.book.create_thread(&id, &metadata).await?;
        Ok(id)
    }
}

/// A new run's record, pending.
fn run_row(new: NewRun) -> RunRow {
    let mut metadata: Map<String, Value> = new.request.metadata.clone().unwrap_or_default();
    metadata.retain(|k, _| k != "run_id");
    let now = now_ms();
    RunRow {
        run_id: uuid7(),
        thread_id: new.thread_id,
        assistant_id: new.assistant_id,
        graph_id: new.graph_id,
        status: RunStatus::Pending,
        created_at: now,
        updated_at: now,
        metadata,
        multitask: new.request.multitask_strategy.unwrap_or_default(),
        request: new.request,
        attempt: 1,
        stateless: new.stateless,
        usage: None,
    }
}
