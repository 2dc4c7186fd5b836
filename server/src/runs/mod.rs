//! Runs: accepted under a thread's multitask rule, queued one running run per thread, run on
//! the process's tasks with their frames going to a [`RunLog`], cancelled on request, picked
//! up again when a server restarts.
//!
//! On PostgreSQL the queue is the database's (`pg`): every server accepts runs, one
//! server's worker runs each, and clients read its frames through a relay (`relay`).
//!
//! Inside: `frames` stream modes and the frames of an event; `log` a run's event log;
//! `execute` one run from start to end; `pg` and `relay` the runs on PostgreSQL.

mod execute;
pub(crate) mod frames;
pub(crate) mod log;
#[cfg(feature = "postgres")]
pub(crate) mod pg;
#[cfg(feature = "postgres")]
mod relay;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};
use stategraph::CancelToken;

use crate::error::{ApiError, ApiResult};
use crate::ids::{now_ms, uuid4, uuid7};
use crate::store::{RunRow, RunStatus, ThreadStatus};
use crate::wire::{Multitask, RunCreate};
use crate::Shared;
pub(crate) use log::{Frame, Next, RunLog};

/// How a running run is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopAction {
    /// Stop at the next step boundary; its checkpoints stay.
    Interrupt,
    /// Stop and undo: the run is deleted and the thread goes back to where it was before it.
    Rollback,
}

/// A run that is running or waiting in this process.
#[derive(Debug)]
pub(crate) struct Active {
    /// The run's record, as stored when it was accepted (or found at start-up).
    pub(crate) row: RunRow,
    pub(crate) cancel: CancelToken,
    pub(crate) stop: Mutex<Option<StopAction>>,
    pub(crate) log: Arc<RunLog>,
    /// Whether the run's record is stored (`None` until then; `Some(false)` if it could not
    /// be): its execution waits for it.
    pub(crate) stored: tokio::sync::watch::Sender<Option<bool>>,
}

/// The runs of this process: per thread the running run and the queue behind it.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    inner: Mutex<RunsInner>,
}

#[derive(Debug, Default)]
struct RunsInner {
    /// Per thread: its runs in the order they run; the first is running (or starting).
    queues: HashMap<String, VecDeque<String>>,
    /// Per run not yet ended: how to stop it and its log.
    active: HashMap<String, Arc<Active>>,
    /// Logs of ended runs, newest last, kept for late readers (bounded).
    ended: VecDeque<(String, Arc<RunLog>)>,
    /// Logs relayed from the database, per run still relayed (PostgreSQL).
    #[cfg(feature = "postgres")]
    relays: HashMap<String, Arc<RunLog>>,
}

/// Most logs of ended runs kept for `join`/`stream` requests that come after the end...
const ENDED_LOGS: usize = 256;
/// ...and most bytes of frames they keep together.
const ENDED_BYTES: usize = 256 * 1024 * 1024;

