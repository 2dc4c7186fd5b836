//! The records on SQLite: the threads, a table of the checkpoint file beside the saver's
//! and the run queue's (whose runs are the server's runs). A thread reads `busy` while the
//! queue holds an unfinished run of it. A file whose runs an earlier build kept in
//! `server_runs` has them moved into the queue when it is opened.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::{Map, Value};

use super::{search_terms, ThreadRow, ThreadStatus};
use crate::error::{ApiError, ApiResult};
use crate::ids::now_ms;
use crate::runs::Frame;
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
CREATE TABLE IF NOT EXISTS server_frames (
    run_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, attempt, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS server_results (
    run_id TEXT PRIMARY KEY,
    result TEXT NOT NULL,
    at INTEGER NOT NULL
);
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
        conn.busy_handler(Some(stategraph_runs::wait_for_the_lock))?;
        conn.execute_batch(SCHEMA)?;
        move_old_runs(&mut conn)?;
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
            c.prepare_cached(&thread_by_id())?
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
                .prepare_cached(&thread_by_id())?
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

    /// Delete a thread's record; whether it existed.
    pub(crate) fn delete_thread(&self, id: &str) -> ApiResult<bool> {
        self.with(|c| {
            c.prepare_cached("DELETE FROM server_threads WHERE thread_id = ?1")?
                .execute([id])
        })
        .map(|n| n == 1)
    }

    /// Keep frames of attempt `attempt` of a run (a resumable one's log, in the file).
    pub(crate) fn keep_frames(&self, run: &str, attempt: u32, frames: &[Frame]) -> ApiResult<()> {
        self.with(|c| {
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT OR IGNORE INTO server_frames VALUES (?1, ?2, ?3, ?4, ?5)",
                )?;
                for f in frames {
                    let seq = i64::try_from(f.seq).unwrap_or(i64::MAX);
                    insert.execute(params![run, attempt, seq, &*f.event, &*f.data])?;
                }
            }
            tx.commit()
        })
    }

    /// Drop a run's kept frames of attempt numbers below `seq` (its log's bound).
    pub(crate) fn trim_run_frames(&self, run: &str, below: u64) -> ApiResult<()> {
        let below = i64::try_from(below).unwrap_or(i64::MAX);
        self.with(|c| {
            c.prepare_cached("DELETE FROM server_frames WHERE run_id = ?1 AND seq < ?2")?
                .execute(params![run, below])
                .map(drop)
        })
    }

    /// Keep what `wait` and `join` answer for a run.
    pub(crate) fn keep_result(&self, run: &str, result: &Value) -> ApiResult<()> {
        self.with(|c| {
            c.prepare_cached("INSERT OR REPLACE INTO server_results VALUES (?1, ?2, ?3)")?
                .execute(params![run, result.to_string(), now_ms()])
                .map(drop)
        })
    }

    /// What the file kept of a run: its last attempt's number and frames, and its result.
    pub(crate) fn kept(&self, run: &str) -> ApiResult<(u32, Vec<Frame>, Option<Value>)> {
        self.with(|c| {
            let attempt: Option<u32> = c
                .prepare_cached("SELECT MAX(attempt) FROM server_frames WHERE run_id = ?1")?
                .query_row([run], |r| r.get(0))?;
            let attempt = attempt.unwrap_or(1);
            let frames = c
                .prepare_cached(
                    "SELECT seq, event, data FROM server_frames
                     WHERE run_id = ?1 AND attempt = ?2 ORDER BY seq",
                )?
                .query_map(params![run, attempt], |r| {
                    Ok(Frame {
                        seq: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                        attempt,
                        event: r.get::<_, String>(1)?.into(),
                        data: r.get::<_, String>(2)?.into(),
                    })
                })?
                .collect::<rusqlite::Result<Vec<Frame>>>()?;
            let result: Option<String> = c
                .prepare_cached("SELECT result FROM server_results WHERE run_id = ?1")?
                .query_row([run], |r| r.get(0))
                .optional()?;
            let result = result.and_then(|t| serde_json::from_str(&t).ok());
            Ok((attempt, frames, result))
        })
    }

    /// Delete what the file kept of a run.
    pub(crate) fn delete_kept(&self, run: &str) -> ApiResult<()> {
        self.with(|c| {
            c.prepare_cached("DELETE FROM server_frames WHERE run_id = ?1")?
                .execute([run])?;
            c.prepare_cached("DELETE FROM server_results WHERE run_id = ?1")?
                .execute([run])
                .map(drop)
        })
    }

    /// Delete what the file kept of runs that ended before `cutoff` (ms).
    pub(crate) fn trim_kept(&self, cutoff: i64) -> ApiResult<()> {
        self.with(|c| {
            let gone = "SELECT run_id FROM sg_run_queue
                        WHERE status NOT IN ('pending', 'running') AND updated_at < ?1";
            c.execute(
                &format!("DELETE FROM server_frames WHERE run_id IN ({gone})"),
                [cutoff],
            )?;
            c.execute(
                &format!(
                    "DELETE FROM server_results WHERE run_id IN ({gone}) OR at < ?1 - 86400000"
                ),
                [cutoff],
            )
            .map(drop)
        })
    }

    /// Threads matching a search: metadata containment (each top-level key present with an
    /// equal value of the same JSON type; an object value must be equal, not contained),
    /// ids, status; sorted and paged.
    pub(crate) fn search_threads(&self, q: &ThreadSearch) -> ApiResult<Vec<ThreadRow>> {
        let mut sql = format!("SELECT * FROM ({THREADS}) WHERE 1 = 1");
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
            " ORDER BY {col} {order}, seq {order} LIMIT {} OFFSET {}",
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

/// The threads, each with its status as the queue makes it, and its place for sorting.
const THREADS: &str = "SELECT t.thread_id, t.created_at, t.updated_at, t.metadata,
         CASE WHEN EXISTS (SELECT 1 FROM sg_run_queue q
             WHERE q.thread = t.thread_id AND q.status IN ('pending', 'running'))
         THEN 'busy' ELSE t.status END AS status,
         t.error, t.rowid AS seq
     FROM server_threads t";

/// The thread of id `?1`.
fn thread_by_id() -> String {
    format!("SELECT * FROM ({THREADS}) WHERE thread_id = ?1")
}

/// Move the runs an earlier build kept in `server_runs` into the run queue, each as its
/// ticket, in one transaction; then drop the table. A run left running is taken over by the
/// next lease, one attempt more.
fn move_old_runs(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let old: i64 = tx.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'server_runs'",
        [],
        |r| r.get(0),
    )?;
    if old == 1 {
        tx.execute_batch(
            "INSERT OR IGNORE INTO sg_run_queue
                 (run_id, thread, input, status, epoch, lease_until, attempts, created_at,
                  updated_at)
             SELECT run_id, thread_id,
                 json_object('assistant_id', assistant_id, 'graph_id', graph_id,
                     'metadata', json(metadata), 'multitask', multitask_strategy,
                     'request', json(request), 'stateless', json(CASE WHEN stateless
                         THEN 'true' ELSE 'false' END)),
                 status, attempt, CASE WHEN status = 'running' THEN 0 END, attempt,
                 created_at, updated_at
             FROM server_runs ORDER BY rowid;
             DROP TABLE server_runs;",
        )?;
    }
    tx.commit()
}

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
