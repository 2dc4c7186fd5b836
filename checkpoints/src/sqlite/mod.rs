//! [`SqliteSaver`]: checkpoints in one SQLite file (WAL, one writer thread per process).
//!
//! Each `put` stores the checkpoint row, the values its step changed and nothing else: a
//! whole value goes to `sg_blobs` (content-addressed: an identical value is stored once; one of
//! at most 64 bytes of JSON, in a format-2 file, into the checkpoint's record itself), an
//! appended list stores only the appended items as a part of a log (`sg_logs`,
//! `sg_log_parts`), and the row's record holds what changed since the parent (a full record
//! every [`SqliteOptions::full_every`] checkpoints). Loading a checkpoint reads at most that
//! many rows plus one blob or one log range per field: O(fields), not O(history).
//!
//! Writes go through one writer thread that groups every queued operation into one
//! `BEGIN IMMEDIATE` transaction (a savepoint each, so one failing operation does not undo
//! the others). With durability `sync` the engine waits for each commit; with `async` it goes
//! on, and steps queued meanwhile share the next commit.
//!
//! Inside: `writer` is the writer thread (`writer::group`: one group's transaction and its
//! busy retry; `writer::memory`: what the writer remembers between and within groups);
//! `write` is a put; `read` a `Reader` (headers, records, field values, list logs);
//! `pending` the pending writes; `list` history and threads; `maintain` delete, copy,
//! prune and gc; `runs` runs and their delivery receipts; `record` the state record and its
//! bytes; `cache` the records cache shared by writer and readers; `sql` rusqlite errors as
//! typed [`StorageError`]s, the busy retry and the column encodings; `schema` the tables and
//! connection set-up; `wal` the WAL's preallocated room.

mod cache;
mod check;
mod graphs;
pub(crate) mod high_water;
mod holders;
mod list;
mod maintain;
mod node_cache;
mod pending;
mod read;
pub(crate) mod read_only;
mod record;
mod record_view;
mod runs;
mod schema;
mod shapes;
mod sql;
mod wal;
mod write;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use crate::graph_shape::GraphShape;
use crate::sync::Unpoisoned;
use futures::future::BoxFuture;
use rusqlite::Connection;

pub use schema::{SqliteOptions, Synchronous, FORMAT_VERSION};

pub(crate) use check::{
    header_fault, load_all, BlobState, Fixed, LoadRow, LogState, Outcome, PartFault, Values,
    WithWrites,
};
pub(crate) use record_view::{decode_fields, FieldRef, Names};

use crate::{
    Checkpoint, CheckpointError, CheckpointId, DeliveryReceipt, ListOptions, LoadedCheckpoint,
    Namespace, NamespaceInfo, PendingWrite, PutCheckpoint, Retention, RunId, RunRecord, Saver,
    StepChanges, StorageError, ThreadId, ThreadInfo,
};
use cache::RecordCache;
use read::Reader;
use read_only::ReadConn;
use sql::{is_busy, retry_busy, SqlResult};
use writer::{Job, Op, Reply, StoredPut, Writer};

/// Why an operation never reached the writer or never heard back from it.
#[derive(Debug, thiserror::Error)]
enum Unavailable {
    #[error("the SQLite saver is closed")]
    Closed,
    #[error("the SQLite writer thread stopped")]
    WriterStopped,
    #[error("nothing submitted")]
    NothingSubmitted,
    #[error("the SQLite writer answered with the reply of another kind of operation")]
    WrongReply,
    #[error("a writer changed the file during each of several reads")]
    Changing,
}

impl Unavailable {
    fn during_submit(self) -> CheckpointError {
        StorageError::new("handing an operation to the writer", self).into()
    }

    /// A reply that does not fit the operation: a bug in the writer, never a made-up answer.
    fn wrong_reply() -> CheckpointError {
        StorageError::new("reading the writer's reply", Unavailable::WrongReply).into()
    }
}

