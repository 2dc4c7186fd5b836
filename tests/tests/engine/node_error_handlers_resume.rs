//! Node error handlers across a pause or a crash: a resumed or continued run finds the
//! handled task's output recorded and does not call its handler again; a handler that asks
//! pauses its task. Compared with `fixtures/langgraph/error_handling_resume.json` where
//! LangGraph 1.2.24 behaves the same (decision 0092 lists where it does not).

use std::sync::Arc;
use std::time::Duration;

use stategraph::checkpoints::{MemorySaver, Namespace, Saver, SqliteSaver, ThreadId, WriteKind};
use stategraph::prelude::*;
use stategraph::{Durability, Input, NodeError, RunError};
use stategraph_tests::langgraph::{recorded, strings};

use crate::node_error_handlers::{counting_handler, failing, number, push, quick};
use crate::superstep_semantics::Log;
use crate::{Counter, TestResult};

/// `flaky` fails and is handled, `asks` pauses, in one step; the graph on a SQLite file.
fn handled_beside_a_pause(
    flaky: Counter,
    handled: Counter,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", flaky),
            NodeOptions::new().error_handler(counting_handler(handled)),
        )
        .add_node("asks", |_s: Arc<Log>, c: NodeContext| async move {
            let answer: String = c.interrupt("ok?")?;
            Ok::<_, BoxError>(push(&format!("answer {answer}")))
        })
        .add_edge(START, "flaky")
        .add_edge(START, "asks")
        .add_edge("flaky", END)
        .add_edge("asks", END)
        .compile()
}

#[tokio::test]
async fn a_resume_after_a_pause_in_the_handled_step_does_not_call_the_handler_again() -> TestResult
{
    let lg = recorded("error_handling_resume")?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.sqlite");
    let (flaky, handled) = (Counter::default(), Counter::default());
    let cfg = RunConfig::new().thread("t").durability(Durability::Sync);
    {
        let saver = Arc::new(SqliteSaver::open(&path)?);
        let g = handled_beside_a_pause(flaky.clone(), handled.clone())?.with_checkpointer(saver);
        let paused = g.invoke(Log::update(), &cfg).await?;
        assert_eq!(paused.interrupts.len(), 1);
    }
    // A new process: the same file opened again.
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let g = handled_beside_a_pause(flaky.clone(), handled.clone())?.with_checkpointer(saver);
    let done = g
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    assert_eq!(
        flaky.get() as u64,
        number(&lg, "/after_resume/calls/flaky")?
    );
    assert_eq!(
        handled.get(),
        1,
        "LangGraph 1.2.24 calls the handler again on resume (recorded: {}); we reuse its write",
        number(&lg, "/after_resume/calls/handler")?
    );
    let mut log = done.state.log.clone();
    log.sort();
    let mut expected = strings(&lg, "/after_resume/result/log")?;
    expected.sort();
    assert_eq!(log, expected);
    let state = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(
        state
            .handled_errors()
            .iter()
            .map(|h| h.node.as_str())
            .collect::<Vec<_>>(),
        ["flaky"],
        "the step that commits on resume records the failure handled before the pause"
    );
    Ok(())
}

/// `flaky` fails and is handled at once; `slow` waits for `gate` in the same step.
fn handled_beside_a_slow_task(
    handled: Counter,
    gate: Arc<tokio::sync::Semaphore>,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", Counter::default()),
            NodeOptions::new().error_handler(counting_handler(handled)),
        )
        .add_node("slow", move |_s: Arc<Log>, _c: NodeContext| {
            let gate = gate.clone();
            async move {
                let _permit = gate.acquire().await?;
                Ok::<_, BoxError>(push("slow"))
            }
        })
        .add_edge(START, "flaky")
        .add_edge(START, "slow")
        .add_edge("flaky", END)
        .add_edge("slow", END)
        .compile()
}

#[tokio::test]
async fn a_crash_after_the_handled_task_finished_does_not_call_the_handler_again() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.sqlite");
    let handled = Counter::default();
    let cfg = RunConfig::new().thread("t").durability(Durability::Sync);
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let closed = Arc::new(tokio::sync::Semaphore::new(0));
    let g = handled_beside_a_slow_task(handled.clone(), closed)?.with_checkpointer(saver.clone());
    let run_cfg = cfg.clone();
    let run = tokio::spawn(async move { g.invoke(Log::update(), &run_cfg).await });
    // Wait until the handled task's write is on disk, then kill the run mid-step.
    let thread = ThreadId::new("t")?;
    loop {
        let head = saver.head(&thread, &Namespace::root()).await?;
        let recorded = head.is_some_and(|h| {
            h.pending
                .iter()
                .any(|w| w.node == "flaky" && matches!(w.kind, WriteKind::Output(_)))
        });
        if recorded {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    run.abort();
    let _ = run.await;
    drop(saver);
    assert_eq!(handled.get(), 1);

    let saver = Arc::new(SqliteSaver::open(&path)?);
    let open = Arc::new(tokio::sync::Semaphore::new(1));
    let g = handled_beside_a_slow_task(handled.clone(), open)?.with_checkpointer(saver);
    let done = g.invoke(Input::Continue, &cfg).await?;
    assert_eq!(
        handled.get(),
        1,
        "the resumed step reuses the handler's recorded write"
    );
    assert_eq!(done.state.log, ["handled", "slow"]);
    let state = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(state.handled_errors().len(), 1);
    Ok(())
}

/// `flaky` fails and its handler routes to `next`, which waits for `gate`.
fn handled_then_a_slow_step(
    handled: Counter,
    gate: Arc<tokio::sync::Semaphore>,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let handler = move |_s: Arc<Log>, _e: NodeError, _c: NodeContext| {
        handled.hit();
        async { Ok::<_, BoxError>(Command::new().update(push("handled")).goto("next")) }
    };
    StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", Counter::default()),
            NodeOptions::new()
                .error_handler(handler)
                .destinations(["next"]),
        )
        .add_node("next", move |_s: Arc<Log>, _c: NodeContext| {
            let gate = gate.clone();
            async move {
                let _permit = gate.acquire().await?;
                Ok::<_, BoxError>(push("next"))
            }
        })
        .add_edge(START, "flaky")
        .add_edge("flaky", END)
        .add_edge("next", END)
        .compile()
}

