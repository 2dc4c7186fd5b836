//! Runs and delivery receipts in the SQLite file (`sg_runs`, `sg_receipts`): the writer's
//! puts and deletes, and the readers' queries.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Row};

use super::sql::SqlResult;
use crate::{CheckpointError, DeliveryReceipt, RunId, RunRecord, RunStatus, ThreadId, TokenUsage};

/// The columns of `sg_runs` a [`RunRecord`] is read from, in [`RunRow::read`]'s order.
const RUN_COLUMNS: &str =
    "run_id, thread, status, reason, stop_reason, created_at, updated_at, metadata, usage";

/// [`RUN_COLUMNS`] in a file whose `sg_runs` has no `usage` column (one written by an older
/// build, opened read-only: a writer adds the column when it opens the file).
const RUN_COLUMNS_WITHOUT_USAGE: &str =
    "run_id, thread, status, reason, stop_reason, created_at, updated_at, metadata, NULL";

/// The columns to read runs with: [`RUN_COLUMNS`], or [`RUN_COLUMNS_WITHOUT_USAGE`] for a
/// file without the `usage` column.
fn run_columns(conn: &Connection) -> Result<&'static str, CheckpointError> {
    let has_usage: i64 = conn
        .prepare_cached("SELECT count(*) FROM pragma_table_info('sg_runs') WHERE name = 'usage'")
        .during("preparing to look for the runs' usage column")?
        .query_row([], |r| r.get(0))
        .during("looking for the runs' usage column")?;
    Ok(if has_usage > 0 {
        RUN_COLUMNS
    } else {
        RUN_COLUMNS_WITHOUT_USAGE
    })
}

/// Add `sg_runs.usage` (a run's token usage as JSON) to a file that lacks it: run in the
/// schema transaction by a writer opening the file. It does not change the format version
/// (an older build names the columns it reads and writes, and leaves this one alone).
pub(crate) fn add_usage_column(conn: &Connection) -> Result<(), CheckpointError> {
    if run_columns(conn)? == RUN_COLUMNS_WITHOUT_USAGE {
        conn.execute("ALTER TABLE sg_runs ADD COLUMN usage TEXT", [])
            .during("adding the runs' usage column")?;
    }
    Ok(())
}

/// An integrity error about a stored run or receipt.
fn damaged(thread: &str, column: &str, detail: String) -> CheckpointError {
    CheckpointError::Integrity {
        thread: thread.to_owned(),
        checkpoint: "-".to_owned(),
        blob: column.to_owned(),
        detail,
    }
}

/// A time stamp as its column stores it (SQLite integers are signed).
fn ms_column(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The raw columns of one `sg_runs` row, before they are checked.
struct RunRow {
    run_id: String,
    thread: String,
    status: String,
    reason: Option<String>,
    stop_reason: Option<String>,
    created_at: i64,
    updated_at: i64,
    metadata: String,
    usage: Option<String>,
}

impl RunRow {
    fn read(r: &Row<'_>) -> rusqlite::Result<RunRow> {
        Ok(RunRow {
            run_id: r.get(0)?,
            thread: r.get(1)?,
            status: r.get(2)?,
            reason: r.get(3)?,
            stop_reason: r.get(4)?,
            created_at: r.get(5)?,
            updated_at: r.get(6)?,
            metadata: r.get(7)?,
            usage: r.get(8)?,
        })
    }

    /// The row as a run; an integrity error for a value this build would not have stored.
    fn into_record(self) -> Result<RunRecord, CheckpointError> {
        let bad = |column: &str, detail: String| damaged(&self.thread, column, detail);
        let run_id =
            RunId::new(self.run_id.clone()).map_err(|e| bad("sg_runs.run_id", e.to_string()))?;
        let thread =
            ThreadId::new(self.thread.clone()).map_err(|e| bad("sg_runs.thread", e.to_string()))?;
        let status = RunStatus::parse(&self.status).ok_or_else(|| {
            bad(
                "sg_runs.status",
                format!("unknown status {:?}", self.status),
            )
        })?;
        let metadata: BTreeMap<String, serde_json::Value> = serde_json::from_str(&self.metadata)
            .map_err(|e| bad("sg_runs.metadata", format!("run {run_id}: {e}")))?;
        let usage: Option<TokenUsage> = self
            .usage
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| bad("sg_runs.usage", format!("run {run_id}: {e}")))?;
        Ok(RunRecord {
            run_id,
            thread,
            status,
            reason: self.reason,
            stop_reason: self.stop_reason,
            created_at_ms: u64::try_from(self.created_at).unwrap_or(0),
            updated_at_ms: u64::try_from(self.updated_at).unwrap_or(0),
            metadata,
            usage,
        })
    }
}

/// The stored run `run`, only if it runs on `thread` when one is given.
pub(crate) fn get_run(
    conn: &Connection,
    thread: Option<&ThreadId>,
    run: &RunId,
) -> Result<Option<RunRecord>, CheckpointError> {
    let columns = run_columns(conn)?;
    let sql = format!("SELECT {columns} FROM sg_runs WHERE run_id = ?1");
    let row = conn
        .prepare_cached(&sql)
        .during("preparing to read a run")?
        .query_row([run.as_str()], RunRow::read)
        .optional()
        .during("reading a run")?;
    let record = row.map(RunRow::into_record).transpose()?;
    Ok(record.filter(|r| thread.is_none_or(|t| *t == r.thread)))
}

