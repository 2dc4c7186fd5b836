//! Runs on PostgreSQL: any server on the database accepts a run into the run queue, and
//! one server's worker leases it and runs it. Its frames go to the `server_frames` table
//! (the sink) and from there to whichever server holds a client's stream (`relay`). A
//! server that dies loses its leases; another takes its runs over when their leases end,
//! and goes on from each run's newest checkpoint.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use stategraph::checkpoints::{
    CheckpointError, Lease, Multitask as QueueStrategy, RunEnd, RunId, StopRequest, ThreadId,
    Wakeups,
};
use stategraph::worker::{Beat, Heartbeat};
use stategraph::CancelToken;
use tokio::sync::Semaphore;

use super::execute::{outcome, End};
use super::log::LOG_FRAMES;
use super::{Active, Next, RunLog, StopAction};
use crate::error::{ApiError, ApiResult};
use crate::ids::now_ms;
use crate::store::postgres::{PgBook, Ticket};
use crate::store::{RunRow, RunStatus};
use crate::wire::Multitask;
use crate::Shared;

/// The payload of a notification that a run has new frames: this prefix and the run's id
/// (a run's own id is the queue's: its state changed).
pub(crate) const FRAMES: &str = "frames:";

/// Ended runs' frames and results are kept this long for late readers, then trimmed.
const KEEP_ENDED: Duration = Duration::from_secs(600);

/// This server's part in the queue.
#[derive(Debug)]
pub(crate) struct PgRuns {
    pub(crate) book: PgBook,
    /// The queue's notifications (one listening connection; each waiter clones it).
    pub(crate) wakeups: Wakeups,
    /// This server's name as the queue's worker.
    worker: String,
    /// How long a lease lasts without a heartbeat.
    lease: Duration,
    /// How long an idle worker or relay waits when nothing notifies it.
    pub(crate) poll: Duration,
    /// Runs this server runs at once.
    slots: Arc<Semaphore>,
}

impl PgRuns {
    pub(crate) async fn new(book: PgBook, lease: Duration, concurrency: usize) -> PgRuns {
        let wakeups = book.queue.wakeups().await;
        let worker = format!("serve-{}-{}", std::process::id(), &crate::ids::uuid4()[..8]);
        PgRuns {
            book,
            wakeups,
            worker,
            lease,
            poll: (lease / 4).min(Duration::from_secs(1)),
            slots: Arc::new(Semaphore::new(concurrency.max(1))),
        }
    }

    /// Queue `row` under its thread's multitask rule.
    pub(crate) async fn submit(&self, row: &RunRow) -> ApiResult<()> {
        let strategy = match row.multitask {
            Multitask::Reject => QueueStrategy::Reject,
            Multitask::Enqueue => QueueStrategy::Enqueue,
            Multitask::Interrupt => QueueStrategy::Interrupt,
            Multitask::Rollback => QueueStrategy::Rollback,
        };
        let ticket = serde_json::to_value(Ticket::of(row))
            .map_err(|e| ApiError::Internal(format!("encoding a run: {e}")))?;
        let (run, thread) = (RunId::new(&row.run_id)?, ThreadId::new(&row.thread_id)?);
        match self
            .book
            .queue
            .submit_as(&run, &thread, &ticket, strategy)
            .await
        {
            Err(CheckpointError::ThreadBusy { run: other, .. }) => {
                Err(ApiError::Conflict(format!(
                    "thread {} is busy with run {other}; multitask_strategy reject refuses another",
                    row.thread_id
                )))
            }
            other => Ok(other?),
        }
    }

