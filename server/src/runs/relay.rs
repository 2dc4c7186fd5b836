//! The relay: a run's frames, as a worker on any server stored them, copied into a log of
//! this server, so its clients read a run that runs elsewhere as they read one that runs
//! here. One relay per run and server, however many clients read it; it ends once the run
//! has ended and its last frame and result are read.

use std::sync::Arc;

use super::pg::FrameStore;
use super::{keep_ended, Frame, RunLog, FRAMES};
use crate::store::RunRow;
use crate::Shared;

/// Frames read per query.
const BATCH: i64 = 1000;

impl Shared {
    /// The relayed log of `row`'s run, started if this server has none.
    pub(crate) fn relay(self: &Arc<Self>, frames: &Arc<FrameStore>, row: &RunRow) -> Arc<RunLog> {
        let run = &row.run_id;
        if let Some(log) = self.runs.log(run) {
            return log;
        }
        let log = {
            let mut g = self.runs.lock();
            if let Some(log) = g.logs.get(run) {
                return log.clone();
            }
            let log = RunLog::relayed(row.request.stream_resumable.unwrap_or(false));
            g.logs.insert(run.clone(), log.clone());
            log
        };
        let (shared, frames, run, relayed) =
            (self.clone(), frames.clone(), run.clone(), log.clone());
        tokio::spawn(async move {
            let mut wake = shared.wakeups.clone();
            relay(&frames, &mut wake, shared.worker.poll, &run, &relayed).await;
            relayed.finish();
            keep_ended(&mut shared.runs.lock(), &run, relayed);
        });
        log
    }
}

/// Copy `run`'s frames into `log` until the run has ended; then its result.
async fn relay(
    frames_store: &FrameStore,
    wake: &mut stategraph_runs::Wakeups,
    poll: std::time::Duration,
    run: &str,
    log: &RunLog,
) {
    let book = &frames_store.book;
    let s = &book.s;
    let frames = format!(
        "SELECT pos, attempt, event, data FROM {s}server_frames
         WHERE run_id = $1 AND pos >= $2 ORDER BY pos LIMIT {BATCH}"
    );
    let status = format!("SELECT status FROM {s}sg_run_queue WHERE run_id = $1");
    let result = format!("SELECT result FROM {s}server_results WHERE run_id = $1");
    let payload = format!("{FRAMES}{run}");
    let mut next: i64 = 0;
    // Whether the run was seen ended: every frame it will have is stored by then.
    let mut ended = false;
    loop {
        let Ok(rows) = book.query(&frames, &[&run, &next]).await else {
            wake.wait_until(poll, |_| false).await;
            continue;
        };
        for r in &rows {
            let (Ok(pos), Ok(attempt), Ok(event), Ok(data)) = (
                r.try_get::<_, i64>(0),
                r.try_get::<_, i32>(1),
                r.try_get::<_, String>(2),
                r.try_get::<_, String>(3),
            ) else {
                continue;
            };
            next = pos + 1;
            log.push_frame(Frame {
                seq: u64::try_from(pos).unwrap_or(0),
                attempt: u32::try_from(attempt).unwrap_or(0),
                event: event.into(),
                data: data.into(),
            });
        }
        if i64::try_from(rows.len()).unwrap_or(0) == BATCH {
            continue;
        }
        if ended {
            break;
        }
        if rows.is_empty() {
            let row = book.query(&status, &[&run]).await;
            let state: Option<String> = match &row {
                Ok(rows) => rows.first().and_then(|r| r.try_get(0).ok()),
                Err(_) => Some("pending".to_owned()),
            };
            // Gone (deleted with its thread) or ended: read what is left, then stop.
            if !matches!(state.as_deref(), Some("pending" | "running")) {
                ended = true;
                continue;
            }
        }
        wake.wait_until(poll, |p| p == run || p == payload).await;
    }
    if let Ok(rows) = book.query(&result, &[&run]).await {
        let value = rows.first().and_then(|r| r.try_get::<_, String>(0).ok());
        if let Some(value) = value.and_then(|v| serde_json::from_str(&v).ok()) {
            log.set_result(value);
        }
    }
}
