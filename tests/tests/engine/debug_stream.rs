//! The `checkpoints` and `tasks` stream modes carry what LangGraph's `debug` mode does:
//! each checkpoint with its values, metadata and next tasks (and, when a run resumes, the
//! head it resumes from with what its tasks recorded), each task with its input and trigger,
//! each result with its writes, interrupts or error. Compared, event by event, with
//! `fixtures/langgraph/stream_debug_*.json`.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{json, Value};
use stategraph::checkpoints::MemorySaver;
use stategraph::prelude::*;
use stategraph::{Checkpointing, EventKind, SendTo, Shared, TaskStatus, TaskTrigger};
use stategraph_tests::langgraph::recorded;

use crate::TestResult;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct S {
    #[reduce(append)]
    pub log: Vec<String>,
    pub x: i64,
}

fn log(v: &Value) -> Value {
    v.get("log").cloned().unwrap_or(Value::Null)
}

fn merged(updates: &[Shared]) -> Value {
    let mut out = serde_json::Map::new();
    for u in updates {
        if let Ok(Value::Object(o)) = u.to_json() {
            out.extend(o);
        }
    }
    Value::Object(out)
}

/// One event as the timeline both sides are compared on.
fn ours_entry(ev: &stategraph::Event) -> Option<Value> {
    let depth = ev.ns.levels().len();
    Some(match &ev.kind {
        EventKind::Checkpoint(cp) => {
            let tasks: Vec<Value> = cp
                .next
                .iter()
                .map(|t| {
                    let result = (!t.updates.is_empty()).then(|| merged(&t.updates));
                    let interrupts: Vec<&Value> = t.interrupts.iter().map(|i| &i.value).collect();
                    json!([t.node.as_ref(), result, interrupts, t.subgraph])
                })
                .collect();
            let values = cp.values.to_json().ok()?;
            json!([
                "checkpoint",
                depth,
                ev.step,
                cp.source.as_str(),
                log(&values),
                tasks
            ])
        }
        EventKind::TaskStart {
            node,
            trigger,
            input,
            ..
        } => {
            let trigger = match trigger {
                TaskTrigger::Sent(_) => "__pregel_push".to_owned(),
                _ => format!("branch:to:{node}"),
            };
            let input = input.to_json().ok()?;
            let input = if input.get("log").is_some() {
                log(&input)
            } else {
                input
            };
            json!(["task", depth, ev.step, node.as_ref(), input, [trigger]])
        }
        EventKind::TaskEnd { status, .. } if *status == TaskStatus::Reused => return None,
        EventKind::TaskEnd {
            node,
            status,
            updates,
            interrupts,
            ..
        } => {
            let failed = matches!(status, TaskStatus::Failed(_));
            let interrupts: Vec<&Value> = interrupts.iter().map(|i| &i.value).collect();
            json!([
                "task_result",
                depth,
                ev.step,
                node.as_ref(),
                merged(updates),
                interrupts,
                failed
            ])
        }
        _ => return None,
    })
}

/// LangGraph's debug payload (or `checkpoints` payload) as the same timeline entry.
fn theirs_entry(kind: &str, step: i64, depth: usize, p: &Value) -> Value {
    match kind {
        "checkpoint" => {
            let tasks: Vec<Value> = p["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    let interrupts: Vec<&Value> = t["interrupts"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|i| &i["value"])
                        .collect();
                    json!([
                        t["name"],
                        t.get("result"),
                        interrupts,
                        !t["state"].is_null()
                    ])
                })
                .collect();
            let source = &p["metadata"]["source"];
            json!([
                "checkpoint",
                depth,
                p["metadata"]["step"],
                source,
                log(&p["values"]),
                tasks
            ])
        }
        "task" => {
            let input = &p["input"];
            let input = if input.get("log").is_some() {
                log(input)
            } else {
                input.clone()
            };
            json!(["task", depth, step, p["name"], input, p["triggers"]])
        }
        _ => {
            let interrupts: Vec<&Value> = p["interrupts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| &i["value"])
                .collect();
            let failed = !p["error"].is_null();
            json!([
                "task_result",
                depth,
                step,
                p["name"],
                p["result"],
                interrupts,
                failed
            ])
        }
    }
}

/// The debug entries of one recorded run, streamed under `modes` (each event `[mode,
/// payload]`; a bare payload under one mode; `[ns, …]` first under subgraphs).
fn theirs(run: &Value, modes: &[&str]) -> Vec<Value> {
    let mut out = Vec::new();
    for ev in run.as_array().into_iter().flatten() {
        if ev.get("raised").is_some() {
            continue; // the probe's note of the exception the run raised
        }
        let (depth, rest) = match ev.as_array().map(Vec::as_slice) {
            Some([Value::Array(ns), rest @ ..]) => (ns.len(), rest),
            Some(rest) => (0, rest),
            None => (0, std::slice::from_ref(ev)),
        };
        let (mode, data) = match (rest, modes) {
            ([mode, data], _) => (mode.as_str().unwrap_or_default(), data),
            ([data], [mode]) => (*mode, data),
            _ => continue,
        };
        match mode {
            "debug" => {
                let kind = data["type"].as_str().unwrap_or_default();
                let step = data["step"].as_i64().unwrap_or_default();
                out.push(theirs_entry(kind, step, depth, &data["payload"]));
            }
            "checkpoints" if !modes.contains(&"debug") => {
                out.push(theirs_entry("checkpoint", 0, depth, data));
            }
            _ => {}
        }
    }
    out
}

