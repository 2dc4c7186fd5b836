//! A run's heartbeat: a task that extends the lease every interval (and at once when the
//! queue notifies), and stops the run (its caller says how: at its next step boundary) when
//! the lease is lost or a stop is asked.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::{CheckpointError, Lease, RunQueue, StopRequest, Wakeups};

/// What the heartbeat saw by the time it was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// The lease held and no stop was asked.
    Held,
    /// A stop was asked of the run.
    Stop(StopRequest),
    /// The lease was lost.
    Lost,
}

/// A running heartbeat: whoever runs a leased run keeps its lease with it (the engine's
/// workers, an Agent Server's).
#[derive(Debug)]
pub struct Heartbeat {
    task: JoinHandle<()>,
    /// What the task saw, once it saw a stop or a lost lease.
    seen: Arc<Mutex<Option<Beat>>>,
}

impl Heartbeat {
    /// Start beating `lease` every `every` (and when `wakeups` names its run), extending it
    /// by `lease_for`; `stop` is called once when the lease is lost or a stop is asked (to
    /// cancel the run).
    pub fn start(
        queue: Arc<dyn RunQueue>,
        lease: Lease,
        lease_for: Duration,
        every: Duration,
        mut wakeups: Wakeups,
        stop: impl FnOnce() + Send + 'static,
    ) -> Self {
        let seen = Arc::new(Mutex::new(None));
        let seen_by_task = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                // A notification naming the run (a stop asked of it) beats at once.
                wakeups.wait_for_run(lease.run.as_str(), every).await;
                let beat = match queue.heartbeat(&lease, lease_for).await {
                    Ok(None) => continue,
                    Ok(Some(stop)) => Beat::Stop(stop),
                    Err(CheckpointError::LeaseLost { .. }) => Beat::Lost,
                    // The database is unreachable for now: try again at the next beat; the
                    // fence keeps the run's writes safe if the lease runs out meanwhile.
                    Err(_) => continue,
                };
                *seen_by_task.lock().unwrap_or_else(PoisonError::into_inner) = Some(beat);
                stop();
                return;
            }
        });
        Heartbeat { task, seen }
    }

    /// Stop beating; what it saw. It does not wait for a beat in flight: a lease lost
    /// meanwhile shows when the run's end is refused under it.
    pub async fn stop(self) -> Beat {
        self.task.abort();
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or(Beat::Held)
    }
}
