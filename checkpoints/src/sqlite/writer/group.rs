//! A writer group: operations committed in one `BEGIN IMMEDIATE` transaction, retried while
//! the database is busy, with one failing operation kept from undoing the others.

use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::super::schema::SqliteOptions;
use super::super::sql::{is_busy, is_busy_sqlite, is_full, retry_busy, SqlResult};
use super::super::{graphs, maintain, node_cache, pending, runs, write};
use super::memory::{GroupRecords, WriterMemory};
use super::{Op, Reply, Writer};
use crate::{CheckpointError, StorageError, WriteKind};

/// One reply per operation of a group, in order.
type Replies = Vec<Result<Reply, CheckpointError>>;
/// Where a group finds operations that arrived while it ran (`None`: no more).
type More<'m> = &'m mut dyn FnMut() -> Option<Vec<Op>>;

/// How one try at a group ended.
enum GroupResult {
    /// Committed (each operation's own result; a failed one's writes were undone).
    Committed(Replies),
    /// The database was locked: nothing was done; try the same operations again.
    Busy(Vec<Op>, CheckpointError),
    /// Nothing was committed: every one of the operations fails with this error.
    Failed(CheckpointError, Vec<Op>),
}

impl Writer {
    /// Run a group in one transaction; if the transaction itself cannot start or commit
    /// because the database is busy, retry the whole group (for up to a minute). If the disk
    /// is full, fold the WAL into the main file to free the log's space and try once more
    /// (see [`Writer::fold_log`]).
    pub(super) fn commit_group(&mut self, ops: Vec<Op>, more: More<'_>) -> Replies {
        let mut pending = Some(ops);
        let mut folded = false;
        let outcome = retry_busy(
            || match self.run_group(pending.take().unwrap_or_default(), more) {
                GroupResult::Committed(replies) => Ok(replies),
                GroupResult::Failed(e, ops) if is_full(&e) && !folded => {
                    folded = true;
                    self.fold_log();
                    pending = Some(ops);
                    Err(e)
                }
                GroupResult::Failed(e, ops) => Ok(each_fails(e, ops.len())),
                GroupResult::Busy(ops, e) => {
                    pending = Some(ops);
                    Err(e)
                }
            },
            |_| true,
        );
        match outcome {
            Ok(replies) => replies,
            Err(busy) => {
                let n = pending.map_or(0, |ops| ops.len());
                let e = StorageError::new("waiting a minute for the write lock", shared(busy));
                each_fails(e.into(), n)
            }
        }
    }

    /// The disk is full: make no more room in the WAL and fold the log into the main file,
    /// truncating it (a log holds many versions of the same pages, so the main file grows by
    /// far less than the log frees). If even that fails, hand the room's zeros back.
    pub(super) fn fold_log(&mut self) {
        self.memory.room.give_up();
        let folded = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        if folded.is_err() {
            self.memory.give_back_room(&self.conn);
        }
    }

    /// Run `ops` in one transaction.
    ///
    /// Most groups succeed whole, so they first run without a savepoint per op (each
    /// savepoint costs a sub-journal of the pages it touches). If an op fails, that
    /// transaction is rolled back and the group runs again with a savepoint each, so the
    /// failure stays that op's alone (a single op needs no second run: rolling back its
    /// transaction isolates it). If SQLite itself rolls a transaction back (a full disk, an
    /// I/O error), the whole group fails with that error and nothing of it is committed.
    ///
    /// Before committing, the group asks `more` for operations that arrived meanwhile and
    /// runs them in the same transaction, until it answers `None` (see [`Writer::run`]: the
    /// writer keeps a group open while a run says more checkpoints follow). A group run again
    /// with savepoints takes no more.
    fn run_group(&mut self, ops: Vec<Op>, more: More<'_>) -> GroupResult {
        match self.run_together(ops, more) {
            Ok(done) => done,
            Err(ops) => self.run_isolated(ops),
        }
    }