async fn collect(
    graph: &CompiledGraph<S>,
    input: impl Into<stategraph::run::Input<S>>,
    config: &RunConfig,
    mode: StreamMode,
) -> Vec<Value> {
    let mut stream = graph.stream(input, config, mode);
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        out.extend(ours_entry(&ev));
    }
    out
}

fn push(s: &str) -> SUpdate {
    S::update().log(vec![s.to_owned()])
}

#[tokio::test]
async fn checkpoints_and_tasks_carry_langgraphs_payloads_through_an_interrupt_and_resume(
) -> TestResult {
    let fixture = recorded("stream_debug_pause_resume")?;
    let graph = StateGraph::<S>::new()
        .add_node("a", |_s: Arc<S>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a").x(1))
        })
        .add_node("b", |_s: Arc<S>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("b"))
        })
        .add_node("c", |_s: Arc<S>, cx: NodeContext| async move {
            let answer: String = cx.interrupt("ok?")?;
            Ok::<_, BoxError>(push(&format!("c:{answer}")))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("a", "c")
        .add_edge("b", END)
        .add_edge("c", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().thread("t1");
    let first = collect(&graph, S::update(), &config, StreamMode::debug()).await;
    assert_eq!(
        first,
        theirs(&fixture["runs"][0], &["checkpoints", "debug", "tasks"])
    );
    let resume = Command::resume(stategraph::Resume::value("yes"));
    let second = collect(&graph, resume, &config, StreamMode::debug()).await;
    assert_eq!(
        second,
        theirs(&fixture["runs"][1], &["checkpoints", "debug"])
    );
    Ok(())
}

#[tokio::test]
async fn a_sent_tasks_input_is_its_argument_and_a_failed_task_reports_its_error() -> TestResult {
    let fixture = recorded("stream_debug_send_fail")?;
    let graph = StateGraph::<S>::new()
        .add_node("w", |_s: Arc<S>, cx: NodeContext| async move {
            let arg: Value = cx.arg()?;
            Ok::<_, BoxError>(push(&format!("w{}", arg["x"])))
        })
        .add_node("f", |_s: Arc<S>, _c: NodeContext| async {
            Err::<SUpdate, BoxError>("boom".into())
        })
        .add_conditional_edges(START, |_s: &S| SendTo::new("w", json!({"x": 7})), ["w"])
        .add_edge("w", "f")
        .add_edge("f", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let ours = collect(
        &graph,
        S::update(),
        &RunConfig::new().thread("t2"),
        StreamMode::debug(),
    )
    .await;
    assert_eq!(ours, theirs(&fixture["runs"][0], &["debug"]));
    Ok(())
}

#[tokio::test]
async fn a_subgraphs_checkpoints_stream_under_the_task_the_parent_announced() -> TestResult {
    let fixture = recorded("stream_debug_subgraph")?;
    let inner = StateGraph::<S>::new()
        .add_node("inner", |_s: Arc<S>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("in"))
        })
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()?;
    let graph = StateGraph::<S>::new()
        .add_subgraph(
            "child",
            inner,
            Checkpointing::Inherit,
            |s: &S| S::update().log(s.log.clone()),
            |c: &S| S::update().log(c.log.clone()),
        )
        .add_edge(START, "child")
        .add_edge("child", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let mode = StreamMode {
        checkpoints: true,
        subgraphs: true,
        ..StreamMode::none()
    };
    let mut stream = graph.stream(S::update(), &RunConfig::new().thread("t3"), mode);
    let (mut ours, mut announced, mut child_ns) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(ev) = stream.next().await {
        if let EventKind::Checkpoint(cp) = &ev.kind {
            if ev.ns.is_root() {
                announced.extend(
                    cp.next
                        .iter()
                        .filter(|t| t.subgraph)
                        .map(|t| format!("child:{}", t.id)),
                );
            } else {
                child_ns.push(ev.ns.to_string());
            }
        }
        ours.extend(ours_entry(&ev));
    }
    assert_eq!(ours, theirs(&fixture["runs"][0], &["checkpoints"]));
    assert_eq!(
        announced.len(),
        1,
        "the parent announces the child's task once"
    );
    assert!(
        child_ns.iter().all(|ns| *ns == announced[0]),
        "{child_ns:?} under {announced:?}"
    );
    Ok(())
}
