//! [`PostgresSaver`]: checkpoints in a PostgreSQL database, shared by every process that
//! opens it (crate feature `postgres`).
//!
//! The same ideas as the SQLite file (decision 0045): each checkpoint row holds what its put
//! wrote (`wrote`: references to values, a delta against the parent) and, every
//! [`PostgresOptions::full_every`] checkpoints of a branch, the whole state (`base`), so a
//! load reads at most that many rows plus the values; values are content-addressed
//! (blake3 of the payload, in an envelope) and stored once across threads; an appended
//! list stores only what was appended. One transaction holds a put (or a batch of puts),
//! with the parent check under the lock of the thread's head row: of two writers on one
//! thread exactly one commits, the other gets [`CheckpointError::StaleParent`].
//!
//! Every statement is one unnamed statement with typed parameters and no session state is
//! kept, so the saver works through a transaction-mode pooler (decision 0047). Pruning and
//! deleting collect values no checkpoint refers to, under a transaction-scoped advisory
//! lock that puts share (decision 0046).
//!
//! Inside: `options` the options; `schema` the tables and their creation; `sql` errors,
//! statements and column encodings; `record` the records of part references; `resolve`
//! states and hash-checked values; `read` loads and lists; `write` puts and pending writes, `rows` a batch's rows in one statement;
//! `maintain` delete, copy, prune and garbage collection; `runs` runs and receipts.

mod extend;
mod get;
mod known;
mod maintain;
mod node_cache;
mod options;
mod queue;
mod read;
mod record;
mod resolve;
mod rows;
mod runs;
mod schema;
mod sql;
mod tls;
mod tx;
mod verify;
mod write;

use std::sync::Arc;

use deadpool_postgres::{ManagerConfig, Pool, RecyclingMethod};
use futures::future::BoxFuture;
use tokio_postgres::{Client, IsolationLevel};

use crate::Lease;
pub use options::PostgresOptions;
pub use queue::{RunQueue, Wakeups};
pub use schema::POSTGRES_FORMAT_VERSION;
pub use tls::{PostgresTls, TlsClientCert};

use crate::{
    Checkpoint, CheckpointError, CheckpointId, DeliveryReceipt, Head, ListOptions,
    LoadedCheckpoint, Namespace, NamespaceInfo, PendingWrite, PutCheckpoint, Retention, RunId,
    RunRecord, Saver, StepChanges, StorageError, ThreadId, ThreadInfo,
};
use sql::{PgResult, Sql};

#[derive(Debug)]
struct Inner {
    pool: Pool,
    sql: Sql,
    options: PostgresOptions,
    /// The heads this saver last saw (decision 0059).
    known: known::KnownHeads,
    /// How to open the run queue's listening connection (`PostgresOptions::listen_url`).
    listen: tokio_postgres::Config,
    /// In the clear or with TLS (`PostgresOptions::tls`).
    connector: tls::Connector,
}

/// A [`Saver`] over a PostgreSQL database: for many processes on many machines sharing
/// threads. Cloning shares the connection pool.
///
/// ```
/// use stategraph_checkpoints::{Namespace, PostgresOptions, PostgresSaver, Saver, ThreadId};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // A server started by `.ci/postgres.sh`; without one this example does nothing.
/// let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else { return Ok(()) };
/// let options = PostgresOptions { schema: "doc_example".to_owned(), ..Default::default() };
/// let saver = PostgresSaver::connect_with(&url, options).await?;
/// let thread = ThreadId::new("t1")?;
/// saver.delete_thread(&thread).await?;
/// assert!(saver.get(&thread, &Namespace::root(), None).await?.is_none());
/// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct PostgresSaver {
    inner: Arc<Inner>,
    /// The lease every write is fenced by ([`PostgresSaver::fenced`]).
    fence: Option<Arc<queue::Fence>>,
}

/// Run `$body` (an expression over the transaction `$tx` and the statements `$sql`) in one
/// read-only, repeatable-read transaction: one snapshot for all of its statements.
macro_rules! in_read {
    ($self:ident, |$tx:ident, $sql:ident| $body:expr) => {{
        let mut client = $self.client().await?;
        let client: &mut Client = &mut client;
        let $tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .during("beginning a read")?;
        let $sql = &$self.inner.sql;
        let out = $body.await?;
        $tx.commit().await.during("ending a read")?;
        Ok(out)
    }};
}

/// Run `$body` in one read-write transaction, committed when it returns `Ok`.
macro_rules! in_write {
    ($self:ident, |$tx:ident, $sql:ident| $body:expr) => {{
        let mut client = $self.client().await?;
        let client: &mut Client = &mut client;
        let $tx = client.transaction().await.during("beginning a write")?;
        let $sql = &$self.inner.sql;
        let out = $body.await?;
        $tx.commit().await.during("committing a write")?;
        Ok(out)
    }};
}

