//! The node cache compared with LangGraph 1.2.24's, point by point
//! (`fixtures/langgraph/probe_node_cache.py`). Where we differ on purpose, the test asserts
//! our behaviour and names decision 0096.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use stategraph::cache::{CacheError, CachePolicy, CACHED_KEY};
use stategraph::checkpoints::{ListOptions, MemorySaver};
use stategraph::prelude::*;
use stategraph::{EventKind, GraphProblem, RunError, SendTo, TaskStatus};
use stategraph_tests::langgraph::recorded;

use super::{cached, double_graph, memory_cache, Counter, SUpdate, TestResult, S};

/// The integers at `field` of each object of the array at `pointer`.
fn ints(v: &Value, pointer: &str, field: &str) -> Result<Vec<i64>, String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no array at {pointer}"))?
        .iter()
        .map(|r| {
            r.get(field)
                .and_then(Value::as_i64)
                .ok_or_else(|| format!("no integer {field} in {r}"))
        })
        .collect()
}

/// The integer at `pointer`.
fn int(v: &Value, pointer: &str) -> Result<i64, String> {
    v.pointer(pointer)
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("no integer at {pointer}"))
}

/// Whether a recorded updates event carries LangGraph's cache marker.
fn marked_cached(ev: &Value) -> bool {
    ev.pointer("/__metadata__/cached") == Some(&Value::Bool(true))
}

/// The updates a streamed run produced, as `(node, cached)`, and the statuses of its task ends.
async fn stream_run(
    graph: &CompiledGraph<S>,
    input: SUpdate,
    config: &RunConfig,
) -> Result<(Vec<(String, bool)>, Vec<TaskStatus>), Box<dyn std::error::Error + Send + Sync>> {
    let mode = StreamMode {
        tasks: true,
        ..StreamMode::updates()
    };
    let mut run = graph.stream(input, config, mode);
    let (mut updates, mut ends) = (Vec::new(), Vec::new());
    while let Some(ev) = run.next().await {
        match ev.kind {
            EventKind::Updates { node, cached, .. } => updates.push((node.to_string(), cached)),
            EventKind::TaskEnd { status, .. } => ends.push(status),
            _ => {}
        }
    }
    run.outcome().await?;
    Ok((updates, ends))
}

#[tokio::test]
async fn a_hit_streams_its_update_marked_cached_without_running() -> TestResult {
    let lg = recorded("node_cache_stream")?;
    let runs = Counter::default();
    let (cache, clock) = memory_cache();
    let graph = cached(&double_graph(&runs, CachePolicy::new()), &cache, &clock);
    let first = stream_run(&graph, S::update().x(3), &RunConfig::new()).await?;
    let second = stream_run(&graph, S::update().x(3), &RunConfig::new()).await?;
    assert_eq!(runs.get() as i64, int(&lg, "/calls_after_second/double")?);
    let lg_updates = |run: &str| -> Vec<bool> {
        lg[run]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e[0] == "updates")
            .map(|e| marked_cached(&e[1]))
            .collect()
    };
    let ours = |r: &(Vec<(String, bool)>, Vec<TaskStatus>)| -> Vec<bool> {
        r.0.iter().map(|(_, c)| *c).collect()
    };
    assert_eq!(ours(&first), lg_updates("first_run"));
    assert_eq!(
        ours(&second),
        lg_updates("second_run"),
        "as LangGraph: marked"
    );
    // LangGraph streams no task result for a hit; our engine ends it as `Cached` (the
    // server drops that frame).
    let lg_results = lg["second_run"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e[0] == "tasks" && e[1].get("result").is_some())
        .count();
    assert_eq!(lg_results, 0);
    assert_eq!(first.1, [TaskStatus::Succeeded]);
    assert_eq!(second.1, [TaskStatus::Cached]);
    Ok(())
}

