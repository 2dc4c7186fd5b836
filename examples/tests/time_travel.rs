//! The `time_travel` example, run twice over one folder: the thread is recorded anew each
//! time, has three branches, replays without a difference on unchanged code and is caught
//! at the grader's step when the grader changes.

#[path = "../time_travel.rs"]
mod example;

#[tokio::test]
async fn the_example_replays_every_branch_and_catches_the_changed_grader(
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let tmp = tempfile::tempdir()?;
    for _ in 0..2 {
        let summary = example::time_travel(tmp.path()).await?;
        assert_eq!(summary.branches, 3);
        assert_eq!(summary.unchanged_divergences, 0);
        assert_eq!(
            summary.changed,
            Some((4, "grade".to_owned(), "score".to_owned()))
        );
    }
    Ok(())
}