struct Inner {
    path: PathBuf,
    options: SqliteOptions,
    /// Jobs go to the writer in batches: a batch sent at once is never split across
    /// transactions by the writer waking up in the middle of it.
    tx: Mutex<Option<mpsc::Sender<Vec<Job>>>>,
    writer: Mutex<Option<JoinHandle<Result<(), CheckpointError>>>>,
    readers: Mutex<Vec<ReadConn>>,
    cache: Arc<Mutex<RecordCache>>,
    /// Opened with [`SqliteSaver::open_read_only`]: no writer, read-only connections.
    read_only: bool,
}

/// A [`Saver`] over one SQLite file: the default, embedded store.
///
/// Cloning shares the connection pool and the writer thread. Several processes may use the
/// same file: writes serialize through SQLite's lock (`BEGIN IMMEDIATE` with a busy timeout,
/// retried), and two runners on the same thread are told apart by
/// [`CheckpointError::StaleParent`].
///
/// ```
/// use stategraph_checkpoints::{Namespace, Saver, SqliteSaver, ThreadId};
/// # let dir = tempfile::tempdir().unwrap();
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let saver = SqliteSaver::open(dir.path().join("threads.db"))?;
/// let thread = ThreadId::new("t1")?;
/// assert!(saver.get(&thread, &Namespace::root(), None).await?.is_none());
/// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteSaver {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteSaver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSaver")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteSaver {
    /// Open (or create) a checkpoint file with default options.
    ///
    /// # Errors
    /// Storage errors; [`CheckpointError::UnsupportedFormatVersion`] for a file written by a
    /// newer format (nothing is written to it); [`CheckpointError::LostCommits`] for a file
    /// that lost committed checkpoints (its `-wal` damaged or lost, see
    /// [`SqliteOptions::accept_lost_commits`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Open (or create) a checkpoint file.
    ///
    /// # Errors
    /// As [`SqliteSaver::open`].
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<Self, CheckpointError> {
        let path = path.as_ref().to_path_buf();
        let mut conn = schema::connect(&path, &options)?;
        let format = retry_busy(|| schema::init(&mut conn, &path), is_busy)?;
        let mut high_water = high_water::HighWater::new(&conn, &path);
        if let Some(lost) = high_water::check(&conn, &path)? {
            if !options.accept_lost_commits {
                return Err(lost.into_error(&path));
            }
            high_water.reset(&conn)?;
        }
        let (tx, rx) = mpsc::channel::<Vec<Job>>();
        let cache = Arc::new(Mutex::new(RecordCache::default()));
        let writer = Writer::new(conn, cache.clone(), options.clone(), format, high_water);
        let writer = std::thread::Builder::new()
            .name("stategraph-sqlite-writer".to_owned())
            .spawn(move || writer.run(rx))
            .map_err(|e| StorageError::new("starting the writer thread", e))?;
        Ok(SqliteSaver {
            inner: Arc::new(Inner {
                path,
                options,
                tx: Mutex::new(Some(tx)),
                writer: Mutex::new(Some(writer)),
                readers: Mutex::new(Vec::new()),
                cache,
                read_only: false,
            }),
        })
    }

    /// Open an existing checkpoint file for reading only (SQLite's `SQLITE_OPEN_READ_ONLY`):
    /// it works without write access to the file or its directory, never creates the file,
    /// never writes to it, and leaves no `-wal` or `-shm` beside it that was not there (see
    /// decision 0035). Every write fails with [`CheckpointError::ReadOnly`].
    ///
    /// A file whose creation was cut short (a rollback journal beside it) needs a writer to
    /// roll it back first: opening it read-only fails with a storage error.
    ///
    /// ```
    /// use stategraph_checkpoints::{Namespace, Saver, SqliteSaver, ThreadId};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("threads.db");
    /// # SqliteSaver::open(&path)?.close()?;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let saver = SqliteSaver::open_read_only(&path)?;
    /// assert!(saver.list_threads().await?.is_empty());
    /// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
    /// # }).unwrap();
    /// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
    /// ```
    ///
    /// # Errors
    /// [`CheckpointError::InvalidPath`] for `""` or `:memory:`; a `NotFound` storage error
    /// for a missing file; [`CheckpointError::Integrity`] naming `sg_meta` for an empty
    /// database; [`CheckpointError::ForeignDatabase`] for another application's database;
    /// [`CheckpointError::FormatRecord`] for a missing or unreadable format record;
    /// [`CheckpointError::UnsupportedFormatVersion`] for a newer format; storage errors.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        let path = path.as_ref().to_path_buf();
        schema::check_path(&path)?;
        let options = SqliteOptions::default();
        let first = read_only::connect(&path, &options)?;
        let format = retry_busy(|| schema::format_of(&first.conn, &path), is_busy)
            .map_err(read_only::cut_short)?;
        if format.is_none() {
            return Err(CheckpointError::Integrity {
                thread: "-".to_owned(),
                checkpoint: "-".to_owned(),
                blob: "sg_meta".to_owned(),
                detail: "not a stategraph checkpoint file: it has no sg_meta table".to_owned(),
            });
        }
        Ok(SqliteSaver {
            inner: Arc::new(Inner {
                path,
                options,
                tx: Mutex::new(None),
                writer: Mutex::new(None),
                readers: Mutex::new(vec![first]),
                cache: Arc::new(Mutex::new(RecordCache::default())),
                read_only: true,
            }),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The recorded shape of each field of `thread` in namespace `ns`: every kind of value
    /// the graph's steps and typed updates stored there (never a fork's edits; see
    /// [`crate::shape`]). Empty for a thread written by a build that did not record shapes.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn field_shapes(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
    ) -> Result<std::collections::BTreeMap<String, crate::shape::Shape>, CheckpointError> {
        let (thread, ns) = (thread.as_str().to_owned(), ns.as_str().to_owned());
        self.read(move |conn, _| shapes::read_all(conn, &thread, &ns))
            .await
    }

    /// Stop the writer after it has committed everything queued, and checkpoint the WAL into
    /// the main file. Later calls fail with a storage error. Dropping the last clone does the
    /// same, without the report.
    ///
    /// # Errors
    /// A storage error if the WAL could not be folded into the main file (a disk too full
    /// for the main file to grow): every commit is safe in the `-wal` beside the file, which
    /// SQLite reads at the next open, but the main file alone does not hold them, so copy
    /// both or open the file again once there is room. The WAL's preallocated room is handed
    /// back to the disk first. Closing a saver opened read-only, or closing again, is `Ok`.
    pub fn close(&self) -> Result<(), CheckpointError> {
        let closed = self.inner.stop_writer();
        self.inner.readers.lock().unpoisoned().clear();
        closed
    }

    fn submit(&self, op: Op) -> BoxFuture<'static, Result<Reply, CheckpointError>> {
        match self.submit_all(vec![op], false).pop() {
            Some(reply) => reply,
            None => Box::pin(async { Err(Unavailable::NothingSubmitted.during_submit()) }),
        }
    }

    /// Hand `ops` to the writer as one batch (it runs them in one transaction, possibly with
    /// other queued work); one reply future per op. `more_follow`: the caller will hand over
    /// more at once (see [`Writer::run`]).
    fn submit_all(
        &self,
        ops: Vec<Op>,
        more_follow: bool,
    ) -> Vec<BoxFuture<'static, Result<Reply, CheckpointError>>> {
        if ops.is_empty() {
            return Vec::new();
        }
        let (jobs, replies): (Vec<Job>, Vec<_>) = ops
            .into_iter()
            .map(|op| {
                let (done, rx) = tokio::sync::oneshot::channel();
                (
                    Job {
                        op,
                        done,
                        more_follow,
                    },
                    rx,
                )
            })
            .unzip();
        let sent = match self.inner.tx.lock().unpoisoned().as_ref() {
            Some(tx) => tx.send(jobs).is_ok(),
            None => false,
        };
        let read_only = self.inner.read_only.then(|| self.inner.path.clone());
        replies
            .into_iter()
            .map(|rx| -> BoxFuture<'static, Result<Reply, CheckpointError>> {
                let read_only = read_only.clone();
                Box::pin(async move {
                    if let Some(file) = read_only {
                        return Err(CheckpointError::ReadOnly { file });
                    }
                    if !sent {
                        return Err(Unavailable::Closed.during_submit());
                    }
                    rx.await
                        .unwrap_or_else(|_| Err(Unavailable::WriterStopped.during_submit()))
                })
            })
            .collect()
    }

    /// Run a read on a pooled connection, in one read transaction, off the async runtime when
    /// there is one.
    fn read<T: Send + 'static>(
        &self,
        f: impl Fn(&Connection, &Mutex<RecordCache>) -> Result<T, CheckpointError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, CheckpointError>> {
        let inner = self.inner.clone();
        let job = move || -> Result<T, CheckpointError> {
            for _ in 0..READ_TRIES {
                let pooled = inner.readers.lock().unpoisoned().pop();
                let conn = match pooled {
                    Some(c) if c.still_valid(&inner.path)? => c,
                    _ => inner.connect_reader()?,
                };
                // One read transaction: the statements of a read see one snapshot of the
                // file, and take the WAL read lock once instead of once per statement.
                let result = retry_busy(
                    || {
                        let tx = conn
                            .conn
                            .unchecked_transaction()
                            .during("beginning a read transaction")?;
                        f(&tx, &inner.cache)
                    },
                    is_busy,
                );
                // An `immutable` connection's read counts only if no writer came meanwhile.
                if conn.still_valid(&inner.path)? {
                    inner.readers.lock().unpoisoned().push(conn);
                    return result;
                }
            }
            Err(
                StorageError::new("reading a file that kept changing", Unavailable::Changing)
                    .into(),
            )
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let task = handle.spawn_blocking(job);
                Box::pin(async move {
                    task.await
                        .unwrap_or_else(|e| Err(StorageError::new("running a read task", e).into()))
                })
            }
            Err(_) => Box::pin(futures::future::ready(job())),
        }
    }
}

