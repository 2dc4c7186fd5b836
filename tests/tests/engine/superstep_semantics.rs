//! Supersteps: shared snapshots, deterministic merge order, conflicts, failures, limits,
//! fan-in, deferral, retry, timeout, cancellation.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use stategraph::checkpoints::MemorySaver;
use stategraph::prelude::*;
use stategraph::{RetryPolicy, RunError};

use crate::{Counter, TestResult};

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    #[reduce(append)]
    pub log: Vec<String>,
    pub value: i64,
}

fn push(s: &str) -> LogUpdate {
    Log::update().log(vec![s.to_owned()])
}

#[tokio::test]
async fn parallel_tasks_see_the_same_snapshot_and_not_each_others_writes() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().value(1))
        })
        .add_node("b", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(push(&format!("b saw {}", s.value)))
        })
        .add_node("c", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(push(&format!("c saw {}", s.value)))
        })
        .add_node("d", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(push(&format!("d saw {} lines", s.log.len())))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("a", "c")
        .add_join(["b", "c"], "d")
        .add_edge("d", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, ["b saw 1", "c saw 1", "d saw 2 lines"]);
    Ok(())
}

fn delayed_fanout(delays: Vec<u64>) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let mut g = StateGraph::<Log>::new();
    for (i, d) in delays.into_iter().enumerate() {
        let name = format!("n{i}");
        let label = name.clone();
        g = g
            .add_node(name.clone(), move |_s: Arc<Log>, _c: NodeContext| {
                let label = label.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(d)).await;
                    Ok::<_, BoxError>(push(&label))
                }
            })
            .add_edge(START, name.clone())
            .add_edge(name, END);
    }
    g.compile()
}

#[tokio::test]
async fn writes_merge_in_node_order_not_in_finish_order() -> TestResult {
    // n0 finishes last, n2 first: the append order is still n0, n1, n2.
    let g = delayed_fanout(vec![30, 15, 0])?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, ["n0", "n1", "n2"]);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn final_state_does_not_depend_on_task_finish_order(delays in proptest::collection::vec(0u64..6, 2..6)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let n = delays.len();
        let g = delayed_fanout(delays).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let out = rt.block_on(g.invoke(Log::update(), &RunConfig::new())).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let expected: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        prop_assert_eq!(&out.state.log, &expected);
    }
}

#[tokio::test]
async fn two_writes_to_a_last_value_field_in_one_step_fail_naming_field_and_writers() -> TestResult
{
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().value(1))
        })
        .add_node("b", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().value(2))
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .compile()?;
    let err = g.invoke(Log::update(), &RunConfig::new()).await.err();
    let (field, writers, source) = reduce_error(err.ok_or("expected a conflict")?)?;
    assert_eq!(field, "value");
    assert_eq!(writers, ["a", "b"]);
    assert!(matches!(
        source,
        stategraph::reducers::ReduceError::ConcurrentUpdate { writes: 2 }
    ));
    Ok(())
}

/// The field, writers and reducer error of a failed step's `RunError::Reduce`.
fn reduce_error(
    err: RunError,
) -> Result<(&'static str, Vec<String>, stategraph::reducers::ReduceError), BoxError> {
    match err {
        RunError::Reduce {
            field,
            writers,
            source,
            ..
        } => Ok((field, writers, source)),
        other => Err(format!("unexpected error {other}").into()),
    }
}

