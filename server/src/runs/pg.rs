//! Frames through PostgreSQL: the server running a run copies its frames into the
//! `server_frames` table (the sink) and its result into `server_results`; from there they
//! go to whichever server holds a client's stream (`relay`). Ended runs' rows are trimmed.

use std::sync::Arc;

use serde_json::Value;
use stategraph::checkpoints::PostgresSaver;
use tokio::task::JoinHandle;

use super::log::LOG_FRAMES;
use super::{Active, Next, RunLog, FRAMES};
use crate::error::ApiResult;
use crate::ids::now_ms;
use crate::store::postgres::PgBook;

use super::kept::KEEP_ENDED;

/// Frames and results in the database, for the relays of every server.
#[derive(Debug)]
pub(crate) struct FrameStore {
    pub(crate) book: PgBook,
    /// The saver, whose fenced copies a leased run's graph writes through.
    pub(crate) saver: PostgresSaver,
}

impl FrameStore {
    pub(crate) fn new(book: PgBook) -> FrameStore {
        FrameStore {
            saver: book.saver.clone(),
            book,
        }
    }

    /// Store what `wait` and `join` answer for `run`.
    async fn store_result(&self, run: &str, result: &Value) -> ApiResult<()> {
        let text = format!(
            "INSERT INTO {}server_results VALUES ($1, $2, $3)
             ON CONFLICT (run_id) DO UPDATE SET result = $2, at = $3",
            self.book.s
        );
        self.book
            .query(&text, &[&run, &result.to_string(), &now_ms()])
            .await
            .map(drop)
    }

    /// Delete a run's frames and result.
    pub(crate) async fn delete(&self, run: &str) -> ApiResult<()> {
        let text = format!(
            "WITH f AS (DELETE FROM {s}server_frames WHERE run_id = $1)
             DELETE FROM {s}server_results WHERE run_id = $1",
            s = self.book.s
        );
        self.book.query(&text, &[&run]).await.map(drop)
    }

    /// Delete the frames and results of runs that ended more than [`KEEP_ENDED`] ago, and
    /// of runs deleted since (whose result is as old, or that have none).
    pub(crate) async fn trim(&self) -> ApiResult<()> {
        let s = &self.book.s;
        let cutoff = now_ms() - i64::try_from(KEEP_ENDED.as_millis()).unwrap_or(i64::MAX);
        let text = format!(
            "WITH f AS (
                 DELETE FROM {s}server_frames f
                 WHERE NOT EXISTS (SELECT 1 FROM {s}sg_run_queue q WHERE q.run_id = f.run_id
                         AND (q.status IN ('pending', 'running') OR q.updated_at >= $1))
                   AND NOT EXISTS (SELECT 1 FROM {s}server_results r
                         WHERE r.run_id = f.run_id AND r.at >= $1))
             DELETE FROM {s}server_results WHERE at < $1"
        );
        self.book.query(&text, &[&cutoff]).await.map(drop)
    }
}

impl FrameStore {
    /// Start copying `active`'s frames into the database.
    pub(crate) fn spawn_sink(&self, active: &Active) -> JoinHandle<()> {
        let (book, log) = (self.book.clone(), active.log.clone());
        tokio::spawn(sink(book, log, active.row.run_id.clone()))
    }

    /// End `active`'s log, wait until its frames are stored, and store its result: all
    /// before its end is, so a relay that sees the end has everything.
    pub(crate) async fn flush(&self, active: &Active, sink: Option<JoinHandle<()>>) {
        active.log.finish();
        if let Some(sink) = sink {
            let _ = sink.await;
        }
        if let Some(result) = active.log.result().await {
            let _ = self.store_result(&active.row.run_id, &result).await;
        }
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
    let channel = book.saver.queue().channel();
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