/// Keep an ended run's log, dropping the oldest kept ones beyond the budgets.
fn keep_ended(g: &mut RunsInner, run: &str, log: Arc<RunLog>) {
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

    /// The log of a run of this process, running or recently ended.
    pub(crate) fn log(&self, run: &str) -> Option<Arc<RunLog>> {
        let g = self.lock();
        g.active.get(run).map(|a| a.log.clone()).or_else(|| {
            g.ended
                .iter()
                .rev()
                .find(|(id, _)| id == run)
                .map(|(_, l)| l.clone())
        })
    }

    pub(crate) fn active(&self, run: &str) -> Option<Arc<Active>> {
        self.lock().active.get(run).cloned()
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
    /// Accept a run: apply the thread's multitask rule, store it pending, and start it if the
    /// thread is free (on PostgreSQL, queue it for any server's worker). Returns its record
    /// and log. The busy check and the run's place in the queue are taken together, so two
    /// runs submitted at once under `reject` cannot both be accepted.
    pub(crate) async fn submit(self: &Arc<Self>, new: NewRun) -> ApiResult<(RunRow, Arc<RunLog>)> {
        let row = run_row(new);
        #[cfg(feature = "postgres")]
        if let Some(pg) = &self.pg {
            pg.submit(&row).await?;
            let log = self.relay(pg, &row);
            return Ok((row, log));
        }
        self.submit_here(row)
    }

    /// The log a client reads `row`'s run from: this process's, or on PostgreSQL the run's
    /// relayed frames.
    pub(crate) fn log_of(self: &Arc<Self>, row: &RunRow) -> Option<Arc<RunLog>> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = &self.pg {
            return Some(self.relay(pg, row));
        }
        self.runs.log(&row.run_id)
    }

    /// Ask a run to stop (see [`Shared::stop_here`]); whether it was pending or running.
    pub(crate) async fn stop(&self, run: &str, action: StopAction) -> bool {
        #[cfg(feature = "postgres")]
        if let Some(pg) = &self.pg {
            return pg.stop(run, action).await;
        }
        self.stop_here(run, action)
    }

    /// [`Shared::stop`] from where nothing can wait (a client's stream being dropped).
    pub(crate) fn stop_soon(self: &Arc<Self>, run: &str, action: StopAction) {
        let (shared, run) = (self.clone(), run.to_owned());
        tokio::spawn(async move { shared.stop(&run, action).await });
    }

    /// [`Shared::submit`] to this process's queue.
    fn submit_here(self: &Arc<Self>, row: RunRow) -> ApiResult<(RunRow, Arc<RunLog>)> {
        let strategy = row.multitask;
        let (active, before) = self.reserve(&row, strategy == Multitask::Reject)?;
        if let Err(e) = self.book.local().and_then(|b| b.insert_run(&row)) {
            self.unreserve(&row, &active);
            return Err(e);
        }
        let stop = match strategy {
            Multitask::Interrupt => Some(StopAction::Interrupt),
            Multitask::Rollback => Some(StopAction::Rollback),
            Multitask::Enqueue | Multitask::Reject => None,
        };
        if let Some(action) = stop {
            for run in &before {
                self.stop_here(run, action);
            }
        }
        active.stored.send_replace(Some(true));
        if before.is_empty() {
            self.spawn(row.run_id.clone());
        }
        Ok((row, active.log.clone()))
    }

    /// Take `row`'s place at the end of its thread's queue (or, with `reject`, refuse when
    /// the thread has a run); the runs before it. Its run waits until it is stored.
    fn reserve(&self, row: &RunRow, reject: bool) -> ApiResult<(Arc<Active>, Vec<String>)> {
        let active = Arc::new(Active {
            row: row.clone(),
            cancel: CancelToken::new(),
            stop: Mutex::new(None),
            log: RunLog::new(row.request.stream_resumable.unwrap_or(false), row.attempt),
            stored: tokio::sync::watch::Sender::new(None),
        });
        let mut g = self.runs.lock();
        let before: Vec<String> = g
            .queues
            .get(&row.thread_id)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        if reject && !before.is_empty() {
            return Err(ApiError::Conflict(format!(
                "thread {} is busy with run {}; multitask_strategy reject refuses another",
                row.thread_id, before[0]
            )));
        }
        g.active.insert(row.run_id.clone(), active.clone());
        g.queues
            .entry(row.thread_id.clone())
            .or_default()
            .push_back(row.run_id.clone());
        Ok((active, before))
    }

    /// Give up a reservation whose run could not be stored.
    fn unreserve(self: &Arc<Self>, row: &RunRow, active: &Active) {
        active.stored.send_replace(Some(false));
        active.log.finish();
        self.ended(&row.run_id, &row.thread_id, None);
    }

    /// Put a stored run (one a stopped server left) in its thread's queue; start it if it is
    /// first.
    pub(crate) fn enqueue(self: &Arc<Self>, row: &RunRow) {
        let Ok((active, before)) = self.reserve(row, false) else {
            return;
        };
        active.stored.send_replace(Some(true));
        if before.is_empty() {
            self.spawn(row.run_id.clone());
        }
    }

    /// Ask a run to stop: a running one stops at its next step boundary; a queued one that
    /// has not started leaves the queue at once (interrupted, or deleted for a rollback).
    fn stop_here(&self, run: &str, action: StopAction) -> bool {
        let Some(active) = self.runs.active(run) else {
            return false;
        };
        *active.stop.lock().unwrap_or_else(PoisonError::into_inner) = Some(action);
        active.cancel.cancel();
        let waiting = {
            let mut g = self.runs.lock();
            let queued = g
                .queues
                .get(&active.row.thread_id)
                .is_some_and(|q| q.iter().skip(1).any(|r| r == run));
            if queued {
                if let Some(q) = g.queues.get_mut(&active.row.thread_id) {
                    q.retain(|r| r != run);
                }
                g.active.remove(run);
                keep_ended(&mut g, run, active.log.clone());
            }
            queued
        };
        if waiting {
            let stored = self.book.local().and_then(|book| match action {
                StopAction::Interrupt => book.set_run_status(run, RunStatus::Interrupted),
                StopAction::Rollback => book.delete_run(run).map(drop),
            });
            if let Err(e) = stored {
                let payload = serde_json::json!({ "error": e.kind(), "message": e.to_string() });
                active.log.push("error", &payload);
            }
            active.log.finish();
        }
        true
    }

    fn spawn(self: &Arc<Self>, run: String) {
        let shared = self.clone();
        tokio::spawn(async move { shared.execute(run).await });
    }

    /// A run ended (or left the queue before it started): keep its log for late readers,
    /// start the next run of its thread, or, when none follows, give the thread `status`
    /// (what the run's end made of it) while no other run can be queued meanwhile.
    pub(crate) fn ended(
        self: &Arc<Self>,
        run: &str,
        thread: &str,
        status: Option<(ThreadStatus, Option<Value>)>,
    ) {
        let next = {
            let mut g = self.runs.lock();
            let log = g.active.remove(run).map(|a| a.log.clone());
            if let Some(log) = &log {
                keep_ended(&mut g, run, log.clone());
            }
            let q = g.queues.entry(thread.to_owned()).or_default();
            q.retain(|r| r != run);
            let next = q.front().cloned();
            if q.is_empty() {
                g.queues.remove(thread);
                if let Some((status, error)) = &status {
                    let stored = self
                        .book
                        .local()
                        .and_then(|book| book.set_thread_status(thread, *status, error.as_ref()));
                    if let Err(e) = stored {
                        let payload =
                            serde_json::json!({ "error": e.kind(), "message": e.to_string() });
                        if let Some(log) = &log {
                            log.push("error", &payload);
                        }
                    }
                }
            }
            next
        };
        if let Some(next) = next {
            self.spawn(next);
        }
    }

    /// Pick up the runs a stopped process left pending or running (in order, per thread).
    /// A run left running gets one more attempt (its frames are numbered anew).
    pub(crate) fn recover(self: &Arc<Self>) -> ApiResult<usize> {
        let book = self.book.local()?;
        let runs = book.unfinished_runs()?;
        for row in &runs {
            let mut row = row.clone();
            if row.status == RunStatus::Running {
                book.requeue_run(&row.run_id)?;
                row.attempt += 1;
            }
            self.enqueue(&row);
        }
        Ok(runs.len())
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
    }
}
