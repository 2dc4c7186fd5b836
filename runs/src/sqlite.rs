//! The SQLite backend: the queue as a table of a SQLite file (`sg_run_queue`, beside a
//! saver's tables if it is a checkpoint file), on a connection of its own. Times are this
//! machine's clock in ms; a file is one machine's, so its workers share that clock.
//! Notifications are sent in this process.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};
use serde_json::Value;
use stategraph_checkpoints::StorageError;
use tokio::sync::broadcast;

use crate::{
    CheckpointError, Lease, Multitask, QueuedRun, RunEnd, RunId, RunQueue, RunStatus, StopRequest,
    ThreadId, TokenUsage, Wakeups,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sg_run_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    thread TEXT NOT NULL,
    input TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    stop TEXT,
    stop_reason TEXT,
    epoch INTEGER NOT NULL DEFAULT 0,
    worker TEXT,
    lease_until INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    usage TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS sg_run_queue_one_running
    ON sg_run_queue (thread) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS sg_run_queue_open
    ON sg_run_queue (seq) WHERE status IN ('pending', 'running');
CREATE INDEX IF NOT EXISTS sg_run_queue_by_thread ON sg_run_queue (thread, seq);
CREATE INDEX IF NOT EXISTS sg_run_queue_pending
    ON sg_run_queue (seq) WHERE status = 'pending';
";

/// Add `usage` (an ended run's token usage as JSON, decision 0083) to a queue table an
/// older build made without it.
fn add_usage_column(conn: &Connection) -> rusqlite::Result<()> {
    let has: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('sg_run_queue') WHERE name = 'usage'",
        [],
        |r| r.get(0),
    )?;
    if has == 0 {
        conn.execute("ALTER TABLE sg_run_queue ADD COLUMN usage TEXT", [])?;
    }
    Ok(())
}

/// The oldest runnable run: a running run whose lease ended before `?1`, or a pending run
/// that is its thread's oldest open run while none of its runs is running.
const RUNNABLE: &str = "SELECT run_id FROM (
         SELECT q.seq, q.run_id FROM sg_run_queue q
         WHERE q.status = 'running' AND q.lease_until < ?1
         UNION ALL
         SELECT q.seq, q.run_id FROM sg_run_queue q
         WHERE q.status = 'pending'
           AND q.seq = (SELECT MIN(o.seq) FROM sg_run_queue o
                        WHERE o.thread = q.thread AND o.status IN ('pending', 'running'))
           AND NOT EXISTS (SELECT 1 FROM sg_run_queue r
                           WHERE r.thread = q.thread AND r.status = 'running'))
     ORDER BY seq LIMIT 1";

/// The columns a [`QueuedRun`] is read from.
const RUN_COLUMNS: &str = "run_id, thread, status, reason, epoch, worker, attempts, stop, \
     stop_reason, created_at, updated_at, lease_until, input, usage";

/// A run queue in a SQLite file. Cloning shares the connection.
#[derive(Debug, Clone)]
pub struct SqliteRunQueue {
    conn: Arc<Mutex<Connection>>,
    notify: broadcast::Sender<Arc<str>>,
}

