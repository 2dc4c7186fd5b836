//! Node timeouts: the [`TimeoutPolicy`] of a node's attempts (a wall-clock run limit and an
//! idle limit that the node's progress resets), the heartbeat that resets the idle clock, and
//! the watchdog that enforces both.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::NodeContext;

/// How long one attempt of a node may take.
///
/// `run_timeout` caps an attempt's wall-clock time and is never refreshed. `idle_timeout`
/// caps the time an attempt goes without progress: every [`NodeContext::heartbeat`], custom
/// event ([`NodeContext::emit`]) and message chunk ([`NodeContext::emit_message`],
/// [`NodeContext::forward_message`]) resets it, whether or not anyone listens to the stream.
/// An attempt that exceeds either fails with [`RunError::Timeout`](crate::RunError::Timeout)
/// (naming the limit and the time elapsed) and is retried like any other failure.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use stategraph::prelude::*;
/// use stategraph::TimeoutPolicy;
///
/// # #[derive(State, Clone, Default, Debug)]
/// # struct S { n: u32 }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let policy = TimeoutPolicy::run(Duration::from_secs(60)).idle(Duration::from_secs(5));
/// let graph = StateGraph::<S>::new()
///     .add_node_with(
///         "work",
///         |_s: Arc<S>, cx: NodeContext| async move {
///             for _ in 0..3 {
///                 cx.heartbeat(); // a long job says it is still alive
///             }
///             Ok::<_, BoxError>(S::update().n(1))
///         },
///         NodeOptions::new().timeout_policy(policy),
///     )
///     .add_edge(START, "work")
///     .add_edge("work", END)
///     .compile()?;
/// assert_eq!(graph.invoke(S::update(), &RunConfig::new()).await?.state.n, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeoutPolicy {
    /// The most one attempt may take in all.
    pub run_timeout: Option<Duration>,
    /// The most one attempt may go without a heartbeat.
    pub idle_timeout: Option<Duration>,
}

impl TimeoutPolicy {
    /// A run limit of `d` (what [`NodeOptions::timeout`](crate::NodeOptions::timeout) sets).
    pub fn run(d: Duration) -> Self {
        TimeoutPolicy {
            run_timeout: Some(d),
            idle_timeout: None,
        }
    }

    /// An idle limit of `d` (no run limit).
    pub fn idle_only(d: Duration) -> Self {
        TimeoutPolicy {
            run_timeout: None,
            idle_timeout: Some(d),
        }
    }

    /// This policy with an idle limit of `d`.
    pub fn idle(mut self, d: Duration) -> Self {
        self.idle_timeout = Some(d);
        self
    }

    /// This policy with a run limit of `d`.
    pub(crate) fn with_run(mut self, d: Duration) -> Self {
        self.run_timeout = Some(d);
        self
    }

    /// Whether the policy limits anything.
    pub(crate) fn is_set(&self) -> bool {
        self.run_timeout.is_some() || self.idle_timeout.is_some()
    }
}

/// Which limit of a [`TimeoutPolicy`] an attempt exceeded.
///
/// ```
/// use stategraph::TimeoutLimit;
/// assert_eq!(TimeoutLimit::Idle.to_string(), "idle");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimeoutLimit {
    /// The run limit: the attempt took too long in all.
    Run,
    /// The idle limit: the attempt went too long without progress.
    Idle,
}

impl fmt::Display for TimeoutLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutLimit::Run => "run",
            TimeoutLimit::Idle => "idle",
        })
    }
}

/// A timed-out attempt, as a [`RetryPolicy`](crate::RetryPolicy)'s `retry_on` predicate sees
/// it: downcast the error to tell a timeout from the node's own failures.
///
/// ```
/// use stategraph::{BoxError, RetryPolicy};
/// use stategraph::timeout::NodeTimeout;
///
/// // Retry timeouts only.
/// let policy = RetryPolicy::attempts(3).retry_on(|e: &BoxError| e.is::<NodeTimeout>());
/// # let _ = policy;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node:?} exceeded its {limit} timeout of {after:?} (elapsed: {elapsed:?})")]
#[non_exhaustive]
pub struct NodeTimeout {
    /// The node.
    pub node: String,
    /// Which limit fired.
    pub limit: TimeoutLimit,
    /// The limit's value.
    pub after: Duration,
    /// How long the attempt had run.
    pub elapsed: Duration,
}

/// A limit that fired: which, its value, and how long the attempt had run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fired {
    pub(crate) limit: TimeoutLimit,
    pub(crate) after: Duration,
    pub(crate) elapsed: Duration,
}

/// The idle clock of a task whose node has an idle limit: the time of its last progress,
/// in nanoseconds after `origin` (one atomic store per beat, no lock).
#[derive(Debug)]
pub(crate) struct Heartbeat {
    origin: Instant,
    last: AtomicU64,
}

