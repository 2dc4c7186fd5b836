//! A server's worker: it leases runs from the queue while it has slots, runs each on its own
//! task with a heartbeat keeping the lease, and ends it under the lease. On PostgreSQL a
//! graph writes through the saver fenced by the lease, and the run's frames and result are
//! stored for every server to relay. A lost lease ends nothing: the run's new holder does.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use stategraph::checkpoints::Saver;
use stategraph::CancelToken;
use stategraph_runs::{Beat, Heartbeat, Lease, RunEnd, StopRequest, ThreadId};
use tokio::sync::Semaphore;

use super::execute::{outcome, End};
use super::{Active, StopAction};
use crate::error::ApiError;
use crate::ids::now_ms;
use crate::store::{RunStatus, Ticket};
use crate::Shared;

/// How a server's worker leases.
#[derive(Debug)]
pub(crate) struct Worker {
    /// Its name in the queue (`serve-<pid>-<random>`).
    pub(crate) name: String,
    /// How long a lease lasts without a heartbeat.
    pub(crate) lease: Duration,
    /// How long it waits for work when nothing notifies it.
    pub(crate) poll: Duration,
    /// Runs it runs at once.
    slots: Arc<Semaphore>,
}

impl Worker {
    pub(crate) fn new(lease: Duration, concurrency: usize) -> Worker {
        Worker {
            name: format!("serve-{}-{}", std::process::id(), &crate::ids::uuid4()[..8]),
            lease,
            poll: (lease / 4).min(Duration::from_secs(1)),
            slots: Arc::new(Semaphore::new(concurrency.max(1))),
        }
    }
}

/// How often ended runs' stored frames are trimmed.
const TRIM_EVERY: Duration = Duration::from_secs(60);

impl Shared {
    /// Lease runs while there are slots, each run on a task of its own; wait for the queue's
    /// notifications (not of frames) when none is runnable.
    pub(crate) async fn work(self: Arc<Self>) {
        let mut wake = self.wakeups.clone();
        let mut trimmed = Instant::now();
        loop {
            let Ok(slot) = self.worker.slots.clone().acquire_owned().await else {
                return;
            };
            if let Ok(Some(lease)) = self.queue.lease(&self.worker.name, self.worker.lease).await {
                let shared = self.clone();
                tokio::spawn(async move {
                    shared.run_leased(lease).await;
                    drop(slot);
                });
                continue;
            }
            drop(slot);
            if trimmed.elapsed() > TRIM_EVERY {
                trimmed = Instant::now();
                self.trim_frames().await;
            }
            wake.wait_until(self.worker.poll, |p| !super::is_frames_payload(p))
                .await;
        }
    }

    /// Lease a runnable run at once if a slot is free (the run just submitted, most often),
    /// without waiting for the worker to be woken.
    pub(crate) async fn lease_now(self: &Arc<Self>) {
        let Ok(slot) = self.worker.slots.clone().try_acquire_owned() else {
            return;
        };
        if let Ok(Some(lease)) = self.queue.lease(&self.worker.name, self.worker.lease).await {
            let shared = self.clone();
            tokio::spawn(async move {
                shared.run_leased(lease).await;
                drop(slot);
            });
        }
    }

    /// Run a leased run to its end.
    async fn run_leased(self: &Arc<Self>, lease: Lease) {
        let ticket = match &lease.unreadable {
            None => serde_json::from_value::<Ticket>(lease.input.clone()).ok(),
            Some(_) => None,
        };
        let Some(ticket) = ticket else {
            let why = "not a run of an Agent Server: its input is no server ticket";
            let reason = lease.unreadable.clone().unwrap_or_else(|| why.to_owned());
            let _ = self.queue.finish(&lease, RunEnd::Failed(reason)).await;
            return;
        };
        let created = i64::try_from(lease.created_at_ms).unwrap_or(0);
        let row = ticket.row(
            lease.run.as_str(),
            lease.thread.as_str(),
            RunStatus::Running,
            (created, now_ms()),
            lease.attempt,
        );
        let active = Arc::new(Active {
            log: self.log_for_lease(&row),
            row,
            cancel: CancelToken::new(),
            stop: Mutex::new(None),
            usage: stategraph::UsageMeter::new(),
        });
        let cancel = active.cancel.clone();
        let beat = Heartbeat::start(
            self.queue.clone(),
            lease.clone(),
            self.worker.lease,
            self.worker.lease / 3,
            self.wakeups.clone(),
            move || cancel.cancel(),
        );
        let sink = self.sink(&active);
        let end = match lease.stop {
            Some(request) => End::Stopped(action_of(request)),
            None => self.drive(&active.row, &active, self.fenced(&lease)).await,
        };
        let end = match (end, beat.stop().await) {
            (_, Beat::Lost) => {
                self.end_log(&active);
                if let Some(sink) = sink {
                    sink.abort();
                }
                return;
            }
            (End::Stopped(_), Beat::Stop(request)) => End::Stopped(action_of(request)),
            (end, _) => end,
        };
        *active.stop.lock().unwrap_or_else(PoisonError::into_inner) = match &end {
            End::Stopped(action) => Some(*action),
            _ => None,
        };
        self.settle(&lease, &active, end, sink).await;
    }

