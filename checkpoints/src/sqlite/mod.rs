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

mod ops;
mod record;
mod schema;
mod wal;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rusqlite::{Connection, ErrorCode};

pub use schema::{SqliteOptions, Synchronous, FORMAT_VERSION};

use crate::{
    Checkpoint, CheckpointError, CheckpointId, ListOptions, LoadedCheckpoint, Namespace,
    PendingWrite, PutCheckpoint, Retention, Saver, StepChanges, ThreadId, ThreadInfo,
};
use record::{StateRecord, StoredControl};

/// Operations the writer thread runs.
pub(crate) enum Op {
    Put(Box<StoredPut>),
    PutWrites {
        thread: ThreadId,
        ns: Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    },
    DeleteThread(ThreadId),
    CopyThread {
        from: ThreadId,
        to: ThreadId,
    },
    Prune {
        thread: ThreadId,
        retention: Retention,
    },
    /// Nothing to store: ends a group kept open for more (see [`writer_loop`]).
    Flush,
}

/// A put as the writer runs it: the checkpoint, with its control state moved (on the
/// caller's side) into the shared record form the writer keeps for it.
pub(crate) struct StoredPut {
    /// The put; its `checkpoint.control` has been taken out into `control`.
    pub(crate) put: PutCheckpoint,
    pub(crate) control: Arc<StoredControl>,
}

impl StoredPut {
    fn op(mut put: PutCheckpoint) -> Result<Op, CheckpointError> {
        let control = std::mem::take(&mut put.checkpoint.control);
        let control = StoredControl::from_control(control).map_err(|e| {
            CheckpointError::Storage(format!("cannot encode control state: {e}").into())
        })?;
        Ok(Op::Put(Box::new(StoredPut {
            put,
            control: Arc::new(control),
        })))
    }
}

/// What an operation returns.
pub(crate) enum Reply {
    Done,
    Count(usize),
}

struct Job {
    op: Op,
    done: tokio::sync::oneshot::Sender<Result<Reply, CheckpointError>>,
    /// More checkpoints of the same run follow at once: the writer may keep its transaction
    /// open for them (see [`writer_loop`]).
    more_follow: bool,
}

/// StateRecord state records by checkpoint row (`seq` values are never reused).
#[derive(Default)]
pub(crate) struct Cache {
    map: HashMap<i64, Arc<StateRecord>>,
}

const CACHE_LIMIT: usize = 4096;

impl Cache {
    pub(crate) fn get(&self, seq: i64) -> Option<Arc<StateRecord>> {
        self.map.get(&seq).cloned()
    }

    pub(crate) fn insert(&mut self, seq: i64, full: Arc<StateRecord>) {
        if self.map.len() >= CACHE_LIMIT {
            self.map.clear();
        }
        self.map.insert(seq, full);
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }
}

struct Inner {
    path: PathBuf,
    options: SqliteOptions,
    /// Jobs go to the writer in batches: a batch sent at once is never split across
    /// transactions by the writer waking up in the middle of it.
    tx: Mutex<Option<mpsc::Sender<Vec<Job>>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    readers: Mutex<Vec<Connection>>,
    cache: Arc<Mutex<Cache>>,
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
    /// newer format (nothing is written to it).
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
        let format = retry_busy(|| schema::init(&mut conn))?;
        let (tx, rx) = mpsc::channel::<Vec<Job>>();
        let cache = Arc::new(Mutex::new(Cache::default()));
        let writer_cache = cache.clone();
        let writer_options = options.clone();
        let writer = std::thread::Builder::new()
            .name("stategraph-sqlite-writer".to_string())
            .spawn(move || writer_loop(conn, rx, writer_cache, writer_options, format))
            .map_err(|e| CheckpointError::Storage(Box::new(e)))?;
        Ok(SqliteSaver {
            inner: Arc::new(Inner {
                path,
                options,
                tx: Mutex::new(Some(tx)),
                writer: Mutex::new(Some(writer)),
                readers: Mutex::new(Vec::new()),
                cache,
            }),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Stop the writer after it has committed everything queued, and checkpoint the WAL into
    /// the main file. Later calls fail with a storage error. Dropping the last clone does the
    /// same.
    pub fn close(&self) {
        let tx = self
            .inner
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(tx);
        if let Some(handle) = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = handle.join();
        }
        self.inner
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn submit(&self, op: Op) -> BoxFuture<'static, Result<Reply, CheckpointError>> {
        match self.submit_all(vec![op], false).pop() {
            Some(reply) => reply,
            None => Box::pin(async { Err(CheckpointError::Storage("nothing submitted".into())) }),
        }
    }

    /// Hand `ops` to the writer as one batch (it runs them in one transaction, possibly with
    /// other queued work); one reply future per op. `more_follow`: the caller will hand over
    /// more at once (see [`writer_loop`]).
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
        let sent = match self
            .inner
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(tx) => tx.send(jobs).is_ok(),
            None => false,
        };
        replies
            .into_iter()
            .map(|rx| -> BoxFuture<'static, Result<Reply, CheckpointError>> {
                Box::pin(async move {
                    if !sent {
                        return Err(CheckpointError::Storage(
                            "the SQLite saver is closed".into(),
                        ));
                    }
                    rx.await.unwrap_or_else(|_| {
                        Err(CheckpointError::Storage(
                            "the SQLite writer thread stopped".into(),
                        ))
                    })
                })
            })
            .collect()
    }

    /// Run a read on a pooled connection, in one read transaction, off the async runtime when
    /// there is one.
    fn read<T: Send + 'static>(
        &self,
        f: impl Fn(&Connection, &Mutex<Cache>) -> Result<T, CheckpointError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, CheckpointError>> {
        let inner = self.inner.clone();
        let job = move || -> Result<T, CheckpointError> {
            let conn = match inner
                .readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop()
            {
                Some(c) => c,
                None => schema::connect(&inner.path, &inner.options)?,
            };
            // One read transaction: the statements of a read see one snapshot of the file,
            // and take the WAL read lock once instead of once per statement.
            let result = retry_busy(|| {
                let tx = conn.unchecked_transaction().map_err(schema::storage)?;
                f(&tx, &inner.cache)
            });
            inner
                .readers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(conn);
            result
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let task = handle.spawn_blocking(job);
                Box::pin(async move {
                    task.await.unwrap_or_else(|e| {
                        Err(CheckpointError::Storage(
                            format!("read task failed: {e}").into(),
                        ))
                    })
                })
            }
            Err(_) => Box::pin(futures::future::ready(job())),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(tx);
        if let Some(handle) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = handle.join();
        }
    }
}