/// How many times a read-only saver reads again when a writer changed the file under it.
const READ_TRIES: usize = 5;

impl Inner {
    /// A new read connection: read-only for a read-only saver.
    fn connect_reader(&self) -> Result<ReadConn, CheckpointError> {
        if self.read_only {
            read_only::connect(&self.path, &self.options)
        } else {
            let conn = schema::connect(&self.path, &self.options)?;
            Ok(ReadConn { conn, stamp: None })
        }
    }

    /// Stop the writer after it has committed everything queued (its queue closes, it
    /// drains it and folds the WAL back), and wait for it.
    fn stop_writer(&self) -> Result<(), CheckpointError> {
        let tx = self.tx.lock().unpoisoned().take();
        drop(tx);
        match self.writer.lock().unpoisoned().take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_panic)) => {
                Err(StorageError::new("closing the writer", Unavailable::WriterStopped).into())
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Nobody is left to hear of a failure here: `SqliteSaver::close` reports it.
        let _ = self.stop_writer();
    }
}

impl Saver for SqliteSaver {
    fn put(&self, put: PutCheckpoint) -> BoxFuture<'_, Result<(), CheckpointError>> {
        let fut = StoredPut::op(put).map(|op| self.submit(op));
        Box::pin(async move { fut?.await.map(|_| ()) })
    }

    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let fut = self.submit(Op::PutWrites {
            thread: thread.clone(),
            ns: ns.clone(),
            id,
            writes,
        });
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<LoadedCheckpoint>, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| Reader::new(conn, cache, &thread, &ns).get(id))
    }

    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| list::list(conn, cache, &thread, &ns, &options))
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let fut = self.submit(Op::DeleteThread(thread.clone()));
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>> {
        self.read(list::list_threads)
    }

    fn list_namespaces<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<NamespaceInfo>, CheckpointError>> {
        let thread = thread.clone();
        self.read(move |conn, _| list::list_namespaces(conn, &thread))
    }

    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let fut = self.submit(Op::CopyThread {
            from: from.clone(),
            to: to.clone(),
            head: None,
        });
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn copy_branch<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
        head: CheckpointId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let fut = self.submit(Op::CopyThread {
            from: from.clone(),
            to: to.clone(),
            head: Some(head),
        });
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn prune<'a>(
        &'a self,
        thread: &'a ThreadId,
        retention: Retention,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        let fut = self.submit(Op::Prune {
            thread: thread.clone(),
            retention,
        });
        Box::pin(async move {
            match fut.await? {
                Reply::Count(n) => Ok(n),
                Reply::Done | Reply::Stored(_) => Err(Unavailable::wrong_reply()),
            }
        })
    }

    fn changes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
    ) -> BoxFuture<'a, Result<StepChanges, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| Reader::new(conn, cache, &thread, &ns).changes(id))
    }

    fn changes_many<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        ids: Vec<CheckpointId>,
    ) -> BoxFuture<'a, Result<Vec<StepChanges>, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| {
            let reader = Reader::new(conn, cache, &thread, &ns);
            ids.iter().map(|id| reader.changes(*id)).collect()
        })
    }

    fn head<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
    ) -> BoxFuture<'a, Result<Option<crate::saver::Head>, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| Reader::new(conn, cache, &thread, &ns).head())
    }

    fn queues_in_call_order(&self) -> bool {
        // `put_many` queues its batch on the writer's channel when it is called.
        true
    }

    fn put_many(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_batch(puts, false)
    }

    fn put_streamed(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_batch(puts, true)
    }

    fn flush(&self) -> BoxFuture<'_, Result<(), CheckpointError>> {
        let fut = self.submit(Op::Flush);
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn put_run(&self, run: RunRecord) -> BoxFuture<'_, Result<(), CheckpointError>> {
        let fut = self.submit(Op::PutRun(Box::new(run)));
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn get_run<'a>(
        &'a self,
        thread: Option<&'a ThreadId>,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, CheckpointError>> {
        let (thread, run) = (thread.cloned(), run.clone());
        self.read(move |conn, _| runs::get_run(conn, thread.as_ref(), &run))
    }

    fn list_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        let thread = thread.clone();
        self.read(move |conn, _| runs::list_runs(conn, &thread, None))
    }

    fn list_running_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        let thread = thread.clone();
        self.read(move |conn, _| runs::list_runs(conn, &thread, Some(crate::RunStatus::Running)))
    }

    fn put_receipt_if_absent<'a>(
        &'a self,
        run: &'a RunId,
        receipt: DeliveryReceipt,
    ) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        let fut = self.submit(Op::PutReceipt {
            run: run.clone(),
            receipt,
        });
        Box::pin(async move {
            match fut.await? {
                Reply::Stored(stored) => Ok(stored),
                Reply::Done | Reply::Count(_) => Err(Unavailable::wrong_reply()),
            }
        })
    }

    fn get_receipt<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<DeliveryReceipt>, CheckpointError>> {
        let run = run.clone();
        self.read(move |conn, _| runs::get_receipt(conn, &run))
    }

    fn put_graph<'a>(
        &'a self,
        thread: &'a ThreadId,
        shape: Arc<GraphShape>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        // The run's checkpoints follow at once: the pointer joins their group instead of
        // costing a commit of its own (a flush or any write without the hint ends it).
        let op = Op::PutGraph {
            thread: thread.clone(),
            shape,
        };
        let fut = self.submit_all(vec![op], true).pop();
        Box::pin(async move {
            match fut {
                Some(fut) => fut.await.map(|_| ()),
                None => Ok(()),
            }
        })
    }

    fn graph_of<'a>(
        &'a self,
        thread: &'a ThreadId,
        checkpoint: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<GraphShape>, CheckpointError>> {
        let thread = thread.clone();
        self.read(move |conn, _| graphs::graph_of(conn, &thread, checkpoint))
    }
}

impl SqliteSaver {
    /// [`Saver::put_many`], saying whether more checkpoints of the run follow at once.
    fn put_batch(
        &self,
        puts: Vec<PutCheckpoint>,
        more_follow: bool,
    ) -> BoxFuture<'_, Result<(), CheckpointError>> {
        // Sent as one batch, the writer takes them in one transaction. A put whose control
        // state cannot be encoded fails, and the ones after it are not sent (their parent
        // would be missing).
        let mut ops = Vec::with_capacity(puts.len());
        let mut failed = None;
        for p in puts {
            match StoredPut::op(p) {
                Ok(op) => ops.push(op),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let futures = self.submit_all(ops, more_follow);
        Box::pin(async move {
            for f in futures {
                f.await?;
            }
            failed.map_or(Ok(()), Err)
        })
    }
}
