//! Locks that stay usable after a panic: [`Unpoisoned`].
//!
//! A `std` lock is *poisoned* when a thread panics while holding it. Every lock in these
//! crates guards data that a panic cannot leave half-written (a cache, a queue, a recorded
//! list), so they all take the guard anyway; this trait is the one place that says so.

use std::sync::{LockResult, PoisonError};

/// The value of a lock operation even if the lock is poisoned.
///
/// ```
/// use std::sync::Mutex;
/// use stategraph_checkpoints::sync::Unpoisoned;
///
/// let m = Mutex::new(1);
/// let _ = std::panic::catch_unwind(|| {
///     let _guard = m.lock();
///     panic!("while holding the lock");
/// });
/// assert!(m.is_poisoned());
/// assert_eq!(*m.lock().unpoisoned(), 1);
/// ```
pub trait Unpoisoned<G> {
    /// The guard (or value), whether or not another thread panicked while holding the lock.
    fn unpoisoned(self) -> G;
}

impl<G> Unpoisoned<G> for LockResult<G> {
    fn unpoisoned(self) -> G {
        self.unwrap_or_else(PoisonError::into_inner)
    }
}
