//! The committed golden checkpoint files (written before runs existed) gain the run tables
//! when this build opens them, keep their format version and every existing row, verify
//! clean, and then store runs and receipts.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use stategraph_checkpoints::inspect::verify;
use stategraph_checkpoints::{
    DeliveryReceipt, RunId, RunRecord, RunStatus, Saver, SqliteSaver, ThreadId,
};

use crate::TestResult;

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("checkpoints")
        .join(name)
}

fn tables(path: &Path) -> rusqlite::Result<Vec<String>> {
    let conn = Connection::open(path)?;
    let mut stmt =
        conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?;
    let names = stmt.query_map([], |r| r.get(0))?.collect();
    names
}

/// Every row of the tables that existed before runs, as text, in a stable order.
fn old_rows(path: &Path) -> rusqlite::Result<Vec<String>> {
    let conn = Connection::open(path)?;
    let mut out = Vec::new();
    for table in [
        "sg_meta",
        "sg_checkpoints",
        "sg_blobs",
        "sg_logs",
        "sg_log_parts",
        "sg_writes",
    ] {
        // The file id is the one row an older file gains (the high-water record's binding).
        let only_old = if table == "sg_meta" {
            " WHERE key <> 'file_id'"
        } else {
            ""
        };
        let mut stmt = conn.prepare(&format!("SELECT * FROM {table}{only_old} ORDER BY 1, 2"))?;
        let n = stmt.column_count();
        let rows: Vec<String> = stmt
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get_ref(i).map(|v| format!("{v:?}")))
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(|cols| format!("{table}: {}", cols.join(" | ")))
            })?
            .collect::<rusqlite::Result<_>>()?;
        out.extend(rows);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_files_gain_the_run_tables_and_an_id_on_open_and_keep_everything_else() -> TestResult
{
    for name in ["notes_v1.db", "notes_v1_format2.db"] {
        let dir = tempfile::tempdir()?;
        let copy = dir.path().join(name);
        std::fs::copy(golden(name), &copy)?;
        let before = tables(&copy)?;
        assert!(
            !before.iter().any(|t| t == "sg_runs" || t == "sg_receipts"),
            "{before:?}"
        );
        let rows = old_rows(&copy)?;

        let saver = SqliteSaver::open(&copy)?;
        saver.close()?;
        let after = tables(&copy)?;
        assert!(after.iter().any(|t| t == "sg_runs"), "{name}: {after:?}");
        let id: String = Connection::open(&copy)?.query_row(
            "SELECT value FROM sg_meta WHERE key = 'file_id'",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(id.len(), 32, "{name}: file id {id:?}");
        assert!(
            after.iter().any(|t| t == "sg_receipts"),
            "{name}: {after:?}"
        );
        assert_eq!(
            old_rows(&copy)?,
            rows,
            "{name}: existing rows and format version unchanged"
        );

        let report = verify(&copy).await?;
        assert!(report.is_ok(), "{name}: {:?}", report.problems);
        assert_eq!((report.counts.runs, report.counts.receipts), (0, 0));

        let saver = SqliteSaver::open(&copy)?;
        let thread = ThreadId::new("golden")?;
        let run = RunId::new("golden-run")?;
        saver
            .put_run(RunRecord::new(
                run.clone(),
                thread.clone(),
                RunStatus::Success,
                7,
            ))
            .await?;
        let receipt = DeliveryReceipt::new(serde_json::json!({"presented": 0}));
        assert!(saver.put_receipt_if_absent(&run, receipt.clone()).await?);
        saver.close()?;
        let saver = SqliteSaver::open(&copy)?;
        assert_eq!(saver.list_runs(&thread).await?.len(), 1);
        assert_eq!(saver.get_receipt(&run).await?, Some(receipt));
        saver.close()?;
        assert_eq!(old_rows(&copy)?, rows, "{name}: runs touch no older table");
        assert!(verify(&copy).await?.is_ok());
    }
    Ok(())
}
