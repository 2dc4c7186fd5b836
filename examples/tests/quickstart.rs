//! The `quickstart` example on a SQLite file, twice over one folder: the draft is approved at
//! its third revision, and a fork that starts as the second revision runs on to the third.

#[path = "../quickstart.rs"]
mod example;

#[tokio::test]
async fn the_quickstart_runs_forks_and_runs_again(
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let tmp = tempfile::tempdir()?;
    for _ in 0..2 {
        let summary = example::quickstart(tmp.path()).await?;
        assert_eq!(summary.revision, 3);
        assert_eq!(summary.forked_revision, 3);
        assert_eq!(summary.branches, 2);
    }
    Ok(())
}
