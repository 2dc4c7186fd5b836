//! [`SqliteStore`]: the store in a SQLite file of its own or in a checkpoint file.
//!
//! Its tables are `sg_store_*`, beside a checkpoint file's `sg_*` ones, and the connection
//! has a checkpoint file's settings (WAL, a busy timeout, `synchronous=FULL` by default). A
//! handle has one connection; each batch is one transaction on it: `BEGIN IMMEDIATE` when it
//! writes, `BEGIN DEFERRED` when it only reads (so it waits for no writer; a read that finds
//! a TTL to restart runs again, writing). On a multi-threaded runtime a batch runs in
//! `block_in_place`, which hands the worker's other tasks to another thread; elsewhere on a
//! blocking thread. Either way no other task waits on SQLite, and a get costs no thread hop
//! (a hop to the blocking pool and back made a get eight times slower).
//!
//! A lone get ([`Store::get`]) that finds the handle free runs on the calling task instead:
//! one `SELECT` by the primary key, its own read transaction, with no `BEGIN`, no mirror to
//! sync and no hand-over of the worker, which together cost more than the read. It falls
//! back to a batch when another batch holds the handle or the item's TTL is to restart.
//!
//! Inside: `schema` the tables, their version and the connection; `sql` statements with bound
//! values and item rows; `filter` filters as SQL; `write` puts, deletes and the sweep; `read`
//! gets, searches by recency or full text, listings and the TTL refresh; `vectors` vector
//! search through the handle's mirror.

mod filter;
mod read;
mod schema;
mod sql;
mod vectors;
mod write;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;
use rusqlite::{Connection, TransactionBehavior};

pub use schema::{SqliteStoreOptions, Synchronous, SCHEMA_VERSION};

use crate::prepare::{prepare, Prepared};
use crate::{GetOp, Item, Namespace, Op, OpResult, Store, StoreConfig, StoreError, Timestamp};
use sql::db;
use vectors::Mirror;

/// A [`Store`] in a SQLite file: full-text search by FTS5 (bm25), vector search by a mirror
/// of the vectors in memory (decision 0086), filters in SQL.
///
/// Open it on a file of its own or on a checkpoint file (a
/// `SqliteSaver`'s, which may be open at the same time); several handles and processes may
/// share a file. Cloning shares the handle.
///
/// ```
/// use serde_json::json;
/// use stategraph_store::{Namespace, SearchOp, SqliteStore, Store, StoreConfig};
/// # let dir = tempfile::tempdir().unwrap();
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = SqliteStore::open(dir.path().join("memory.db"), StoreConfig::default())?;
/// let alice = Namespace::new(["users", "alice"])?;
/// store.put(&alice, "tea", json!({"text": "likes green tea"}).as_object().unwrap().clone()).await?;
/// let found = store.search(SearchOp::new(Namespace::new(["users"])?).query("tea")).await?;
/// assert_eq!(found[0].item.key, "tea");
/// assert!(found[0].score.unwrap() > 0.0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    config: StoreConfig,
    state: Mutex<Option<State>>,
}

#[derive(Debug)]
struct State {
    conn: Connection,
    mirror: Option<Mirror>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

/// One batch's transaction and what it may change.
struct Tx<'a> {
    conn: &'a Connection,
    config: &'a StoreConfig,
    now: Timestamp,
    mirror: Option<&'a mut Mirror>,
    /// Whether a vector row changed (the generation is counted up at commit).
    vectors_changed: bool,
    /// Whether the transaction only reads (begun `DEFERRED`).
    read_only: bool,
    /// Set when a read-only transaction found a TTL to restart: it must run again, writing.
    needs_write: Cell<bool>,
}

impl SqliteStore {
    /// Opens (or creates) the store in the file at `path` with default options.
    ///
    /// It does file work: call it at start-up or from a blocking context. The vectors are
    /// loaded by the first batch that needs them.
    ///
    /// # Errors
    /// [`StoreError::SchemaTooNew`] for a file whose store tables a newer build wrote;
    /// [`StoreError::Database`] when the file cannot be opened or is not a database.
    pub fn open(path: impl AsRef<Path>, config: StoreConfig) -> Result<Self, StoreError> {
        Self::open_with(path, config, SqliteStoreOptions::default())
    }

