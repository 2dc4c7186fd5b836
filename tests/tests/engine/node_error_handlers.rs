//! Node error handlers: what a handler receives and when, where its output goes, what it never
//! sees, what a checkpoint records, and that a resumed run does not call it again. Compared
//! with `fixtures/langgraph/error_handling_*.json` and `node_defaults.json` where LangGraph
//! 1.2.24 behaves the same (decision 0092 lists where it does not).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use stategraph::checkpoints::MemorySaver;
use stategraph::prelude::*;
use stategraph::{FailureKind, GraphProblem, NodeError, RetryPolicy, RunError, TimeoutLimit};
use stategraph_checkpoints::sync::Unpoisoned;
use stategraph_tests::langgraph::{recorded, strings};

use crate::superstep_semantics::{Log, LogUpdate};
use crate::{Counter, TestResult};

pub(crate) fn push(s: &str) -> LogUpdate {
    Log::update().log(vec![s.to_owned()])
}

pub(crate) fn quick(attempts: u32) -> RetryPolicy {
    RetryPolicy::attempts(attempts)
        .initial_interval(Duration::ZERO)
        .jitter(false)
}

/// A node that fails on every call with "<name> broke on attempt <n>".
pub(crate) fn failing(
    name: &'static str,
    calls: Counter,
) -> impl Fn(Arc<Log>, NodeContext) -> futures::future::Ready<Result<LogUpdate, BoxError>> {
    move |_s, _c| {
        let n = calls.hit();
        futures::future::ready(Err(format!("{name} broke on attempt {n}").into()))
    }
}

/// A subgraph node's input: nothing of the parent's state.
fn no_input(_parent: &Log) -> LogUpdate {
    Log::update()
}

/// A subgraph node's output: the child's log, appended to the parent's.
fn log_of(child: &Log) -> LogUpdate {
    Log::update().log(child.log.clone())
}

fn appender(
    entry: &'static str,
) -> impl Fn(Arc<Log>, NodeContext) -> futures::future::Ready<Result<LogUpdate, BoxError>> {
    move |_s, _c| futures::future::ready(Ok(push(entry)))
}

pub(crate) fn number(v: &serde_json::Value, pointer: &str) -> Result<u64, String> {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| format!("fixture has no number at {pointer}"))
}

#[tokio::test]
async fn a_handler_gets_the_last_error_after_the_retries_and_its_update_ends_the_branch(
) -> TestResult {
    let lg = recorded("error_handling_handler")?;
    let calls = Counter::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let handler = move |s: Arc<Log>, e: NodeError, _c: NodeContext| {
        let seen = seen2.clone();
        async move {
            let message = e.node_error().map(ToString::to_string);
            seen.lock()
                .unpoisoned()
                .push((e.node.clone(), e.attempts, message, s.value));
            Ok::<_, BoxError>(push("handled"))
        }
    };
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", calls.clone()),
            NodeOptions::new().retry(quick(3)).error_handler(handler),
        )
        .add_node("after", appender("after"))
        .add_edge(START, "flaky")
        .add_edge("flaky", "after")
        .add_edge("after", END)
        .compile()?;
    let out = g.invoke(Log::update().value(7), &RunConfig::new()).await?;
    let attempts = number(&lg, "/handler_saw/0/attempts_before_handler")?;
    let message = lg
        .pointer("/handler_saw/0/message")
        .and_then(|m| m.as_str())
        .ok_or("no message")?;
    assert_eq!(
        *seen.lock().unpoisoned(),
        vec![("flaky".to_owned(), 3, Some(message.to_owned()), 7)],
        "as LangGraph: one call, after the last of the 3 attempts, with its error and the state"
    );
    assert_eq!(calls.get() as u64, attempts);
    assert_eq!(
        out.state.log,
        strings(&lg, "/final/values/log")?,
        "as LangGraph: the failed node's edge to `after` does not fire after its handler"
    );
    Ok(())
}