#[tokio::test]
async fn a_failed_step_keeps_finished_writes_and_resume_runs_only_the_failed_task() -> TestResult {
    let (a_runs, b_runs) = (Counter::default(), Counter::default());
    let (a2, b2) = (a_runs.clone(), b_runs.clone());
    let g = StateGraph::<Log>::new()
        .add_node("a", move |_s: Arc<Log>, _c: NodeContext| {
            a2.hit();
            async { Ok::<_, BoxError>(push("a")) }
        })
        .add_node("b", move |_s: Arc<Log>, _c: NodeContext| {
            let n = b2.hit();
            async move {
                // Let "a" finish first so its writes are recorded.
                tokio::time::sleep(Duration::from_millis(20)).await;
                if n == 1 {
                    Err::<LogUpdate, BoxError>("b fails once".into())
                } else {
                    Ok(push("b"))
                }
            }
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let err = g
        .invoke(Log::update(), &cfg)
        .await
        .err()
        .ok_or("expected failure")?;
    assert!(
        matches!(err, RunError::Node { ref node, .. } if node == "b"),
        "{err}"
    );

    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.next, ["a", "b"]);
    assert_eq!(snap.errors.len(), 1);
    assert_eq!(snap.errors[0].0, "b");

    let out = g.invoke(Input::Continue, &cfg).await?;
    assert_eq!(out.state.log, ["a", "b"]);
    assert_eq!((a_runs.get(), b_runs.get()), (1, 2));
    Ok(())
}

fn chain(n: usize) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let mut g = StateGraph::<Log>::new().add_edge(START, "n0");
    for i in 0..n {
        let name = format!("n{i}");
        g = g.add_node(name.clone(), |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("x"))
        });
        let next = if i + 1 == n {
            END.to_owned()
        } else {
            format!("n{}", i + 1)
        };
        g = g.add_edge(name, next);
    }
    g.compile()
}

#[tokio::test]
async fn recursion_limit_lets_limit_minus_one_node_steps_finish_like_langgraph() -> TestResult {
    let cfg = RunConfig::new().recursion_limit(5);
    let ok = chain(4)?.invoke(Log::update(), &cfg).await?;
    assert_eq!(ok.state.log.len(), 4);
    let err = chain(5)?
        .invoke(Log::update(), &cfg)
        .await
        .err()
        .ok_or("expected limit")?;
    assert!(
        matches!(err, RunError::RecursionLimit { limit: 5, .. }),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_runaway_loop_stops_at_the_recursion_limit() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("spin", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("x"))
        })
        .add_edge(START, "spin")
        .add_conditional_edges("spin", |_s: &Log| "spin", ["spin", END])
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new().recursion_limit(50))
        .await
        .err()
        .ok_or("expected limit")?;
    assert!(matches!(err, RunError::RecursionLimit { limit: 50, .. }));
    Ok(())
}

#[tokio::test]
async fn a_fan_in_edge_waits_for_every_source() -> TestResult {
    let joined = Counter::default();
    let j2 = joined.clone();
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a"))
        })
        .add_node("b1", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("b1"))
        })
        .add_node("b2", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("b2"))
        })
        .add_node("join", move |s: Arc<Log>, _c: NodeContext| {
            j2.hit();
            async move { Ok::<_, BoxError>(push(&format!("join after {}", s.log.join(",")))) }
        })
        .add_edge(START, "a")
        .add_edge(START, "b1")
        .add_edge("b1", "b2")
        .add_join(["a", "b2"], "join")
        .add_edge("join", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(joined.get(), 1);
    assert_eq!(
        out.state.log.last().map(String::as_str),
        Some("join after a,b1,b2")
    );
    Ok(())
}

#[tokio::test]
async fn a_deferred_node_runs_once_after_branches_of_uneven_length() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("short", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("short"))
        })
        .add_node("long1", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("long1"))
        })
        .add_node("long2", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("long2"))
        })
        .add_node_with(
            "after",
            |s: Arc<Log>, _c: NodeContext| async move {
                Ok::<_, BoxError>(push(&format!("after {}", s.log.len())))
            },
            NodeOptions::new().defer(),
        )
        .add_edge(START, "short")
        .add_edge(START, "long1")
        .add_edge("long1", "long2")
        .add_edge("short", "after")
        .add_edge("long2", "after")
        .add_edge("after", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, ["short", "long1", "long2", "after 3"]);
    Ok(())
}

#[tokio::test]
async fn a_retry_policy_reruns_a_failing_node_within_the_step() -> TestResult {
    let runs = Counter::default();
    let r2 = runs.clone();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "flaky",
            move |_s: Arc<Log>, _c: NodeContext| {
                let n = r2.hit();
                async move {
                    if n < 3 {
                        Err::<LogUpdate, BoxError>(format!("attempt {n} failed").into())
                    } else {
                        Ok(push("ok"))
                    }
                }
            },
            NodeOptions::new().retry(
                RetryPolicy::attempts(3)
                    .initial_interval(Duration::from_millis(1))
                    .jitter(false),
            ),
        )
        .add_edge(START, "flaky")
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, ["ok"]);
    assert_eq!(runs.get(), 3);
    Ok(())
}

