//! The raw scans of the run tables for [`verify`](super::verify()): every stored run is
//! one this build would have written, and every delivery receipt is JSON of a stored run.

use std::collections::{BTreeMap, HashSet};

use rusqlite::Connection;

use super::verify::VerifyReport;
use crate::{RunId, RunStatus, ThreadId};

/// Check every row of `sg_runs`; the run ids found.
pub(super) fn runs_check(
    conn: &Connection,
    report: &mut VerifyReport,
) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT run_id, thread, status, metadata FROM sg_runs")?;
    let mut rows = stmt.query([])?;
    let mut ids = HashSet::new();
    while let Some(r) = rows.next()? {
        let (run, thread): (String, String) = (r.get(0)?, r.get(1)?);
        let (status, metadata): (String, String) = (r.get(2)?, r.get(3)?);
        report.counts.runs += 1;
        let key = format!("run {run:?} (thread {thread:?})");
        if let Err(e) = RunId::new(run.clone()) {
            report.problem("sg_runs", key.clone(), e.to_string());
        }
        if let Err(e) = ThreadId::new(thread) {
            report.problem("sg_runs", key.clone(), e.to_string());
        }
        if RunStatus::parse(&status).is_none() {
            report.problem("sg_runs", key.clone(), format!("unknown status {status:?}"));
        }
        if let Err(e) = serde_json::from_str::<BTreeMap<String, serde_json::Value>>(&metadata) {
            report.problem(
                "sg_runs",
                key,
                format!("metadata is not a JSON object: {e}"),
            );
        }
        ids.insert(run);
    }
    Ok(ids)
}

/// Check every row of `sg_receipts` against the runs found.
pub(super) fn receipts_check(
    conn: &Connection,
    report: &mut VerifyReport,
    runs: &HashSet<String>,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare("SELECT run_id, receipt FROM sg_receipts")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (run, receipt): (String, String) = (r.get(0)?, r.get(1)?);
        report.counts.receipts += 1;
        let key = format!("receipt of run {run:?}");
        if !runs.contains(&run) {
            report.problem("sg_receipts", key.clone(), "its run is missing");
        }
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&receipt) {
            report.problem("sg_receipts", key, format!("not JSON: {e}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::inspect::verify;
    use crate::{DeliveryReceipt, RunId, RunRecord, RunStatus, Saver, SqliteSaver, ThreadId};

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    #[tokio::test]
    async fn verify_reports_an_orphan_receipt_and_damaged_json() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("runs.db");
        let saver = SqliteSaver::open(&path)?;
        let run = RunId::new("r1")?;
        let record = RunRecord::new(run.clone(), ThreadId::new("t")?, RunStatus::Success, 5);
        saver.put_run(record).await?;
        let receipt = DeliveryReceipt::new(serde_json::json!({"presented": 0}));
        assert!(saver.put_receipt_if_absent(&run, receipt).await?);
        saver.close()?;
        let clean = verify(&path).await?;
        assert!(clean.is_ok(), "{:?}", clean.problems);
        assert_eq!((clean.counts.runs, clean.counts.receipts), (1, 1));

        let conn = rusqlite::Connection::open(&path)?;
        conn.execute_batch(
            "INSERT INTO sg_receipts(run_id, receipt) VALUES ('ghost', '{}');
             UPDATE sg_receipts SET receipt = '{not json' WHERE run_id = 'r1';
             UPDATE sg_runs SET status = 'done';",
        )?;
        drop(conn);
        let report = verify(&path).await?;
        let found: Vec<(&str, &str)> = report
            .problems
            .iter()
            .map(|p| (p.table.as_str(), p.key.as_str()))
            .collect();
        assert!(
            found.contains(&("sg_receipts", "receipt of run \"ghost\"")),
            "{found:?}"
        );
        assert!(
            found.contains(&("sg_receipts", "receipt of run \"r1\"")),
            "{found:?}"
        );
        assert!(
            found.contains(&("sg_runs", "run \"r1\" (thread \"t\")")),
            "{found:?}"
        );
        assert_eq!(report.problems.len(), 3, "{:?}", report.problems);
        Ok(())
    }
}