#[tokio::test]
async fn a_handlers_goto_routes_to_a_fallback_in_place_of_the_nodes_edges() -> TestResult {
    let lg = recorded("error_handling_goto")?;
    let handler = |_s: Arc<Log>, e: NodeError, _c: NodeContext| async move {
        Ok::<_, BoxError>(
            Command::new()
                .update(push(&format!("handled {}", e.node)))
                .goto("fallback"),
        )
    };
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", Counter::default()),
            NodeOptions::new()
                .error_handler(handler)
                .destinations(["fallback"]),
        )
        .add_node("normal", appender("normal"))
        .add_node("fallback", appender("fallback"))
        .add_edge(START, "flaky")
        .add_edge("flaky", "normal")
        .add_edge("normal", END)
        .add_edge("fallback", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, strings(&lg, "/result/log")?);
    Ok(())
}

pub(crate) fn counting_handler(
    count: Counter,
) -> impl Fn(Arc<Log>, NodeError, NodeContext) -> futures::future::Ready<Result<LogUpdate, BoxError>>
{
    move |_s, _e, _c| {
        count.hit();
        futures::future::ready(Ok(push("handled")))
    }
}

#[tokio::test]
async fn an_interrupt_is_never_handed_to_a_handler() -> TestResult {
    let lg = recorded("error_handling_interrupt_passes")?;
    let handled = Counter::default();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "asks",
            |_s: Arc<Log>, c: NodeContext| async move {
                let answer: String = c.interrupt("ok?")?;
                Ok::<_, BoxError>(push(&format!("answer {answer}")))
            },
            NodeOptions::new().error_handler(counting_handler(handled.clone())),
        )
        .add_edge(START, "asks")
        .add_edge("asks", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let first = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(first.interrupts.len(), 1);
    let done = g
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    assert_eq!(handled.get() as u64, number(&lg, "/handler_calls")?);
    assert_eq!(done.state.log, strings(&lg, "/resumed/log")?);
    Ok(())
}

#[tokio::test]
async fn a_cancellation_is_never_handed_to_a_handler() -> TestResult {
    let handled = Counter::default();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "stops",
            |_s: Arc<Log>, c: NodeContext| async move {
                c.cancel_run();
                Err::<LogUpdate, BoxError>("stopped".into())
            },
            NodeOptions::new().error_handler(counting_handler(handled.clone())),
        )
        .add_edge(START, "stops")
        .add_edge("stops", END)
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected a cancellation")?;
    // The node's error arrives with the cancellation: it passes unhandled, as it was.
    assert!(matches!(err, RunError::Node { .. }), "{err}");
    assert_eq!(handled.get(), 0, "a cancelled run calls no handler");
    Ok(())
}

#[tokio::test]
async fn a_subgraphs_interrupt_error_passes_its_nodes_handler_unchanged() -> TestResult {
    let handled = Counter::default();
    let child = StateGraph::<Log>::new()
        .add_node("asks", |_s: Arc<Log>, c: NodeContext| async move {
            let answer: String = c.interrupt("ok?")?;
            Ok::<_, BoxError>(push(&answer))
        })
        .add_edge(START, "asks")
        .add_edge("asks", END)
        .compile()?;
    let g = StateGraph::<Log>::new()
        .add_subgraph_with(
            "sub",
            child,
            Checkpointing::Disabled,
            no_input,
            log_of,
            NodeOptions::new().error_handler(counting_handler(handled.clone())),
        )
        .add_edge(START, "sub")
        .add_edge("sub", END)
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected an error")?;
    assert!(
        matches!(err, RunError::InterruptInEphemeralSubgraph { .. }),
        "{err}"
    );
    assert_eq!(handled.get(), 0);
    Ok(())
}