impl PostgresSaver {
    /// Connect to the database at `url` (`postgres://user@host:port/db`) with default
    /// options, creating the schema `stategraph` and its tables if missing.
    ///
    /// # Errors
    /// A storage error for a URL that does not parse or a server that cannot be reached;
    /// [`CheckpointError::UnsupportedFormatVersion`] for tables of a newer format (nothing
    /// is written to them).
    pub async fn connect(url: &str) -> Result<Self, CheckpointError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connect with options (the schema to use, the pool size, …).
    ///
    /// # Errors
    /// As [`PostgresSaver::connect`]; [`CheckpointError::InvalidSchemaName`] for a schema
    /// name [`PostgresOptions::validate`] refuses.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<Self, CheckpointError> {
        options.validate()?;
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StorageError::new("parsing the database URL", e))?;
        let connector = tls::Connector::new(&options.tls, options.tls_client_cert.as_ref())?;
        let listen = match &options.listen_url {
            Some(url) => url
                .parse()
                .map_err(|e| StorageError::new("parsing the listen URL", e))?,
            None => config.clone(),
        };
        let listen = connector.configure(listen);
        let manager = connector.manager(
            connector.configure(config),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .build()
            .map_err(|e| StorageError::new("building the connection pool", e))?;
        let sql = Sql::new(&options.schema).with_prepared(options.prepared_statements);
        {
            let mut client = pool.get().await.during("connecting to the database")?;
            schema::init(&mut client, &sql, options.create_schema).await?;
        }
        Ok(PostgresSaver {
            inner: Arc::new(Inner {
                pool,
                sql,
                options,
                known: known::KnownHeads::default(),
                listen,
                connector,
            }),
            fence: None,
        })
    }

    /// The run queue in this saver's schema (shares its pool).
    pub fn queue(&self) -> RunQueue {
        RunQueue::new(PostgresSaver {
            inner: self.inner.clone(),
            fence: None,
        })
    }

    /// This saver with every checkpoint and pending write fenced by `lease`: each write
    /// transaction first checks, inside itself, that the lease is still the run's current
    /// one and logs the write with its epoch (`sg_run_writes`). A write after another worker
    /// took the run over (or after it ended) fails with [`CheckpointError::LeaseLost`] and
    /// stores nothing; a write to another thread fails with
    /// [`CheckpointError::OutsideLease`].
    pub fn fenced(&self, lease: &Lease) -> PostgresSaver {
        PostgresSaver {
            inner: self.inner.clone(),
            fence: Some(Arc::new(queue::Fence::of(lease))),
        }
    }

    /// The schema that holds the saver's tables.
    pub fn schema(&self) -> &str {
        self.inner.sql.schema()
    }

    /// Whether the saver sends its hot calls as named statements each pooled connection
    /// prepares once ([`PostgresOptions::prepared_statements`]): what a store sharing its
    /// pool may do too.
    pub fn prepared_statements(&self) -> bool {
        self.inner.options.prepared_statements
    }

    /// Delete every stored value no checkpoint refers to (such as the values of puts
    /// refused in the middle of a batch); how many were deleted. Safe while other processes
    /// write: it waits for open puts and holds new ones back until it commits.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn collect_garbage(&self) -> Result<u64, CheckpointError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .during("beginning a collection")?;
        let n = maintain::collect_all(&tx, &self.inner.sql).await?;
        tx.commit().await.during("committing a collection")?;
        Ok(n)
    }

    /// Every `(thread, namespace)` with checkpoints, with how many, by thread then
    /// namespace (what the inspector lists).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn namespaces(&self) -> Result<Vec<(String, String, usize)>, CheckpointError> {
        in_read!(self, |tx, sql| verify::namespaces(&tx, sql))
    }

    /// Check the whole schema: every value against its hash, every parent link, and that
    /// every checkpoint loads. Problems are reported, not returned as errors.
    /// `counts.blobs` counts values; `counts.sqlite_ok` is always `true` (there is no
    /// SQLite check to run).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn verify(&self) -> Result<crate::inspect::VerifyReport, CheckpointError> {
        in_read!(self, |tx, sql| verify::verify(&tx, sql))
    }

    /// Drop the saver's schema with every table and row in it (for throwaway schemas, such
    /// as one per test). The saver is unusable afterwards.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn drop_schema(&self) -> Result<(), CheckpointError> {
        let client = self.client().await?;
        client
            .batch_execute(&self.inner.sql.text("DROP SCHEMA IF EXISTS {s} CASCADE"))
            .await
            .during("dropping the schema")
    }

    /// A connection from the saver's pool, for crates that keep tables of their own in its
    /// schema ([`PostgresSaver::schema`]; an Agent Server's threads, say) without a second
    /// pool. It goes back to the pool when dropped.
    ///
    /// # Errors
    /// [`CheckpointError::Storage`] when no connection can be had.
    pub async fn connection(&self) -> Result<deadpool_postgres::Object, CheckpointError> {
        self.client().await
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, CheckpointError> {
        self.inner
            .pool
            .get()
            .await
            .during("taking a connection from the pool")
    }
}