    /// The log a leased run writes its frames to: on SQLite the one its clients read (kept
    /// for late readers when it ends); on PostgreSQL one of its own, which the sink copies
    /// to the database, whence every server's clients read it.
    fn log_for_lease(&self, row: &crate::store::RunRow) -> Arc<super::RunLog> {
        if self.relays() {
            return super::RunLog::new(row.request.stream_resumable.unwrap_or(false), row.attempt);
        }
        self.runs.log_for_attempt(row)
    }

    /// A leased run's log ends.
    fn end_log(&self, active: &Active) {
        if self.relays() {
            active.log.finish();
        } else {
            self.runs.ended(&active.row.run_id, &active.log);
        }
    }

    /// Whether clients read runs through relays of the database (PostgreSQL).
    fn relays(&self) -> bool {
        #[cfg(feature = "postgres")]
        if self.frames.is_some() {
            return true;
        }
        false
    }

    /// The saver a leased run's graph writes through: on PostgreSQL fenced by its lease.
    fn fenced(&self, lease: &Lease) -> Option<Arc<dyn Saver>> {
        #[cfg(feature = "postgres")]
        if let Some(frames) = &self.frames {
            return Some(Arc::new(frames.saver.fenced(lease)));
        }
        let _ = lease;
        None
    }

    /// Store how a leased run ended: its thread's status first (the thread's next run cannot
    /// start before the end below, so cannot be overwritten by this one's), then its frames
    /// and result, then a stateless run's thread, then its end under the lease; then a
    /// rollback's run is deleted; then its log ends.
    async fn settle(
        &self,
        lease: &Lease,
        active: &Active,
        end: End,
        sink: Option<tokio::task::JoinHandle<()>>,
    ) {
        let row = &active.row;
        let (_, thread_status, error) = outcome(&end, active);
        let rollback = matches!(end, End::Stopped(StopAction::Rollback));
        let stored = async {
            if rollback && self.undoes_rollbacks() {
                self.roll_back(row).await?;
            }
            if !row.stateless {
                self.book
                    .set_thread_status(&row.thread_id, thread_status, error.as_ref())
                    .await?;
            }
            Ok::<(), ApiError>(())
        };
        if let Err(e) = stored.await {
            let payload = json!({ "error": e.kind(), "message": e.to_string() });
            active.log.push("error", &payload);
        }
        let sink = self.store_frames(active, sink).await;
        let run_end = match end {
            End::Done { .. } => RunEnd::Success,
            End::Stopped(StopAction::Interrupt) => RunEnd::Stopped(StopRequest::Interrupt),
            End::Stopped(StopAction::Rollback) => RunEnd::Stopped(StopRequest::Rollback),
            End::Failed { message, .. } => RunEnd::Failed(message),
        };
        // What the run's end leaves behind is gone before any client can see the end: no
        // stateless thread (on PostgreSQL its deletion takes the run's queue row with it,
        // which relays read as the end), and no rolled-back run.
        if row.stateless {
            if let Ok(thread) = ThreadId::new(&row.thread_id) {
                let _ = self.saver.delete_thread(&thread).await;
                let _ = self.book.delete_thread(&row.thread_id).await;
            }
        }
        let usage = Some(active.usage.total());
        if self.queue.finish_with(lease, run_end, usage).await.is_ok() {
            // On PostgreSQL the relays of other servers may still read the run's log.
            let keep_log = self.relays();
            if rollback {
                let _ = self.forget_run(&row.run_id, keep_log).await;
            }
            if row.stateless {
                let _ = self.forget_runs(&row.thread_id, keep_log).await;
            }
        }
        self.end_log(active);
        // Its last frames are in the file before the worker takes another run.
        if let Some(sink) = sink {
            let _ = sink.await;
        }
    }

    /// Whether a rolled-back run's checkpoints are undone here: on SQLite (the PostgreSQL
    /// queue deletes them as it ends the run).
    fn undoes_rollbacks(&self) -> bool {
        !self.relays()
    }
}

fn action_of(request: StopRequest) -> StopAction {
    match request {
        StopRequest::Rollback => StopAction::Rollback,
        StopRequest::Interrupt | StopRequest::Cancel => StopAction::Interrupt,
    }
}
