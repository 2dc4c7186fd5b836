//! The logs kept beyond the process: on PostgreSQL every run's frames and result, which the
//! relays of every server read (`pg`); on SQLite a resumable run's frames and result, in the
//! file, so a client can ask for them again after the server restarted. (A run that is not
//! resumable sends no ids, so nothing of its stream can be asked for again.)

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::log::LOG_FRAMES;
use super::{keep_ended, Active, Next, RunLog};
use crate::error::ApiResult;
use crate::ids::now_ms;
use crate::store::RunRow;
use crate::Shared;

/// Ended runs' kept frames and results stay this long for late readers, then are trimmed.
pub(crate) const KEEP_ENDED: Duration = Duration::from_secs(600);

impl Shared {
    /// Start keeping `active`'s frames as they come, if they are kept.
    pub(crate) fn sink(self: &Arc<Self>, active: &Active) -> Option<JoinHandle<()>> {
        #[cfg(feature = "postgres")]
        if let Some(frames) = &self.frames {
            return Some(frames.spawn_sink(active));
        }
        if !active.log.resumable {
            return None;
        }
        let (shared, log, run) = (self.clone(), active.log.clone(), active.row.run_id.clone());
        Some(tokio::spawn(async move {
            shared.keep_in_file(&log, &run).await;
        }))
    }

    /// Before a run's end is stored: keep what `wait` and `join` answer (on PostgreSQL the
    /// run's log ends here, and its last frames are stored first). The sink still to be
    /// waited for once the log has ended (on SQLite, where it ends after the run's end).
    pub(crate) async fn store_frames(
        &self,
        active: &Active,
        sink: Option<JoinHandle<()>>,
    ) -> Option<JoinHandle<()>> {
        #[cfg(feature = "postgres")]
        if let Some(frames) = &self.frames {
            frames.flush(active, sink).await;
            return None;
        }
        if let (Some(book), Some(result), true) = (
            self.book.sqlite(),
            active.log.result_now(),
            active.log.resumable,
        ) {
            let _ = book.keep_result(&active.row.run_id, &result);
        }
        sink
    }

    /// Copy a resumable run's frames into the file as they come (the frames of its attempt,
    /// numbered as its log numbers them), until its log ends.
    async fn keep_in_file(&self, log: &RunLog, run: &str) {
        let Some(book) = self.book.sqlite() else {
            return;
        };
        let mut next = 0u64;
        loop {
            let frames = match log.read_from(next).await {
                Next::End => return,
                Next::Frames(frames) => frames,
            };
            let _ = book.keep_frames(run, log.attempt, &frames);
            next = frames.last().map_or(next, |f| f.seq + 1);
            let kept = u64::try_from(LOG_FRAMES).unwrap_or(u64::MAX);
            if next > kept && next % 1000 < frames.len() as u64 {
                let _ = book.trim_run_frames(run, next - kept);
            }
        }
    }

    /// The log the file kept of an ended run (its last attempt's frames and its result), or
    /// an empty ended one: `join` then answers the thread's values, a stream ends at once.
    pub(crate) fn stored_log(&self, row: &RunRow) -> Arc<RunLog> {
        let resumable = row.request.stream_resumable.unwrap_or(false);
        let kept = self.book.sqlite().and_then(|b| b.kept(&row.run_id).ok());
        let log = match kept {
            Some((attempt, frames, result)) => {
                let log = RunLog::new(resumable, attempt);
                for frame in frames {
                    log.push_frame(frame);
                }
                if let Some(result) = result {
                    log.set_result(result);
                }
                log
            }
            None => RunLog::new(resumable, row.attempt),
        };
        log.finish();
        keep_ended(&mut self.runs.lock(), &row.run_id, log.clone());
        log
    }

    /// Delete what is kept of a run.
    pub(crate) async fn delete_kept(&self, run: &str) -> ApiResult<()> {
        #[cfg(feature = "postgres")]
        if let Some(frames) = &self.frames {
            return frames.delete(run).await;
        }
        match self.book.sqlite() {
            Some(book) => book.delete_kept(run),
            None => Ok(()),
        }
    }

    /// Trim what is kept of runs long ended.
    pub(crate) async fn trim_frames(&self) {
        #[cfg(feature = "postgres")]
        if let Some(frames) = &self.frames {
            let _ = frames.trim().await;
            return;
        }
        if let Some(book) = self.book.sqlite() {
            let cutoff = now_ms() - i64::try_from(KEEP_ENDED.as_millis()).unwrap_or(i64::MAX);
            let _ = book.trim_kept(cutoff);
        }
    }
}
