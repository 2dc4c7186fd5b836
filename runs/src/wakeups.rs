//! Wake-ups: notifications naming runs, for workers and heartbeats to wait on instead of
//! polling. A SQLite queue sends them in its process; the PostgreSQL queue's come from
//! `LISTEN` (and so from every machine). Every wait has a deadline, so a waiter whose
//! notifications stop still wakes on the clock.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;

/// A receiver of a queue's notifications, each naming a run. Each clone sees every
/// notification sent after it was made.
#[derive(Debug)]
pub struct Wakeups(Source);

#[derive(Debug)]
enum Source {
    /// Sent in this process.
    Local {
        sender: broadcast::Sender<Arc<str>>,
        seen: broadcast::Receiver<Arc<str>>,
    },
    /// The PostgreSQL queue's `LISTEN`.
    #[cfg(feature = "postgres")]
    Postgres(stategraph_checkpoints::Wakeups),
    /// Only the clock.
    Polling,
}

impl Clone for Wakeups {
    fn clone(&self) -> Self {
        Wakeups(match &self.0 {
            Source::Local { sender, .. } => Source::Local {
                sender: sender.clone(),
                seen: sender.subscribe(),
            },
            #[cfg(feature = "postgres")]
            Source::Postgres(w) => Source::Postgres(w.clone()),
            Source::Polling => Source::Polling,
        })
    }
}

impl Wakeups {
    /// Wake-ups that only come from the clock.
    pub fn polling() -> Self {
        Wakeups(Source::Polling)
    }

    /// Wake-ups sent on `sender` in this process.
    pub fn local(sender: &broadcast::Sender<Arc<str>>) -> Self {
        Wakeups(Source::Local {
            sender: sender.clone(),
            seen: sender.subscribe(),
        })
    }

    /// The PostgreSQL queue's wake-ups.
    #[cfg(feature = "postgres")]
    pub fn postgres(w: stategraph_checkpoints::Wakeups) -> Self {
        Wakeups(Source::Postgres(w))
    }

    /// Whether notifications can come at all (else only the clock wakes).
    pub fn is_listening(&self) -> bool {
        match &self.0 {
            Source::Local { .. } => true,
            #[cfg(feature = "postgres")]
            Source::Postgres(w) => w.is_listening(),
            Source::Polling => false,
        }
    }

    /// Wait until the queue notifies about any run, or `at_most` passes; whether one came.
    pub async fn wait(&mut self, at_most: Duration) -> bool {
        self.wait_until(at_most, |_| true).await
    }

    /// Wait until the queue notifies about `run`, or `at_most` passes; whether one came.
    pub async fn wait_for_run(&mut self, run: &str, at_most: Duration) -> bool {
        self.wait_until(at_most, |named| named == run).await
    }

    /// Wait until a notification whose payload `wanted` accepts arrives (or so many came
    /// that some were dropped), or `at_most` passes; whether one came.
    pub async fn wait_until(&mut self, at_most: Duration, wanted: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + at_most;
        let seen = match &mut self.0 {
            Source::Local { seen, .. } => seen,
            #[cfg(feature = "postgres")]
            Source::Postgres(w) => return w.wait_until(at_most, wanted).await,
            Source::Polling => {
                tokio::time::sleep_until(deadline).await;
                return false;
            }
        };
        stategraph_checkpoints::queue::wait_for_notice(seen, deadline, wanted).await
    }
}
