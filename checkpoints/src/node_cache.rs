//! The node cache's storage: the [`NodeCache`] trait a cache backend implements, its
//! [`CacheKey`] and [`CacheEntry`], and [`MemoryCache`], the in-process backend.
//!
//! A cached node's task stores its writes (the JSON form pending writes use) under a key the
//! engine derives from the task's input; a later task with the same key takes them instead
//! of running. The backends know nothing of nodes: they keep JSON values by namespace and
//! key, each with an optional expiry time. [`SqliteSaver`](crate::SqliteSaver) keeps them in
//! a table of its file and `PostgresSaver` in a table of its schema.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::future::BoxFuture;

use crate::sync::Unpoisoned;
use crate::CheckpointError;

/// Where a cache entry lives: a namespace (one per cached node) and a key (a digest of the
/// task's input, hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey {
    /// The namespace: [`clear_cached`](NodeCache::clear_cached) drops whole namespaces.
    pub ns: String,
    /// The key within the namespace.
    pub key: String,
}

/// A value to store in a cache.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheEntry {
    /// Where it goes (an entry already there is replaced).
    pub key: CacheKey,
    /// The value.
    pub value: serde_json::Value,
    /// When it expires, in milliseconds since the Unix epoch (`None`: never).
    pub expires_at_ms: Option<i64>,
}

/// A store for cached node writes.
///
/// The engine passes the time to every read, so that a backend never reads a clock itself
/// and tests move time by hand. An entry is live while `now_ms < expires_at_ms`.
///
/// ```
/// use stategraph_checkpoints::node_cache::{CacheEntry, CacheKey, MemoryCache, NodeCache};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let cache = MemoryCache::new();
/// let key = CacheKey { ns: "graph/double".into(), key: "ab12".into() };
/// let value = serde_json::json!({"updates": [{"n": 2}], "goto": []});
/// cache.put_cached(vec![CacheEntry { key: key.clone(), value: value.clone(), expires_at_ms: Some(2_000) }]).await?;
/// assert_eq!(cache.get_cached(&[key.clone()], 1_000).await?, [Some(value)]);
/// assert_eq!(cache.get_cached(&[key], 2_000).await?, [None]);
/// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
/// # }).unwrap();
/// ```
pub trait NodeCache: Send + Sync + 'static {
    /// The live value under each of `keys` at time `now_ms` (in the order of `keys`).
    ///
    /// # Errors
    /// Storage errors.
    fn get_cached<'a>(
        &'a self,
        keys: &'a [CacheKey],
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<Option<serde_json::Value>>, CheckpointError>>;

    /// Store `entries`, each replacing what its key held.
    ///
    /// # Errors
    /// Storage errors (a read-only file: [`CheckpointError::ReadOnly`]).
    fn put_cached(&self, entries: Vec<CacheEntry>) -> BoxFuture<'_, Result<(), CheckpointError>>;

    /// Drop every entry of each namespace in `namespaces`; returns how many were dropped.
    ///
    /// # Errors
    /// Storage errors.
    fn clear_cached<'a>(
        &'a self,
        namespaces: &'a [String],
    ) -> BoxFuture<'a, Result<usize, CheckpointError>>;
}

/// A stored value and its expiry.
type Slot = (serde_json::Value, Option<i64>);

/// An in-process [`NodeCache`]: entries live as long as the value (clone an `Arc` of it to
/// share it between graphs).
#[derive(Debug, Default)]
pub struct MemoryCache {
    namespaces: Mutex<HashMap<String, HashMap<String, Slot>>>,
}

impl MemoryCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many entries it holds (expired ones included until read or replaced).
    pub fn len(&self) -> usize {
        self.namespaces
            .lock()
            .unpoisoned()
            .values()
            .map(HashMap::len)
            .sum()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a value expiring at `expires` is live at `now`.
pub(crate) fn live(expires: Option<i64>, now_ms: i64) -> bool {
    expires.is_none_or(|at| now_ms < at)
}

impl NodeCache for MemoryCache {
    fn get_cached<'a>(
        &'a self,
        keys: &'a [CacheKey],
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<Option<serde_json::Value>>, CheckpointError>> {
        let mut map = self.namespaces.lock().unpoisoned();
        let found = keys
            .iter()
            .map(|k| {
                let ns = map.get_mut(&k.ns)?;
                match ns.get(&k.key) {
                    Some((value, expires)) if live(*expires, now_ms) => Some(value.clone()),
                    Some(_) => {
                        ns.remove(&k.key);
                        None
                    }
                    None => None,
                }
            })
            .collect();
        Box::pin(futures::future::ready(Ok(found)))
    }

    fn put_cached(&self, entries: Vec<CacheEntry>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        let mut map = self.namespaces.lock().unpoisoned();
        for e in entries {
            map.entry(e.key.ns)
                .or_default()
                .insert(e.key.key, (e.value, e.expires_at_ms));
        }
        Box::pin(futures::future::ready(Ok(())))
    }

    fn clear_cached<'a>(
        &'a self,
        namespaces: &'a [String],
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        let mut map = self.namespaces.lock().unpoisoned();
        let dropped = namespaces
            .iter()
            .filter_map(|ns| map.remove(ns))
            .map(|entries| entries.len())
            .sum();
        Box::pin(futures::future::ready(Ok(dropped)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, k: &str) -> CacheKey {
        CacheKey {
            ns: ns.to_owned(),
            key: k.to_owned(),
        }
    }

    #[tokio::test]
    async fn memory_cache_expires_and_clears_by_namespace() -> Result<(), CheckpointError> {
        let cache = MemoryCache::new();
        let v = serde_json::json!(1);
        cache
            .put_cached(vec![
                CacheEntry {
                    key: key("a", "1"),
                    value: v.clone(),
                    expires_at_ms: Some(10),
                },
                CacheEntry {
                    key: key("b", "1"),
                    value: v.clone(),
                    expires_at_ms: None,
                },
            ])
            .await?;
        let keys = [key("a", "1"), key("b", "1"), key("c", "1")];
        assert_eq!(
            cache.get_cached(&keys, 9).await?,
            [Some(v.clone()), Some(v.clone()), None]
        );
        assert_eq!(
            cache.get_cached(&keys, 10).await?,
            [None, Some(v.clone()), None]
        );
        assert_eq!(cache.clear_cached(&["b".to_owned()]).await?, 1);
        assert!(cache.is_empty());
        Ok(())
    }
}
