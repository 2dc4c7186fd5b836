//! The records on SQLite: tables of the checkpoint file beside the saver's, and the queue's
//! state of each run (the in-process queue keeps the rest).

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::{Map, Value};

use super::{search_terms, RunRow, RunStatus, ThreadRow, ThreadStatus};
use crate::error::{ApiError, ApiResult};
use crate::ids::now_ms;
use crate::wire::ThreadSearch;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS server_threads (
    thread_id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT
);
CREATE TABLE IF NOT EXISTS server_runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    graph_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    multitask_strategy TEXT NOT NULL,
    request TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    stateless INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS server_runs_by_thread ON server_runs(thread_id, run_id);
CREATE INDEX IF NOT EXISTS server_runs_unfinished ON server_runs(status)
    WHERE status IN ('pending', 'running');
";

/// The server's tables, on one connection of their own to the checkpoint file.
#[derive(Debug)]
pub(crate) struct SqliteBook {
    conn: Mutex<Connection>,
}

pub(super) fn storage(e: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(format!("server storage: {e}"))
}

pub(super) fn json_text(m: &Map<String, Value>) -> String {
    Value::Object(m.clone()).to_string()
}

pub(super) fn json_map(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

impl SqliteBook {
    /// Open the tables in `path` (made if missing).
    pub(crate) fn open(path: &Path) -> rusqlite::Result<SqliteBook> {
        let mut conn = Connection::open(path)?;
        // WAL, like the saver; NORMAL sync: a commit survives the process being killed (it
        // is in the WAL), which is what these records need (decision 0079).
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // The saver's writer holds the write lock for its commits: wait in short slices,
        // not SQLite's default back-off of up to 100 ms.
        conn.busy_handler(Some(wait_for_the_lock))?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteBook {
            conn: Mutex::new(conn),
        })
    }

    /// Run `f` on the connection (its transactions begin `IMMEDIATE`: one that read first
    /// and wrote after could not take the write lock once the saver committed in between).
    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> ApiResult<T> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| storage("a request failed while holding the connection"))?;
        f(&conn).map_err(storage)
    }

    /// Create a thread; `Ok(None)` if it exists.
    pub(crate) fn create_thread(
        &self,
        id: &str,
        metadata: &Map<String, Value>,
    ) -> ApiResult<Option<ThreadRow>> {
        let now = now_ms();
        let made = self.with(|c| {
            c.prepare_cached(
                "INSERT INTO server_threads VALUES (?1, ?2, ?2, ?3, 'idle', NULL)
                 ON CONFLICT(thread_id) DO NOTHING",
            )?
            .execute(params![id, now, json_text(metadata)])
        })?;
        Ok((made == 1).then(|| ThreadRow {
            thread_id: id.to_owned(),
            created_at: now,
            updated_at: now,
            metadata: metadata.clone(),
            status: ThreadStatus::Idle,
            error: None,
        }))
    }

    pub(crate) fn thread(&self, id: &str) -> ApiResult<Option<ThreadRow>> {
        self.with(|c| {
            c.prepare_cached(THREAD_BY_ID)?
                .query_row([id], thread_row)
                .optional()
        })
    }

    /// Merge `metadata` into the thread's; `None` if there is no such thread.
    pub(crate) fn merge_metadata(
        &self,
        id: &str,
        metadata: &Map<String, Value>,
    ) -> ApiResult<Option<ThreadRow>> {
        // Read and write in one transaction: a concurrent merge is not lost.
        self.with(|c| {
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)?;
            let Some(mut row) = tx
                .prepare_cached(THREAD_BY_ID)?
                .query_row([id], thread_row)
                .optional()?
            else {
                return Ok(None);
            };
            row.metadata
                .extend(metadata.iter().map(|(k, v)| (k.clone(), v.clone())));
            row.updated_at = now_ms();
            tx.prepare_cached(
                "UPDATE server_threads SET metadata = ?2, updated_at = ?3 WHERE thread_id = ?1",
            )?
            .execute(params![id, json_text(&row.metadata), row.updated_at])?;
            tx.commit()?;
            Ok(Some(row))
        })
    }

    /// Set the thread's status, and its error (`None` clears it).
    pub(crate) fn set_thread_status(
        &self,
        id: &str,
        status: ThreadStatus,
        error: Option<&Value>,
    ) -> ApiResult<()> {
        self.with(|c| set_thread(c, id, status, error))
    }

    /// Delete a thread and its runs; whether it existed.
    pub(crate) fn delete_thread(&self, id: &str) -> ApiResult<bool> {
        self.with(|c| {
            c.prepare_cached("DELETE FROM server_runs WHERE thread_id = ?1")?
                .execute([id])?;
            c.prepare_cached("DELETE FROM server_threads WHERE thread_id = ?1")?
                .execute([id])
        })
        .map(|n| n == 1)
    }

    /// Threads matching a search: metadata containment (each top-level key present with an
    /// equal value of the same JSON type; an object value must be equal, not contained),
    /// ids, status; sorted and paged.
    pub(crate) fn search_threads(&self, q: &ThreadSearch) -> ApiResult<Vec<ThreadRow>> {
        let mut sql = String::from(
            "SELECT thread_id, created_at, updated_at, metadata, status, error FROM server_threads
             WHERE 1 = 1",
        );
        let mut args: Vec<String> = Vec::new();
        for (key, value) in q.metadata.iter().flatten() {
            if key.contains('"') || key.contains('\\') {
                return Err(ApiError::Invalid(format!(
                    "metadata key {key:?}: quotes and backslashes are not allowed"
                )));
            }
            args.push(format!("$.\"{key}\""));
            args.push(value.to_string());
            let (k, v) = (args.len() - 1, args.len());
            // Present, of the same JSON type (numbers as one), and equal: `{"x": null}`
            // does not match a thread without `x`, nor `true` one with `1`.
            sql.push_str(&format!(
                " AND replace(json_type(metadata, ?{k}), 'integer', 'real')
                      = replace(json_type(?{v}), 'integer', 'real')
                  AND json_extract(metadata, ?{k}) IS json_extract(?{v}, '$')"
            ));
        }
        let terms = search_terms(q)?;
        if let Some(status) = terms.status {
            args.push(status.as_str().to_owned());
            sql.push_str(&format!(" AND status = ?{}", args.len()));
        }
        if let Some(ids) = &q.ids {
            let marks: Vec<String> = ids
                .iter()
                .map(|id| {
                    args.push(id.clone());
                    format!("?{}", args.len())
                })
                .collect();
            sql.push_str(&format!(" AND thread_id IN ({})", marks.join(", ")));
        }
        sql.push_str(&format!(
            " ORDER BY {col} {order}, rowid {order} LIMIT {} OFFSET {}",
            terms.limit,
            terms.offset,
            col = terms.column,
            order = terms.order,
        ));
        self.with(|c| {
            let mut stmt = c.prepare(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), thread_row)?;
            rows.collect()
        })
    }

    /// Store a new run, and mark its thread busy, in one transaction.
    pub(crate) fn insert_run(&self, run: &RunRow) -> ApiResult<()> {
        let request = serde_json::to_string(&run.request).map_err(storage)?;
        self.with(|c| {
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)?;
            tx.prepare_cached(
                "INSERT INTO server_runs VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                run.run_id,
                run.thread_id,
                run.assistant_id,
                run.graph_id,
                run.status.as_str(),
                run.created_at,
                json_text(&run.metadata),
                run.multitask.as_str(),
                request,
                run.attempt,
                run.stateless,
            ])?;
            set_thread(&tx, &run.thread_id, ThreadStatus::Busy, None)?;
            tx.commit()
        })
    }

    /// A run starts: `running`, and its thread `busy`, in one transaction.
    pub(crate) fn start_run(&self, run: &str, thread: &str) -> ApiResult<()> {
        self.with(|c| {
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)?;
            update_run(&tx, run, RunStatus::Running)?;
            set_thread(&tx, thread, ThreadStatus::Busy, None)?;
            tx.commit()
        })
    }

    /// Move a run to `status` unless it already ended (a cancellation stored first wins).
    pub(crate) fn set_run_status(&self, run: &str, status: RunStatus) -> ApiResult<()> {
        self.with(|c| update_run(c, run, status).map(drop))
    }

    /// A run left running by a process that stopped goes back to pending, one attempt more.
    pub(crate) fn requeue_run(&self, run: &str) -> ApiResult<()> {
        self.with(|c| {
            c.prepare_cached(
                "UPDATE server_runs SET status = 'pending', attempt = attempt + 1,
                 updated_at = ?2 WHERE run_id = ?1",
            )?
            .execute(params![run, now_ms()])
        })
        .map(drop)
    }

    pub(crate) fn delete_run(&self, run: &str) -> ApiResult<bool> {
        self.with(|c| {
            c.prepare_cached("DELETE FROM server_runs WHERE run_id = ?1")?
                .execute([run])
        })
        .map(|n| n == 1)
    }

    pub(crate) fn run(&self, run: &str) -> ApiResult<Option<RunRow>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM server_runs WHERE run_id = ?1"
            ))?
            .query_row([run], run_row)
            .optional()
        })
    }

    /// A thread's runs, newest first.
    pub(crate) fn runs_of(
        &self,
        thread: &str,
        limit: usize,
        offset: usize,
        status: Option<RunStatus>,
    ) -> ApiResult<Vec<RunRow>> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM server_runs WHERE thread_id = ?1
                 AND (?2 IS NULL OR status = ?2)
                 ORDER BY rowid DESC LIMIT ?3 OFFSET ?4"
            ))?;
            let rows = stmt.query_map(
                params![
                    thread,
                    status.map(RunStatus::as_str),
                    i64::try_from(limit).unwrap_or(i64::MAX),
                    i64::try_from(offset).unwrap_or(i64::MAX)
                ],
                run_row,
            )?;
            rows.collect()
        })
    }

    /// Every pending or running run, oldest first (what a starting server picks up).
    pub(crate) fn unfinished_runs(&self) -> ApiResult<Vec<RunRow>> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM server_runs
                 WHERE status IN ('pending', 'running') ORDER BY rowid"
            ))?;
            let rows = stmt.query_map([], run_row)?;
            rows.collect()
        })
    }
}