#[tokio::test]
async fn a_retry_policy_gives_up_after_max_attempts_and_respects_its_predicate() -> TestResult {
    let runs = Counter::default();
    let r2 = runs.clone();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "bad",
            move |_s: Arc<Log>, _c: NodeContext| {
                r2.hit();
                async { Err::<LogUpdate, BoxError>("permanent".into()) }
            },
            NodeOptions::new().retry(
                RetryPolicy::attempts(5)
                    .initial_interval(Duration::from_millis(1))
                    .retry_on(|e| e.to_string() != "permanent"),
            ),
        )
        .add_edge(START, "bad")
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected failure")?;
    assert!(matches!(err, RunError::Node { .. }));
    assert_eq!(runs.get(), 1, "the predicate rejects retrying this error");
    Ok(())
}

#[tokio::test]
async fn a_node_over_its_timeout_fails_with_a_timeout_error() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "slow",
            |_s: Arc<Log>, _c: NodeContext| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<_, BoxError>(push("late"))
            },
            NodeOptions::new().timeout(Duration::from_millis(20)),
        )
        .add_edge(START, "slow")
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected timeout")?;
    assert!(
        matches!(err, RunError::Timeout { ref node, .. } if node == "slow"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn cancelling_a_run_stops_it_with_a_cancelled_error() -> TestResult {
    let token = CancelToken::new();
    let g = StateGraph::<Log>::new()
        .add_node("spin", |_s: Arc<Log>, _c: NodeContext| async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok::<_, BoxError>(push("x"))
        })
        .add_edge(START, "spin")
        .add_conditional_edges("spin", |_s: &Log| "spin", ["spin", END])
        .compile()?;
    let cfg = RunConfig::new().cancel_token(token.clone());
    let run = tokio::spawn(async move { g.invoke(Log::update(), &cfg).await });
    tokio::time::sleep(Duration::from_millis(30)).await;
    token.cancel();
    let err = run.await?.err().ok_or("expected cancel")?;
    assert!(matches!(err, RunError::Cancelled { .. }), "{err}");
    Ok(())
}

use stategraph::CancelToken;

#[tokio::test]
async fn a_conditional_edge_routes_on_the_state_after_the_step() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("count", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Log::update().value(s.value + 1))
        })
        .add_node("done", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("done"))
        })
        .add_edge(START, "count")
        .add_conditional_edges(
            "count",
            |s: &Log| if s.value < 3 { "count" } else { "done" },
            ["count", "done"],
        )
        .add_edge("done", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(
        (out.state.value, out.state.log.as_slice()),
        (3, &["done".to_owned()][..])
    );
    Ok(())
}

#[tokio::test]
async fn a_router_returning_an_undeclared_target_is_a_typed_error() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a"))
        })
        .add_node("b", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("b"))
        })
        .add_edge(START, "a")
        .add_conditional_edges("a", |_s: &Log| "b", [END])
        .add_edge(START, "b")
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::UnknownRouteTarget { ref router, ref value } if router == "a" && value == "b"),
        "{err}"
    );
    Ok(())
}

#[test]
fn public_engine_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<CompiledGraph<Log>>();
    check::<RunConfig>();
    check::<NodeContext>();
    check::<stategraph::RunOutcome<Log>>();
    check::<stategraph::Event>();
    check::<RunError>();
    check::<Command<Log>>();
    check::<MemorySaver>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_spawned_nodes_run_in_parallel_on_the_runtime() -> TestResult {
    // Each node blocks its thread until it hears from the other: this only finishes if the two
    // tasks run at the same time on different threads.
    let (to_b, from_a) = std::sync::mpsc::channel::<()>();
    let (to_a, from_b) = std::sync::mpsc::channel::<()>();
    let from_a = Arc::new(std::sync::Mutex::new(from_a));
    let from_b = Arc::new(std::sync::Mutex::new(from_b));
    let rendezvous = |tx: std::sync::mpsc::Sender<()>,
                      rx: Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
                      name: &'static str| {
        move |_s: Arc<Log>, _c: NodeContext| {
            let (tx, rx) = (tx.clone(), rx.clone());
            async move {
                tx.send(()).map_err(|e| e.to_string())?;
                rx.lock()
                    .map_err(|e| e.to_string())?
                    .recv_timeout(Duration::from_secs(10))
                    .map_err(|_| format!("{name} never met its sibling"))?;
                Ok::<_, BoxError>(push(name))
            }
        }
    };
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "a",
            rendezvous(to_b, from_b, "a"),
            NodeOptions::new().spawn(),
        )
        .add_node_with(
            "b",
            rendezvous(to_a, from_a, "b"),
            NodeOptions::new().spawn(),
        )
        .add_edge(START, "a")
        .add_edge(START, "b")
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, ["a", "b"]);
    Ok(())
}

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Note {
    id: Option<String>,
}

