//! The `deliver_report` example, run twice over one folder (as two processes would): both
//! succeed, and the report of the first is still there for the second.

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
    Ok(())
}
