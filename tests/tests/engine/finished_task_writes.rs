//! Each finished task's writes are recorded against the step's checkpoint while its siblings
//! still run (grouped: tasks that finish together cost one record), on a saver that does not
//! queue in call order (in memory) as on one that does (SQLite), and dropped when the step's
//! checkpoint commits; nothing is recorded under durability exit or when every task finishes
//! at once.

use std::sync::Arc;

use stategraph::checkpoints::{
    Checkpoint, MemorySaver, Namespace, Saver, SqliteSaver, ThreadId, WriteKind,
};
use stategraph::prelude::*;
use stategraph::{CompiledGraph, Durability, SendTo};
use tokio::sync::Notify;

use crate::TestResult;

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Fan {
    #[reduce(append)]
    results: Vec<u64>,
    width: u64,
}

/// Task 0 waits for `release`; the others return at once.
fn graph(release: Arc<Notify>) -> Result<CompiledGraph<Fan>, stategraph::CompileError> {
    StateGraph::<Fan>::new()
        .add_node_with(
            "fan",
            |s: Arc<Fan>, _ctx: NodeContext| async move {
                let sends: Vec<SendTo> = (0..s.width).map(|i| SendTo::new("work", i)).collect();
                Ok::<_, BoxError>(stategraph::Command::<Fan>::new().goto_all(sends))
            },
            NodeOptions::new().destinations(["work"]),
        )
        .add_node("work", move |_s: Arc<Fan>, ctx: NodeContext| {
            let release = Arc::clone(&release);
            async move {
                let i: u64 = ctx.arg()?;
                if i == 0 {
                    release.notified().await;
                }
                Ok::<_, BoxError>(Fan::update().results(vec![i + 100]))
            }
        })
        .add_edge(START, "fan")
        .add_edge("work", END)
        .compile()
}

/// The task outputs recorded against `checkpoint`.
async fn outputs_of(saver: &dyn Saver, checkpoint: &Checkpoint) -> Result<usize, BoxError> {
    let loaded = saver
        .get(
            &ThreadId::new("t")?,
            &Namespace::root(),
            Some(checkpoint.id),
        )
        .await?
        .ok_or("the checkpoint is stored")?;
    Ok(loaded
        .pending
        .iter()
        .filter(|w| matches!(w.kind, WriteKind::Output(_)))
        .count())
}

/// Run a fan-out of `width` with task 0 held back; while it waits, return what the head
/// checkpoint has recorded; then let it finish and check the final state.
async fn recorded_while_one_task_runs(
    saver: Arc<dyn Saver>,
    width: u64,
    durability: Durability,
) -> Result<usize, BoxError> {
    let release = Arc::new(Notify::new());
    let g = graph(Arc::clone(&release))?.with_checkpointer(Arc::clone(&saver));
    let config = RunConfig::new().thread("t").durability(durability);
    let run = tokio::spawn({
        let g = g.clone();
        let config = config.clone();
        async move { g.invoke(Fan::update().width(width), &config).await }
    });
    let thread = ThreadId::new("t")?;
    let mut seen = 0;
    for _ in 0..2000 {
        if let Some(head) = saver.head(&thread, &Namespace::root()).await? {
            seen = outputs_of(&*saver, &head.checkpoint).await?;
            if head.checkpoint.step == 0 && seen == width as usize - 1 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    release.notify_one();
    let done = run.await??;
    let mut results = done.state.results.clone();
    results.sort_unstable();
    assert_eq!(results, (100..100 + width).collect::<Vec<_>>());
    if durability != Durability::Exit {
        // The step's checkpoint holds the outputs now: the records are dropped with it.
        assert_no_recorded_outputs(&*saver)
            .await
            .map_err(|e| -> BoxError { e.to_string().into() })?;
    }
    Ok(seen)
}

/// Under `sync` and `async`: 7 of 8 tasks finished while task 0 waits, all 7 recorded.
async fn seven_recorded_of_eight(saver: Arc<dyn Saver>) -> TestResult {
    for durability in [Durability::Sync, Durability::Async] {
        let seen = recorded_while_one_task_runs(Arc::clone(&saver), 8, durability).await?;
        assert_eq!(seen, 7, "{durability:?}: the 7 finished tasks are recorded");
        saver.delete_thread(&ThreadId::new("t")?).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_are_recorded_while_a_sibling_runs_in_memory() -> TestResult {
    seven_recorded_of_eight(Arc::new(MemorySaver::new())).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_are_recorded_while_a_sibling_runs_on_sqlite() -> TestResult {
    let dir = tempfile::tempdir()?;
    seven_recorded_of_eight(Arc::new(SqliteSaver::open(dir.path().join("t.db"))?)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_recorded_under_durability_exit() -> TestResult {
    let saver: Arc<dyn Saver> = Arc::new(MemorySaver::new());
    let release = Arc::new(Notify::new());
    let g = graph(Arc::clone(&release))?.with_checkpointer(Arc::clone(&saver));
    let config = RunConfig::new().thread("t").durability(Durability::Exit);
    let run = tokio::spawn(async move { g.invoke(Fan::update().width(4), &config).await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    release.notify_one();
    let done = run.await??;
    assert_eq!(done.state.results.len(), 4);
    assert_no_recorded_outputs(&*saver).await
}

/// Every stored checkpoint of thread `t` has no recorded task outputs.
async fn assert_no_recorded_outputs(saver: &dyn Saver) -> TestResult {
    let history = saver
        .list(&ThreadId::new("t")?, &Namespace::root(), Default::default())
        .await?;
    assert!(!history.is_empty(), "the thread is stored");
    for checkpoint in &history {
        assert_eq!(
            outputs_of(saver, checkpoint).await?,
            0,
            "step {} holds recorded writes",
            checkpoint.step
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_that_finish_together_record_nothing_before_their_step_commits() -> TestResult {
    let saver: Arc<dyn Saver> = Arc::new(MemorySaver::new());
    let release = Arc::new(Notify::new());
    release.notify_one(); // task 0 does not wait either
    let g = graph(release)?.with_checkpointer(Arc::clone(&saver));
    let config = RunConfig::new().thread("t");
    g.invoke(Fan::update().width(50), &config).await?;
    assert_no_recorded_outputs(&*saver).await
}