/// SQLite's busy handler: the saver's writer holds the file's write lock for its commit.
/// Wait in 0.1 ms slices (not SQLite's back-off of up to 100 ms), for up to 10 s. On a
/// multi-threaded runtime the wait tells the runtime it blocks, so the worker's other tasks
/// go on on another thread meanwhile; uncontended calls pay nothing for it.
fn wait_for_the_lock(tries: i32) -> bool {
    let nap = || std::thread::sleep(Duration::from_micros(100));
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(nap),
        _ => nap(),
    }
    tries < 100_000
}

fn update_run(c: &Connection, run: &str, status: RunStatus) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "UPDATE server_runs SET status = ?2, updated_at = ?3
         WHERE run_id = ?1 AND status IN ('pending', 'running')",
    )?
    .execute(params![run, status.as_str(), now_ms()])
}

fn set_thread(
    c: &Connection,
    id: &str,
    status: ThreadStatus,
    error: Option<&Value>,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE server_threads SET status = ?2, updated_at = ?3, error = ?4
         WHERE thread_id = ?1",
    )?
    .execute(params![
        id,
        status.as_str(),
        now_ms(),
        error.map(Value::to_string)
    ])
    .map(drop)
}

const THREAD_BY_ID: &str = "SELECT thread_id, created_at, updated_at, metadata, status, error
     FROM server_threads WHERE thread_id = ?1";

