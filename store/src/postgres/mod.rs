//! [`PostgresStore`]: the store in a PostgreSQL database, in the schema and through the
//! connection pool of a [`PostgresSaver`] (crate feature `postgres`).
//!
//! Its tables sit beside the saver's: `<schema>.sg_store_items` (one row per item: the
//! value as `jsonb`, its `simple` tsvector, its times and TTL), `sg_store_vectors` (an
//! item's vectors as `real[]`), `sg_store_vector_log` (which items each generation of the
//! vectors changed) and `sg_store_meta` (the schema version, the index's dimensions, the
//! vectors' generation). A batch is one transaction. A batch of only puts and deletes goes
//! to the server whole, `BEGIN` to `COMMIT`, in one round trip; in a batch that also reads,
//! the statements of a run of puts (with the batch's locks) go together; a batch of one
//! get is its one statement, without a transaction, and so is a batch of one put with a
//! value into a store without an index: a call of the schema's put function, which writes
//! an item without vectors and leaves one with vectors to a batch (`alone`). Filters become
//! `jsonb` conditions with every value bound, namespaces are `.`-joined keys compared by
//! bytes so a prefix is a key range, full-text search is `ts_rank` over an OR of the
//! query's words. Vectors are ranked by pgvector when the server has it, otherwise exactly
//! in this process over a mirror of the vectors table (decision 0088).
//!
//! Inside: `schema` the tables; `sql` statements and filters; `rows` reading rows; `alone`
//! a batch of one get, search without a query or put run without a transaction;
//! `locks` the order a batch locks in; `batch` a batch's operations; `pipeline` a batch of
//! only writes in one round trip; `writes` a put's and a delete's statements; `vectors` the
//! vector backends; `mirror` the fallback's in-memory vectors.

mod alone;
mod batch;
mod locks;
mod mirror;
mod pipeline;
mod rows;
mod schema;
mod sql;
mod vectors;
mod writes;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use tokio_postgres::types::Type;
use tokio_postgres::Client;

use crate::prepare::{prepare, Prepared};
use crate::{Op, OpResult, PutOp, SearchOp, Store, StoreConfig, StoreError};
use alone::Alone;
use batch::Batch;
use schema::named;
pub use schema::POSTGRES_SCHEMA_VERSION;
use sql::db;
pub use vectors::VectorBackend;
use vectors::Vectors;

/// A [`Store`] in PostgreSQL: shared by every process that opens the same schema. Cloning
/// shares the pool and the vector mirror.
///
/// ```
/// use serde_json::json;
/// use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
/// use stategraph_store::{Namespace, PostgresStore, Store, StoreConfig};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // A server started by `.ci/postgres.sh`; without one this example does nothing.
/// let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else { return Ok(()) };
/// let options = PostgresOptions { schema: "doc_store".to_owned(), ..Default::default() };
/// let saver = PostgresSaver::connect_with(&url, options).await?;
/// let store = PostgresStore::from_saver(&saver, StoreConfig::default()).await?;
/// let ns = Namespace::new(["users", "u-1"])?;
/// store.put(&ns, "tea", json!({"text": "likes green tea"}).as_object().unwrap().clone()).await?;
/// assert!(store.get(&ns, "tea").await?.is_some());
/// saver.drop_schema().await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    saver: PostgresSaver,
    config: StoreConfig,
    vectors: Vectors,
}

impl PostgresStore {
    /// The store in `saver`'s schema, through its pool, creating its tables if missing;
    /// vectors by [`VectorBackend::Auto`].
    ///
    /// # Errors
    /// [`StoreError::SchemaTooNew`] for tables of a newer schema version; [`StoreError::Invalid`]
    /// for an index whose dimensions differ from the vectors the schema holds; database
    /// errors.
    pub async fn from_saver(
        saver: &PostgresSaver,
        config: StoreConfig,
    ) -> Result<Self, StoreError> {
        Self::from_saver_with(saver, config, VectorBackend::Auto).await
    }

