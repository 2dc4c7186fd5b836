//! Managed values: `NodeContext::remaining_steps` and `is_last_step` (and a router's), with
//! LangGraph's numbers. Compared with `fixtures/langgraph/runtime_context_managed_*.json`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use stategraph::prelude::*;
use stategraph::{RouteContext, RunError};
use stategraph_tests::langgraph::recorded;

use super::TestResult;

#[derive(State, Clone, Default, Debug)]
struct Steps {
    #[reduce(append)]
    log: Vec<Value>,
}

#[derive(State, Clone, Default, Debug)]
struct Inner {
    #[reduce(append)]
    inner: Vec<Value>,
}

fn pair(cx: &NodeContext) -> Value {
    json!([cx.remaining_steps(), cx.is_last_step()])
}

/// A node that loops on itself, logging its managed values, until it sees the last step
/// (or forever).
fn loop_graph(until_last: bool) -> Result<CompiledGraph<Steps>, stategraph::CompileError> {
    StateGraph::<Steps>::new()
        .add_node("tick", |_s: Arc<Steps>, cx: NodeContext| async move {
            Ok::<_, BoxError>(Steps::update().log(vec![pair(&cx)]))
        })
        .add_edge(START, "tick")
        .add_conditional_edges_with_context(
            "tick",
            move |_s: &Steps, cx: &RouteContext<'_>| {
                if until_last && cx.is_last_step() {
                    END
                } else {
                    "tick"
                }
            },
            ["tick", END],
        )
        .compile()
}

/// A run's log and error as the fixtures record them: the log left on the thread when the
/// run hit the recursion limit.
async fn run_loop(graph: &CompiledGraph<Steps>, config: &RunConfig) -> Result<Value, BoxError> {
    match graph.invoke(Steps::update(), config).await {
        Ok(out) => Ok(json!({"log": out.state.log, "error": null})),
        Err(RunError::RecursionLimit { .. }) => {
            let log = match config.thread_name() {
                Some(t) => graph
                    .get_state(t, None)
                    .await?
                    .map(|s| json!(s.values.log))
                    .unwrap_or(Value::Null),
                None => Value::Null,
            };
            Ok(json!({"log": log, "error": "GraphRecursionError"}))
        }
        Err(e) => Err(e.into()),
    }
}

#[tokio::test]
async fn remaining_steps_count_down_to_the_recursion_limit_as_in_langgraph() -> TestResult {
    let lg = recorded("runtime_context_managed_steps")?;
    let graph = loop_graph(true)?;
    for limit in [1usize, 2, 3, 5, 10] {
        let got = run_loop(&graph, &RunConfig::new().recursion_limit(limit)).await?;
        let want = lg
            .pointer(&format!("/fresh_thread_by_limit/{limit}"))
            .ok_or("no record")?;
        assert_eq!(&got, want, "recursion limit {limit}");
    }
    Ok(())
}

#[tokio::test]
async fn a_run_that_never_stops_sees_zero_remaining_on_its_last_step() -> TestResult {
    let lg = recorded("runtime_context_managed_steps")?;
    let graph = loop_graph(false)?.with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().recursion_limit(4).thread("endless");
    let got = run_loop(&graph, &config).await?;
    assert_eq!(Some(&got), lg.get("never_stopping_limit_4"));
    Ok(())
}

#[tokio::test]
async fn a_second_run_on_a_thread_counts_from_its_own_start() -> TestResult {
    let lg = recorded("runtime_context_managed_steps")?;
    let graph = loop_graph(true)?.with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().recursion_limit(3).thread("t");
    let first = run_loop(&graph, &config).await?;
    assert_eq!(Some(&first), lg.get("same_thread_first_run_limit_3"));
    let second = run_loop(&graph, &config).await?;
    assert_eq!(Some(&second), lg.get("same_thread_second_run_limit_3"));
    let head = graph.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(
        Some(&json!(head.checkpoint.step)),
        lg.get("same_thread_second_run_last_step")
    );
    Ok(())
}

#[tokio::test]
async fn a_chain_sees_one_step_fewer_at_each_node() -> TestResult {
    let lg = recorded("runtime_context_managed_steps")?;
    let mut g = StateGraph::<Steps>::new();
    for name in ["a", "b", "c"] {
        g = g.add_node(name, move |_s: Arc<Steps>, cx: NodeContext| async move {
            let entry = json!([name, cx.remaining_steps(), cx.is_last_step()]);
            Ok::<_, BoxError>(Steps::update().log(vec![entry]))
        });
    }
    let graph = g
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .compile()?;
    for limit in [3usize, 4] {
        let got = run_loop(&graph, &RunConfig::new().recursion_limit(limit)).await?;
        let want = lg
            .pointer(&format!("/chain_of_three_by_limit/{limit}"))
            .ok_or("no record")?;
        assert_eq!(&got, want, "recursion limit {limit}");
    }
    Ok(())
}