    /// Opens (or creates) the store in the file at `path`.
    ///
    /// With a semantic index, a search with a query ranks by vector similarity and returns
    /// each item's cosine:
    ///
    /// ```
    /// use std::sync::Arc;
    /// use serde_json::json;
    /// use stategraph_store::{
    ///     HashEmbedder, IndexConfig, Namespace, SearchOp, SqliteStore, SqliteStoreOptions,
    ///     Store, StoreConfig, Synchronous,
    /// };
    /// # let dir = tempfile::tempdir().unwrap();
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let index = IndexConfig::new(Arc::new(HashEmbedder::new(64))).fields(["text"]);
    /// let options = SqliteStoreOptions { synchronous: Synchronous::Normal, ..Default::default() };
    /// let store = SqliteStore::open_with(dir.path().join("m.db"), StoreConfig::default().index(index), options)?;
    /// let docs = Namespace::new(["docs"])?;
    /// store.put(&docs, "tea", json!({"text": "green tea"}).as_object().unwrap().clone()).await?;
    /// store.put(&docs, "boat", json!({"text": "a red boat"}).as_object().unwrap().clone()).await?;
    /// let found = store.search(SearchOp::new(docs).query("green tea")).await?;
    /// assert_eq!(found[0].item.key, "tea");
    /// assert!(found[0].score.unwrap() > found[1].score.unwrap());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn open_with(
        path: impl AsRef<Path>,
        config: StoreConfig,
        options: SqliteStoreOptions,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut conn = schema::connect(&path, &options)?;
        schema::init(&mut conn)?;
        let mirror = config.index.as_ref().map(|index| Mirror::new(index.dims));
        Ok(Self {
            shared: Arc::new(Shared {
                path,
                config,
                state: Mutex::new(Some(State { conn, mirror })),
            }),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Closes the connection; every later operation fails with [`StoreError::Closed`].
    pub fn close(&self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.take();
        }
    }

    /// Runs `work` on the connection: in `block_in_place` on a multi-threaded runtime, else on
    /// a blocking thread.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Shared, &mut State) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let shared = self.shared.clone();
        let run = move || {
            let mut guard = shared
                .state
                .lock()
                .map_err(|_| StoreError::Database("the store's lock was poisoned".to_owned()))?;
            let state = guard.as_mut().ok_or(StoreError::Closed)?;
            work(&shared, state)
        };
        if tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
        {
            return tokio::task::block_in_place(run);
        }
        tokio::task::spawn_blocking(run)
            .await
            .map_err(|e| StoreError::Database(format!("the store's blocking task failed: {e}")))?
    }
}