    /// As [`PostgresStore::from_saver`], ranking vectors by `vectors`.
    ///
    /// # Errors
    /// As [`PostgresStore::from_saver`]; [`StoreError::Invalid`] naming the vector
    /// backend when [`VectorBackend::PgVector`] is asked and the server lacks pgvector.
    pub async fn from_saver_with(
        saver: &PostgresSaver,
        config: StoreConfig,
        vectors: VectorBackend,
    ) -> Result<Self, StoreError> {
        let mut pooled = connection(saver).await?;
        let client: &mut Client = &mut pooled;
        schema::init(client, saver.schema()).await?;
        let vectors = match &config.index {
            None => Vectors::Off,
            Some(index) => {
                check_dims(client, saver.schema(), index.dims).await?;
                vectors::resolve(client, vectors, index.dims).await?
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                saver: saver.clone(),
                config,
                vectors,
            }),
        })
    }

    /// Opens a [`PostgresSaver`] at `url` with `options` (its schema, pool and TLS; it
    /// creates the saver's tables too) and the store in it.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the saver cannot be opened; as
    /// [`PostgresStore::from_saver`].
    pub async fn connect(
        url: &str,
        options: PostgresOptions,
        config: StoreConfig,
    ) -> Result<Self, StoreError> {
        let saver = PostgresSaver::connect_with(url, options)
            .await
            .map_err(|e| StoreError::Database(format!("opening the database: {e}")))?;
        Self::from_saver(&saver, config).await
    }

    /// The saver whose pool and schema the store uses.
    pub fn saver(&self) -> &PostgresSaver {
        &self.inner.saver
    }

    /// How the store ranks by vector; `None` when it has no index.
    pub fn vector_backend(&self) -> Option<VectorBackend> {
        match self.inner.vectors {
            Vectors::Off => None,
            ref v => Some(v.backend()),
        }
    }

    /// Runs the batch, again when the server rolled it back to break a deadlock (a read's
    /// TTL restart too may meet a batch's writes in a cycle).
    async fn run(&self, prepared: &Prepared) -> Result<Vec<OpResult>, StoreError> {
        let mut attempt = 0;
        loop {
            let done = match self.run_alone(prepared).await {
                Ok(Some(out)) => Ok(out),
                Ok(None) => self.run_once(prepared).await,
                Err(e) => Err(e),
            };
            match done {
                Err(e) if locks::retryable(&e) && attempt < RETRIES => attempt += 1,
                done => return done,
            }
        }
    }

    /// A batch of one get, of one search without a query, or of one put with a value into
    /// a store without an index, without a transaction of its own making (`alone`): one
    /// round trip, where a transaction takes three. `None`: the batch is none of these, or
    /// its put found the item with vectors and wrote nothing ([`writes::item_alone`]).
    ///
    /// (In a store with an index a put does not go alone: it counts the vectors'
    /// generation, whose lock comes first.)
    async fn run_alone(&self, prepared: &Prepared) -> Result<Option<Vec<OpResult>>, StoreError> {
        let inner = &self.inner;
        let (Some(op), 1) = (prepared.ops.first(), prepared.ops.len()) else {
            return Ok(None);
        };
        let alone = match op {
            Op::Get(_) | Op::Search(SearchOp { query: None, .. }) => true,
            Op::Put(PutOp { value: Some(_), .. }) => inner.vectors.is_off(),
            _ => false,
        };
        if !alone {
            return Ok(None);
        }
        let pooled = connection(&inner.saver).await?;
        let alone = Alone {
            client: &pooled,
            schema: inner.saver.schema(),
            config: &inner.config,
            now: inner.config.clock.now(),
            prepared: inner.saver.prepared_statements(),
        };
        Ok(Some(vec![match op {
            Op::Search(search) => OpResult::Items(alone.search_recent(search).await?),
            Op::Get(get) => OpResult::Item(alone.get(get).await?),
            Op::Put(
                put @ PutOp {
                    value: Some(value), ..
                },
            ) => match alone.put(put, value).await? {
                true => OpResult::Done,
                false => return Ok(None),
            },
            _ => return Ok(None),
        }]))
    }

    async fn run_once(&self, prepared: &Prepared) -> Result<Vec<OpResult>, StoreError> {
        let inner = &self.inner;
        let mut pooled = connection(&inner.saver).await?;
        if pipeline::runs(prepared, inner.saver.prepared_statements()) {
            let (saver, config) = (&inner.saver, &inner.config);
            let counted = inner.vectors.counted();
            let done = pipeline::run(&pooled, saver, config, counted, prepared).await?;
            if let (Some((generation, changes)), Vectors::Mirror(mirror)) = (done, &inner.vectors) {
                mirror.apply(generation - 1, changes)?;
            }
            return Ok(vec![OpResult::Done; prepared.ops.len()]);
        }
        let client: &mut Client = &mut pooled;
        let tx = client
            .transaction()
            .await
            .map_err(db("beginning a batch"))?;
        let schema = inner.saver.schema();
        let mut batch = Batch {
            tx: &tx,
            schema,
            config: &inner.config,
            now: inner.config.clock.now(),
            vectors: &inner.vectors,
            wrote_vectors: false,
            generation: None,
            changes: Vec::new(),
            locks: locks::statements(schema, &prepared.ops, inner.vectors.counted()),
        };
        let out = batch.run(prepared).await?;
        let (generation, changes) = (batch.generation, batch.changes);
        if let Some(generation) = generation {
            let items = changes
                .iter()
                .map(|c| (c.ns.clone(), c.key.clone()))
                .unzip();
            vectors::log_changes(&tx, schema, generation, items).await?;
        }
        tx.commit().await.map_err(db("committing a batch"))?;
        if let (Some(generation), Vectors::Mirror(mirror)) = (generation, &inner.vectors) {
            mirror.apply(generation - 1, changes)?;
        }
        Ok(out)
    }

    /// Deletes the expired items, again when the server broke a deadlock.
    async fn sweep_now(&self) -> Result<u64, StoreError> {
        let mut attempt = 0;
        loop {
            match self.sweep_once().await {
                Err(e) if locks::retryable(&e) && attempt < RETRIES => attempt += 1,
                done => return done,
            }
        }
    }

    async fn sweep_once(&self) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let schema = inner.saver.schema();
        let mut pooled = connection(&inner.saver).await?;
        let client: &mut Client = &mut pooled;
        let tx = client
            .transaction()
            .await
            .map_err(db("beginning a sweep"))?;
        let now = inner.config.clock.now().millis();
        // A store without an index counts the sweep only when a swept item had vectors.
        let counted = if inner.vectors.counted() {
            locks::lock_generation(&tx, schema).await?;
            true
        } else {
            vectors::drop_expired(&tx, schema, now).await? > 0
        };
        let rows = tx
            .query_typed(
                &named(
                    schema,
                    "DELETE FROM {s}.sg_store_items \
                     WHERE expires_at IS NOT NULL AND expires_at <= $1 RETURNING ns, key",
                ),
                &[(&now, Type::INT8)],
            )
            .await
            .map_err(db("deleting expired items"))?;
        let generation = if counted && !rows.is_empty() {
            let generation = vectors::bump_generation(&tx, schema).await?;
            let gone = rows
                .iter()
                .map(|row| Ok((rows::col(row, 0)?, rows::col(row, 1)?)))
                .collect::<Result<(Vec<String>, Vec<String>), StoreError>>()?;
            vectors::log_changes(&tx, schema, generation, gone).await?;
            Some(generation)
        } else {
            None
        };
        // Every sweep, whatever it deleted: writes that expire nothing log too.
        vectors::prune_log(&tx, schema).await?;
        tx.commit().await.map_err(db("committing a sweep"))?;
        if let (Vectors::Mirror(mirror), Some(generation)) = (&inner.vectors, generation) {
            let gone = rows
                .iter()
                .map(|row| {
                    Ok(mirror::Change {
                        ns: rows::col(row, 0)?,
                        key: rows::col(row, 1)?,
                        vectors: Vec::new(),
                    })
                })
                .collect::<Result<_, StoreError>>()?;
            mirror.apply(generation - 1, gone)?;
        }
        Ok(rows.len() as u64)
    }
}

