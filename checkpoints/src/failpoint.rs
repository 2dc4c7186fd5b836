//! Named crash points in the SQLite writer, for the failpoint crash matrix of the reliability
//! tests (reliability.md R-02).
//!
//! In debug builds, or with the `failpoints` feature, setting `STATEGRAPH_FAILPOINT=NAME@N`
//! makes the process abort (as a crash would: no unwinding, no destructors, no flush) the
//! `N`-th time it reaches the point `NAME` (`N` counts from 1; `NAME` alone means `NAME@1`).
//! Release builds without the feature compile every point to nothing.
//!
//! | point | where |
//! |---|---|
//! | `group.before_begin` | the writer took a group of operations, before `BEGIN IMMEDIATE` |
//! | `put.after_values` | a checkpoint's new values (blobs, list parts) are inserted, its row is not |
//! | `put.after_row` | a checkpoint's row is inserted, the transaction is still open |
//! | `group.before_commit` | every operation of the group ran, before `COMMIT` |
//! | `group.after_commit` | `COMMIT` returned, before anyone is told |
//! | `prune.after_delete` | a namespace's pruned checkpoints are deleted, the kept ones re-rooted; values not yet collected |
//! | `copy.after_checkpoints` | a copied thread's checkpoints are inserted, its pending writes are not |

/// Abort here if `STATEGRAPH_FAILPOINT` names this point and this is the hit it names.
#[cfg(any(debug_assertions, feature = "failpoints"))]
pub(crate) fn hit(name: &'static str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let target = TARGET.get_or_init(|| {
        let spec = std::env::var("STATEGRAPH_FAILPOINT").ok()?;
        match spec.split_once('@') {
            Some((point, n)) => Some((point.to_owned(), n.parse().ok()?)),
            None => Some((spec, 1)),
        }
    });
    if let Some((point, n)) = target {
        if point == name && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            std::process::abort();
        }
    }
}

/// Failpoints are compiled out of this build.
#[cfg(not(any(debug_assertions, feature = "failpoints")))]
#[inline(always)]
pub(crate) fn hit(_name: &'static str) {}