#[tokio::test]
async fn a_router_sees_the_values_of_the_step_its_node_ran_in() -> TestResult {
    let lg = recorded("runtime_context_managed_router")?;
    let saw = Arc::new(Mutex::new(Vec::new()));
    let s = saw.clone();
    let graph = StateGraph::<Steps>::new()
        .add_node("tick", |_s: Arc<Steps>, _cx: NodeContext| async {
            Ok::<_, BoxError>(Steps::update())
        })
        .add_edge(START, "tick")
        .add_conditional_edges_with_context(
            "tick",
            move |_s: &Steps, cx: &RouteContext<'_>| {
                let mut saw = s.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                saw.push(json!([cx.remaining_steps(), cx.is_last_step()]));
                if saw.len() >= 2 {
                    END
                } else {
                    "tick"
                }
            },
            ["tick", END],
        )
        .compile()?;
    graph
        .invoke(Steps::update(), &RunConfig::new().recursion_limit(5))
        .await?;
    let got = Value::Array(saw.lock().map_err(|e| e.to_string())?.clone());
    assert_eq!(Some(&got), lg.get("router_saw"));
    Ok(())
}

#[tokio::test]
async fn a_subgraph_counts_its_own_steps_against_the_same_limit() -> TestResult {
    let lg = recorded("runtime_context_managed_subgraph")?;
    let sub = StateGraph::<Inner>::new()
        .add_node("i1", |_s: Arc<Inner>, cx: NodeContext| async move {
            Ok::<_, BoxError>(Inner::update().inner(vec![pair(&cx)]))
        })
        .add_node("i2", |_s: Arc<Inner>, cx: NodeContext| async move {
            Ok::<_, BoxError>(Inner::update().inner(vec![pair(&cx)]))
        })
        .add_edge(START, "i1")
        .add_edge("i1", "i2")
        .add_edge("i2", END)
        .compile()?;
    let outer = |_s: Arc<Steps>, cx: NodeContext| async move {
        let entry = json!(["outer", cx.remaining_steps(), cx.is_last_step()]);
        Ok::<_, BoxError>(Steps::update().log(vec![entry]))
    };
    let inner_log = Arc::new(Mutex::new(Vec::new()));
    let keep = inner_log.clone();
    let graph = StateGraph::<Steps>::new()
        .add_node("o1", outer)
        .add_node("o2", outer)
        .add_subgraph(
            "sub",
            sub,
            Checkpointing::Inherit,
            |_s: &Steps| Inner::update(),
            move |c: &Inner| {
                keep.lock().map(|mut k| k.extend(c.inner.clone())).ok();
                Steps::update()
            },
        )
        .add_edge(START, "o1")
        .add_edge("o1", "o2")
        .add_edge("o2", "sub")
        .add_edge("sub", END)
        .compile()?;
    let out = graph
        .invoke(Steps::update(), &RunConfig::new().recursion_limit(6))
        .await?;
    assert_eq!(Some(&json!(out.state.log)), lg.get("outer"));
    let inner = Value::Array(inner_log.lock().map_err(|e| e.to_string())?.clone());
    assert_eq!(Some(&inner), lg.get("inner"));
    Ok(())
}

#[tokio::test]
async fn a_resume_starts_a_new_count_from_the_resumed_step() -> TestResult {
    let lg = recorded("runtime_context_managed_resume")?;
    let graph = StateGraph::<Steps>::new()
        .add_node("a", |_s: Arc<Steps>, cx: NodeContext| async move {
            let entry = json!(["a", cx.remaining_steps(), cx.is_last_step()]);
            Ok::<_, BoxError>(Steps::update().log(vec![entry]))
        })
        .add_node("ask", |_s: Arc<Steps>, cx: NodeContext| async move {
            let before = pair(&cx);
            let _: bool = cx.interrupt("go on?")?;
            let entry = json!(["ask", before, pair(&cx)]);
            Ok::<_, BoxError>(Steps::update().log(vec![entry]))
        })
        .add_node("b", |_s: Arc<Steps>, cx: NodeContext| async move {
            let entry = json!(["b", cx.remaining_steps(), cx.is_last_step()]);
            Ok::<_, BoxError>(Steps::update().log(vec![entry]))
        })
        .add_edge(START, "a")
        .add_edge("a", "ask")
        .add_edge("ask", "b")
        .add_edge("b", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().recursion_limit(5).thread("r");
    graph.invoke(Steps::update(), &config).await?;
    let paused = graph.get_state("r", None).await?.ok_or("no state")?;
    assert_eq!(
        Some(&json!(paused.checkpoint.step)),
        lg.get("paused_checkpoint_step")
    );
    let out = graph
        .invoke(Command::resume(Resume::Value(json!(true))), &config)
        .await?;
    assert_eq!(Some(&json!(out.state.log)), lg.get("log"));
    Ok(())
}

#[tokio::test]
async fn a_command_that_updates_and_routes_counts_from_the_step_it_runs() -> TestResult {
    let lg = recorded("runtime_context_managed_resume")?;
    let graph = StateGraph::<Steps>::new()
        .add_node("tick", |_s: Arc<Steps>, cx: NodeContext| async move {
            let entry = json!(["tick", cx.remaining_steps(), cx.is_last_step()]);
            Ok::<_, BoxError>(Steps::update().log(vec![entry]))
        })
        .add_edge(START, "tick")
        .add_edge("tick", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().recursion_limit(5).thread("cmd");
    graph.invoke(Steps::update(), &config).await?;
    let command = Command::new()
        .update(Steps::update().log(vec![json!("update")]))
        .goto("tick");
    let out = graph.invoke(command, &config).await?;
    assert_eq!(
        Some(&json!(out.state.log)),
        lg.get("command_update_goto_limit_5")
    );
    Ok(())
}