/// How many times a batch or a sweep the server rolled back to break a deadlock is run
/// again before its error is returned.
const RETRIES: u32 = 3;

async fn connection(saver: &PostgresSaver) -> Result<deadpool_postgres::Object, StoreError> {
    saver
        .connection()
        .await
        .map_err(|e| StoreError::Database(format!("taking a connection from the pool: {e}")))
}

/// Records the index's dimensions in a schema that has none, and refuses another.
async fn check_dims(client: &Client, schema: &str, dims: usize) -> Result<(), StoreError> {
    let rows = client
        .query_typed(
            &named(
                schema,
                "WITH ins AS (INSERT INTO {s}.sg_store_meta (key, value) \
                 VALUES ('vector_dims', $1) ON CONFLICT (key) DO NOTHING RETURNING value) \
                 SELECT value FROM ins UNION ALL \
                 SELECT value FROM {s}.sg_store_meta WHERE key = 'vector_dims'",
            ),
            &[(&dims.to_string(), Type::TEXT)],
        )
        .await
        .map_err(db("recording the index's dimensions"))?;
    let found: String = match rows.first() {
        Some(row) => rows::col(row, 0)?,
        None => return Ok(()),
    };
    if found == dims.to_string() {
        return Ok(());
    }
    Err(StoreError::Invalid {
        what: "index dims",
        why: format!("schema {schema} holds vectors of {found} dimensions; the index has {dims}"),
    })
}

impl Store for PostgresStore {
    fn batch(&self, ops: Vec<Op>) -> BoxFuture<'_, Result<Vec<OpResult>, StoreError>> {
        async move {
            let prepared = prepare(&self.inner.config, ops).await?;
            self.run(&prepared).await
        }
        .boxed()
    }

    fn sweep(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.sweep_now().boxed()
    }
}
