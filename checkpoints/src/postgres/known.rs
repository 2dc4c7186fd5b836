//! What this saver last saw of each thread's head: its id, its distance from its base record
//! and its whole state as references. A hint, never trusted: a put that extends a known head
//! checks, in the statement that stores it, that the head is still that id (decision 0059).

use std::collections::HashMap;
use std::sync::Mutex;

use super::record::Base;
use crate::{CheckpointId, Namespace, ThreadId};

/// The most threads remembered at once.
const MAX_THREADS: usize = 1024;
/// The most part references remembered over all threads (about 40 bytes each).
const MAX_PARTS: usize = 1 << 18;

/// One thread's head as this saver last saw it.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    /// The head checkpoint.
    pub(crate) head: CheckpointId,
    /// How many records after its base record the head is (its `since_base`).
    pub(crate) since: i32,
    /// The head's whole state.
    pub(crate) state: Base,
}

impl Known {
    fn parts(&self) -> usize {
        self.state.values().map(Vec::len).sum()
    }
}

/// The known heads, bounded in threads and in part references.
#[derive(Debug, Default)]
pub(crate) struct KnownHeads {
    inner: Mutex<Heads>,
}

#[derive(Debug, Default)]
struct Heads {
    map: HashMap<(ThreadId, Namespace), Known>,
    parts: usize,
}

impl Heads {
    fn remove(&mut self, key: &(ThreadId, Namespace)) -> Option<Known> {
        let known = self.map.remove(key)?;
        self.parts -= known.parts();
        Some(known)
    }
}

impl KnownHeads {
    /// Take `(thread, ns)`'s entry out (a put that extends it puts it back when stored).
    pub(crate) fn take(&self, thread: &ThreadId, ns: &Namespace) -> Option<Known> {
        let mut heads = self.inner.lock().ok()?;
        heads.remove(&(thread.clone(), ns.clone()))
    }

    /// A copy of `(thread, ns)`'s remembered head.
    pub(crate) fn head(&self, thread: &ThreadId, ns: &Namespace) -> Option<Known> {
        let heads = self.inner.lock().ok()?;
        heads.map.get(&(thread.clone(), ns.clone())).cloned()
    }

    /// Remember `known` as `(thread, ns)`'s head, forgetting others while over the bounds.
    pub(crate) fn remember(&self, thread: &ThreadId, ns: &Namespace, known: Known) {
        let parts = known.parts();
        if parts > MAX_PARTS {
            return;
        }
        let Ok(mut heads) = self.inner.lock() else {
            return;
        };
        let key = (thread.clone(), ns.clone());
        heads.remove(&key);
        while heads.map.len() >= MAX_THREADS || heads.parts + parts > MAX_PARTS {
            let Some(victim) = heads.map.keys().next().cloned() else {
                break;
            };
            heads.remove(&victim);
        }
        heads.parts += parts;
        heads.map.insert(key, known);
    }

    /// Forget `(thread, ns)`'s head.
    pub(crate) fn forget(&self, thread: &ThreadId, ns: &Namespace) {
        drop(self.take(thread, ns));
    }

    /// Forget every namespace of `thread` (deleted).
    pub(crate) fn forget_thread(&self, thread: &ThreadId) {
        if let Ok(mut heads) = self.inner.lock() {
            let keys: Vec<_> = heads
                .map
                .keys()
                .filter(|k| &k.0 == thread)
                .cloned()
                .collect();
            for key in keys {
                heads.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CheckpointError;

    fn known(head: u128, parts: usize) -> Known {
        let part = super::super::record::PartRef {
            whole: false,
            hash: [1; 32],
        };
        let mut state = Base::new();
        state.insert("log".to_owned(), vec![part; parts]);
        Known {
            head: CheckpointId::from_u128(head),
            since: 0,
            state,
        }
    }

    #[test]
    fn remembered_heads_stay_within_their_bounds() -> Result<(), CheckpointError> {
        let heads = KnownHeads::default();
        let ns = Namespace::root();
        for i in 0..(MAX_THREADS + 10) {
            heads.remember(&ThreadId::new(format!("t{i}"))?, &ns, known(1, 1));
        }
        assert_eq!(
            heads.inner.lock().map(|h| h.map.len()).ok(),
            Some(MAX_THREADS)
        );
        heads.remember(&ThreadId::new("big")?, &ns, known(2, MAX_PARTS - 5));
        let parts = heads.inner.lock().map(|h| h.parts).ok();
        assert!(parts.is_some_and(|p| p <= MAX_PARTS), "{parts:?}");
        heads.remember(&ThreadId::new("huge")?, &ns, known(3, MAX_PARTS + 1));
        assert!(heads.take(&ThreadId::new("huge")?, &ns).is_none());
        let big = heads.take(&ThreadId::new("big")?, &ns);
        assert_eq!(big.map(|k| k.head), Some(CheckpointId::from_u128(2)));
        assert!(
            heads.take(&ThreadId::new("big")?, &ns).is_none(),
            "taken out"
        );
        Ok(())
    }
}
