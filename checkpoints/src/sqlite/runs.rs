//! Runs and delivery receipts in the SQLite file (`sg_runs`, `sg_receipts`): the writer's
//! puts and deletes, and the readers' queries.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Row};

use super::sql::SqlResult;
use crate::{CheckpointError, DeliveryReceipt, RunId, RunRecord, RunStatus, ThreadId};

/// The columns of `sg_runs` a [`RunRecord`] is read from, in [`run_from`]'s order.
const RUN_COLUMNS: &str =
    "run_id, thread, status, reason, stop_reason, created_at, updated_at, metadata";

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
        Ok(RunRecord {
            run_id,
            thread,
            status,
            reason: self.reason,
            stop_reason: self.stop_reason,
            created_at_ms: u64::try_from(self.created_at).unwrap_or(0),
            updated_at_ms: u64::try_from(self.updated_at).unwrap_or(0),
            metadata,
        })
    }
}

/// The stored run `run`, only if it runs on `thread` when one is given.
pub(crate) fn get_run(
    conn: &Connection,
    thread: Option<&ThreadId>,
    run: &RunId,
) -> Result<Option<RunRecord>, CheckpointError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM sg_runs WHERE run_id = ?1");
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
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM sg_runs WHERE thread = ?1 AND (?2 IS NULL OR status = ?2) \
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
    conn.prepare_cached(
        "INSERT INTO sg_runs(run_id, thread, status, reason, stop_reason, created_at, \
         updated_at, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT(run_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, \
         stop_reason = excluded.stop_reason, updated_at = excluded.updated_at, \
         metadata = excluded.metadata",
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
    use crate::{SqliteSaver, ThreadId};

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

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
