//! Per-node options: retry, timeout, cache, error handler, deferral, spawning, declared
//! destinations.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{BoxError, State};

type RetryPredicate = Arc<dyn Fn(&BoxError) -> bool + Send + Sync>;

/// When and how often a failing node is retried within its step.
#[derive(Clone)]
pub struct RetryPolicy {
    /// Total attempts, the first included (at least 1).
    pub max_attempts: u32,
    /// Wait before the second attempt.
    pub initial_interval: Duration,
    /// Each further wait is the previous one times this factor.
    pub backoff_factor: f64,
    /// Upper bound on one wait.
    pub max_interval: Duration,
    /// Add up to 50% random jitter to each wait.
    pub jitter: bool,
    retry_on: Option<RetryPredicate>,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("initial_interval", &self.initial_interval)
            .field("backoff_factor", &self.backoff_factor)
            .field("max_interval", &self.max_interval)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_interval: Duration::from_millis(500),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(128),
            jitter: true,
            retry_on: None,
        }
    }
}

impl RetryPolicy {
    /// `max_attempts` attempts with the default backoff (0.5 s, ×2, jitter).
    pub fn attempts(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            ..Self::default()
        }
    }

    /// Set the first wait.
    pub fn initial_interval(mut self, d: Duration) -> Self {
        self.initial_interval = d;
        self
    }

    /// Turn jitter off or on.
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// Retry only errors for which `pred` is true (default: every error).
    pub fn retry_on(mut self, pred: impl Fn(&BoxError) -> bool + Send + Sync + 'static) -> Self {
        self.retry_on = Some(Arc::new(pred));
        self
    }

    pub(crate) fn should_retry(&self, attempt: u32, err: &BoxError) -> bool {
        attempt < self.max_attempts && self.retry_on.as_ref().is_none_or(|p| p(err))
    }

    pub(crate) fn wait(&self, attempt: u32) -> Duration {
        let factor = self.backoff_factor.powi(attempt.saturating_sub(1) as i32);
        let base = self.initial_interval.as_secs_f64() * factor;
        let capped = base.min(self.max_interval.as_secs_f64());
        let jittered = if self.jitter {
            capped * (1.0 + 0.5 * pseudo_random())
        } else {
            capped
        };
        Duration::try_from_secs_f64(jittered.max(0.0)).unwrap_or(self.max_interval)
    }
}

fn pseudo_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    (h.finish() % 10_000) as f64 / 10_000.0
}

/// Options of one node: retry, timeout, deferral, declared `goto` destinations.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) timeout: Option<crate::TimeoutPolicy>,
    pub(crate) error_handler: Option<crate::handler::ErasedHandler>,
    pub(crate) defer: bool,
    pub(crate) spawn: bool,
    pub(crate) destinations: Option<Vec<String>>,
    pub(crate) role: Option<String>,
    pub(crate) cache: Option<crate::cache::CachePolicy>,
    /// The node runs a workflow's subtasks ([`crate::func`]): their results are recorded as
    /// they finish.
    pub(crate) subtasks: bool,
}

impl NodeOptions {
    /// Default options: no retry, no timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retry failures with this policy.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Fail an attempt that runs longer than `d` with [`RunError::Timeout`](crate::RunError::Timeout) (the run limit
    /// of the node's [`TimeoutPolicy`](crate::TimeoutPolicy)).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(self.timeout.unwrap_or_default().with_run(d));
        self
    }

    /// Limit each attempt's run time and idle time (see [`TimeoutPolicy`](crate::TimeoutPolicy)).
    pub fn timeout_policy(mut self, policy: crate::TimeoutPolicy) -> Self {
        self.timeout = Some(policy).filter(crate::TimeoutPolicy::is_set);
        self
    }

    /// Hand the node's failures, after its retries, to `handler` (see
    /// [`ErrorHandler`](crate::ErrorHandler)).
    pub fn error_handler<S: State, H: crate::ErrorHandler<S>>(mut self, handler: H) -> Self {
        self.error_handler = Some(crate::handler::ErasedHandler::new(handler));
        self
    }

    /// Run only when no other node is left to run (for reduce steps after a fan-out of
    /// uneven depth).
    pub fn defer(mut self) -> Self {
        self.defer = true;
        self
    }

    /// Run each task of this node on its own tokio task, in parallel with the other tasks of
    /// the step (for CPU-heavy nodes). By default a step's tasks run concurrently on the
    /// run's own task, which is cheaper for the I/O-bound nodes of agent workflows.
    pub fn spawn(mut self) -> Self {
        self.spawn = true;
        self
    }

    /// The nodes this node may `goto` (used by `compile` for reachability and checked at run
    /// time).
    pub fn destinations<I: IntoIterator<Item = T>, T: Into<String>>(mut self, names: I) -> Self {
        self.destinations = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The part this node plays, for readers of the graph's stored shape (an inspector marks
    /// an agent's `model` and `tools` nodes); it changes nothing about how the node runs.
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }

    /// Cache this node's results by its input (see [`crate::cache`]).
    pub fn cache(mut self, policy: crate::cache::CachePolicy) -> Self {
        self.cache = Some(policy);
        self
    }
}