impl Saver for PostgresSaver {
    fn put(&self, put: PutCheckpoint) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_many(vec![put])
    }

    /// One transaction for the batch; a put refused by a check stores nothing and the
    /// others are kept.
    fn put_many(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            if puts.is_empty() {
                return Ok(());
            }
            let sql = &self.inner.sql;
            if let Some(fence) = &self.fence {
                puts.iter().try_for_each(|p| fence.admit(&p.thread))?;
            }
            let client = self.client().await?;
            let (options, known) = (&self.inner.options, &self.inner.known);
            let fence = self.fence.as_deref();
            if extend::try_extend(&client, sql, options, known, fence, &puts).await? {
                return Ok(());
            }
            let tx = tx::WriteTx::begin_put(client, sql).await?;
            if let Some(fence) = &self.fence {
                let ids: Vec<CheckpointId> = puts.iter().map(|p| p.checkpoint.id).collect();
                fence
                    .hold(tx.client()?, sql, queue::Fenced::Checkpoints, &ids)
                    .await?;
            }
            let stored = write::put_batch(tx.client()?, sql, (options, known), puts).await?;
            tx.commit().await?;
            stored
        })
    }

    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            let sql = &self.inner.sql;
            let Some(fence) = &self.fence else {
                let client = self.client().await?;
                return write::put_writes(&**client, sql, thread, ns, id, writes).await;
            };
            fence.admit(thread)?;
            let mut pooled = self.client().await?;
            let client: &mut Client = &mut pooled;
            let tx = client
                .transaction()
                .await
                .during("beginning pending writes")?;
            fence.hold(&tx, sql, queue::Fenced::Writes, &[id]).await?;
            write::put_writes(&tx, sql, thread, ns, id, writes).await?;
            tx.commit().await.during("committing pending writes")
        })
    }

    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<LoadedCheckpoint>, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let (sql, known) = (&self.inner.sql, &self.inner.known);
            match get::call(&client, sql, (thread, ns), id, known).await? {
                Ok(loaded) => Ok(loaded),
                // Perhaps deleted (by another process) after the call read it: a read
                // transaction tells.
                Err(_missing) => {
                    drop(client);
                    in_read!(self, |tx, sql| get::read(
                        &tx,
                        sql,
                        (thread, ns),
                        id,
                        Some(known)
                    ))
                }
            }
        })
    }

    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>> {
        Box::pin(async move { in_read!(self, |tx, sql| read::list(&tx, sql, thread, ns, options)) })
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            self.inner.known.forget_thread(thread);
            in_write!(self, |tx, sql| maintain::delete_thread(&tx, sql, thread))
        })
    }

    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>> {
        Box::pin(async move { in_read!(self, |tx, sql| read::list_threads(&tx, sql)) })
    }

    fn list_namespaces<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<NamespaceInfo>, CheckpointError>> {
        Box::pin(async move { in_read!(self, |tx, sql| read::list_namespaces(&tx, sql, thread)) })
    }

    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(
            async move { in_write!(self, |tx, sql| maintain::copy_thread(&tx, sql, from, to)) },
        )
    }

    fn copy_branch<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
        head: CheckpointId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            in_write!(self, |tx, sql| maintain::copy_branch(
                &tx, sql, from, to, head
            ))
        })
    }

    fn prune<'a>(
        &'a self,
        thread: &'a ThreadId,
        retention: Retention,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        Box::pin(
            async move { in_write!(self, |tx, sql| maintain::prune(&tx, sql, thread, retention)) },
        )
    }

    /// From what the checkpoint's put wrote; a root (also one whose parent was pruned)
    /// reports every field.
    fn changes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
    ) -> BoxFuture<'a, Result<StepChanges, CheckpointError>> {
        Box::pin(async move { in_read!(self, |tx, sql| read::changes(&tx, sql, thread, ns, id)) })
    }

    /// Every checkpoint's changes in one read transaction.
    fn changes_many<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        ids: Vec<CheckpointId>,
    ) -> BoxFuture<'a, Result<Vec<StepChanges>, CheckpointError>> {
        Box::pin(async move {
            in_read!(self, |tx, sql| async {
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    out.push(read::changes(&tx, sql, thread, ns, id).await?);
                }
                Ok::<_, CheckpointError>(out)
            })
        })
    }

    fn head<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
    ) -> BoxFuture<'a, Result<Option<Head>, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            read::head(&client, &self.inner.sql, thread, ns).await
        })
    }

    fn put_run(&self, run: RunRecord) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            runs::put_run(&mut client, &self.inner.sql, run).await
        })
    }

    fn get_run<'a>(
        &'a self,
        thread: Option<&'a ThreadId>,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            runs::get_run(&**client, &self.inner.sql, thread, run).await
        })
    }

    fn list_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            runs::list_runs(&**client, &self.inner.sql, thread, None).await
        })
    }

    fn list_running_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let running = Some(crate::RunStatus::Running);
            runs::list_runs(&**client, &self.inner.sql, thread, running).await
        })
    }

    fn put_receipt_if_absent<'a>(
        &'a self,
        run: &'a RunId,
        receipt: DeliveryReceipt,
    ) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            runs::put_receipt(&**client, &self.inner.sql, run, receipt).await
        })
    }

    fn get_receipt<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<DeliveryReceipt>, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            runs::get_receipt(&**client, &self.inner.sql, run).await
        })
    }
}
