//! What every conformance test shares: the backend handle, values, clocks.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{Map, Value};
use stategraph_store::{
    HashEmbedder, IndexConfig, ManualClock, MemoryStore, Namespace, Store, StoreConfig, Timestamp,
    TtlConfig,
};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type TestResult = Result<(), BoxError>;

/// A store a backend opened, with whatever must live as long as it (a temporary directory).
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub keep: Option<Box<dyn Any + Send + Sync>>,
}

impl Opened {
    /// A store that needs nothing kept alive.
    pub fn store(store: impl Store) -> Self {
        Self {
            store: Arc::new(store),
            keep: None,
        }
    }
}

/// Opens a fresh, empty store with a config; `Ok(None)`: this backend is unavailable here.
pub type OpenFn = fn(StoreConfig) -> BoxFuture<'static, Result<Option<Opened>, BoxError>>;

/// The backend a test runs on.
#[derive(Clone, Copy)]
pub struct Backend {
    open: OpenFn,
}

#[derive(Debug, thiserror::Error)]
#[error("backend unavailable")]
struct Skip;

/// A store under test, with the clock it reads.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    pub clock: ManualClock,
    _keep: Option<Box<dyn Any + Send + Sync>>,
}

impl std::ops::Deref for Fixture {
    type Target = dyn Store;
    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

/// The time every fixture's clock starts at.
pub const T0: Timestamp = Timestamp(1_700_000_000_000);

impl Backend {
    /// A store with `config` and a manual clock at [`T0`].
    pub async fn open(self, config: StoreConfig) -> Result<Fixture, BoxError> {
        let clock = ManualClock::at(T0);
        let config = config.clock(Arc::new(clock.clone()));
        match (self.open)(config).await? {
            Some(opened) => Ok(Fixture {
                store: opened.store,
                clock,
                _keep: opened.keep,
            }),
            None => Err(Box::new(Skip)),
        }
    }

    /// A store with the default config (no index, no default TTL).
    pub async fn plain(self) -> Result<Fixture, BoxError> {
        self.open(StoreConfig::default()).await
    }

    /// A store with TTL rules.
    pub async fn with_ttl(self, ttl: TtlConfig) -> Result<Fixture, BoxError> {
        self.open(StoreConfig::default().ttl(ttl)).await
    }

    /// A store with a 64-dimension [`HashEmbedder`] index over `fields`.
    pub async fn indexed(self, fields: &[&str]) -> Result<Fixture, BoxError> {
        let index = IndexConfig::new(Arc::new(HashEmbedder::new(64))).fields(fields.to_vec());
        self.open(StoreConfig::default().index(index)).await
    }
}

/// Runs one test on one backend; a backend that is unavailable here skips it.
pub async fn run<F, Fut>(open: OpenFn, test: F) -> TestResult
where
    F: FnOnce(Backend) -> Fut,
    Fut: Future<Output = TestResult>,
{
    match test(Backend { open }).await {
        Err(e) if e.is::<Skip>() => {
            eprintln!("skipped: backend unavailable");
            Ok(())
        }
        other => other,
    }
}

/// The reference backend.
pub fn open_memory(config: StoreConfig) -> BoxFuture<'static, Result<Option<Opened>, BoxError>> {
    async move { Ok(Some(Opened::store(MemoryStore::new(config)))) }.boxed()
}

/// A JSON object from `json!`.
pub fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A namespace from labels.
pub fn ns(labels: &[&str]) -> Namespace {
    Namespace::new(labels.iter().copied()).expect("valid namespace")
}

/// Seconds.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The keys of found items, in order.
pub fn keys(found: &[stategraph_store::SearchItem]) -> Vec<String> {
    found.iter().map(|f| f.item.key.clone()).collect()
}

/// The SQLite backend, on a file in a fresh temporary directory.
pub fn open_sqlite(config: StoreConfig) -> BoxFuture<'static, Result<Option<Opened>, BoxError>> {
    async move {
        let dir = tempfile::tempdir()?;
        let store = stategraph_store::SqliteStore::open(dir.path().join("store.db"), config)?;
        Ok(Some(Opened {
            store: Arc::new(store),
            keep: Some(Box::new(dir)),
        }))
    }
    .boxed()
}