    /// The group's ops in one transaction with nothing between them; if one fails (and it is
    /// not alone), the transaction is rolled back and the ops come back to be run isolated.
    fn run_together(&mut self, mut ops: Vec<Op>, more: More<'_>) -> Result<GroupResult, Vec<Op>> {
        crate::failpoint::hit("group.before_begin");
        let tx = match begin(&mut self.conn, &mut self.memory) {
            Ok(tx) => tx,
            Err(e) => return Ok(refused(e, ops)),
        };
        let mut records = GroupRecords::new(&self.cache, &mut self.memory);
        let mut results = Vec::with_capacity(ops.len());
        let mut i = 0;
        while has_op(&mut ops, i, more) {
            let n = ops.len();
            match run_op(&tx, &mut records, &self.options, &ops[i]) {
                Ok(reply) => results.push(Ok(reply)),
                Err(e) => {
                    records.memory.forget();
                    drop(tx);
                    return if is_busy(&e) {
                        Ok(GroupResult::Busy(ops, e))
                    } else if is_full(&e) {
                        // Not one op's fault: the group fails whole (and is tried again once
                        // the log is folded, see `commit_group`).
                        Ok(GroupResult::Failed(e, ops))
                    } else if n == 1 {
                        // Alone in its transaction: rolling it back isolates the failure.
                        Ok(GroupResult::Committed(vec![Err(e)]))
                    } else {
                        // Run the group again with a savepoint per op, so only the failing op
                        // fails (unless SQLite rolls the whole transaction back again).
                        Err(ops)
                    };
                }
            }
            i += 1;
        }
        Ok(commit(tx, records, results, ops))
    }

    /// The group's ops in one transaction, each in a savepoint of its own: a failing op is
    /// rolled back alone and the others commit.
    fn run_isolated(&mut self, ops: Vec<Op>) -> GroupResult {
        crate::failpoint::hit("group.before_begin");
        let mut tx = match begin(&mut self.conn, &mut self.memory) {
            Ok(tx) => tx,
            Err(e) => return refused(e, ops),
        };
        let mut records = GroupRecords::new(&self.cache, &mut self.memory);
        let mut results = Vec::with_capacity(ops.len());
        for op in &ops {
            match run_in_savepoint(&mut tx, &mut records, &self.options, op) {
                Ok(result) => results.push(result),
                Err(Abort::Busy(e)) => {
                    drop(tx);
                    return GroupResult::Busy(ops, e);
                }
                Err(Abort::Failed(e)) => return GroupResult::Failed(e, ops),
            }
        }
        commit(tx, records, results, ops)
    }
}

/// Why a group stops in the middle of a transaction.
enum Abort {
    /// The database is locked: try the group again.
    Busy(CheckpointError),
    /// The transaction is lost: the group fails with this error.
    Failed(CheckpointError),
}

/// Run `op` in a savepoint: its result (a failure rolled back to the savepoint), or why the
/// whole group must stop.
fn run_in_savepoint(
    tx: &mut Transaction<'_>,
    records: &mut GroupRecords<'_>,
    options: &SqliteOptions,
    op: &Op,
) -> Result<Result<Reply, CheckpointError>, Abort> {
    let mark = records.mark();
    let mut sp = match tx.savepoint().during("opening a savepoint") {
        Ok(sp) => sp,
        Err(e) => {
            // The whole transaction is undone: nothing it stored may be remembered.
            records.memory.forget();
            return Err(Abort::Failed(e));
        }
    };
    let e = match run_op(&sp, records, options, op) {
        Ok(reply) => {
            if let Err(e) = sp.commit().during("releasing a savepoint") {
                records.memory.forget();
                return Err(Abort::Failed(e));
            }
            return Ok(Ok(reply));
        }
        Err(e) => e,
    };
    records.memory.forget();
    if is_busy(&e) {
        return Err(Abort::Busy(e));
    }
    if sp.is_autocommit() || is_full(&e) {
        // SQLite rolled the whole transaction back (a full disk, I/O): the ops before this
        // one are gone too, so the group fails with this error. A full disk fails the group
        // even when SQLite kept the transaction: it is no one op's fault.
        return Err(Abort::Failed(e));
    }
    if let Err(undo) = sp.rollback() {
        // The op's partial writes could not be undone: commit nothing.
        let failure = UndoFailed { failure: e, undo };
        return Err(Abort::Failed(
            StorageError::new("undoing a failed operation", failure).into(),
        ));
    }
    drop(sp);
    records.undo_since(mark);
    Ok(Err(e))
}

