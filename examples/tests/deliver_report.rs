//! The `deliver_report` example, run twice over one folder (as two processes would): both
//! succeed, and the report of the first is still there for the second.

use stategraph::checkpoints::Saver;

#[path = "../deliver_report.rs"]
mod example;

#[tokio::test]
async fn the_example_runs_twice_on_one_thread(
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let tmp = tempfile::tempdir()?;
    example::deliver_report(tmp.path()).await?;
    example::deliver_report(tmp.path()).await?;
    let report = tmp
        .path()
        .join("sandboxes/threads/quarterly-report/user-data/outputs/report.md");
    assert!(std::fs::read_to_string(report)?.starts_with("# Q3 sales"));
    // Four runs on the thread (two per call), each settled as a success with one receipt;
    // the runs that presented the report delivered it.
    let saver = stategraph::checkpoints::SqliteSaver::open(tmp.path().join("threads.db"))?;
    let thread = stategraph::checkpoints::ThreadId::new("quarterly-report")?;
    let runs = saver.list_runs(&thread).await?;
    assert_eq!(runs.len(), 4);
    let mut delivered = 0;
    for run in &runs {
        assert_eq!(run.status, stategraph::checkpoints::RunStatus::Success);
        let receipt = saver.get_receipt(&run.run_id).await?.ok_or("no receipt")?;
        if receipt.as_json()["verdict"]["stage"] == "presented" {
            assert_eq!(
                receipt.as_json()["verdict"]["matched_paths"],
                serde_json::json!(["/mnt/user-data/outputs/report.md"])
            );
            delivered += 1;
        }
    }
    // The second call's first run rewrites the same report: unchanged bytes are not produced,
    // so only the very first run has a verdict.
    assert_eq!(delivered, 1);
    Ok(())
}