impl stategraph::reducers::Message for Note {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn set_id(&mut self, id: String) {
        self.id = Some(id);
    }
}

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Notes {
    #[reduce(add_messages)]
    notes: Vec<Note>,
}

#[tokio::test]
async fn a_reducer_error_of_a_step_with_one_writer_names_that_writer() -> TestResult {
    use stategraph::reducers::{MessagesUpdate, ReduceError};
    let g = StateGraph::<Notes>::new()
        .add_node("remover", |_s: Arc<Notes>, _c: NodeContext| async {
            Ok::<_, BoxError>(Notes::update().notes(MessagesUpdate::remove("nope")))
        })
        .add_edge(START, "remover")
        .compile()?;
    let err = g.invoke(Notes::update(), &RunConfig::new()).await.err();
    let err = err.ok_or("expected the removal of an unknown id to fail")?;
    let (field, writers, source) = reduce_error(err)?;
    assert_eq!(field, "notes");
    assert_eq!(writers, ["remover"]);
    assert!(matches!(source, ReduceError::UnknownMessageId { .. }));
    Ok(())
}

#[tokio::test]
async fn a_reducer_conflict_records_the_outputs_so_continue_does_not_rerun_the_tasks() -> TestResult
{
    let (a_runs, b_runs) = (Counter::default(), Counter::default());
    let (a2, b2) = (a_runs.clone(), b_runs.clone());
    let g = StateGraph::<Log>::new()
        .add_node("a", move |_s: Arc<Log>, _c: NodeContext| {
            a2.hit();
            async { Ok::<_, BoxError>(Log::update().value(1)) }
        })
        .add_node("b", move |_s: Arc<Log>, _c: NodeContext| {
            b2.hit();
            async { Ok::<_, BoxError>(Log::update().value(2)) }
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    assert!(matches!(
        g.invoke(Log::update(), &cfg).await,
        Err(RunError::Reduce { .. })
    ));
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(
        snap.errors.len(),
        1,
        "the conflict is recorded: {:?}",
        snap.errors
    );
    assert!(snap.errors[0].1.contains("value"));
    // The conflict is deterministic: it comes back, but the tasks do not run again.
    assert!(matches!(
        g.invoke(Input::Continue, &cfg).await,
        Err(RunError::Reduce { .. })
    ));
    assert_eq!((a_runs.get(), b_runs.get()), (1, 1));
    Ok(())
}

#[tokio::test]
async fn under_durability_exit_a_failed_apply_leaves_the_thread_as_before_the_run() -> TestResult {
    let saver = Arc::new(MemorySaver::new());
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a").value(1))
        })
        .add_node("b", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("b").value(2))
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .compile()?
        .with_checkpointer(saver.clone());
    let cfg = RunConfig::new()
        .thread("t")
        .durability(stategraph::Durability::Exit);
    assert!(g.invoke(Log::update(), &cfg).await.is_err());
    assert!(
        g.get_state("t", None).await?.is_none(),
        "no half-applied step is stored"
    );
    Ok(())
}

