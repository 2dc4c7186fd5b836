//! Durability: `sync`, `async`, `exit`.

use std::sync::Arc;

use stategraph::checkpoints::{CheckpointError, Source};
use stategraph::prelude::*;
use stategraph::RunError;
use stategraph_tests::RecordingSaver;

use crate::superstep_semantics::Log;
use crate::TestResult;

fn counting_chain(saver: RecordingSaver) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let mut g = StateGraph::<Log>::new().add_edge(START, "n0");
    for i in 0..4 {
        let saver = saver.clone();
        let name = format!("n{i}");
        g = g.add_node(name.clone(), move |_s: Arc<Log>, _c: NodeContext| {
            // Each node records how many checkpoints exist when it starts.
            let stored = saver.puts().len();
            async move { Ok::<_, BoxError>(Log::update().log(vec![format!("{stored}")])) }
        });
        let next = if i == 3 {
            END.to_owned()
        } else {
            format!("n{}", i + 1)
        };
        g = g.add_edge(name, next);
    }
    g.compile()
}

#[tokio::test]
async fn sync_stores_each_step_before_the_next_step_starts() -> TestResult {
    let saver = RecordingSaver::new();
    let g = counting_chain(saver.clone())?.with_checkpointer(saver.shared());
    let out = g
        .invoke(
            Log::update(),
            &RunConfig::new().thread("t").durability(Durability::Sync),
        )
        .await?;
    // n0 runs at step 1, after the input (-1) and start (0) checkpoints: 2 stored; and so on.
    assert_eq!(out.state.log, ["2", "3", "4", "5"]);
    assert_eq!(saver.puts().len(), 6);
    Ok(())
}

#[tokio::test]
async fn async_stores_every_step_by_the_time_the_run_returns() -> TestResult {
    let saver = RecordingSaver::new();
    let g = counting_chain(saver.clone())?.with_checkpointer(saver.shared());
    g.invoke(
        Log::update(),
        &RunConfig::new().thread("t").durability(Durability::Async),
    )
    .await?;
    let steps: Vec<i64> = saver.puts().iter().map(|p| p.checkpoint.step).collect();
    assert_eq!(steps, [-1, 0, 1, 2, 3, 4]);
    Ok(())
}

#[tokio::test]
async fn exit_stores_one_checkpoint_per_invocation_with_every_change() -> TestResult {
    let saver = RecordingSaver::new();
    let g = counting_chain(saver.clone())?.with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t").durability(Durability::Exit);
    let out = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(
        out.state.log,
        ["0", "0", "0", "0"],
        "nothing is stored while the run goes"
    );
    let puts = saver.puts();
    assert_eq!(puts.len(), 1);
    assert_eq!(
        (
            puts[0].checkpoint.step,
            puts[0].checkpoint.source,
            puts[0].checkpoint.parent
        ),
        (4, Source::Loop, None)
    );
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(*snap.values, *out.state);
    // A second invocation appends one more checkpoint, chained to the first.
    g.invoke(Log::update(), &cfg).await?;
    let puts = saver.puts();
    assert_eq!(puts.len(), 2);
    assert_eq!(puts[1].checkpoint.parent, Some(puts[0].checkpoint.id));
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.values.log.len(), 8);
    Ok(())
}

#[tokio::test]
async fn exit_keeps_an_interrupted_run_resumable() -> TestResult {
    let saver = RecordingSaver::new();
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().log(vec!["a".into()]))
        })
        .add_node("ask", |_s: Arc<Log>, c: NodeContext| async move {
            let v: String = c.interrupt("?")?;
            Ok::<_, BoxError>(Log::update().log(vec![v]))
        })
        .add_edge(START, "a")
        .add_edge("a", "ask")
        .compile()?
        .with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t").durability(Durability::Exit);
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert!(paused.is_interrupted());
    assert_eq!(saver.puts().len(), 1);
    let done = g
        .invoke(Command::resume(Resume::value("answer")), &cfg)
        .await?;
    assert_eq!(done.state.log, ["a", "answer"]);
    Ok(())
}

#[tokio::test]
async fn a_failed_background_write_surfaces_as_an_error_of_the_run() -> TestResult {
    for durability in [Durability::Async, Durability::Sync] {
        let saver = RecordingSaver::failing_from(3);
        let g = counting_chain(saver.clone())?.with_checkpointer(saver.shared());
        let err = g
            .invoke(
                Log::update(),
                &RunConfig::new().thread("t").durability(durability),
            )
            .await
            .err();
        let err = err.ok_or("expected a storage error")?;
        assert!(
            matches!(err, RunError::Checkpoint(CheckpointError::Storage(_))),
            "{durability:?}: {err}"
        );
        assert_eq!(saver.puts().len(), 2);
    }
    Ok(())
}

#[tokio::test]
async fn async_runs_ahead_of_a_slow_saver_and_still_stores_every_step_in_order() -> TestResult {
    let recording = RecordingSaver::slow(std::time::Duration::from_millis(3));
    let g = counting_chain(recording.clone())?.with_checkpointer(recording.shared());
    let out = g
        .invoke(
            Log::update(),
            &RunConfig::new().thread("t").durability(Durability::Async),
        )
        .await?;
    // Nodes started before earlier checkpoints were stored (the log records what was stored
    // when each node began), and all six checkpoints are stored, in order, by the end.
    // Under `sync` each node would see every earlier checkpoint stored ("2", "3", "4", "5").
    assert_ne!(
        out.state.log,
        ["2", "3", "4", "5"],
        "async waited for each write"
    );
    let steps: Vec<i64> = recording.puts().iter().map(|p| p.checkpoint.step).collect();
    assert_eq!(steps, [-1, 0, 1, 2, 3, 4]);
    Ok(())
}

/// Under `async` on SQLite, a step's checkpoint is committed while the next step runs (the
/// writer does not hold it back for the rest of the run): a second saver on the same file,
/// another connection as another process would have, reads it before the long step ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_on_sqlite_commits_a_step_while_the_next_step_runs() -> TestResult {
    use stategraph::checkpoints::{Namespace, SqliteSaver, ThreadId};
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("async.db");
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let observer = SqliteSaver::open(&path)?;
    let release = Arc::new(tokio::sync::Notify::new());
    let wait = release.clone();
    let g = StateGraph::<Log>::new()
        .add_node("quick", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().log(vec!["quick".into()]))
        })
        .add_node("long", move |_s: Arc<Log>, _c: NodeContext| {
            let wait = wait.clone();
            async move {
                wait.notified().await;
                Ok::<_, BoxError>(Log::update().log(vec!["long".into()]))
            }
        })
        .add_edge(START, "quick")
        .add_edge("quick", "long")
        .add_edge("long", END)
        .compile()?
        .with_checkpointer(saver);
    let run = tokio::spawn(async move {
        g.invoke(
            Log::update(),
            &RunConfig::new().thread("t").durability(Durability::Async),
        )
        .await
    });
    let thread = ThreadId::new("t")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let seen = loop {
        let head = observer.get(&thread, &Namespace::root(), None).await?;
        if let Some(h) = head.filter(|h| h.checkpoint.step >= 1) {
            break h;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the checkpoint of the step before the long one was not committed while it ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    };
    assert_eq!(seen.checkpoint.step, 1, "only the quick step is done");
    release.notify_one();
    let out = run.await??;
    assert_eq!(out.state.log, ["quick", "long"]);
    let head = observer
        .get(&thread, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    assert_eq!(head.checkpoint.step, 2);
    Ok(())
}