/// Whether an error is SQLite's "busy/locked" (worth retrying).
fn is_busy(e: &CheckpointError) -> bool {
    match e {
        CheckpointError::Storage(inner) => inner
            .downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
            .is_some_and(|c| matches!(c, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)),
        _ => false,
    }
}

/// Retry an operation while SQLite reports the database busy, for up to a minute (each try
/// already waits out the busy timeout).
fn retry_busy<T>(mut f: impl FnMut() -> Result<T, CheckpointError>) -> Result<T, CheckpointError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match f() {
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            other => return other,
        }
    }
}

/// The next jobs: polled for up to 300 µs first (yielding the CPU between polls), then waited
/// for. A `sync` run hands over its next checkpoint a few microseconds after it hears of the
/// last commit, and a short `async` run its batch a run start and a few steps after the last
/// one; catching them without a sleep and a wake-up saved about 40 µs per durable commit and
/// about 15% of a short `async` run here (one run each).
fn next_jobs(rx: &mpsc::Receiver<Vec<Job>>) -> Result<Vec<Job>, mpsc::RecvError> {
    let until = Instant::now() + Duration::from_micros(300);
    loop {
        match rx.try_recv() {
            Ok(jobs) => return Ok(jobs),
            Err(mpsc::TryRecvError::Disconnected) => return Err(mpsc::RecvError),
            Err(mpsc::TryRecvError::Empty) if Instant::now() < until => std::thread::yield_now(),
            Err(mpsc::TryRecvError::Empty) => return rx.recv(),
        }
    }
}

/// How long an open group waits for the next checkpoint of a run that said more follow.
const MORE_IDLE: Duration = Duration::from_micros(100);
/// How long a group stays open for more at most (the write lock is held meanwhile).
const MORE_MAX: Duration = Duration::from_millis(2);
/// Most operations in one group.
const MAX_GROUP: usize = 512;