fn storage(during: &'static str) -> impl FnOnce(rusqlite::Error) -> CheckpointError {
    move |e| CheckpointError::Storage(Box::new(StorageError::new(during, e)))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl SqliteRunQueue {
    /// Open the queue in the SQLite file at `path` (the file and its table are made if
    /// missing; a checkpoint file may hold it beside the saver's tables).
    ///
    /// # Errors
    /// [`CheckpointError::Storage`] when the file cannot be opened or the table made.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        let during = "opening the run queue";
        let mut conn = Connection::open(path).map_err(storage(during))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(storage(during))?;
        // A commit survives the process being killed (it is in the WAL).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(storage(during))?;
        conn.busy_handler(Some(wait_for_the_lock))
            .map_err(storage(during))?;
        conn.execute_batch(SCHEMA).map_err(storage(during))?;
        add_usage_column(&conn).map_err(storage(during))?;
        Ok(SqliteRunQueue {
            conn: Arc::new(Mutex::new(conn)),
            notify: broadcast::channel(1024).0,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Run `f` in an `IMMEDIATE` transaction (it holds the write lock from its first read).
    fn write<T>(
        &self,
        during: &'static str,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, CheckpointError>,
    ) -> Result<T, CheckpointError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(storage(during))?;
        let out = f(&tx)?;
        tx.commit().map_err(storage(during))?;
        Ok(out)
    }

    fn tell(&self, run: &RunId) {
        let _ = self.notify.send(Arc::from(run.as_str()));
    }

    /// Every running run's lease ends now, so the next lease takes it over: what a process
    /// that is the file's only worker does when it starts, its previous self having died
    /// holding leases that would otherwise run out only later. The number of runs.
    ///
    /// # Errors
    /// Storage errors.
    pub fn expire_leases(&self) -> Result<usize, CheckpointError> {
        self.write("ending the leases of a stopped process", |tx| {
            tx.execute(
                "UPDATE sg_run_queue SET lease_until = 0 WHERE status = 'running'",
                [],
            )
            .map_err(storage("ending leases"))
        })
    }

    fn do_submit(
        &self,
        run: &RunId,
        thread: &ThreadId,
        input: &Value,
        strategy: Multitask,
    ) -> Result<Vec<RunId>, CheckpointError> {
        let now = now_ms();
        let (asked, ended) = self.write("queueing a run", |tx| {
            let made_way = make_way(tx, thread, run, strategy, now)?;
            tx.execute(
                "INSERT INTO sg_run_queue (run_id, thread, input, status, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'pending', ?4, ?4)",
                params![run.as_str(), thread.as_str(), input.to_string(), now],
            )
            .map_err(storage("queueing a run"))?;
            Ok(made_way)
        })?;
        // The runs asked to stop hear it at once, as the new run's workers do.
        for other in asked.iter().chain(&ended).chain([run]) {
            self.tell(other);
        }
        Ok(ended)
    }

    fn do_lease(
        &self,
        worker: &str,
        lease_for: Duration,
    ) -> Result<Option<Lease>, CheckpointError> {
        let now = now_ms();
        let runnable = |conn: &Connection| -> Result<Option<String>, CheckpointError> {
            conn.prepare_cached(RUNNABLE)
                .and_then(|mut s| s.query_row([now], |r| r.get(0)).optional())
                .map_err(storage("finding a runnable run"))
        };
        // Looked for first without the write lock: most looks find nothing (a worker looks
        // again after each lease and each notification), and need not queue for it.
        if runnable(&self.lock())?.is_none() {
            return Ok(None);
        }
        let leased = self.write("leasing a run", |tx| {
            let candidate = runnable(tx)?;
            let Some(run) = candidate else {
                return Ok(None);
            };
            let leased = tx
                .prepare_cached(
                    "UPDATE sg_run_queue SET status = 'running', epoch = epoch + 1, worker = ?2,
                         lease_until = ?3, attempts = attempts + 1, updated_at = ?4
                     WHERE run_id = ?1
                     RETURNING run_id, thread, epoch, input, attempts, stop, created_at",
                )
                .and_then(|mut s| {
                    s.query_row(
                        params![run, worker, now.saturating_add(ms(lease_for)), now],
                        |r| lease_of(r, worker),
                    )
                })
                .map_err(storage("leasing a run"))?;
            if let Err(e) = &leased {
                // Its id or thread does not read: it ends here (as on PostgreSQL), so the
                // next lease goes past it, and the error is reported.
                tx.execute(
                    "UPDATE sg_run_queue SET status = 'error', reason = ?2, lease_until = NULL
                     WHERE run_id = ?1",
                    params![run, e.to_string()],
                )
                .map_err(storage("ending a run whose row does not read"))?;
            }
            Ok(Some(leased))
        })?;
        leased.transpose()
    }

    fn do_heartbeat(
        &self,
        lease: &Lease,
        lease_for: Duration,
    ) -> Result<Option<StopRequest>, CheckpointError> {
        let until = now_ms().saturating_add(ms(lease_for));
        let stop: Option<Option<String>> = self
            .lock()
            .prepare_cached(
                "UPDATE sg_run_queue SET lease_until = ?3
                 WHERE run_id = ?1 AND epoch = ?2 AND status = 'running' RETURNING stop",
            )
            .and_then(|mut s| {
                s.query_row(params![lease.run.as_str(), epoch(lease), until], |r| {
                    r.get(0)
                })
                .optional()
            })
            .map_err(storage("extending a lease"))?;
        match stop {
            Some(stop) => Ok(stop.as_deref().and_then(StopRequest::parse)),
            None => Err(lost(lease)),
        }
    }

    fn do_finish(
        &self,
        lease: &Lease,
        end: &RunEnd,
        usage: Option<TokenUsage>,
    ) -> Result<(), CheckpointError> {
        let stopped = matches!(end, RunEnd::Stopped(_));
        let usage = usage
            .map(|u| serde_json::to_string(&u))
            .transpose()
            .map_err(|e| StorageError::new("encoding a run's usage", e))?;
        let ended = self.write("ending a run", |tx| {
            tx.prepare_cached(
                "UPDATE sg_run_queue
                 SET status = ?3, reason = CASE WHEN ?5 THEN stop_reason ELSE ?4 END,
                     lease_until = NULL, updated_at = ?6, usage = ?7
                 WHERE run_id = ?1 AND epoch = ?2 AND status = 'running'",
            )
            .and_then(|mut s| {
                s.execute(params![
                    lease.run.as_str(),
                    epoch(lease),
                    end.status().as_str(),
                    end.reason(),
                    stopped,
                    now_ms(),
                    usage
                ])
            })
            .map_err(storage("ending a run"))
        })?;
        if ended == 0 {
            return Err(lost(lease));
        }
        self.tell(&lease.run);
        Ok(())
    }

    fn do_stop(&self, run: &RunId, request: StopRequest) -> Result<RunStatus, CheckpointError> {
        let reason = match request {
            StopRequest::Cancel => "cancelled on request",
            StopRequest::Interrupt => "interrupted on request",
            StopRequest::Rollback => "rolled back on request",
        };
        let now = now_ms();
        self.write("stopping a run", |tx| {
            if read_run(tx, run)?.is_none() {
                return Err(CheckpointError::RunNotFound { run: run.clone() });
            }
            if !end_pending(tx, run, pending_end(request), reason, now)? {
                ask_stop(tx, run, request, reason, now)?;
            }
            Ok(())
        })?;
        self.tell(run);
        let found = read_run(&self.lock(), run)?;
        Ok(found.map_or(RunStatus::Cancelled, |r| r.status))
    }

    fn do_forget(&self, run: &RunId) -> Result<bool, CheckpointError> {
        self.lock()
            .execute(
                "DELETE FROM sg_run_queue
                 WHERE run_id = ?1 AND status NOT IN ('pending', 'running')",
                [run.as_str()],
            )
            .map(|n| n == 1)
            .map_err(storage("forgetting a run"))
    }

    fn do_runs(&self, thread: &ThreadId) -> Result<Vec<QueuedRun>, CheckpointError> {
        let now = now_ms();
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM sg_run_queue WHERE thread = ?1 ORDER BY seq"
            ))
            .map_err(storage("listing runs"))?;
        let rows = stmt
            .query_map([thread.as_str()], |r| queued_of(r, now))
            .map_err(storage("listing runs"))?;
        rows.map(|r| r.map_err(storage("listing runs"))?).collect()
    }
}