const RUN_COLUMNS: &str = "run_id, thread_id, assistant_id, graph_id, status, created_at, \
     updated_at, metadata, multitask_strategy, request, attempt, stateless";

fn thread_row(r: &Row<'_>) -> rusqlite::Result<ThreadRow> {
    let status: String = r.get(4)?;
    Ok(ThreadRow {
        thread_id: r.get(0)?,
        created_at: r.get(1)?,
        updated_at: r.get(2)?,
        metadata: json_map(&r.get::<_, String>(3)?),
        status: ThreadStatus::parse(&status).unwrap_or(ThreadStatus::Idle),
        error: r
            .get::<_, Option<String>>(5)?
            .and_then(|e| serde_json::from_str(&e).ok()),
    })
}

fn run_row(r: &Row<'_>) -> rusqlite::Result<RunRow> {
    let status: String = r.get(4)?;
    let multitask: String = r.get(8)?;
    let request: String = r.get(9)?;
    Ok(RunRow {
        run_id: r.get(0)?,
        thread_id: r.get(1)?,
        assistant_id: r.get(2)?,
        graph_id: r.get(3)?,
        status: RunStatus::parse(&status).unwrap_or(RunStatus::Error),
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
        metadata: json_map(&r.get::<_, String>(7)?),
        multitask: serde_json::from_value(Value::String(multitask)).unwrap_or_default(),
        request: serde_json::from_str(&request).unwrap_or_default(),
        attempt: r.get(10)?,
        stateless: r.get(11)?,
    })
}