#[tokio::test]
async fn the_default_key_is_the_whole_state_on_any_thread() -> TestResult {
    let lg = recorded("node_cache_default_key")?;
    let runs = Counter::default();
    let (cache, clock) = memory_cache();
    let graph = cached(&double_graph(&runs, CachePolicy::new()), &cache, &clock)
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let inputs = [
        (S::update().x(1).y(1), "c1"),
        (S::update().x(1).y(1), "c2"),
        (S::update().x(1).y(2), "c3"),
        (S::update().x(1).y(1).log(vec![-1]), "c4"),
        (S::update().x(1).y(1), "c1"),
    ];
    let mut ran = Vec::new();
    for (input, thread) in inputs {
        let before = runs.get();
        graph
            .invoke(input, &RunConfig::new().thread(thread))
            .await?;
        ran.push((runs.get() - before) as i64);
    }
    assert_eq!(ran, ints(&lg, "/runs", "ran")?);
    // Two graphs of one name and node share entries through one cache.
    let runs2 = Counter::default();
    let (shared, clock) = memory_cache();
    for _ in 0..2 {
        let g = cached(&double_graph(&runs2, CachePolicy::new()), &shared, &clock);
        g.invoke(S::update().x(5), &RunConfig::new()).await?;
    }
    assert_eq!(runs2.get() as i64, int(&lg, "/two_graphs_one_cache_calls")?);
    Ok(())
}

#[tokio::test]
async fn a_key_function_decides_which_inputs_are_the_same() -> TestResult {
    let lg = recorded("node_cache_key_func")?;
    let runs = Counter::default();
    let (cache, clock) = memory_cache();
    let policy = CachePolicy::new().key(|s: &S, _arg| s.x.to_string());
    let graph = cached(&double_graph(&runs, policy), &cache, &clock);
    let mut ran = Vec::new();
    let mut logs = Vec::new();
    for input in [
        S::update().x(1).y(1),
        S::update().x(1).y(9).log(vec![-1]),
        S::update().x(2),
    ] {
        let before = runs.get();
        let out = graph.invoke(input, &RunConfig::new()).await?;
        ran.push((runs.get() - before) as i64);
        logs.push(out.state.log.last().copied());
    }
    assert_eq!(ran, ints(&lg, "/runs", "ran")?);
    assert_eq!(logs, [Some(2), Some(2), Some(4)]);
    Ok(())
}

#[tokio::test]
async fn entries_expire_after_their_ttl() -> TestResult {
    let lg = recorded("node_cache_ttl")?;
    let runs = Counter::default();
    let (cache, clock) = memory_cache();
    let policy = CachePolicy::new().ttl(Duration::from_secs(1));
    let graph = cached(&double_graph(&runs, policy), &cache, &clock);
    let mut ran = Vec::new();
    for wait in [0, 0, 1_200, 0] {
        clock.advance(Duration::from_millis(wait));
        let before = runs.get();
        graph.invoke(S::update().x(1), &RunConfig::new()).await?;
        ran.push((runs.get() - before) as i64);
    }
    assert_eq!(ran, ints(&lg, "/runs", "ran")?);
    Ok(())
}

/// START -> a -> b, both cached, each counting its runs.
fn two_cached(a: &Counter, b: &Counter) -> CompiledGraph<S> {
    let node = |c: &Counter, v: i64| {
        let c = c.clone();
        move |_s: Arc<S>, _cx: NodeContext| {
            c.hit();
            async move { Ok::<_, BoxError>(S::update().log(vec![v])) }
        }
    };
    let cache = || NodeOptions::new().cache(CachePolicy::new());
    StateGraph::<S>::new()
        .add_node_with("a", node(a, 1), cache())
        .add_node_with("b", node(b, 2), cache())
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile()
        .expect("the graph compiles")
}