#[tokio::test]
async fn new_input_discards_a_ready_fan_in_left_by_a_failed_run() -> TestResult {
    let c_runs = Counter::default();
    let c2 = c_runs.clone();
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a"))
        })
        .add_node("b", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("b"))
        })
        .add_node("c", move |s: Arc<Log>, _c: NodeContext| {
            let n = c2.hit();
            async move {
                if n == 1 {
                    return Err::<LogUpdate, BoxError>("c fails once".into());
                }
                Ok(push(&format!("c saw {}", s.log.len())))
            }
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_join(["a", "b"], "c")
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    assert!(g.invoke(Log::update(), &cfg).await.is_err());
    let out = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(
        c_runs.get(),
        2,
        "c runs once in the second run, after its sources"
    );
    assert_eq!(out.state.log.last().map(String::as_str), Some("c saw 4"));
    Ok(())
}

#[tokio::test]
async fn a_huge_recursion_limit_does_not_overflow() -> TestResult {
    let g = chain(2)?.with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t").recursion_limit(usize::MAX);
    g.invoke(Log::update(), &cfg).await?;
    let out = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(out.state.log.len(), 4);
    Ok(())
}

#[tokio::test]
async fn a_panicking_node_fails_its_task_with_a_typed_error() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("ok", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("ok"))
        })
        .add_node("boom", |s: Arc<Log>, _c: NodeContext| async move {
            let items: Vec<u8> = Vec::new();
            let _ = items[s.log.len() + 3];
            Ok::<_, BoxError>(push("never"))
        })
        .add_edge(START, "ok")
        .add_edge(START, "boom")
        .compile()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected failure")?;
    assert!(
        matches!(err, RunError::Node { ref node, ref source, .. } if node == "boom" && source.to_string().contains("panicked")),
        "{err}"
    );
    Ok(())
}

#[test]
fn joins_without_sources_or_with_a_repeated_source_do_not_compile() {
    let noop = |_s: Arc<Log>, _c: NodeContext| async { Ok::<_, BoxError>(Log::update()) };
    let err = StateGraph::<Log>::new()
        .add_node("a", noop)
        .add_node("c", noop)
        .add_edge(START, "a")
        .add_join(Vec::<String>::new(), "c")
        .add_join(["a", "a"], "c")
        .compile()
        .err()
        .map(|e| e.problems)
        .unwrap_or_default();
    let joins = err
        .iter()
        .filter(|p| matches!(p, stategraph::GraphProblem::InvalidJoin { .. }))
        .count();
    assert_eq!(joins, 2, "{err:?}");
}

#[tokio::test]
async fn resuming_with_code_that_plans_other_tasks_is_a_determinism_error() -> TestResult {
    let saver = Arc::new(MemorySaver::new());
    let build = |deferred: bool| {
        let options = if deferred {
            NodeOptions::new().defer()
        } else {
            NodeOptions::new()
        };
        StateGraph::<Log>::new()
            .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
                Ok::<_, BoxError>(push("a"))
            })
            .add_node_with(
                "b",
                |_s: Arc<Log>, _c: NodeContext| async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Err::<LogUpdate, BoxError>("fails".into())
                },
                options,
            )
            .add_edge(START, "a")
            .add_edge(START, "b")
            .compile()
    };
    let cfg = RunConfig::new().thread("t");
    let old = build(false)?.with_checkpointer(saver.clone());
    assert!(matches!(
        old.invoke(Log::update(), &cfg).await,
        Err(RunError::Node { .. })
    ));
    // `b` became deferred before the thread resumed: the step now plans only `a`.
    let changed = build(true)?.with_checkpointer(saver.clone());
    let err = changed
        .invoke(Input::Continue, &cfg)
        .await
        .err()
        .ok_or("expected a determinism error")?;
    match err {
        RunError::DeterminismMismatch {
            recorded, computed, ..
        } => {
            assert_eq!(recorded, ["a", "b"]);
            assert_eq!(computed, ["a"]);
        }
        other => return Err(format!("unexpected {other}").into()),
    }
    // A renamed node is caught when the checkpoint is read.
    let renamed = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a"))
        })
        .add_node("b2", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("b2"))
        })
        .add_edge(START, "a")
        .add_edge(START, "b2")
        .compile()?
        .with_checkpointer(saver);
    let err = renamed
        .invoke(Input::Continue, &cfg)
        .await
        .err()
        .ok_or("expected a decode error")?;
    assert!(err.to_string().contains("branch:to:b"), "{err}");
    Ok(())
}