#[tokio::test]
async fn a_failing_handler_fails_the_run_with_an_error_naming_both() -> TestResult {
    let lg = recorded("error_handling_handler_fails")?;
    let handler = |_s: Arc<Log>, e: NodeError, _c: NodeContext| async move {
        Err::<LogUpdate, BoxError>(
            format!(
                "handler could not recover from {}",
                e.node_error().map(ToString::to_string).unwrap_or_default()
            )
            .into(),
        )
    };
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", Counter::default()),
            NodeOptions::new().error_handler(handler),
        )
        .add_edge(START, "flaky")
        .add_edge("flaky", END)
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected a failure")?;
    let handler_message = lg
        .pointer("/raised/message")
        .and_then(|m| m.as_str())
        .ok_or("no message")?;
    let RunError::ErrorHandler {
        node,
        failure,
        source,
        ..
    } = &err
    else {
        return Err(format!("expected an error handler failure, got {err}").into());
    };
    assert_eq!(node, "flaky");
    assert_eq!(
        source.to_string(),
        handler_message,
        "the handler's own error"
    );
    assert!(
        matches!(failure.as_ref(), RunError::Node { source, .. } if source.to_string() == "flaky broke on attempt 1"),
        "and the node's: {failure}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains(handler_message) && shown.contains("flaky broke on attempt 1"),
        "{shown}"
    );
    Ok(())
}

#[tokio::test]
async fn a_panicking_handler_fails_the_run_like_a_failing_one() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", Counter::default()),
            NodeOptions::new().error_handler(|_s: Arc<Log>, _e: NodeError, _c: NodeContext| {
                if true {
                    panic!("handler bug");
                }
                async { Ok::<_, BoxError>(push("never")) }
            }),
        )
        .add_edge(START, "flaky")
        .add_edge("flaky", END)
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected a failure")?;
    assert!(
        matches!(&err, RunError::ErrorHandler { source, .. } if source.to_string().contains("handler bug")),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn the_handled_failure_is_recorded_in_its_steps_checkpoint_metadata() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            failing("flaky", Counter::default()),
            NodeOptions::new()
                .retry(quick(2))
                .error_handler(counting_handler(Counter::default())),
        )
        .add_node("ok", appender("ok"))
        .add_edge(START, "flaky")
        .add_edge(START, "ok")
        .add_edge("flaky", END)
        .add_edge("ok", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let state = g.get_state("t", None).await?.ok_or("no state")?;
    let handled = state.handled_errors();
    assert_eq!(handled.len(), 1, "{handled:?}");
    let h = &handled[0];
    assert_eq!(
        (
            h.node.as_str(),
            h.step,
            h.attempts,
            h.kind,
            h.error.as_str()
        ),
        ("flaky", 1, 2, FailureKind::Node, "flaky broke on attempt 2")
    );
    assert_eq!(
        state.checkpoint.step, 1,
        "the checkpoint of the step that ran it"
    );
    let history = g
        .get_state_history("t", Default::default())
        .await?
        .into_iter()
        .map(|s| (s.checkpoint.step, s.handled_errors().len()))
        .collect::<Vec<_>>();
    assert_eq!(
        history,
        vec![(1, 1), (0, 0), (-1, 0)],
        "only that step records it"
    );
    Ok(())
}

#[tokio::test]
async fn a_timeout_handed_to_a_handler_says_which_limit_fired() -> TestResult {
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "slow",
            |_s: Arc<Log>, _c: NodeContext| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, BoxError>(push("late"))
            },
            NodeOptions::new()
                .timeout(Duration::from_millis(5))
                .error_handler(move |_s: Arc<Log>, e: NodeError, _c: NodeContext| {
                    *seen2.lock().unpoisoned() = e.timeout();
                    async { Ok::<_, BoxError>(push("gave up")) }
                }),
        )
        .add_edge(START, "slow")
        .add_edge("slow", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let out = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(out.state.log, ["gave up"]);
    assert_eq!(*seen.lock().unpoisoned(), Some(TimeoutLimit::Run));
    let state = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(
        state.handled_errors().first().map(|h| h.kind),
        Some(FailureKind::Timeout(TimeoutLimit::Run))
    );
    Ok(())
}

