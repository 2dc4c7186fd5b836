//! The in-memory backend: the reference for every rule the store keeps.
//!
//! `items` holds the tables (entries by namespace and key, a newest-first order, the
//! vectors in one contiguous mirror); `search` reads pages off them.

mod items;
mod search;

use std::sync::{PoisonError, RwLock};

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{Map, Value};

use crate::prepare::{prepare, prepare_one, Prepared};
use crate::{
    check_key, Item, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchItem, Store,
    StoreConfig, StoreError, Timestamp,
};
use items::{Entry, Items, NewValue};

/// Items in memory behind a lock; gone when the process ends.
///
/// Reads share the lock; a batch with a put, or a read that restarts a TTL, takes it alone.
/// A search without a query walks the items newest first and stops at its page; a vector
/// search scans one contiguous matrix with SIMD (decision 0086).
///
/// ```
/// use serde_json::json;
/// use stategraph_store::{MemoryStore, Namespace, SearchOp, Store};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = MemoryStore::default();
/// let ns = Namespace::new(["users", "u-1"])?;
/// store.put(&ns, "tea", json!({"text": "likes green tea"}).as_object().unwrap().clone()).await?;
/// let found = store.search(SearchOp::new(Namespace::new(["users"])?).query("tea")).await?;
/// assert_eq!(found[0].item.key, "tea");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    config: StoreConfig,
    items: RwLock<Items>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(StoreConfig::default())
    }
}

impl MemoryStore {
    /// An empty store with these settings.
    pub fn new(config: StoreConfig) -> Self {
        let dims = config.index.as_ref().map(|index| index.dims);
        Self {
            config,
            items: RwLock::new(Items::new(dims)),
        }
    }

    /// Runs a checked batch under one lock: shared when it only reads and restarts no TTL.
    fn apply(&self, prepared: Prepared) -> Result<Vec<OpResult>, StoreError> {
        let now = self.config.clock.now();
        if !self.may_write(&prepared.ops) {
            let items = self.items.read().map_err(poisoned)?;
            if items.with_ttl == 0 || !self.refreshes(&prepared.ops) {
                return Ok(prepared
                    .ops
                    .iter()
                    .zip(&prepared.vectors)
                    .map(|(op, vectors)| read(&items, op, vectors, now))
                    .collect());
            }
        }
        let mut items = self.items.write().map_err(poisoned)?;
        // `prepare` checked every vector's length, so no put below can fail half-way.
        let mut results = Vec::with_capacity(prepared.ops.len());
        for (op, vectors) in prepared.ops.into_iter().zip(prepared.vectors) {
            results.push(self.write(&mut items, op, &vectors, now)?);
        }
        Ok(results)
    }

    fn may_write(&self, ops: &[Op]) -> bool {
        ops.iter().any(|op| matches!(op, Op::Put(_)))
    }

    /// Whether a read of the batch restarts TTLs.
    fn refreshes(&self, ops: &[Op]) -> bool {
        self.config.ttl.refresh_on_read
            && ops.iter().any(|op| match op {
                Op::Get(get) => get.refresh_ttl,
                Op::Search(search) => search.refresh_ttl,
                _ => false,
            })
    }

    /// One op under the write lock.
    fn write(
        &self,
        items: &mut Items,
        op: Op,
        vectors: &[Vec<f32>],
        now: Timestamp,
    ) -> Result<OpResult, StoreError> {
        let refresh = self.config.ttl.refresh_on_read;
        Ok(match op {
            Op::Put(put) => {
                match put.value {
                    Some(value) => {
                        let ttl = self.config.ttl.resolve(put.ttl);
                        let new = NewValue {
                            value,
                            vectors,
                            ttl,
                        };
                        items.put(put.namespace, put.key, new, now)?;
                    }
                    None => items.delete(&put.namespace, &put.key),
                }
                OpResult::Done
            }
            Op::Get(get) => OpResult::Item(get_refreshing(
                items,
                &get.namespace,
                &get.key,
                refresh && get.refresh_ttl,
                now,
            )),
            Op::Search(search) => {
                let page = search::search(items, &search, vectors.first().map(Vec::as_slice), now);
                if refresh && search.refresh_ttl {
                    for (slot, _) in &page {
                        items.refresh(*slot, now);
                    }
                }
                OpResult::Items(page_items(items, page))
            }
            Op::ListNamespaces(list) => OpResult::Namespaces(list_namespaces(items, &list, now)),
        })
    }

