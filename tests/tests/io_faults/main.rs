//! Storage faults (reliability R-07): a full disk inside SQLite, and a saver that fails the
//! n-th write for every n. Each fault surfaces as a typed storage error, leaves the thread at a
//! consistent checkpoint (the file passes `integrity_check`, every checkpoint's parent exists,
//! steps are contiguous), and once the fault clears the thread resumes to exactly the state an
//! uninterrupted run reaches. `near_full_disk`: the same on a real, tiny file system.
//! `lost_commits`: a damaged `-wal` that silently dropped commits is noticed.

mod lost_commits;
mod near_full_disk;

use std::sync::Arc;

use stategraph::checkpoints::{
    CheckpointId, ListOptions, Namespace, Saver, SqliteOptions, SqliteSaver, ThreadId,
};
use stategraph::prelude::*;
use stategraph::{CompiledGraph, Durability, Input, RunError};
use stategraph_checkpoints::CheckpointError;
use stategraph_tests::RecordingSaver;

type BoxedError = Box<dyn std::error::Error + Send + Sync>;
type TestResult = Result<(), BoxedError>;

const STEPS: u64 = 40;

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Tally {
    #[reduce(append)]
    items: Vec<String>,
    checksum: u64,
}

fn graph() -> Result<CompiledGraph<Tally>, Box<dyn std::error::Error + Send + Sync>> {
    graph_of(STEPS)
}

/// A thread of `steps` steps, each appending a 2 kB item.
fn graph_of(steps: u64) -> Result<CompiledGraph<Tally>, Box<dyn std::error::Error + Send + Sync>> {
    Ok(StateGraph::<Tally>::new()
        .add_node("step", |s: Arc<Tally>, _ctx: NodeContext| async move {
            let n = s.items.len() as u64;
            Ok::<_, BoxError>(
                Tally::update()
                    .items(vec![format!("{n}:{}", "x".repeat(2000))])
                    .checksum(s.checksum.wrapping_mul(31).wrapping_add(n + 1)),
            )
        })
        .add_edge(START, "step")
        .add_conditional_edges(
            "step",
            move |s: &Tally| {
                if (s.items.len() as u64) < steps {
                    "step"
                } else {
                    END
                }
            },
            ["step", END],
        )
        .compile()?)
}

fn config(thread: &str, durability: Durability) -> RunConfig {
    RunConfig::new()
        .thread(thread)
        .durability(durability)
        .recursion_limit(10 * STEPS as usize)
}

async fn expected() -> Result<Tally, Box<dyn std::error::Error + Send + Sync>> {
    expected_of(STEPS).await
}

/// The state an uninterrupted run of `steps` steps ends in.
async fn expected_of(steps: u64) -> Result<Tally, Box<dyn std::error::Error + Send + Sync>> {
    let limit = RunConfig::new().recursion_limit(10 * steps as usize);
    let out = graph_of(steps)?.invoke(Tally::update(), &limit).await?;
    Ok((*out.state).clone())
}

/// The thread's history is one chain: every parent is in it, steps go up by one.
async fn assert_linear(saver: &dyn Saver, thread: &str) -> TestResult {
    let list = saver
        .list(
            &ThreadId::new(thread)?,
            &Namespace::root(),
            ListOptions::default(),
        )
        .await?;
    let ids: std::collections::HashSet<_> = list.iter().map(|c| c.id).collect();
    for pair in list.windows(2) {
        assert_eq!(pair[0].parent, Some(pair[1].id), "history is not one chain");
        assert_eq!(pair[0].step, pair[1].step + 1, "a step is missing");
    }
    for c in &list {
        if let Some(p) = c.parent {
            assert!(ids.contains(&p), "checkpoint {} has a missing parent", c.id);
        }
    }
    Ok(())
}

fn integrity_ok(path: &std::path::Path) -> TestResult {
    let conn = rusqlite::Connection::open(path)?;
    let verdict: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    assert_eq!(verdict, "ok");
    Ok(())
}

/// The checkpoint ids of the thread, newest first.
async fn stored(saver: &dyn Saver) -> Result<Vec<CheckpointId>, BoxedError> {
    Ok(saver
        .list(
            &ThreadId::new("t")?,
            &Namespace::root(),
            ListOptions::default(),
        )
        .await?
        .into_iter()
        .map(|c| c.id)
        .collect())
}