    /// Ask a pending or running run to stop; whether the queue held it unfinished. A pending
    /// run rolled back is deleted, as on SQLite.
    pub(crate) async fn stop(&self, run: &str, action: StopAction) -> bool {
        let Ok(id) = RunId::new(run) else {
            return false;
        };
        let request = match action {
            StopAction::Interrupt => StopRequest::Interrupt,
            StopAction::Rollback => StopRequest::Rollback,
        };
        match self.book.queue.stop(&id, request).await {
            Ok(RunStatus::Cancelled) if action == StopAction::Rollback => {
                let _ = self.book.delete_run(run).await;
                true
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// Delete the frames and results of runs that ended more than [`KEEP_ENDED`] ago.
    async fn trim(&self) -> ApiResult<()> {
        let s = &self.book.s;
        let cutoff = now_ms() - i64::try_from(KEEP_ENDED.as_millis()).unwrap_or(i64::MAX);
        let text = format!(
            "WITH gone AS (SELECT run_id FROM {s}sg_run_queue
                 WHERE status NOT IN ('pending', 'running') AND updated_at < $1),
             f AS (DELETE FROM {s}server_frames WHERE run_id IN (SELECT run_id FROM gone))
             DELETE FROM {s}server_results WHERE run_id IN (SELECT run_id FROM gone)
                 OR at < $1 - 86400000"
        );
        self.book.query(&text, &[&cutoff]).await.map(drop)
    }
}

impl Shared {
    /// This server's worker: lease runs while it has slots, run each on its own task.
    pub(crate) async fn work(self: Arc<Self>, pg: Arc<PgRuns>) {
        let mut wake = pg.wakeups.clone();
        let mut trimmed = Instant::now();
        loop {
            let Ok(slot) = pg.slots.clone().acquire_owned().await else {
                return;
            };
            if let Ok(Some(lease)) = pg.book.queue.lease(&pg.worker, pg.lease).await {
                let (shared, pg) = (self.clone(), pg.clone());
                tokio::spawn(async move {
                    shared.run_leased(&pg, lease).await;
                    drop(slot);
                });
                continue;
            }
            drop(slot);
            if trimmed.elapsed() > KEEP_ENDED / 10 {
                trimmed = Instant::now();
                let _ = pg.trim().await;
            }
            wake.wait_until(pg.poll, |p| !p.starts_with(FRAMES)).await;
        }
    }

    /// Run a leased run to its end, its checkpoints fenced by the lease; its frames, result
    /// and end stored for every server to read. A lost lease ends nothing: the run's new
    /// holder does.
    async fn run_leased(&self, pg: &PgRuns, lease: Lease) {
        let ticket = match &lease.unreadable {
            None => serde_json::from_value::<Ticket>(lease.input.clone()).ok(),
            Some(_) => None,
        };
        let Some(ticket) = ticket else {
            let why = "not a run of an Agent Server: its input is no server ticket";
            let reason = lease.unreadable.clone().unwrap_or_else(|| why.to_owned());
            let _ = pg.book.queue.finish(&lease, RunEnd::Failed(reason)).await;
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
        let resumable = row.request.stream_resumable.unwrap_or(false);
        let active = Arc::new(Active {
            row: row.clone(),
            cancel: CancelToken::new(),
            stop: Mutex::new(None),
            log: RunLog::new(resumable, row.attempt),
            stored: tokio::sync::watch::Sender::new(Some(true)),
        });
        let beat = Heartbeat::start(
            pg.book.queue.clone(),
            lease.clone(),
            pg.lease,
            pg.lease / 3,
            pg.wakeups.clone(),
            active.cancel.clone(),
        );
        let sink = tokio::spawn(sink(
            pg.book.clone(),
            active.log.clone(),
            row.run_id.clone(),
        ));
        let end = match lease.stop {
            Some(request) => End::Stopped(action_of(request)),
            None => {
                let fenced = Arc::new(pg.book.saver.fenced(&lease));
                self.drive(&row, &active, Some(fenced)).await
            }
        };
        let end = match (end, beat.stop().await) {
            (_, Beat::Lost) => {
                active.log.finish();
                sink.abort();
                return;
            }
            (End::Stopped(_), Beat::Stop(request)) => End::Stopped(action_of(request)),
            (end, _) => end,
        };
        *active.stop.lock().unwrap_or_else(PoisonError::into_inner) = match &end {
            End::Stopped(action) => Some(*action),
            _ => None,
        };
        self.settle_leased(pg, &lease, &active, end, sink).await;
    }

    /// Store how a leased run ended: its thread's status first (the next run of the thread
    /// cannot start before the end below, so it cannot be overwritten by this one's), then
    /// its frames and result, then its end under the lease.
    async fn settle_leased(
        &self,
        pg: &PgRuns,
        lease: &Lease,
        active: &Active,
        end: End,
        sink: tokio::task::JoinHandle<()>,
    ) {
        let row = &active.row;
        let (_, thread_status, error) = outcome(&end, active);
        let stored = async {
            if !row.stateless {
                pg.book
                    .set_thread_status(&row.thread_id, thread_status, error.as_ref())
                    .await?;
            }
            Ok::<(), ApiError>(())
        };
        if let Err(e) = stored.await {
            active.log.push(
                "error",
                &json!({ "error": e.kind(), "message": e.to_string() }),
            );
        }
        active.log.finish();
        let _ = sink.await;
        if let Some(result) = active.log.result().await {
            let text = format!(
                "INSERT INTO {}server_results VALUES ($1, $2, $3)
                 ON CONFLICT (run_id) DO UPDATE SET result = $2, at = $3",
                pg.book.s
            );
            let _ = pg
                .book
                .query(&text, &[&row.run_id, &result.to_string(), &now_ms()])
                .await;
        }
        let run_end = match end {
            End::Done { .. } => RunEnd::Success,
            End::Stopped(StopAction::Interrupt) => RunEnd::Stopped(StopRequest::Interrupt),
            End::Stopped(StopAction::Rollback) => RunEnd::Stopped(StopRequest::Rollback),
            End::Failed { message, .. } => RunEnd::Failed(message),
        };
        if pg.book.queue.finish(lease, run_end).await.is_err() || !row.stateless {
            return;
        }
        if let Ok(thread) = ThreadId::new(&row.thread_id) {
            let _ = self.saver.delete_thread(&thread).await;
            let _ = pg.book.delete_thread(&row.thread_id).await;
        }
    }
}

fn action_of(request: StopRequest) -> StopAction {
    match request {
        StopRequest::Rollback => StopAction::Rollback,
        StopRequest::Interrupt | StopRequest::Cancel => StopAction::Interrupt,
    }
}

/// Copy a running run's frames into `server_frames` as they come, numbered on from the
/// frames its earlier attempts stored, and tell the relays. Returns once the log has ended
/// and every frame is stored (a frame that could not be stored is skipped).
async fn sink(book: PgBook, log: Arc<RunLog>, run: String) {
    let s = &book.s;
    let base = format!("SELECT COALESCE(MAX(pos) + 1, 0) FROM {s}server_frames WHERE run_id = $1");
    let base: i64 = match book.query(&base, &[&run]).await {
        Ok(rows) => rows.first().and_then(|r| r.try_get(0).ok()).unwrap_or(0),
        Err(_) => 0,
    };
    let insert = format!(
        "WITH ins AS (
             INSERT INTO {s}server_frames (run_id, pos, attempt, event, data)
             SELECT $1, u.p, $3, u.e, u.d FROM unnest($2::int8[], $4::text[], $5::text[]) AS u(p, e, d)
             ON CONFLICT DO NOTHING RETURNING 1)
         SELECT pg_notify($6, $7), (SELECT count(*) FROM ins)"
    );
    let trim = format!("DELETE FROM {s}server_frames WHERE run_id = $1 AND pos < $2");
    let channel = book.queue.channel();
    let payload = format!("{FRAMES}{run}");
    let attempt = i32::try_from(log.attempt).unwrap_or(i32::MAX);
    let mut next = 0u64;
    loop {
        let frames = match log.read_from(next).await {
            Next::End => return,
            Next::Frames(frames) => frames,
        };
        let pos: Vec<i64> = frames
            .iter()
            .map(|f| base + i64::try_from(f.seq).unwrap_or(i64::MAX - base))
            .collect();
        let events: Vec<&str> = frames.iter().map(|f| &*f.event).collect();
        let data: Vec<&str> = frames.iter().map(|f| &*f.data).collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
            [&run, &pos, &attempt, &events, &data, &channel, &payload];
        let _ = book.query(&insert, &params).await;
        next = frames.last().map_or(next, |f| f.seq + 1);
        let last = pos.last().copied().unwrap_or(0);
        let kept = i64::try_from(LOG_FRAMES).unwrap_or(i64::MAX);
        if last >= kept && last % 1000 < i64::try_from(frames.len()).unwrap_or(0) {
            let _ = book.query(&trim, &[&run, &(last - kept)]).await;
        }
    }
}