impl Shared {
    /// A get answered on the calling task, when the handle is free: one `SELECT` by the
    /// primary key, which SQLite runs as its own read transaction (a WAL reader waits for
    /// no writer), and no mirror to bring up to date, since a get reads no vector. `None`
    /// when another batch holds the handle, or when the item has a TTL to restart (a write):
    /// the get then runs as a batch.
    fn get_inline(&self, get: &GetOp) -> Option<Result<Option<Item>, StoreError>> {
        let mut guard = self.state.try_lock().ok()?;
        let Some(state) = guard.as_mut() else {
            return Some(Err(StoreError::Closed));
        };
        let cx = Tx {
            conn: &state.conn,
            config: &self.config,
            now: self.config.clock.now(),
            mirror: None,
            vectors_changed: false,
            read_only: true,
            needs_write: Cell::new(false),
        };
        let found = cx.get(get);
        (!cx.needs_write.get()).then_some(found)
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction; the mirror follows the commit (or
    /// is marked stale when the transaction fails).
    fn in_tx<T>(
        &self,
        state: &mut State,
        work: impl FnOnce(&mut Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.in_tx_as(state, TransactionBehavior::Immediate, work)
    }

    /// As [`in_tx`](Self::in_tx), begun as `behavior`: `Deferred` makes a read-only
    /// transaction, which takes no write lock.
    fn in_tx_as<T>(
        &self,
        state: &mut State,
        behavior: TransactionBehavior,
        work: impl FnOnce(&mut Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let tx = state
            .conn
            .transaction_with_behavior(behavior)
            .map_err(db("starting a batch"))?;
        let mut cx = Tx {
            conn: &tx,
            config: &self.config,
            now: self.config.clock.now(),
            mirror: state.mirror.as_mut(),
            vectors_changed: false,
            read_only: matches!(behavior, TransactionBehavior::Deferred),
            needs_write: Cell::new(false),
        };
        let result = cx.sync_mirror().and_then(|()| {
            let out = work(&mut cx)?;
            let generation = match cx.vectors_changed {
                true => Some(cx.bump_generation()?),
                false => None,
            };
            Ok((out, generation))
        });
        let committed = result.and_then(|(out, generation)| {
            tx.commit().map_err(db("committing a batch"))?;
            Ok((out, generation))
        });
        match (committed, state.mirror.as_mut()) {
            (Ok((out, generation)), mirror) => {
                if let (Some(g), Some(m)) = (generation, mirror) {
                    m.generation = Some(g);
                }
                Ok(out)
            }
            (Err(e), Some(m)) => {
                m.generation = None;
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    /// Runs a batch: one without a put first in a read-only transaction, which other
    /// handles' writers do not wait for; if a read in it has a TTL to restart, the batch runs
    /// again in a writing one.
    fn apply(&self, state: &mut State, prepared: Prepared) -> Result<Vec<OpResult>, StoreError> {
        if !prepared.ops.iter().any(|op| matches!(op, Op::Put(_))) {
            let reads = |cx: &mut Tx<'_>| {
                let out = cx.read_all(&prepared)?;
                Ok((!cx.needs_write.get()).then_some(out))
            };
            if let Some(out) = self.in_tx_as(state, TransactionBehavior::Deferred, reads)? {
                return Ok(out);
            }
        }
        self.in_tx(state, |cx| {
            let ops = prepared.ops.into_iter().zip(prepared.vectors);
            ops.map(|(op, vectors)| cx.apply(op, vectors)).collect()
        })
    }
}

impl Tx<'_> {
    fn apply(&mut self, op: Op, vectors: Vec<Vec<f32>>) -> Result<OpResult, StoreError> {
        match op {
            Op::Put(put) => {
                self.put(put, vectors)?;
                Ok(OpResult::Done)
            }
            read => self.read(&read, &vectors),
        }
    }

    fn read_all(&mut self, prepared: &Prepared) -> Result<Vec<OpResult>, StoreError> {
        let ops = prepared.ops.iter().zip(&prepared.vectors);
        ops.map(|(op, vectors)| self.read(op, vectors)).collect()
    }

    /// A get, search or listing (a put reads as done: `apply` writes it).
    fn read(&mut self, op: &Op, vectors: &[Vec<f32>]) -> Result<OpResult, StoreError> {
        Ok(match op {
            Op::Get(get) => OpResult::Item(self.get(get)?),
            Op::Put(_) => OpResult::Done,
            Op::Search(search) => OpResult::Items(match vectors.first() {
                Some(query) => self.search_vectors(search, query)?,
                None => self.search_rows(search)?,
            }),
            Op::ListNamespaces(list) => OpResult::Namespaces(self.list_namespaces(list)?),
        })
    }
}

impl Store for SqliteStore {
    fn batch(&self, ops: Vec<Op>) -> BoxFuture<'_, Result<Vec<OpResult>, StoreError>> {
        async move {
            let prepared = prepare(&self.shared.config, ops).await?;
            self.blocking(move |shared, state| shared.apply(state, prepared))
                .await
        }
        .boxed()
    }

    fn sweep(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        async move {
            self.blocking(|shared, state| shared.in_tx(state, |cx| cx.sweep()))
                .await
        }
        .boxed()
    }

    fn get<'a>(
        &'a self,
        namespace: &Namespace,
        key: &str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        let get = GetOp::new(namespace.clone(), key);
        if let Some(found) = self.shared.get_inline(&get) {
            return async move { found }.boxed();
        }
        async move { crate::store::get_in_batch(self, get).await }.boxed()
    }
}
