//! The contract every backend keeps.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{Map, Value};

use crate::{
    Clock, GetOp, IndexConfig, Item, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchItem,
    SearchOp, StoreError, SystemClock, TtlConfig,
};

/// What a backend is opened with: its semantic index, its TTL rules and its clock.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Embed items and rank searches by vector similarity; `None`: full-text rank.
    pub index: Option<IndexConfig>,
    /// TTL rules.
    pub ttl: TtlConfig,
    /// Where the store reads the time.
    pub clock: Arc<dyn Clock>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            index: None,
            ttl: TtlConfig::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

impl StoreConfig {
    /// With a semantic index.
    pub fn index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// With these TTL rules.
    pub fn ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Reading time from `clock`.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// A long-term store: JSON items under namespaces, shared by every thread.
///
/// - [`batch`](Store::batch) applies its operations in order, atomically: a read sees the
///   batch's earlier writes, and a failed batch applies nothing.
/// - An expired item is gone for every read at once; [`sweep`](Store::sweep) deletes it.
/// - The other methods are one-operation batches.
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Applies `ops` in order, in one transaction, and returns one result per op.
    fn batch(&self, ops: Vec<Op>) -> BoxFuture<'_, Result<Vec<OpResult>, StoreError>>;

    /// Deletes every expired item and returns how many.
    fn sweep(&self) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// The item at `namespace`/`key`, refreshing its TTL when the store refreshes on read.
    fn get<'a>(
        &'a self,
        namespace: &Namespace,
        key: &str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        let op = GetOp::new(namespace.clone(), key);
        async move { get_in_batch(self, op).await }.boxed()
    }

    /// Puts `value` at `namespace`/`key`, indexed by default, with the default TTL.
    fn put<'a>(
        &'a self,
        namespace: &Namespace,
        key: &str,
        value: Map<String, Value>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let op = Op::Put(PutOp::new(namespace.clone(), key, value));
        async move { one(self.batch(vec![op]).await?).map(drop) }.boxed()
    }

    /// Deletes the item at `namespace`/`key` (nothing if there is none).
    fn delete<'a>(
        &'a self,
        namespace: &Namespace,
        key: &str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let op = Op::Put(PutOp::delete(namespace.clone(), key));
        async move { one(self.batch(vec![op]).await?).map(drop) }.boxed()
    }

    /// Runs one search.
    fn search(&self, op: SearchOp) -> BoxFuture<'_, Result<Vec<SearchItem>, StoreError>> {
        async move {
            match one(self.batch(vec![Op::Search(op)]).await?)? {
                OpResult::Items(items) => Ok(items),
                other => Err(mismatch("search", &other)),
            }
        }
        .boxed()
    }

    /// Runs one namespace listing.
    fn list_namespaces(
        &self,
        op: ListNamespacesOp,
    ) -> BoxFuture<'_, Result<Vec<Namespace>, StoreError>> {
        async move {
            match one(self.batch(vec![Op::ListNamespaces(op)]).await?)? {
                OpResult::Namespaces(list) => Ok(list),
                other => Err(mismatch("list_namespaces", &other)),
            }
        }
        .boxed()
    }
}

/// A get run as a batch of one: what [`Store::get`] does unless a store answers it faster.
pub(crate) async fn get_in_batch<S: Store + ?Sized>(
    store: &S,
    op: GetOp,
) -> Result<Option<Item>, StoreError> {
    match one(store.batch(vec![Op::Get(op)]).await?)? {
        OpResult::Item(item) => Ok(item),
        other => Err(mismatch("get", &other)),
    }
}

fn one(results: Vec<OpResult>) -> Result<OpResult, StoreError> {
    results
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::Database("a one-operation batch returned nothing".to_owned()))
}

fn mismatch(op: &str, got: &OpResult) -> StoreError {
    StoreError::Database(format!("{op} returned {got:?}"))
}

/// Deletes expired items every `every` until the returned handle is dropped.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use stategraph_store::{spawn_sweeper, MemoryStore, Store};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
/// let sweeper = spawn_sweeper(store, Duration::from_secs(60));
/// drop(sweeper); // stops it
/// # });
/// ```
pub fn spawn_sweeper(store: Arc<dyn Store>, every: Duration) -> Sweeper {
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // A failed sweep is tried again at the next tick; expired items are
            // already invisible to reads.
            let _ = store.sweep().await;
        }
    });
    Sweeper(task)
}

/// A running sweeper; dropping it stops the sweeps.
#[derive(Debug)]
pub struct Sweeper(tokio::task::JoinHandle<()>);

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}
