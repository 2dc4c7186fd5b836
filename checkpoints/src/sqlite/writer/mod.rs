//! The writer thread: the one connection that writes, taking the operations queued by every
//! clone of a saver and committing them in groups, one transaction per group.

mod group;
pub(crate) mod memory;

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::cache::RecordCache;
use super::high_water::HighWater;
use super::record::StoredControl;
use super::schema::SqliteOptions;
use crate::graph_shape::GraphShape;
use crate::{
    CheckpointError, CheckpointId, DeliveryReceipt, Namespace, PendingWrite, PutCheckpoint,
    Retention, RunId, RunRecord, StorageError, ThreadId,
};
use memory::WriterMemory;

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
    /// Copy a thread, or with `head` one branch of it.
    CopyThread {
        from: ThreadId,
        to: ThreadId,
        head: Option<CheckpointId>,
    },
    Prune {
        thread: ThreadId,
        retention: Retention,
    },
    /// Store or update a run.
    PutRun(Box<RunRecord>),
    /// Store a run's delivery receipt unless it has one.
    PutReceipt {
        run: RunId,
        receipt: DeliveryReceipt,
    },
    /// Record the graph a thread's next checkpoints are made by.
    PutGraph {
        thread: ThreadId,
        shape: Arc<GraphShape>,
    },
    /// Store node cache entries.
    PutCache(Vec<crate::node_cache::CacheEntry>),
    /// Drop the node cache entries of these namespaces.
    ClearCache(Vec<String>),
    /// Nothing to store: ends a group kept open for more (see [`Writer::run`]).
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
    /// The operation storing `put`; fails if its control state cannot be encoded.
    pub(crate) fn op(mut put: PutCheckpoint) -> Result<Op, CheckpointError> {
        let control = std::mem::take(&mut put.checkpoint.control);
        let control = StoredControl::from_control(control)
            .map_err(|e| StorageError::new("encoding the control state", e))?;
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
    /// Whether a put-if-absent stored its value.
    Stored(bool),
}

/// Where an operation's reply goes.
pub(crate) type ReplyTo = tokio::sync::oneshot::Sender<Result<Reply, CheckpointError>>;

/// An operation queued for the writer.
pub(crate) struct Job {
    pub(crate) op: Op,
    pub(crate) done: ReplyTo,
    /// More checkpoints of the same run follow at once: the writer may keep its transaction
    /// open for them (see [`Writer::run`]).
    pub(crate) more_follow: bool,
}

/// How long an open group waits for the next checkpoint of a run that said more follow.
const MORE_IDLE: Duration = Duration::from_micros(100);
/// How long a group stays open for more at most (the write lock is held meanwhile).
const MORE_MAX: Duration = Duration::from_millis(2);
/// Most operations in one group.
const MAX_GROUP: usize = 512;

/// The writer thread's state: its connection, what it remembers, the saver's records cache.
pub(crate) struct Writer {
    conn: Connection,
    cache: Arc<Mutex<RecordCache>>,
    memory: WriterMemory,
    options: SqliteOptions,
    high_water: HighWater,
}

impl Writer {
    /// A writer on `conn`, a file of format `format`.
    pub(crate) fn new(
        conn: Connection,
        cache: Arc<Mutex<RecordCache>>,
        options: SqliteOptions,
        format: u32,
        high_water: HighWater,
    ) -> Writer {
        let memory = WriterMemory::new(&conn, &options, format);
        Writer {
            conn,
            cache,
            memory,
            options,
            high_water,
        }
    }

    /// Commit queued operations in groups, one transaction per group, until every sender
    /// is gone; then fold the WAL back into the main file (see [`Writer::close`]).
    ///
    /// A group takes every job queued when it starts. If every job says more checkpoints of
    /// its run follow (durability `async` hands each checkpoint over as the run makes it), the
    /// writer runs the group's SQL at once and, before committing, waits up to [`MORE_IDLE`]
    /// for each next job, runs it in the same transaction, and so on, until a job without that
    /// hint (the run's flush, a `sync` put, anything else) arrives, the queue stays idle, the
    /// group has been open for [`MORE_MAX`], or it holds [`MAX_GROUP`] operations. So a short
    /// run's SQL is done while its steps run, and its end waits only for the commit. A group
    /// of nothing but flushes is answered at once, without taking the write lock.
    pub(crate) fn run(mut self, rx: mpsc::Receiver<Vec<Job>>) -> Result<(), CheckpointError> {
        self.memory.make_room(&self.conn, &self.options);
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
            let adds_rows = ops
                .iter()
                .any(|op| matches!(op, Op::Put(_) | Op::CopyThread { .. }));
            let results = self.commit_group(ops, &mut more);
            for (done, result) in dones.into_iter().zip(results) {
                let _ = done.send(result);
            }
            if adds_rows {
                self.high_water.after_commit(&self.conn);
            }
            if self.memory.room.disk_low() {
                // The log must not hold the disk's last space (see `wal`).
                self.fold_log();
            }
        }
        self.close()
    }

    /// Fold the WAL back into the main file and truncate it. Another connection still
    /// reading is not a failure (the log stays for a later checkpoint); an error is (a disk
    /// too full for the main file to grow): the WAL's room, if any, is then handed back to
    /// the disk, and the error is returned — the data is safe in the WAL, but the main file
    /// alone does not hold it.
    fn close(mut self) -> Result<(), CheckpointError> {
        let folded = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        match folded {
            Ok(()) => Ok(()),
            Err(e) => {
                self.memory.give_back_room(&self.conn);
                Err(StorageError::new("folding the log into the main file at close", e).into())
            }
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

/// The operations of `jobs`; their reply senders go to `dones`, and `more_follow` stays true
/// only while every job taken says more follow (one without the hint ends the group).
fn take(jobs: Vec<Job>, dones: &mut Vec<ReplyTo>, more_follow: &mut bool) -> Vec<Op> {
    jobs.into_iter()
        .map(|j| {
            *more_follow &= j.more_follow;
            dones.push(j.done);
            j.op
        })
        .collect()
}