/// Commit queued operations in groups, one transaction per group.
///
/// A group takes every job queued when it starts. If every job says more checkpoints of its
/// run follow (durability `async` hands each checkpoint over as the run makes it), the writer
/// runs the group's SQL at once and, before committing, waits up to [`MORE_IDLE`] for each
/// next job, runs it in the same transaction, and so on, until a job without that hint (the
/// run's flush, a `sync` put, anything else) arrives, the queue stays idle, the group has been
/// open for [`MORE_MAX`], or it holds [`MAX_GROUP`] operations. So a short run's SQL is done
/// while its steps run, and its end waits only for the commit. A group of nothing but flushes
/// is answered at once, without taking the write lock.
fn writer_loop(
    mut conn: Connection,
    rx: mpsc::Receiver<Vec<Job>>,
    cache: Arc<Mutex<Cache>>,
    options: SqliteOptions,
    format: u32,
) {
    let mut writer = ops::WriterState::new(&conn, &options, format);
    writer.make_room(&conn, &options);
    while let Ok(first) = next_jobs(&rx) {
        let opened = Instant::now();
        let mut dones = Vec::new();
        let mut more_follow = true;
        let mut ops = take(first, &mut dones, &mut more_follow);
        while ops.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(jobs) => ops.extend(take(jobs, &mut dones, &mut more_follow)),
                Err(_) => break,
            }
        }
        if ops.iter().all(|op| matches!(op, Op::Flush)) {
            // Everything queued before these flushes was committed by earlier groups (the
            // queue is first in, first out): nothing to wait for, no lock to take.
            for done in dones {
                let _ = done.send(Ok(Reply::Done));
            }
            continue;
        }
        let mut more = || -> Option<Vec<Op>> {
            if !more_follow || dones.len() >= MAX_GROUP || opened.elapsed() >= MORE_MAX {
                return None;
            }
            let until = Instant::now() + MORE_IDLE;
            loop {
                match rx.try_recv() {
                    Ok(jobs) => return Some(take(jobs, &mut dones, &mut more_follow)),
                    Err(mpsc::TryRecvError::Empty) if Instant::now() < until => {
                        std::thread::yield_now();
                    }
                    Err(_) => return None,
                }
            }
        };
        let results = retry_busy_group(&mut conn, &cache, &mut writer, &options, ops, &mut more);
        for (done, result) in dones.into_iter().zip(results) {
            let _ = done.send(result);
        }
    }
    // Fold the WAL back into the main file on a clean close.
    let _ = conn.pragma_update(None, "wal_checkpoint", "TRUNCATE");
}

/// The operations of `jobs`; their reply senders go to `dones`, and `more_follow` stays true
/// only while every job taken says more follow (one without the hint ends the group).
fn take(
    jobs: Vec<Job>,
    dones: &mut Vec<tokio::sync::oneshot::Sender<Result<Reply, CheckpointError>>>,
    more_follow: &mut bool,
) -> Vec<Op> {
    jobs.into_iter()
        .map(|j| {
            *more_follow &= j.more_follow;
            dones.push(j.done);
            j.op
        })
        .collect()
}

/// Run a group in one transaction; if the transaction itself cannot start or commit because
/// the database is busy, retry the whole group.
fn retry_busy_group(
    conn: &mut Connection,
    cache: &Mutex<Cache>,
    writer: &mut ops::WriterState,
    options: &SqliteOptions,
    ops: Vec<Op>,
    more: &mut dyn FnMut() -> Option<Vec<Op>>,
) -> Vec<Result<Reply, CheckpointError>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ops = Some(ops);
    loop {
        let Some(current) = ops.take() else {
            return Vec::new();
        };
        match ops::run_group(conn, cache, writer, options, current, more) {
            ops::GroupResult::Committed(results) => return results,
            ops::GroupResult::Busy(returned) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
                ops = Some(returned);
            }
            ops::GroupResult::Busy(returned) => {
                return returned
                    .iter()
                    .map(|_| {
                        Err(CheckpointError::Storage(
                            "database stayed locked for 60 s".into(),
                        ))
                    })
                    .collect()
            }
            ops::GroupResult::Failed(e, n) => {
                let text = e.to_string();
                return (0..n)
                    .map(|_| Err(CheckpointError::Storage(text.clone().into())))
                    .collect();
            }
        }
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
        self.read(move |conn, cache| ops::get(conn, cache, &thread, &ns, id))
    }

    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| ops::list(conn, cache, &thread, &ns, &options))
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let fut = self.submit(Op::DeleteThread(thread.clone()));
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>> {
        self.read(ops::list_threads)
    }

    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let fut = self.submit(Op::CopyThread {
            from: from.clone(),
            to: to.clone(),
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
                Reply::Done => Ok(0),
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
        self.read(move |conn, cache| ops::changes(conn, cache, &thread, &ns, id))
    }

    fn changes_many<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        ids: Vec<CheckpointId>,
    ) -> BoxFuture<'a, Result<Vec<StepChanges>, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| {
            ids.iter()
                .map(|id| ops::changes(conn, cache, &thread, &ns, *id))
                .collect()
        })
    }

    fn head<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
    ) -> BoxFuture<'a, Result<Option<crate::saver::Head>, CheckpointError>> {
        let (thread, ns) = (thread.clone(), ns.clone());
        self.read(move |conn, cache| ops::head_only(conn, cache, &thread, &ns))
    }

    fn orders_batches(&self) -> bool {
        // `put_many` queues its batch on the writer's channel when it is called.
        true
    }

    fn put_many(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_batch(puts, false)
    }

    fn put_many_more(
        &self,
        puts: Vec<PutCheckpoint>,
    ) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_batch(puts, true)
    }

    fn flush(&self) -> BoxFuture<'_, Result<(), CheckpointError>> {
        let fut = self.submit(Op::Flush);
        Box::pin(async move { fut.await.map(|_| ()) })
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