    /// A get outside a batch: under the shared lock, unless it restarts a TTL.
    fn get_now(&self, namespace: &Namespace, key: &str) -> Result<Option<Item>, StoreError> {
        namespace.for_item()?;
        check_key(key)?;
        let refresh = self.config.ttl.refresh_on_read;
        {
            let items = self.items.read().map_err(poisoned)?;
            // Without a TTL no entry expires: the clock is not read.
            if items.with_ttl == 0 {
                let found = items
                    .find(namespace, key)
                    .and_then(|slot| items.entry(slot));
                return Ok(found.map(Entry::item));
            }
            if !refresh {
                let now = self.config.clock.now();
                return Ok(items.live(namespace, key, now).map(Entry::item));
            }
        }
        let now = self.config.clock.now();
        let mut items = self.items.write().map_err(poisoned)?;
        Ok(get_refreshing(&mut items, namespace, key, refresh, now))
    }

    /// A put or delete outside a batch: the batch's checks and writes, without its lists.
    async fn put_one(&self, put: PutOp) -> Result<(), StoreError> {
        let op = Op::Put(put);
        let vectors = prepare_one(&self.config, &op).await?;
        let now = self.config.clock.now();
        let mut items = self.items.write().map_err(poisoned)?;
        self.write(&mut items, op, &vectors, now).map(drop)
    }

    fn sweep_now(&self) -> Result<u64, StoreError> {
        let now = self.config.clock.now();
        Ok(self.items.write().map_err(poisoned)?.sweep(now))
    }
}

/// The live item at `namespace`/`key`, its TTL restarted first when `refresh`.
fn get_refreshing(
    items: &mut Items,
    namespace: &Namespace,
    key: &str,
    refresh: bool,
    now: Timestamp,
) -> Option<Item> {
    let slot = items.live(namespace, key, now)?.owner.slot();
    if refresh {
        items.refresh(slot, now);
    }
    items.entry(slot).map(Entry::item)
}

/// One read op under the shared lock.
fn read(items: &Items, op: &Op, vectors: &[Vec<f32>], now: Timestamp) -> OpResult {
    match op {
        Op::Get(get) => OpResult::Item(items.live(&get.namespace, &get.key, now).map(Entry::item)),
        Op::Search(search) => {
            let page = search::search(items, search, vectors.first().map(Vec::as_slice), now);
            OpResult::Items(page_items(items, page))
        }
        Op::ListNamespaces(list) => OpResult::Namespaces(list_namespaces(items, list, now)),
        // `apply` sends a batch with a put to `write`.
        Op::Put(_) => OpResult::Done,
    }
}

/// The page's items, built for the page only.
fn page_items(items: &Items, page: search::Page) -> Vec<SearchItem> {
    page.into_iter()
        .filter_map(|(slot, score)| {
            Some(SearchItem {
                item: items.entry(slot)?.item(),
                score: score.map(f64::from),
            })
        })
        .collect()
}

fn list_namespaces(items: &Items, op: &ListNamespacesOp, now: Timestamp) -> Vec<Namespace> {
    let live = items
        .tree
        .iter()
        .filter(|(_, at)| {
            items.space(**at).is_some_and(|space| {
                space
                    .slots()
                    .any(|slot| items.entry(slot).is_some_and(|e| e.live(now)))
            })
        })
        .map(|(ns, _)| ns.clone());
    op.select(live)
}

fn poisoned<T>(_: PoisonError<T>) -> StoreError {
    StoreError::Database("the store's lock was poisoned".to_owned())
}

impl Store for MemoryStore {
    fn batch(&self, ops: Vec<Op>) -> BoxFuture<'_, Result<Vec<OpResult>, StoreError>> {
        async move {
            let prepared = prepare(&self.config, ops).await?;
            self.apply(prepared)
        }
        .boxed()
    }

    fn get<'a>(
        &'a self,
        namespace: &Namespace,
        key: &str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        let found = self.get_now(namespace, key);
        async move { found }.boxed()
    }

    fn put<'a>(
        &'a self,
        namespace: &Namespace,
        key: &str,
        value: Map<String, Value>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.put_one(PutOp::new(namespace.clone(), key, value))
            .boxed()
    }

    fn delete<'a>(
        &'a self,
        namespace: &Namespace,
        key: &str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.put_one(PutOp::delete(namespace.clone(), key)).boxed()
    }

    fn sweep(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        let swept = self.sweep_now();
        async move { swept }.boxed()
    }
}