/// The runs of `thread`, newest first; only those whose status is `status`, when given.
pub(crate) fn list_runs(
    conn: &Connection,
    thread: &ThreadId,
    status: Option<RunStatus>,
) -> Result<Vec<RunRecord>, CheckpointError> {
    let columns = run_columns(conn)?;
    let sql = format!(
        "SELECT {columns} FROM sg_runs WHERE thread = ?1 AND (?2 IS NULL OR status = ?2) \
         ORDER BY created_at DESC, run_id DESC"
    );
    let status = status.map(RunStatus::as_str);
    let rows: Vec<RunRow> = conn
        .prepare_cached(&sql)
        .during("preparing to list runs")?
        .query_map(rusqlite::params![thread.as_str(), status], RunRow::read)
        .during("listing runs")?
        .collect::<Result<_, _>>()
        .during("reading a run row")?;
    rows.into_iter().map(RunRow::into_record).collect()
}

/// Store `run`, or update the stored one under the transition rule (writer side).
pub(crate) fn put_run(conn: &Connection, run: &RunRecord) -> Result<(), CheckpointError> {
    let run = match get_run(conn, None, &run.run_id)? {
        Some(stored) => stored.updated_by(run.clone())?,
        None => run.clone(),
    };
    let metadata = serde_json::to_string(&run.metadata)
        .map_err(|e| crate::StorageError::new("encoding a run's metadata", e))?;
    let usage = run
        .usage
        .map(|u| serde_json::to_string(&u))
        .transpose()
        .map_err(|e| crate::StorageError::new("encoding a run's usage", e))?;
    conn.prepare_cached(
        "INSERT INTO sg_runs(run_id, thread, status, reason, stop_reason, created_at, \
         updated_at, metadata, usage) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
         ON CONFLICT(run_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, \
         stop_reason = excluded.stop_reason, updated_at = excluded.updated_at, \
         metadata = excluded.metadata, usage = excluded.usage",
    )
    .during("preparing to store a run")?
    .execute(rusqlite::params![
        run.run_id.as_str(),
        run.thread.as_str(),
        run.status.as_str(),
        run.reason,
        run.stop_reason,
        ms_column(run.created_at_ms),
        ms_column(run.updated_at_ms),
        metadata,
        usage,
    ])
    .during("storing a run")?;
    Ok(())
}

/// Store `receipt` for the stored run `run` unless it has one; whether this put stored it
/// (writer side).
pub(crate) fn put_receipt(
    conn: &Connection,
    run: &RunId,
    receipt: &DeliveryReceipt,
) -> Result<bool, CheckpointError> {
    let known: Option<i64> = conn
        .prepare_cached("SELECT 1 FROM sg_runs WHERE run_id = ?1")
        .during("preparing to look for a run")?
        .query_row([run.as_str()], |r| r.get(0))
        .optional()
        .during("looking for a run")?;
    if known.is_none() {
        return Err(CheckpointError::RunNotFound { run: run.clone() });
    }
    let json = serde_json::to_string(receipt.as_json())
        .map_err(|e| crate::StorageError::new("encoding a delivery receipt", e))?;
    let stored = conn
        .prepare_cached(
            "INSERT INTO sg_receipts(run_id, receipt) VALUES (?1, ?2) \
             ON CONFLICT(run_id) DO NOTHING",
        )
        .during("preparing to store a delivery receipt")?
        .execute(rusqlite::params![run.as_str(), json])
        .during("storing a delivery receipt")?;
    Ok(stored == 1)
}

/// A run's receipt.
pub(crate) fn get_receipt(
    conn: &Connection,
    run: &RunId,
) -> Result<Option<DeliveryReceipt>, CheckpointError> {
    let json: Option<String> = conn
        .prepare_cached("SELECT receipt FROM sg_receipts WHERE run_id = ?1")
        .during("preparing to read a delivery receipt")?
        .query_row([run.as_str()], |r| r.get(0))
        .optional()
        .during("reading a delivery receipt")?;
    json.map(|text| {
        serde_json::from_str(&text)
            .map(DeliveryReceipt::new)
            .map_err(|e| damaged("-", "sg_receipts.receipt", format!("run {run}: {e}")))
    })
    .transpose()
}

/// Delete the runs of `thread` and their receipts (writer side, inside `delete_thread`).
pub(crate) fn delete_thread_runs(
    conn: &Connection,
    thread: &ThreadId,
) -> Result<(), CheckpointError> {
    conn.execute(
        "DELETE FROM sg_receipts WHERE run_id IN (SELECT run_id FROM sg_runs WHERE thread = ?1)",
        [thread.as_str()],
    )
    .during("deleting a thread's delivery receipts")?;
    conn.execute("DELETE FROM sg_runs WHERE thread = ?1", [thread.as_str()])
        .during("deleting a thread's runs")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{CheckpointError, DeliveryReceipt, RunId, RunRecord, RunStatus, Saver};
    use crate::{SqliteSaver, ThreadId, TokenUsage};

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    #[tokio::test]
    async fn a_runs_usage_is_stored_and_read_back_after_reopening() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("runs.db");
        let (run, thread) = (RunId::new("r")?, ThreadId::new("t")?);
        let usage = TokenUsage::of_call(120, 30, 150) + TokenUsage::of_call(0, 0, 0);
        {
            let saver = SqliteSaver::open(&path)?;
            saver
                .put_run(RunRecord::new(
                    run.clone(),
                    thread.clone(),
                    RunStatus::Running,
                    1,
                ))
                .await?;
            let mut done = RunRecord::new(run.clone(), thread.clone(), RunStatus::Success, 2);
            done.usage = Some(usage);
            saver.put_run(done).await?;
            saver.close()?;
        }
        let saver = SqliteSaver::open(&path)?;
        let got = saver.get_run(None, &run).await?.ok_or("no run")?;
        assert_eq!(got.usage, Some(usage));
        assert_eq!(saver.list_runs(&thread).await?[0].usage, Some(usage));
        let read_only = SqliteSaver::open_read_only(&path)?;
        let got = read_only.get_run(None, &run).await?.ok_or("no run")?;
        assert_eq!(got.usage, Some(usage));
        Ok(())
    }

    #[tokio::test]
    async fn an_old_file_without_the_usage_column_opens_and_reads() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("old.db");
        let (run, thread) = (RunId::new("r")?, ThreadId::new("t")?);
        {
            let saver = SqliteSaver::open(&path)?;
            saver
                .put_run(RunRecord::new(
                    run.clone(),
                    thread.clone(),
                    RunStatus::Success,
                    1,
                ))
                .await?;
            saver.close()?;
        }
        // The file as a build before the column wrote it.
        rusqlite::Connection::open(&path)?.execute("ALTER TABLE sg_runs DROP COLUMN usage", [])?;
        let read_only = SqliteSaver::open_read_only(&path)?;
        let got = read_only.get_run(None, &run).await?.ok_or("no run")?;
        assert_eq!((got.status, got.usage), (RunStatus::Success, None));
        assert_eq!(read_only.list_runs(&thread).await?.len(), 1);
        drop(read_only);
        let saver = SqliteSaver::open(&path)?;
        assert_eq!(
            saver.get_run(None, &run).await?.ok_or("no run")?.usage,
            None
        );
        let (later, usage) = (RunId::new("r2")?, TokenUsage::of_call(3, 4, 7));
        let mut record = RunRecord::new(later.clone(), thread, RunStatus::Success, 2);
        record.usage = Some(usage);
        saver.put_run(record).await?;
        let got = saver.get_run(None, &later).await?.ok_or("no run")?;
        assert_eq!(got.usage, Some(usage));
        Ok(())
    }

    #[tokio::test]
    async fn a_later_put_without_usage_keeps_the_stored_usage() -> TestResult {
        let dir = tempfile::tempdir()?;
        let saver = SqliteSaver::open(dir.path().join("runs.db"))?;
        let (run, thread) = (RunId::new("r")?, ThreadId::new("t")?);
        let mut done = RunRecord::new(run.clone(), thread.clone(), RunStatus::Success, 1);
        done.usage = Some(TokenUsage::of_call(1, 1, 2));
        saver.put_run(done.clone()).await?;
        saver
            .put_run(RunRecord::new(run.clone(), thread, RunStatus::Success, 2))
            .await?;
        assert_eq!(
            saver.get_run(None, &run).await?.ok_or("no run")?.usage,
            done.usage
        );
        Ok(())
    }

    #[tokio::test]
    async fn damaged_rows_read_as_integrity_errors_naming_their_column() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("runs.db");
        let saver = SqliteSaver::open(&path)?;
        let (run, thread) = (RunId::new("r")?, ThreadId::new("t")?);
        let record = RunRecord::new(run.clone(), thread.clone(), RunStatus::Running, 1);
        saver.put_run(record).await?;
        let receipt = DeliveryReceipt::new(serde_json::json!({"presented": 0}));
        assert!(saver.put_receipt_if_absent(&run, receipt).await?);
        let conn = rusqlite::Connection::open(&path)?;
        conn.execute_batch(
            "UPDATE sg_runs SET status = 'done'; UPDATE sg_receipts SET receipt = '{';",
        )?;
        let column = |e: CheckpointError| match e {
            CheckpointError::Integrity { blob, .. } => blob,
            other => other.to_string(),
        };
        let got = saver.get_run(None, &run).await.map_err(column);
        assert_eq!(got, Err("sg_runs.status".to_owned()));
        let listed = saver.list_runs(&thread).await.map_err(column);
        assert_eq!(listed, Err("sg_runs.status".to_owned()));
        let got = saver.get_receipt(&run).await.map_err(column);
        assert_eq!(got, Err("sg_receipts.receipt".to_owned()));
        Ok(())
    }
}