#[tokio::test]
async fn clear_cache_drops_the_entries_of_the_nodes_named() -> TestResult {
    let lg = recorded("node_cache_clear")?;
    let (a, b) = (Counter::default(), Counter::default());
    let (cache, clock) = memory_cache();
    let graph = cached(&two_cached(&a, &b), &cache, &clock);
    let mut ran = Vec::new();
    let run = |label: &'static str| {
        let (graph, a, b) = (graph.clone(), a.clone(), b.clone());
        async move {
            let before = (a.get(), b.get());
            graph.invoke(S::update(), &RunConfig::new()).await?;
            Ok::<_, RunError>((
                label,
                (a.get() - before.0) as i64,
                (b.get() - before.1) as i64,
            ))
        }
    };
    ran.push(run("first").await?);
    ran.push(run("second").await?);
    assert_eq!(graph.clear_cache(&["a"]).await?, 1);
    ran.push(run("after clear a").await?);
    graph.clear_cache(&[]).await?;
    ran.push(run("after clear all").await?);
    let got: Vec<(i64, i64)> = ran.iter().map(|(_, a, b)| (*a, *b)).collect();
    let want: Vec<(i64, i64)> = lg["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["ran"]["a"].as_i64().unwrap_or(-1),
                r["ran"]["b"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(got, want);
    // A graph without a cache has none to clear (LangGraph raises a ValueError).
    assert!(lg["clear_cache_without_cache"]
        .as_str()
        .is_some_and(|e| e.contains("No cache")));
    let err = graph.without_cache().clear_cache(&[]).await.unwrap_err();
    assert!(matches!(err, CacheError::NoCache { .. }), "{err}");
    let err = graph.clear_cache(&["nope"]).await.unwrap_err();
    assert!(
        matches!(err, CacheError::UnknownNode { ref node, .. } if node == "nope"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_task_that_failed_is_not_cached() -> TestResult {
    let lg = recorded("node_cache_failed_interrupted")?;
    let runs = Counter::default();
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (r, f) = (runs.clone(), fail.clone());
    let graph = StateGraph::<S>::new()
        .add_node_with(
            "flaky",
            move |_s: Arc<S>, _cx: NodeContext| {
                r.hit();
                let failing = f.load(std::sync::atomic::Ordering::SeqCst);
                async move {
                    if failing {
                        return Err::<SUpdate, BoxError>("boom".into());
                    }
                    Ok(S::update().log(vec![1]))
                }
            },
            NodeOptions::new().cache(CachePolicy::new()),
        )
        .add_edge(START, "flaky")
        .compile()?;
    let (cache, clock) = memory_cache();
    let graph = cached(&graph, &cache, &clock);
    for _ in 0..2 {
        assert!(graph.invoke(S::update(), &RunConfig::new()).await.is_err());
    }
    fail.store(false, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..2 {
        graph.invoke(S::update(), &RunConfig::new()).await?;
    }
    assert_eq!(runs.get() as i64, int(&lg, "/failed/calls")?);
    Ok(())
}

/// START -> ask, where `ask` interrupts and logs the length of its answer; cached.
fn asking(runs: &Counter) -> CompiledGraph<S> {
    let runs = runs.clone();
    StateGraph::<S>::new()
        .add_node_with(
            "ask",
            move |_s: Arc<S>, cx: NodeContext| {
                runs.hit();
                async move {
                    let answer: String = cx.interrupt("q")?;
                    Ok::<_, BoxError>(S::update().log(vec![answer.len() as i64]))
                }
            },
            NodeOptions::new().cache(CachePolicy::new()),
        )
        .add_edge(START, "ask")
        .compile()
        .expect("the graph compiles")
}

#[tokio::test]
async fn a_task_that_paused_or_took_an_answer_is_not_cached() -> TestResult {
    let lg = recorded("node_cache_failed_interrupted")?;
    let runs = Counter::default();
    let (cache, clock) = memory_cache();
    let graph =
        cached(&asking(&runs), &cache, &clock).with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = |t: &str| RunConfig::new().thread(t);
    assert!(graph
        .invoke(S::update(), &cfg("g1"))
        .await?
        .is_interrupted());
    assert!(graph
        .invoke(S::update(), &cfg("g2"))
        .await?
        .is_interrupted());
    assert_eq!(
        runs.get() as i64,
        int(&lg, "/interrupted/calls_after_two_pauses")?
    );
    let resumed = graph
        .invoke(
            Command::resume(stategraph::Resume::value("yes")),
            &cfg("g1"),
        )
        .await?;
    assert_eq!(resumed.state.log, [3]);
    assert_eq!(
        runs.get() as i64,
        int(&lg, "/interrupted/calls_after_resume")?
    );
    // LangGraph caches the resumed task's writes, so a new thread with the same input takes
    // the first thread's answer without asking (`g3_result`). We never cache writes made
    // from an answer (decision 0096): the new thread is asked.
    assert_eq!(
        lg.pointer("/interrupted/calls_after_g3"),
        Some(&Value::from(3))
    );
    assert!(graph
        .invoke(S::update(), &cfg("g3"))
        .await?
        .is_interrupted());
    assert_eq!(runs.get(), 4);
    Ok(())
}

/// Items in, a cached `worker` per item by `Send`, each logging `10 * item`.
#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Fan {
    pub items: Vec<i64>,
    #[reduce(append)]
    pub log: Vec<i64>,
}

fn fan_out(runs: &Counter, policy: CachePolicy) -> CompiledGraph<Fan> {
    let runs = runs.clone();
    StateGraph::<Fan>::new()
        .add_node_with(
            "worker",
            move |_s: Arc<Fan>, cx: NodeContext| {
                runs.hit();
                let item = cx.arg::<i64>();
                async move { Ok::<_, BoxError>(Fan::update().log(vec![item? * 10])) }
            },
            NodeOptions::new().cache(policy),
        )
        .add_conditional_edges(
            START,
            |s: &Fan| {
                s.items
                    .iter()
                    .map(|i| SendTo::new("worker", i))
                    .collect::<Vec<_>>()
            },
            ["worker"],
        )
        .add_edge("worker", END)
        .compile()
        .expect("the graph compiles")
}

/// How many worker tasks ran, and how many were hits, in runs over `[1, 2, 1]` twice then
/// `[2, 3]`.
async fn fan_runs(policy: CachePolicy) -> Result<(Vec<i64>, Vec<usize>), RunError> {
    let runs = Counter::default();
    let (cache, clock) = memory_cache();
    let graph = cached(&fan_out(&runs, policy), &cache, &clock);
    let (mut ran, mut marks) = (Vec::new(), Vec::new());
    for items in [vec![1, 2, 1], vec![1, 2, 1], vec![2, 3]] {
        let before = runs.get();
        let mut run = graph.stream(
            Fan::update().items(items),
            &RunConfig::new(),
            StreamMode::updates(),
        );
        let mut hits = 0;
        while let Some(ev) = run.next().await {
            if let EventKind::Updates { cached: true, .. } = ev.kind {
                hits += 1;
            }
        }
        run.outcome().await?;
        ran.push((runs.get() - before) as i64);
        marks.push(hits);
    }
    Ok((ran, marks))
}

#[tokio::test]
async fn send_tasks_are_keyed_by_the_state_and_their_argument() -> TestResult {
    let lg = recorded("node_cache_send")?;
    let lg_ran = ints(&lg, "/runs", "ran")?;
    assert_eq!(lg_ran, [3, 1, 1]);
    // A node started by a Send reads the state too, so the default key holds both: the third
    // run's state differs, and its task for item 2 runs again. LangGraph's Send node sees its
    // argument only, and keys by it (decision 0096).
    let (ran, marks) = fan_runs(CachePolicy::new()).await?;
    assert_eq!((ran, marks), (vec![3, 0, 2], vec![0, 3, 0]));
    // Keyed by the argument alone, as LangGraph keys it. In the second run LangGraph runs
    // one of the two tasks with equal arguments again (it matches one task per key in a
    // step); here every task whose key is stored is a hit.
    let by_arg =
        CachePolicy::new().key(|_s: &Fan, arg| arg.map(ToString::to_string).unwrap_or_default());
    let (ran, marks) = fan_runs(by_arg).await?;
    assert_eq!((ran[0], ran[2]), (lg_ran[0], lg_ran[2]));
    assert_eq!(ran[1], 0);
    assert_eq!(marks, [0, 3, 1]);
    Ok(())
}

#[tokio::test]
async fn a_hit_routes_as_the_command_it_stored() -> TestResult {
    let lg = recorded("node_cache_command")?;
    let (route_runs, b_runs) = (Counter::default(), Counter::default());
    let (r, b) = (route_runs.clone(), b_runs.clone());
    let graph = StateGraph::<S>::new()
        .add_node_with(
            "route",
            move |_s: Arc<S>, _cx: NodeContext| {
                r.hit();
                async move {
                    Ok::<_, BoxError>(Command::new().update(S::update().log(vec![1])).goto("b"))
                }
            },
            NodeOptions::new()
                .cache(CachePolicy::new())
                .destinations(["b"]),
        )
        .add_node("b", move |_s: Arc<S>, _cx: NodeContext| {
            b.hit();
            async move { Ok::<_, BoxError>(S::update().log(vec![2])) }
        })
        .add_edge(START, "route")
        .add_edge("b", END)
        .compile()?;
    let (cache, clock) = memory_cache();
    let graph = cached(&graph, &cache, &clock);
    for run in 0..2 {
        let (updates, _) = stream_run(&graph, S::update(), &RunConfig::new()).await?;
        let lg_updates = &lg["runs"][run]["updates"];
        let want: Vec<(String, bool)> = lg_updates
            .as_array()
            .into_iter()
            .flatten()
            .map(|ev| {
                let node = ev
                    .as_object()
                    .and_then(|o| o.keys().find(|k| !k.starts_with("__")).cloned())
                    .unwrap_or_default();
                (node, marked_cached(ev))
            })
            .collect();
        assert_eq!(updates, want, "run {run}");
    }
    assert_eq!(route_runs.get() as i64, int(&lg, "/runs/1/calls/route")?);
    assert_eq!(b_runs.get() as i64, int(&lg, "/runs/1/calls/b")?);
    Ok(())
}

#[tokio::test]
async fn a_run_from_an_earlier_checkpoint_reads_the_cache_but_replay_does_not() -> TestResult {
    let lg = recorded("node_cache_replay")?;
    let (a, b) = (Counter::default(), Counter::default());
    let (cache, clock) = memory_cache();
    let graph =
        cached(&two_cached(&a, &b), &cache, &clock).with_checkpointer(Arc::new(MemorySaver::new()));
    graph
        .invoke(S::update(), &RunConfig::new().thread("j1"))
        .await?;
    let history = graph
        .get_state_history("j1", ListOptions::default())
        .await?;
    let before_a = history
        .iter()
        .find(|s| s.next == ["a"])
        .ok_or("no checkpoint before a")?;
    // Time travel (LangGraph's replay): the same input, so both nodes are hits.
    let config = RunConfig::new()
        .thread("j1")
        .checkpoint(before_a.checkpoint.id);
    let (updates, _) = stream_run_continue(&graph, &config).await?;
    let lg_marks: Vec<bool> = lg["replay_updates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(marked_cached)
        .collect();
    assert_eq!(
        updates.iter().map(|(_, c)| *c).collect::<Vec<_>>(),
        lg_marks
    );
    assert_eq!((a.get(), b.get()), (1, 1));
    // A fork with other values misses, as in LangGraph.
    let fork = graph
        .fork("j1", before_a.checkpoint.id, None, S::update().x(7))
        .await?;
    let config = RunConfig::new().thread("j1").checkpoint(fork);
    stream_run_continue(&graph, &config).await?;
    assert_eq!(a.get() as i64, int(&lg, "/calls_after_fork/a")?);
    // Our replay re-runs the code to compare it with the recording: it never reads the
    // cache (LangGraph has no such replay).
    let first = history.last().ok_or("no history")?;
    let report = graph.replay("j1", first.checkpoint.id, None).await?;
    assert_eq!(report.divergence, None);
    assert_eq!(a.get(), 3, "the replay ran a");
    Ok(())
}

/// Continue thread `config` from its checkpoint, streaming.
async fn stream_run_continue(
    graph: &CompiledGraph<S>,
    config: &RunConfig,
) -> Result<(Vec<(String, bool)>, Vec<TaskStatus>), Box<dyn std::error::Error + Send + Sync>> {
    let mut run = graph.stream(stategraph::Input::Continue, config, StreamMode::updates());
    let mut updates = Vec::new();
    while let Some(ev) = run.next().await {
        if let EventKind::Updates { node, cached, .. } = ev.kind {
            updates.push((node.to_string(), cached));
        }
    }
    run.outcome().await?;
    Ok((updates, Vec::new()))
}

#[tokio::test]
async fn a_steps_checkpoint_lists_its_hits_in_its_metadata() -> TestResult {
    let lg = recorded("node_cache_metadata")?;
    let runs = Counter::default();
    let (cache, clock) = memory_cache();
    let graph = cached(&double_graph(&runs, CachePolicy::new()), &cache, &clock)
        .with_checkpointer(Arc::new(MemorySaver::new()));
    graph
        .invoke(S::update().x(3), &RunConfig::new().thread("b1"))
        .await?;
    graph
        .invoke(S::update().x(3), &RunConfig::new().thread("b2"))
        .await?;
    assert_eq!(runs.get() as i64, int(&lg, "/calls/double")?);
    let history = graph
        .get_state_history("b2", ListOptions::default())
        .await?;
    // The states match LangGraph's history, newest first.
    let logs: Vec<Vec<i64>> = history.iter().map(|s| s.values.log.clone()).collect();
    let lg_logs: Vec<Vec<i64>> = lg["history_b2"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            h["values"]["log"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_i64)
                .collect()
        })
        .collect();
    assert_eq!(logs, lg_logs);
    // LangGraph's metadata says nothing of the hit; ours lists it on the step's checkpoint.
    assert!(lg["history_b2"][0]["metadata"].get(CACHED_KEY).is_none());
    let hits = history[0]
        .checkpoint
        .metadata
        .get(CACHED_KEY)
        .ok_or("no hits listed")?;
    assert_eq!(hits[0]["node"], "double");
    assert!(history[1..]
        .iter()
        .all(|s| !s.checkpoint.metadata.contains_key(CACHED_KEY)));
    let b1 = graph
        .get_state_history("b1", ListOptions::default())
        .await?;
    assert!(b1
        .iter()
        .all(|s| !s.checkpoint.metadata.contains_key(CACHED_KEY)));
    Ok(())
}

#[tokio::test]
async fn a_policy_without_a_cache_runs_the_node() -> TestResult {
    let runs = Counter::default();
    let graph = double_graph(&runs, CachePolicy::new());
    for _ in 0..2 {
        graph.invoke(S::update().x(1), &RunConfig::new()).await?;
    }
    assert_eq!(runs.get(), 2);
    Ok(())
}

#[test]
fn a_key_function_over_another_state_does_not_compile() {
    #[derive(State, Clone, Default, Debug)]
    struct Other {
        n: i64,
    }
    let err = StateGraph::<S>::new()
        .add_node_with(
            "n",
            |_s: Arc<S>, _cx: NodeContext| async { Ok::<_, BoxError>(S::update()) },
            NodeOptions::new().cache(CachePolicy::new().key(|o: &Other, _| o.n.to_string())),
        )
        .add_edge(START, "n")
        .compile()
        .unwrap_err();
    assert!(
        matches!(&err.problems[..], [GraphProblem::CacheKeyState { node, .. }] if node == "n"),
        "{err}"
    );
}
