//! Runs and their delivery receipts (decision 0022), in `sg_runs` and `sg_receipts`: each
//! run's record as JSON, updated under the transition rule inside a transaction.

use tokio_postgres::types::Type;
use tokio_postgres::{Client, GenericClient};

use super::sql::{col, to_i64, PgResult, Sql};
use crate::run::newest_first;
use crate::{CheckpointError, DeliveryReceipt, RunId, RunRecord, RunStatus, ThreadId};

fn decode<T: serde::de::DeserializeOwned>(
    text: &str,
    run: &str,
    what: &str,
) -> Result<T, CheckpointError> {
    serde_json::from_str(text).map_err(|e| CheckpointError::Integrity {
        thread: "-".to_owned(),
        checkpoint: "-".to_owned(),
        blob: format!("{what} of run {run}"),
        detail: e.to_string(),
    })
}

fn encode(value: &impl serde::Serialize) -> Result<String, CheckpointError> {
    serde_json::to_string(value).map_err(|e| crate::StorageError::new("encoding a run", e).into())
}

/// [`Saver::put_run`](crate::Saver::put_run).
pub(crate) async fn put_run(
    client: &mut Client,
    sql: &Sql,
    run: RunRecord,
) -> Result<(), CheckpointError> {
    let tx = client
        .transaction()
        .await
        .during("beginning a run update")?;
    let id = run.run_id.as_str().to_owned();
    // Twice at most: a first put that loses the race to create the row updates it instead.
    for _ in 0..2 {
        let stored = sql
            .query_opt(
                &tx,
                "SELECT record FROM {s}.sg_runs WHERE run_id = $1 FOR UPDATE",
                &[(&id, Type::TEXT)],
                "reading a run",
            )
            .await?;
        if let Some(row) = stored {
            let stored: RunRecord = decode(col(&row, 0)?, &id, "the record")?;
            let next = stored.updated_by(run)?;
            let text = encode(&next)?;
            sql.query(
                &tx,
                "UPDATE {s}.sg_runs SET record = $2 WHERE run_id = $1",
                &[(&id, Type::TEXT), (&text, Type::TEXT)],
                "updating a run",
            )
            .await?;
            return tx.commit().await.during("committing a run update");
        }
        let text = encode(&run)?;
        let created = to_i64(run.created_at_ms);
        let inserted = sql
            .query(
                &tx,
                "INSERT INTO {s}.sg_runs (run_id, thread, created_at, record) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING 1",
                &[
                    (&id, Type::TEXT),
                    (&run.thread.as_str(), Type::TEXT),
                    (&created, Type::INT8),
                    (&text, Type::TEXT),
                ],
                "storing a run",
            )
            .await?;
        if !inserted.is_empty() {
            return tx.commit().await.during("committing a new run");
        }
    }
    Err(crate::StorageError::new(
        "storing a run",
        std::io::Error::other("the run row appeared and vanished while it was stored"),
    )
    .into())
}

/// [`Saver::get_run`](crate::Saver::get_run).
pub(crate) async fn get_run(
    client: &impl GenericClient,
    sql: &Sql,
    thread: Option<&ThreadId>,
    run: &RunId,
) -> Result<Option<RunRecord>, CheckpointError> {
    let row = sql
        .query_opt(
            client,
            "SELECT record FROM {s}.sg_runs WHERE run_id = $1",
            &[(&run.as_str(), Type::TEXT)],
            "reading a run",
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let record: RunRecord = decode(col(&row, 0)?, run.as_str(), "the record")?;
    Ok(Some(record).filter(|r| thread.is_none_or(|t| *t == r.thread)))
}

/// [`Saver::list_runs`](crate::Saver::list_runs): newest first; with `status`, only the
/// runs whose record has it (selected by the server, so only those are sent).
pub(crate) async fn list_runs(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    status: Option<RunStatus>,
) -> Result<Vec<RunRecord>, CheckpointError> {
    let status = status.map(RunStatus::as_str);
    let rows = sql
        .query(
            client,
            "SELECT run_id, record FROM {s}.sg_runs WHERE thread = $1 \
             AND ($2::text IS NULL OR (record::jsonb ->> 'status') = $2)",
            &[(&thread.as_str(), Type::TEXT), (&status, Type::TEXT)],
            "listing runs",
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.push(decode::<RunRecord>(
            col(row, 1)?,
            col(row, 0)?,
            "the record",
        )?);
    }
    out.sort_by(newest_first);
    Ok(out)
}

/// [`Saver::put_receipt_if_absent`](crate::Saver::put_receipt_if_absent): one statement, so
/// of concurrent puts exactly one stores its receipt.
pub(crate) async fn put_receipt(
    client: &impl GenericClient,
    sql: &Sql,
    run: &RunId,
    receipt: DeliveryReceipt,
) -> Result<bool, CheckpointError> {
    let text = encode(&receipt)?;
    let row = sql
        .query_opt(
            client,
            "WITH r AS (SELECT 1 FROM {s}.sg_runs WHERE run_id = $1 FOR SHARE), \
             i AS (INSERT INTO {s}.sg_receipts (run_id, receipt) \
                   SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM r) \
                   ON CONFLICT DO NOTHING RETURNING 1) \
             SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM i)",
            &[(&run.as_str(), Type::TEXT), (&text, Type::TEXT)],
            "storing a receipt",
        )
        .await?;
    let (runs, stored): (i64, i64) = match &row {
        Some(r) => (col(r, 0)?, col(r, 1)?),
        None => (0, 0),
    };
    if runs == 0 {
        return Err(CheckpointError::RunNotFound { run: run.clone() });
    }
    Ok(stored > 0)
}

/// [`Saver::get_receipt`](crate::Saver::get_receipt).
pub(crate) async fn get_receipt(
    client: &impl GenericClient,
    sql: &Sql,
    run: &RunId,
) -> Result<Option<DeliveryReceipt>, CheckpointError> {
    let row = sql
        .query_opt(
            client,
            "SELECT receipt FROM {s}.sg_receipts WHERE run_id = $1",
            &[(&run.as_str(), Type::TEXT)],
            "reading a receipt",
        )
        .await?;
    match row {
        Some(r) => Ok(Some(decode(col(&r, 0)?, run.as_str(), "the receipt")?)),
        None => Ok(None),
    }
}

/// Store `run` as the queue says it stands, whatever was stored before: the run queue keeps
/// its own forward-only status (`sg_run_queue`) and mirrors each change here, in the same
/// transaction, so [`Saver::list_runs`](crate::Saver::list_runs) and the CLI show queued
/// runs as they show others.
pub(crate) async fn mirror(
    client: &impl GenericClient,
    sql: &Sql,
    run: &RunRecord,
) -> Result<(), CheckpointError> {
    let text = encode(run)?;
    let created = to_i64(run.created_at_ms);
    sql.query(
        client,
        "INSERT INTO {s}.sg_runs (run_id, thread, created_at, record) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (run_id) DO UPDATE SET record = EXCLUDED.record",
        &[
            (&run.run_id.as_str(), Type::TEXT),
            (&run.thread.as_str(), Type::TEXT),
            (&created, Type::INT8),
            (&text, Type::TEXT),
        ],
        "mirroring a queued run",
    )
    .await?;
    Ok(())
}
