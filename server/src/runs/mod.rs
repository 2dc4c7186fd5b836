//! Runs: accepted under a thread's multitask rule, queued one running run per thread, run on
//! the process's tasks with their frames going to a [`RunLog`], cancelled on request, picked
//! up again when a server restarts.
//!
//! Inside: `frames` stream modes and the frames of an event; `log` a run's event log;
//! `execute` one run from start to end.

mod execute;
pub(crate) mod frames;
pub(crate) mod log;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};
use stategraph::CancelToken;

use crate::error::{ApiError, ApiResult};
use crate::ids::{now_ms, uuid4, uuid7};
use crate::store::{RunRow, RunStatus};
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
    pub(crate) thread: String,
    pub(crate) cancel: CancelToken,
    pub(crate) stop: Mutex<Option<StopAction>>,
    pub(crate) log: Arc<RunLog>,
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
}

/// Most logs of ended runs kept for `join`/`stream` requests that come after the end.
const ENDED_LOGS: usize = 256;

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

    fn busy(&self, thread: &str) -> Vec<String> {
        self.lock()
            .queues
            .get(thread)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
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
    /// thread is free. Returns its record and log.
    pub(crate) fn submit(self: &Arc<Self>, new: NewRun) -> ApiResult<(RunRow, Arc<RunLog>)> {
        let strategy = new.request.multitask_strategy.unwrap_or_default();
        let before = self.runs.busy(&new.thread_id);
        if !before.is_empty() && strategy == Multitask::Reject {
            return Err(ApiError::Conflict(format!(
                "thread {} is busy with run {}; multitask_strategy reject refuses another",
                new.thread_id, before[0]
            )));
        }
        let mut metadata: Map<String, Value> = new.request.metadata.clone().unwrap_or_default();
        metadata.retain(|k, _| k != "run_id");
        let now = now_ms();
        let row = RunRow {
            run_id: uuid7(),
            thread_id: new.thread_id.clone(),
            assistant_id: new.assistant_id,
            graph_id: new.graph_id,
            status: RunStatus::Pending,
            created_at: now,
            updated_at: now,
            metadata,
            multitask: strategy,
            request: new.request,
            attempt: 1,
            stateless: new.stateless,
        };
        self.book.insert_run(&row)?;
        let stop = match strategy {
            Multitask::Interrupt => Some(StopAction::Interrupt),
            Multitask::Rollback => Some(StopAction::Rollback),
            Multitask::Enqueue | Multitask::Reject => None,
        };
        if let Some(action) = stop {
            for run in &before {
                self.stop(run, action);
            }
        }
        let log = self.enqueue(&row);
        Ok((row, log))
    }

    /// Put a stored run in its thread's queue; start it if it is first.
    pub(crate) fn enqueue(self: &Arc<Self>, row: &RunRow) -> Arc<RunLog> {
        let log = RunLog::new(row.request.stream_resumable.unwrap_or(false), row.attempt);
        let active = Arc::new(Active {
            thread: row.thread_id.clone(),
            cancel: CancelToken::new(),
            stop: Mutex::new(None),
            log: log.clone(),
        });
        let first = {
            let mut g = self.runs.lock();
            g.active.insert(row.run_id.clone(), active);
            let q = g.queues.entry(row.thread_id.clone()).or_default();
            q.push_back(row.run_id.clone());
            q.len() == 1
        };
        if first {
            self.spawn(row.run_id.clone());
        }
        log
    }

    /// Ask a run to stop: a running one stops at its next step boundary; a queued one that
    /// has not started leaves the queue at once (interrupted, or deleted for a rollback).
    pub(crate) fn stop(&self, run: &str, action: StopAction) -> bool {
        let Some(active) = self.runs.active(run) else {
            return false;
        };
        *active.stop.lock().unwrap_or_else(PoisonError::into_inner) = Some(action);
        active.cancel.cancel();
        let waiting = {
            let mut g = self.runs.lock();
            let queued = g
                .queues
                .get(&active.thread)
                .is_some_and(|q| q.iter().skip(1).any(|r| r == run));
            if queued {
                if let Some(q) = g.queues.get_mut(&active.thread) {
                    q.retain(|r| r != run);
                }
                g.active.remove(run);
                g.ended.push_back((run.to_owned(), active.log.clone()));
                if g.ended.len() > ENDED_LOGS {
                    g.ended.pop_front();
                }
            }
            queued
        };
        if waiting {
            let stored = match action {
                StopAction::Interrupt => self.book.set_run_status(run, RunStatus::Interrupted),
                StopAction::Rollback => self.book.delete_run(run).map(drop),
            };
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

    /// A run ended: keep its log for late readers, start the next run of its thread.
    fn ended(self: &Arc<Self>, run: &str, thread: &str) {
        let next = {
            let mut g = self.runs.lock();
            if let Some(a) = g.active.remove(run) {
                g.ended.push_back((run.to_owned(), a.log.clone()));
                if g.ended.len() > ENDED_LOGS {
                    g.ended.pop_front();
                }
            }
            let q = g.queues.entry(thread.to_owned()).or_default();
            q.retain(|r| r != run);
            let next = q.front().cloned();
            if q.is_empty() {
                g.queues.remove(thread);
            }
            next
        };
        if let Some(next) = next {
            self.spawn(next);
        }
    }

    /// Pick up the runs a stopped process left pending or running (in order, per thread).
    pub(crate) fn recover(self: &Arc<Self>) -> ApiResult<usize> {
        let runs = self.book.unfinished_runs()?;
        for row in &runs {
            if row.status == RunStatus::Running {
                self.book.requeue_run(&row.run_id)?;
            }
            self.enqueue(row);
        }
        Ok(runs.len())
    }

    /// A thread id for a run without one (`POST /runs/stream`): a thread of its own, deleted
    /// when the run ends.
    pub(crate) fn stateless_thread(&self) -> ApiResult<String> {
        let id = uuid4();
        let mut metadata = Map::new();
        metadata.insert("stateless".to_owned(), Value::Bool(true));
        self.book.create_thread(&id, &metadata)?;
        Ok(id)
    }
}
