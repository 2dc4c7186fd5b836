//! A damaged `-wal` makes SQLite drop committed transactions without an error: everything
//! after the damaged frame is gone and what is left is consistent. The high-water record
//! beside the file notices it: opening such a file fails with `LostCommits` naming the
//! thread's newest committed checkpoint, `verify` reports it, and accepting the loss lets the
//! thread go on from what is left. Nothing that only looks like a loss (pruning, deleting the
//! newest thread, a record left by another file of the same name) raises it.

use std::path::{Path, PathBuf};
use std::process::Command;

use stategraph::checkpoints::inspect::verify;
use stategraph::checkpoints::Retention;

use super::*;

const STEPS: u64 = 300;

fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Copy the file, its `-wal` and its high-water record as they are on disk while `db` is open
/// (a child process copies: opening the file in this process would drop the SQLite locks its
/// savers hold).
fn copy_open_file(db: &Path, to: &Path) -> Result<PathBuf, BoxedError> {
    let copy = to.join("copy.db");
    for suffix in ["", "-wal", "-highwater"] {
        let status = Command::new("cp")
            .arg(sibling(db, suffix))
            .arg(sibling(&copy, suffix))
            .status()?;
        assert!(status.success(), "cp {suffix} failed");
    }
    Ok(copy)
}

/// A thread of `STEPS` sync steps, left open (its newest commits only in the `-wal`), copied.
async fn damaged_copy(dir: &Path) -> Result<(PathBuf, usize), BoxedError> {
    let path = dir.join("t.db");
    let saver = SqliteSaver::open(&path)?;
    let g = graph_of(STEPS)?.with_checkpointer(Arc::new(saver.clone()));
    g.invoke(Tally::update(), &config_at(Durability::Sync))
        .await?;
    let committed = stored(&saver).await?.len();
    let copy = copy_open_file(&path, dir)?;
    drop(g);
    saver.close()?;
    // One flipped byte in the copy's log, a few frames past its start: SQLite reads the log
    // up to that frame and silently drops the rest.
    let wal = sibling(&copy, "-wal");
    let mut bytes = std::fs::read(&wal)?;
    let at = 32 + 3 * (4096 + 24) + 40;
    assert!(bytes.len() > at + 10 * 4120, "the log holds too little");
    bytes[at] ^= 0x55;
    std::fs::write(&wal, bytes)?;
    Ok((copy, committed))
}

fn config_at(durability: Durability) -> RunConfig {
    RunConfig::new()
        .thread("t")
        .durability(durability)
        .recursion_limit(10 * STEPS as usize)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_whose_wal_lost_commits_is_refused_with_the_newest_checkpoint_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (copy, committed) = damaged_copy(dir.path()).await?;

    let err = SqliteSaver::open(&copy)
        .err()
        .ok_or("the damaged copy opened")?;
    let CheckpointError::LostCommits {
        thread,
        checkpoint,
        recorded,
        found,
        ..
    } = &err
    else {
        return Err(format!("not LostCommits: {err}").into());
    };
    assert_eq!(thread, "t");
    assert_eq!(checkpoint.len(), 32, "{checkpoint}");
    assert!(found < recorded, "{found} < {recorded}");
    assert!(err.to_string().contains("missing"), "{err}");

    // Reading is still possible, and verify says what is wrong.
    let reader = SqliteSaver::open_read_only(&copy)?;
    let left = stored(&reader).await?.len();
    assert!(left < committed, "{left} of {committed} checkpoints left");
    reader.close()?;
    let report = verify(&copy).await?;
    assert!(!report.is_ok(), "verify passed a file that lost commits");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.key.contains(checkpoint.as_str()) && p.detail.contains("missing")),
        "{:?}",
        report.problems
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_the_loss_lets_the_thread_go_on_from_what_is_left() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (copy, _) = damaged_copy(dir.path()).await?;
    let accepting = SqliteOptions {
        accept_lost_commits: true,
        ..Default::default()
    };
    let saver = SqliteSaver::open_with(&copy, accepting)?;
    let g = graph_of(STEPS)?.with_checkpointer(Arc::new(saver.clone()));
    let out = g
        .invoke(Input::Continue, &config_at(Durability::Sync))
        .await?;
    assert_eq!(*out.state, expected_of(STEPS).await?);
    drop(g);
    saver.close()?;
    // Accepted once: the file opens as any other from then on, and verifies.
    SqliteSaver::open(&copy)?.close()?;
    assert!(verify(&copy).await?.is_ok());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_deleting_and_a_stale_record_are_not_taken_for_a_loss() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.db");
    let saver = SqliteSaver::open(&path)?;
    let g = graph_of(20)?.with_checkpointer(Arc::new(saver.clone()));
    g.invoke(Tally::update(), &config_at(Durability::Sync))
        .await?;
    let other = RunConfig::new().thread("newest").recursion_limit(200);
    g.invoke(Tally::update(), &other).await?;
    saver
        .prune(&ThreadId::new("t")?, Retention::KeepLast(2))
        .await?;
    saver.delete_thread(&ThreadId::new("newest")?).await?;
    drop(g);
    saver.close()?;
    SqliteSaver::open(&path)?.close()?;
    assert!(verify(&path).await?.is_ok());

    // A new file where the old one was, the old record left beside it.
    std::fs::remove_file(&path)?;
    let saver = SqliteSaver::open(&path)?;
    assert!(verify(&path).await?.is_ok());
    saver.close()?;
    Ok(())
}