/// A busy handler for a connection that shares its file with a saver's writer (which holds
/// the write lock for its commits): wait in 0.1 ms slices, not SQLite's back-off of up to
/// 100 ms, for up to 10 s. On a multi-threaded runtime the wait tells the runtime it blocks,
/// so the worker's other tasks go on on another thread meanwhile.
pub fn wait_for_the_lock(tries: i32) -> bool {
    let nap = || std::thread::sleep(Duration::from_micros(100));
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(nap),
        _ => nap(),
    }
    tries < 100_000
}

/// The status a pending run stopped with `request` ends with.
fn pending_end(request: StopRequest) -> RunStatus {
    match request {
        StopRequest::Interrupt => RunStatus::Interrupted,
        StopRequest::Cancel | StopRequest::Rollback => RunStatus::Cancelled,
    }
}

fn epoch(lease: &Lease) -> i64 {
    i64::try_from(lease.epoch).unwrap_or(i64::MAX)
}

fn lost(lease: &Lease) -> CheckpointError {
    CheckpointError::LeaseLost {
        run: lease.run.clone(),
        epoch: lease.epoch,
    }
}

/// What `strategy` does to `thread`'s unfinished runs before `run` joins them: the runs it
/// asked to stop (to be told at once), and the pending runs it ended.
fn make_way(
    tx: &Transaction<'_>,
    thread: &ThreadId,
    run: &RunId,
    strategy: Multitask,
    now: i64,
) -> Result<(Vec<RunId>, Vec<RunId>), CheckpointError> {
    let (mut asked, mut ended) = (Vec::new(), Vec::new());
    if strategy == Multitask::Enqueue {
        return Ok((asked, ended));
    }
    let open: Vec<(String, String)> = tx
        .prepare_cached(
            "SELECT run_id, status FROM sg_run_queue
             WHERE thread = ?1 AND status IN ('pending', 'running') ORDER BY seq",
        )
        .and_then(|mut s| {
            s.query_map([thread.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(storage("reading open runs"))?;
    for (other, status) in open {
        let other = RunId::new(&other)?;
        let running = status == "running";
        if strategy == Multitask::Reject {
            return Err(CheckpointError::ThreadBusy {
                thread: thread.clone(),
                run: other,
                status: if running {
                    RunStatus::Running
                } else {
                    RunStatus::Pending
                },
            });
        }
        let reason = format!("superseded by run {run} ({})", strategy.as_str());
        if running {
            let stop = if strategy == Multitask::Rollback {
                StopRequest::Rollback
            } else {
                StopRequest::Interrupt
            };
            ask_stop(tx, &other, stop, &reason, now)?;
            asked.push(other);
        } else {
            end_pending(tx, &other, RunStatus::Cancelled, &reason, now)?;
            ended.push(other);
        }
    }
    Ok((asked, ended))
}

fn ask_stop(
    tx: &Connection,
    run: &RunId,
    stop: StopRequest,
    reason: &str,
    now: i64,
) -> Result<(), CheckpointError> {
    tx.execute(
        "UPDATE sg_run_queue SET stop = ?2, stop_reason = ?3, updated_at = ?4
         WHERE run_id = ?1 AND status = 'running' AND stop IS NULL",
        params![run.as_str(), stop.as_str(), reason, now],
    )
    .map(drop)
    .map_err(storage("asking a run to stop"))
}

/// End a pending run; whether it was pending.
fn end_pending(
    tx: &Connection,
    run: &RunId,
    status: RunStatus,
    reason: &str,
    now: i64,
) -> Result<bool, CheckpointError> {
    tx.execute(
        "UPDATE sg_run_queue SET status = ?2, reason = ?3, updated_at = ?4
         WHERE run_id = ?1 AND status = 'pending'",
        params![run.as_str(), status.as_str(), reason, now],
    )
    .map(|n| n == 1)
    .map_err(storage("ending a pending run"))
}

fn read_run(conn: &Connection, run: &RunId) -> Result<Option<QueuedRun>, CheckpointError> {
    let now = now_ms();
    conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM sg_run_queue WHERE run_id = ?1"
    ))
    .and_then(|mut s| {
        s.query_row([run.as_str()], |r| queued_of(r, now))
            .optional()
    })
    .map_err(storage("reading a run"))?
    .transpose()
}

fn bad_row(run: &str, detail: &str) -> CheckpointError {
    CheckpointError::Integrity {
        thread: "-".to_owned(),
        checkpoint: "-".to_owned(),
        blob: format!("sg_run_queue row of run {run}"),
        detail: detail.to_owned(),
    }
}

/// A leased row as a [`Lease`]: an input that does not read makes a lease whose
/// `unreadable` says why (the run must end, not stay the oldest runnable one).
fn lease_of(r: &Row<'_>, worker: &str) -> rusqlite::Result<Result<Lease, CheckpointError>> {
    let run: String = r.get(0)?;
    let thread: String = r.get(1)?;
    let input: String = r.get(3)?;
    let attempts: i64 = r.get(4)?;
    let stop: Option<String> = r.get(5)?;
    let (epoch, created): (i64, i64) = (r.get(2)?, r.get(6)?);
    Ok((|| {
        let mut unreadable = None;
        let input = serde_json::from_str(&input).unwrap_or_else(|e| {
            unreadable = Some(format!("the run's stored input does not read: {e}"));
            Value::Null
        });
        Ok(Lease {
            run: RunId::new(&run).map_err(|e| bad_row(&run, &e.to_string()))?,
            thread: ThreadId::new(&thread).map_err(|e| bad_row(&run, &e.to_string()))?,
            epoch: u64::try_from(epoch).unwrap_or(0),
            worker: worker.to_owned(),
            input,
            command: None,
            attempt: u32::try_from(attempts).unwrap_or(0),
            // The queue keeps no log of a run's writes: a run leased before may have
            // written; its worker reads the thread's head to know.
            resumed: attempts > 1,
            stop: stop.as_deref().and_then(StopRequest::parse),
            created_at_ms: u64::try_from(created).unwrap_or(0),
            unreadable,
        })
    })())
}

fn queued_of(r: &Row<'_>, now: i64) -> rusqlite::Result<Result<QueuedRun, CheckpointError>> {
    let run: String = r.get(0)?;
    let thread: String = r.get(1)?;
    let status: String = r.get(2)?;
    let reason: Option<String> = r.get(3)?;
    let stop: Option<String> = r.get(7)?;
    let stop_reason: Option<String> = r.get(8)?;
    let lease_until: Option<i64> = r.get(11)?;
    let (epoch, worker, attempts): (i64, Option<String>, i64) = (r.get(4)?, r.get(5)?, r.get(6)?);
    let (created, updated): (i64, i64) = (r.get(9)?, r.get(10)?);
    let input: String = r.get(12)?;
    let usage: Option<String> = r.get(13)?;
    Ok((|| {
        let status = RunStatus::parse(&status)
            .ok_or_else(|| bad_row(&run, &format!("unknown status `{}`", status.escape_debug())))?;
        Ok(QueuedRun {
            run: RunId::new(&run).map_err(|e| bad_row(&run, &e.to_string()))?,
            thread: ThreadId::new(&thread).map_err(|e| bad_row(&run, &e.to_string()))?,
            status,
            reason: reason.or(stop_reason.filter(|_| !status.is_terminal())),
            epoch: u64::try_from(epoch).unwrap_or(0),
            worker,
            attempts: u32::try_from(attempts).unwrap_or(0),
            stop: stop.as_deref().and_then(StopRequest::parse),
            created_at_ms: u64::try_from(created).unwrap_or(0),
            updated_at_ms: u64::try_from(updated).unwrap_or(0),
            lease_expired: status == RunStatus::Running && lease_until.is_some_and(|u| u < now),
            input: serde_json::from_str(&input).unwrap_or(Value::Null),
            usage: usage
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(|e| bad_row(&run, &format!("its usage does not read: {e}")))?,
        })
    })())
}

impl RunQueue for SqliteRunQueue {
    fn submit_as<'a>(
        &'a self,
        run: &'a RunId,
        thread: &'a ThreadId,
        input: &'a Value,
        strategy: Multitask,
    ) -> BoxFuture<'a, Result<Vec<RunId>, CheckpointError>> {
        Box::pin(async move { self.do_submit(run, thread, input, strategy) })
    }

    fn lease<'a>(
        &'a self,
        worker: &'a str,
        lease_for: Duration,
    ) -> BoxFuture<'a, Result<Option<Lease>, CheckpointError>> {
        Box::pin(async move { self.do_lease(worker, lease_for) })
    }

    fn heartbeat<'a>(
        &'a self,
        lease: &'a Lease,
        lease_for: Duration,
    ) -> BoxFuture<'a, Result<Option<StopRequest>, CheckpointError>> {
        Box::pin(async move { self.do_heartbeat(lease, lease_for) })
    }

    fn finish_with<'a>(
        &'a self,
        lease: &'a Lease,
        end: RunEnd,
        usage: Option<TokenUsage>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move { self.do_finish(lease, &end, usage) })
    }

    fn stop<'a>(
        &'a self,
        run: &'a RunId,
        request: StopRequest,
    ) -> BoxFuture<'a, Result<RunStatus, CheckpointError>> {
        Box::pin(async move { self.do_stop(run, request) })
    }

    fn run<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<QueuedRun>, CheckpointError>> {
        Box::pin(async move { read_run(&self.lock(), run) })
    }

    fn runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<QueuedRun>, CheckpointError>> {
        Box::pin(async move { self.do_runs(thread) })
    }

    fn forget<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        Box::pin(async move { self.do_forget(run) })
    }

    fn wakeups(&self) -> BoxFuture<'_, Wakeups> {
        Box::pin(async move { Wakeups::local(&self.notify) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_table_made_without_the_usage_column_gets_it_and_keeps_its_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        {
            let conn = Connection::open(&path).expect("open");
            let old = SCHEMA.replace(",\n    usage TEXT", "");
            assert!(!old.contains("usage"), "{old}");
            conn.execute_batch(&old).expect("old schema");
            conn.execute(
                "INSERT INTO sg_run_queue(run_id, thread, input, status, created_at, \
                 updated_at) VALUES ('r1', 't', 'null', 'success', 1, 1)",
                [],
            )
            .expect("old run");
        }
        let q = SqliteRunQueue::open(&path).expect("reopen");
        let run = read_run(&q.lock(), &RunId::new("r1").expect("id"))
            .expect("read")
            .expect("held");
        assert_eq!((run.status, run.usage), (RunStatus::Success, None));
    }
}