/// New input if nothing was stored, else continue where the thread stopped.
fn resume_input(stored: usize) -> Input<Tally> {
    if stored == 0 {
        Input::Update(Tally::update())
    } else {
        Input::Continue
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_a_typed_error_and_the_thread_resumes_once_space_is_back() -> TestResult {
    let want = expected().await?;
    for durability in [Durability::Sync, Durability::Async] {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("full.db");
        // Room for the schema and a few steps of 2 kB items, not for all 40.
        let capped = SqliteSaver::open_with(
            &path,
            SqliteOptions {
                max_page_count: Some(32),
                ..Default::default()
            },
        )?;
        let g = graph()?.with_checkpointer(Arc::new(capped.clone()));
        let err = g
            .invoke(Tally::update(), &config("t", durability))
            .await
            .err()
            .ok_or("the run fit in the capped file")?;
        assert!(
            matches!(err, RunError::Checkpoint(CheckpointError::Storage(_))),
            "{durability:?}: {err}"
        );
        assert!(err.to_string().contains("full"), "{err}");
        let before = stored(&capped).await?;
        // Under `sync` each step commits alone, so the first steps fit; under `async` a batch
        // (or several queued together) is all or nothing.
        if durability == Durability::Sync {
            assert!(
                !before.is_empty(),
                "nothing committed before the disk filled"
            );
        }
        assert!(
            before.len() < STEPS as usize + 2,
            "{durability:?}: everything fit"
        );
        assert_linear(&capped, "t").await?;
        drop(g);
        capped.close()?;
        integrity_ok(&path)?;

        // Space is back: the same file, no cap.
        let saver = SqliteSaver::open(&path)?;
        let g = graph()?.with_checkpointer(Arc::new(saver.clone()));
        let out = g
            .invoke(resume_input(before.len()), &config("t", durability))
            .await?;
        assert_eq!(*out.state, want, "{durability:?}");
        assert_linear(&saver, "t").await?;
        let after = stored(&saver).await?;
        assert!(
            before.iter().all(|id| after.contains(id)),
            "a committed checkpoint is gone"
        );
        saver.close()?;
        integrity_ok(&path)?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_failing_at_any_position_loses_nothing_committed_and_resumes() -> TestResult {
    let want = expected().await?;
    let dir = tempfile::tempdir()?;
    // A clean run stores STEPS + 2 checkpoints (input, start, one per step).
    for n in 1..=(STEPS as usize + 2) {
        let durability = if n % 2 == 0 {
            Durability::Sync
        } else {
            Durability::Async
        };
        let path = dir.path().join(format!("fail-{n}.db"));
        let sqlite = SqliteSaver::open(&path)?;
        // Batches reach SQLite through `put_many`, cut at the fault.
        let faulty = RecordingSaver::failing_once_at(Arc::new(sqlite.clone()), n);
        let g = graph()?.with_checkpointer(faulty.shared());
        let err = g
            .invoke(Tally::update(), &config("t", durability))
            .await
            .err()
            .ok_or(format!("put {n} failed but the run succeeded"))?;
        // The injected error, first in checkpoint order (a later batch refused as stale
        // does not hide it).
        assert!(
            matches!(err, RunError::Checkpoint(CheckpointError::Storage(_))),
            "put {n}: {err}"
        );
        assert!(
            err.to_string().contains(&format!("(put {n})")),
            "put {n}: {err}"
        );
        assert_linear(&sqlite, "t").await?;
        let before = stored(&sqlite).await?;
        if durability == Durability::Sync {
            // Every put before the failing one was waited for, so it is committed.
            assert_eq!(
                before.len(),
                n - 1,
                "put {n}: sync lost a committed checkpoint"
            );
        } else {
            assert!(
                before.len() < n,
                "put {n}: a checkpoint after the fault was stored"
            );
        }
        // The fault has cleared; continue (or start over if nothing was stored).
        let out = g
            .invoke(resume_input(before.len()), &config("t", durability))
            .await
            .map_err(|e| format!("put {n} ({durability:?}): resume failed: {e}"))?;
        assert_eq!(*out.state, want, "put {n} ({durability:?})");
        assert_linear(&sqlite, "t").await?;
        let after = stored(&sqlite).await?;
        assert!(
            before.iter().all(|id| after.contains(id)),
            "put {n}: a checkpoint committed before the fault is gone"
        );
        drop(g);
        sqlite.close()?;
        integrity_ok(&path)?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_failed_batch_is_the_error_even_when_a_later_one_fails_first() -> TestResult {
    // Under async, batch 1 fails slowly (its stored part takes 50 ms) while batch 2 fails at
    // once: the run must report batch 1's failure, the first in checkpoint order.
    let dir = tempfile::tempdir()?;
    let sqlite = SqliteSaver::open(dir.path().join("order.db"))?;
    let mut faulty = RecordingSaver::over(Arc::new(sqlite.clone()));
    faulty.fail_puts_from = Some(3);
    faulty.put_delay = Some(std::time::Duration::from_millis(50));
    let g = graph()?.with_checkpointer(faulty.shared());
    let err = g
        .invoke(Tally::update(), &config("t", Durability::Async))
        .await
        .err()
        .ok_or("the run succeeded")?;
    assert!(err.to_string().contains("(put 3)"), "{err}");
    Ok(())
}