/// An operation's failure whose partial writes could not be undone.
#[derive(Debug, thiserror::Error)]
#[error("{}; undoing it failed too: {undo}", .failure.detail())]
struct UndoFailed {
    failure: CheckpointError,
    undo: rusqlite::Error,
}

/// Start the group's transaction, holding the write lock: the WAL gets its room and the
/// writer's memory is checked against the file's data version.
fn begin<'c>(
    conn: &'c mut Connection,
    memory: &mut WriterMemory,
) -> Result<Transaction<'c>, CheckpointError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .during("beginning a write transaction")?;
    // Holding the write lock, before anything is written.
    memory.room.ensure();
    let version = tx
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut st| st.query_row([], |r| r.get::<_, i64>(0)))
        .during("reading the data version")?;
    memory.note_data_version(version);
    Ok(tx)
}

/// A group whose transaction could not begin: busy (try again) or failed.
fn refused(e: CheckpointError, ops: Vec<Op>) -> GroupResult {
    if is_busy(&e) {
        GroupResult::Busy(ops, e)
    } else {
        GroupResult::Failed(e, ops)
    }
}

/// Commit the group; on success its records go to the shared cache.
fn commit(
    tx: Transaction<'_>,
    records: GroupRecords<'_>,
    results: Replies,
    ops: Vec<Op>,
) -> GroupResult {
    crate::failpoint::hit("group.before_commit");
    match tx.commit() {
        Ok(()) => {
            crate::failpoint::hit("group.after_commit");
            records.publish();
            GroupResult::Committed(results)
        }
        Err(e) => {
            records.memory.forget();
            let busy = is_busy_sqlite(&e);
            let e = StorageError::new("committing a write transaction", e).into();
            if busy {
                GroupResult::Busy(ops, e)
            } else {
                GroupResult::Failed(e, ops)
            }
        }
    }
}

/// Whether there is an op at `i`, taking more from `more` once the group's are done.
fn has_op(ops: &mut Vec<Op>, i: usize, more: More<'_>) -> bool {
    while i == ops.len() {
        match more() {
            Some(extra) => ops.extend(extra),
            None => return false,
        }
    }
    true
}

fn run_op(
    conn: &Connection,
    records: &mut GroupRecords<'_>,
    options: &SqliteOptions,
    op: &Op,
) -> Result<Reply, CheckpointError> {
    if !matches!(
        op,
        Op::Put(_)
            | Op::PutWrites { .. }
            | Op::PutRun(_)
            | Op::PutReceipt { .. }
            | Op::PutGraph { .. }
            | Op::PutCache(_)
            | Op::ClearCache(_)
            | Op::Flush
    ) {
        // Deleting, copying and pruning move heads and values behind what we remember.
        records.memory.forget();
    }
    match op {
        Op::Put(p) => write::put(conn, records, options, p).map(|()| Reply::Done),
        Op::PutWrites {
            thread,
            ns,
            id,
            writes,
        } => {
            // The last order given here, remembered: a step recording its tasks' writes one
            // by one reads it once, not once per write (each read scans the step's writes).
            let key = (thread.as_str().to_owned(), ns.as_str().to_owned());
            let known = records
                .memory
                .write_ords
                .get(&key)
                .filter(|(at, _)| at == id)
                .map(|(_, ord)| *ord);
            let last = pending::put_writes(conn, thread, ns, *id, writes, known)?;
            records.memory.write_ords.insert(key, (*id, last));
            if writes
                .iter()
                .any(|w| matches!(w.kind, WriteKind::Output(_)))
            {
                let key = (thread.as_str().to_owned(), ns.as_str().to_owned());
                records.memory.recorded_outputs.insert(key, *id);
            }
            Ok(Reply::Done)
        }
        Op::DeleteThread(thread) => {
            maintain::delete_thread(conn, records, thread).map(|()| Reply::Done)
        }
        Op::CopyThread { from, to, head } => {
            maintain::copy_thread(conn, records.memory.holders, from, to, *head)
                .map(|()| Reply::Done)
        }
        Op::Flush => Ok(Reply::Done),
        Op::PutGraph { thread, shape } => {
            graphs::put_graph(conn, records.memory, thread, shape).map(|()| Reply::Done)
        }
        Op::PutRun(run) => runs::put_run(conn, run).map(|()| Reply::Done),
        Op::PutCache(entries) => node_cache::put(conn, entries).map(|()| Reply::Done),
        Op::ClearCache(namespaces) => node_cache::clear(conn, namespaces).map(Reply::Count),
        Op::PutReceipt { run, receipt } => runs::put_receipt(conn, run, receipt).map(Reply::Stored),
        Op::Prune { thread, retention } => {
            maintain::prune(conn, records, thread, *retention).map(Reply::Count)
        }
    }
}

