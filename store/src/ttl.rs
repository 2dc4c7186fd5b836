//! Time to live: how long an item lasts, what a read does to it, and the clock both read.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::Timestamp;

/// What TTL a put gives its item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ttl {
    /// The store's [`TtlConfig::default_ttl`] (none when it has none).
    #[default]
    Default,
    /// The item never expires.
    Never,
    /// The item expires this long after its last put (or refreshing read).
    After(Duration),
}

/// A store's TTL settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlConfig {
    /// The TTL of a put that asks for [`Ttl::Default`]; `None`: such items never expire.
    pub default_ttl: Option<Duration>,
    /// Whether a get or search that asks for it restarts an item's TTL.
    pub refresh_on_read: bool,
}

impl Default for TtlConfig {
    fn default() -> Self {
        Self {
            default_ttl: None,
            refresh_on_read: true,
        }
    }
}

impl TtlConfig {
    /// The TTL a put of `ttl` gives its item.
    pub fn resolve(&self, ttl: Ttl) -> Option<Duration> {
        match ttl {
            Ttl::Default => self.default_ttl,
            Ttl::Never => None,
            Ttl::After(d) => Some(d),
        }
    }
}

/// Where a store reads the time: [`SystemClock`] in production, [`ManualClock`] in tests.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The time now.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told; clones share the time.
///
/// ```
/// use std::time::Duration;
/// use stategraph_store::{Clock, ManualClock, Timestamp};
/// let clock = ManualClock::at(Timestamp(1_000));
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), Timestamp(3_000));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock reading `at`.
    pub fn at(at: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(at.0)))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}