impl Heartbeat {
    /// A clock that last beat now.
    pub(crate) fn new() -> Self {
        Heartbeat {
            origin: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Record progress now.
    pub(crate) fn beat(&self) {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.store(nanos, Ordering::Relaxed);
    }

    /// When progress was last recorded.
    fn last(&self) -> Instant {
        self.origin + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }
}

impl NodeContext {
    /// Tell the engine this task is making progress: it resets the idle clock of the node's
    /// [`TimeoutPolicy`] (never its run limit). A node whose work streams nothing (a long
    /// download, a poll loop) calls it as it goes; custom events and message chunks count
    /// on their own. Without an idle limit it does nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use stategraph::prelude::*;
    /// use stategraph::TimeoutPolicy;
    ///
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct S { polls: u32 }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node_with(
    ///         "poll",
    ///         |_s: Arc<S>, cx: NodeContext| async move {
    ///             for _ in 0..4 {
    ///                 tokio::time::sleep(Duration::from_millis(5)).await;
    ///                 cx.heartbeat();
    ///             }
    ///             Ok::<_, BoxError>(S::update().polls(4))
    ///         },
    ///         NodeOptions::new().timeout_policy(TimeoutPolicy::idle_only(Duration::from_secs(10))),
    ///     )
    ///     .add_edge(START, "poll")
    ///     .add_edge("poll", END)
    ///     .compile()?;
    /// assert_eq!(graph.invoke(S::update(), &RunConfig::new()).await?.state.polls, 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn heartbeat(&self) {
        if let Some(clock) = &self.inner.heartbeat {
            clock.beat();
        }
    }
}

/// Run `fut` under `policy`, the idle limit read from `clock` (reset as the attempt starts).
/// A limit that fires drops `fut` and says which it was.
pub(crate) async fn run_timed<F: Future>(
    fut: F,
    policy: &TimeoutPolicy,
    clock: Option<&Heartbeat>,
) -> Result<F::Output, Fired> {
    let start = Instant::now();
    if let Some(clock) = clock {
        clock.beat();
    }
    let fired = |limit, after| Fired {
        limit,
        after,
        elapsed: start.elapsed(),
    };
    let run_deadline = policy.run_timeout.map(|d| start + d);
    let idle = policy.idle_timeout.zip(clock);
    let watchdog = async {
        loop {
            let idle_deadline = idle.map(|(d, clock)| clock.last() + d);
            // The earlier of the two deadlines: which limit it is, and when.
            let next = match (run_deadline, idle_deadline) {
                (Some(r), Some(i)) if i < r => Some((TimeoutLimit::Idle, i)),
                (Some(r), _) => Some((TimeoutLimit::Run, r)),
                (None, Some(i)) => Some((TimeoutLimit::Idle, i)),
                (None, None) => None,
            };
            let Some((limit, at)) = next else {
                return std::future::pending::<Fired>().await;
            };
            tokio::time::sleep_until(at).await;
            match limit {
                TimeoutLimit::Idle => {
                    // A beat since the deadline was computed moves it: wait again.
                    if let Some((d, clock)) = idle {
                        if clock.last() + d <= Instant::now() {
                            return fired(TimeoutLimit::Idle, d);
                        }
                    }
                }
                TimeoutLimit::Run => {
                    return fired(TimeoutLimit::Run, policy.run_timeout.unwrap_or_default())
                }
            }
        }
    };
    tokio::select! {
        biased;
        out = fut => Ok(out),
        f = watchdog => Err(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_run_limit_fires_after_its_duration() {
        let policy = TimeoutPolicy::run(Duration::from_secs(2));
        let r = run_timed(tokio::time::sleep(Duration::from_secs(5)), &policy, None).await;
        assert_eq!(
            r,
            Err(Fired {
                limit: TimeoutLimit::Run,
                after: Duration::from_secs(2),
                elapsed: Duration::from_secs(2),
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn beats_keep_an_idle_attempt_alive_until_they_stop() {
        let clock = Heartbeat::new();
        let policy = TimeoutPolicy::idle_only(Duration::from_secs(3));
        let work = async {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_secs(2)).await;
                clock.beat();
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
        };
        let r = run_timed(work, &policy, Some(&clock)).await;
        // Five beats two seconds apart, then silence: the idle limit fires 3 s after the last.
        assert_eq!(
            r,
            Err(Fired {
                limit: TimeoutLimit::Idle,
                after: Duration::from_secs(3),
                elapsed: Duration::from_secs(13),
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_finishes_in_time_returns_its_output() {
        let policy = TimeoutPolicy::run(Duration::from_secs(2)).idle(Duration::from_secs(1));
        let clock = Heartbeat::new();
        let r = run_timed(async { 7 }, &policy, Some(&clock)).await;
        assert_eq!(r, Ok(7));
    }
}