/// The error that undid a whole group, as a storage error every one of its operations can
/// hold: a [`StorageError`] is shared as it is (each operation gets the same typed error);
/// anything else becomes the cause of one.
fn shared(e: CheckpointError) -> StorageError {
    match e {
        CheckpointError::Storage(inner) => match inner.downcast::<StorageError>() {
            Ok(storage) => *storage,
            Err(other) => StorageError::boxed("running a group of writes", other),
        },
        other => StorageError::new("running a group of writes", other),
    }
}

/// `n` replies, each failing with the error that undid their group.
fn each_fails(e: CheckpointError, n: usize) -> Replies {
    let e = shared(e);
    (0..n).map(|_| Err(e.clone().into())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn failures(replies: Replies) -> Result<Vec<CheckpointError>, &'static str> {
        replies
            .into_iter()
            .map(|r| r.err().ok_or("a reply succeeded"))
            .collect()
    }

    #[test]
    fn a_storage_error_that_undid_a_group_reaches_every_op_with_its_type() -> TestResult {
        let cause = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        let e: CheckpointError = StorageError::new("inserting a value row", cause).into();
        let errors = failures(each_fails(e, 3))?;
        assert_eq!(errors.len(), 3);
        for e in errors {
            let storage = e.storage_error().ok_or("not a StorageError")?;
            assert_eq!(storage.during(), "inserting a value row");
            let sqlite = storage.cause().downcast_ref::<rusqlite::Error>();
            assert_eq!(
                sqlite.and_then(rusqlite::Error::sqlite_error_code),
                Some(rusqlite::ErrorCode::DiskFull)
            );
            assert!(e.to_string().contains("full"), "{e}");
        }
        Ok(())
    }

    #[test]
    fn any_other_error_that_undid_a_group_is_the_cause_of_a_storage_error() -> TestResult {
        let e = CheckpointError::InvalidFilterKey { key: "k".into() };
        for e in failures(each_fails(e, 2))? {
            let storage = e.storage_error().ok_or("not a StorageError")?;
            let cause = storage.cause().downcast_ref::<CheckpointError>();
            assert!(matches!(
                cause,
                Some(CheckpointError::InvalidFilterKey { .. })
            ));
            assert!(e.to_string().contains("invalid metadata filter key"), "{e}");
        }
        Ok(())
    }

    #[test]
    fn a_group_takes_more_ops_only_once_its_own_are_done() {
        let mut ops = vec![Op::Flush];
        let mut offered = vec![vec![Op::Flush, Op::Flush], vec![]];
        let mut more = || offered.pop();
        assert!(has_op(&mut ops, 0, &mut more));
        assert_eq!(ops.len(), 1);
        // An empty batch is passed over; the next one is taken.
        assert!(has_op(&mut ops, 1, &mut more));
        assert_eq!(ops.len(), 3);
        assert!(has_op(&mut ops, 2, &mut more));
        assert!(!has_op(&mut ops, 3, &mut more));
    }
}