#[tokio::test]
async fn graph_defaults_give_every_node_a_handler_and_retry_its_own_options_win() -> TestResult {
    let lg = recorded("node_defaults")?;
    let (a, b, inner) = (Counter::default(), Counter::default(), Counter::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = |who: &'static str| {
        let seen = seen.clone();
        move |_s: Arc<Log>, e: NodeError, _c: NodeContext| {
            seen.lock()
                .unpoisoned()
                .push((who.to_owned(), e.node.clone()));
            let entry = format!("{who} handled {}", e.node);
            async move { Ok::<_, BoxError>(push(&entry)) }
        }
    };
    let child = StateGraph::<Log>::new()
        .add_node("inner", failing("inner", inner.clone()))
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()?;
    let g = StateGraph::<Log>::new()
        .set_node_defaults(
            NodeOptions::new()
                .retry(quick(2))
                .error_handler(handler("default")),
        )
        .add_node("a", failing("a", a.clone()))
        .add_node_with(
            "b",
            failing("b", b.clone()),
            NodeOptions::new()
                .retry(quick(4))
                .error_handler(handler("own")),
        )
        .add_subgraph("sub", child, Checkpointing::Disabled, no_input, log_of)
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge(START, "sub")
        .add_edge("a", END)
        .add_edge("b", END)
        .add_edge("sub", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, strings(&lg, "/result/log")?);
    let attempts = [a.get(), b.get(), inner.get()].map(|n| n as u64);
    assert_eq!(
        attempts,
        [
            number(&lg, "/attempts/a")?,
            number(&lg, "/attempts/b")?,
            number(&lg, "/attempts/inner")?
        ],
        "a: the default retry; b: its own; inner: not the parent's, but run twice by `sub`'s"
    );
    let mut seen = seen.lock().unpoisoned().clone();
    seen.sort();
    let mut expected: Vec<(String, String)> = lg
        .pointer("/handlers_called")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .ok_or("no handlers_called")?;
    expected.sort();
    assert_eq!(seen, expected);
    Ok(())
}

#[tokio::test]
async fn a_subgraph_keeps_its_own_defaults_and_its_parents_do_not_reach_inside() -> TestResult {
    let inner = Counter::default();
    let handler = |who: &'static str| {
        move |_s: Arc<Log>, e: NodeError, _c: NodeContext| {
            let entry = format!("{who} handled {}", e.node);
            async move { Ok::<_, BoxError>(push(&entry)) }
        }
    };
    let child = StateGraph::<Log>::new()
        .set_node_defaults(NodeOptions::new().error_handler(handler("child")))
        .add_node("inner", failing("inner", inner.clone()))
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()?;
    let g = StateGraph::<Log>::new()
        .set_node_defaults(
            NodeOptions::new()
                .retry(quick(3))
                .error_handler(handler("parent")),
        )
        .add_subgraph("sub", child, Checkpointing::Disabled, no_input, log_of)
        .add_edge(START, "sub")
        .add_edge("sub", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, ["child handled inner"]);
    assert_eq!(
        inner.get(),
        1,
        "the parent's retry default does not apply inside"
    );
    Ok(())
}

#[derive(State, Clone, Default, Debug)]
struct Other {
    n: u32,
}

#[test]
fn a_handler_for_another_state_type_is_a_compile_error() {
    let wrong = |_s: Arc<Other>, _e: NodeError, _c: NodeContext| async {
        Ok::<_, BoxError>(Other::update())
    };
    let result = StateGraph::<Log>::new()
        .set_node_defaults(NodeOptions::new().error_handler(wrong))
        .add_node_with("a", appender("a"), NodeOptions::new().error_handler(wrong))
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile();
    let problems = match result {
        Ok(_) => Vec::new(),
        Err(e) => e.problems,
    };
    let named: Vec<&str> = problems
        .iter()
        .filter_map(|p| match p {
            GraphProblem::HandlerState { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(named, ["a", "*"], "{problems:?}");
}