#[tokio::test]
async fn a_crash_in_the_step_after_the_handled_one_resumes_there_without_the_handler() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.sqlite");
    let handled = Counter::default();
    let cfg = RunConfig::new().thread("t").durability(Durability::Sync);
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let closed = Arc::new(tokio::sync::Semaphore::new(0));
    let g = handled_then_a_slow_step(handled.clone(), closed)?.with_checkpointer(saver.clone());
    let run_cfg = cfg.clone();
    let run = tokio::spawn(async move { g.invoke(Log::update(), &run_cfg).await });
    // Wait until the handled step's checkpoint is on disk, then kill the run in the next.
    let thread = ThreadId::new("t")?;
    loop {
        let head = saver.head(&thread, &Namespace::root()).await?;
        if head.is_some_and(|h| h.checkpoint.metadata.contains_key("handled_errors")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    run.abort();
    let _ = run.await;
    drop(saver);

    let saver = Arc::new(SqliteSaver::open(&path)?);
    let open = Arc::new(tokio::sync::Semaphore::new(1));
    let g = handled_then_a_slow_step(handled.clone(), open)?.with_checkpointer(saver);
    let done = g.invoke(Input::Continue, &cfg).await?;
    assert_eq!(handled.get(), 1);
    assert_eq!(done.state.log, ["handled", "next"]);
    let handled_steps: Vec<i64> = g
        .get_state_history("t", Default::default())
        .await?
        .iter()
        .filter(|s| !s.handled_errors().is_empty())
        .map(|s| s.checkpoint.step)
        .collect();
    assert_eq!(
        handled_steps,
        [1],
        "recorded once, by the step that handled it"
    );
    Ok(())
}

#[tokio::test]
async fn without_a_handler_a_failure_after_the_retries_fails_the_run_and_a_resume_retries_it(
) -> TestResult {
    let lg = recorded("error_handling_no_handler")?;
    let dir = tempfile::tempdir()?;
    let saver = Arc::new(SqliteSaver::open(dir.path().join("threads.sqlite"))?);
    let (flaky, ok) = (Counter::default(), Counter::default());
    let ok2 = ok.clone();
    let g = StateGraph::<Log>::new()
        .add_node("ok", move |_s: Arc<Log>, _c: NodeContext| {
            ok2.hit();
            async { Ok::<_, BoxError>(push("ok")) }
        })
        .add_node_with(
            "flaky",
            failing("flaky", flaky.clone()),
            NodeOptions::new().retry(quick(3)),
        )
        .add_edge(START, "ok")
        .add_edge(START, "flaky")
        .add_edge("ok", END)
        .add_edge("flaky", END)
        .compile()?
        .with_checkpointer(saver);
    let cfg = RunConfig::new().thread("t");
    let err = g
        .invoke(Log::update().value(1), &cfg)
        .await
        .err()
        .ok_or("expected a failure")?;
    let message = lg
        .pointer("/raised/message")
        .and_then(|m| m.as_str())
        .ok_or("no message")?;
    assert!(
        matches!(&err, RunError::Node { node, source, .. } if node == "flaky" && source.to_string() == message),
        "{err}"
    );
    assert_eq!(flaky.get() as u64, number(&lg, "/attempts_first_run")?);
    let state = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(
        state.errors,
        vec![("flaky".to_owned(), err.to_string())],
        "the failed task's error is kept with the checkpoint"
    );
    assert!(state.handled_errors().is_empty());
    let again = g.invoke(Input::Continue, &cfg).await.err();
    assert!(matches!(again, Some(RunError::Node { .. })), "{again:?}");
    assert_eq!(
        flaky.get() as u64,
        number(&lg, "/attempts_after_resume")?,
        "as LangGraph: a resume runs the failed node again, with its retries"
    );
    assert_eq!(ok.get(), 1, "its finished sibling's write is reused");
    Ok(())
}

#[tokio::test]
async fn a_handler_that_asks_pauses_its_task_and_the_resume_runs_the_node_first() -> TestResult {
    let flaky = Counter::default();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", flaky.clone()),
            NodeOptions::new().error_handler(
                |_s: Arc<Log>, e: NodeError, c: NodeContext| async move {
                    let choice: String =
                        c.interrupt(format!("{} failed: retry or skip?", e.node))?;
                    Ok::<_, BoxError>(push(&choice))
                },
            ),
        )
        .add_edge(START, "flaky")
        .add_edge("flaky", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(
        paused.interrupts.first().map(|i| i.value.clone()),
        Some(serde_json::json!("flaky failed: retry or skip?"))
    );
    let done = g
        .invoke(Command::resume(Resume::value("skip")), &cfg)
        .await?;
    assert_eq!(done.state.log, ["skip"]);
    assert_eq!(
        flaky.get(),
        2,
        "only a finished task's output is kept (decision 0092)"
    );
    Ok(())
}
