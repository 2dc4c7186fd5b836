//! A process that dies while storing a delivery receipt leaves it whole or absent: after a
//! restart the run is there, and put-if-absent stores the receipt exactly when the crashed
//! write did not commit. The test runs itself as the child process, which the SQLite
//! writer's failpoints abort (debug builds have them).
#![cfg(all(unix, debug_assertions))]

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command as Process;

use stategraph_checkpoints::{
    DeliveryReceipt, RunId, RunRecord, RunStatus, Saver, SqliteSaver, ThreadId,
};

use crate::TestResult;

/// Set in the child: the checkpoint file to write.
const CHILD_FILE: &str = "STATEGRAPH_RECEIPT_CRASH_FILE";
const TEST_NAME: &str = "receipt_crash::a_crash_while_storing_a_receipt_leaves_it_whole_or_absent";

fn receipt(text: &str) -> DeliveryReceipt {
    DeliveryReceipt::new(serde_json::json!({ "presented": 1, "paths": [text], "by_tool": {} }))
}

/// The child: store a run (first group), then its receipt (second group), where it dies.
async fn child(path: &Path) -> TestResult {
    let saver = SqliteSaver::open(path)?;
    let run = RunId::new("r")?;
    let record = RunRecord::new(run.clone(), ThreadId::new("t")?, RunStatus::Success, 1);
    saver.put_run(record).await?;
    saver.put_receipt_if_absent(&run, receipt("first")).await?;
    Err("the failpoint did not abort the child".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_while_storing_a_receipt_leaves_it_whole_or_absent() -> TestResult {
    if let Some(path) = std::env::var_os(CHILD_FILE) {
        return child(Path::new(&path)).await;
    }
    for (point, committed) in [
        ("group.before_commit@2", false),
        ("group.after_commit@2", true),
    ] {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("receipts.db");
        let status = Process::new(std::env::current_exe()?)
            .args(["--exact", TEST_NAME, "--test-threads=1", "--quiet"])
            .env(CHILD_FILE, &path)
            .env("STATEGRAPH_FAILPOINT", point)
            .output()?
            .status;
        assert_eq!(
            status.signal(),
            Some(6),
            "{point}: the child aborts: {status:?}"
        );
        let saver = SqliteSaver::open(&path)?;
        let run = RunId::new("r")?;
        let stored = saver.get_run(None, &run).await?.ok_or("the run is lost")?;
        assert_eq!(stored.status, RunStatus::Success);
        let found = saver.get_receipt(&run).await?;
        assert_eq!(found, committed.then(|| receipt("first")), "{point}");
        let stored_now = saver.put_receipt_if_absent(&run, receipt("second")).await?;
        assert_eq!(stored_now, !committed, "{point}");
        let expected = if committed { "first" } else { "second" };
        assert_eq!(
            saver.get_receipt(&run).await?,
            Some(receipt(expected)),
            "{point}"
        );
        saver.close()?;
    }
    Ok(())
}
