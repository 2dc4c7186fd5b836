//! The `checkpoints`, `debug` and `tasks` stream modes on the wire, compared with LangGraph's
//! recorded answers for the same graphs and requests (`fixtures/langgraph/*-debug*.sse`): the
//! same frames in the same order, each carrying the same payload (config, parent, values,
//! metadata, next and tasks of a checkpoint; a task's input and triggers; its result,
//! interrupts and error), with ids that tie a checkpoint's tasks to the tasks that run.

mod common;

use common::{recorded, Reply, Served};
use serde_json::{json, Value};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The object's keys, sorted.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

/// `values` without the fields LangGraph leaves out until written (ours shows every field).
fn written(values: &Value) -> Value {
    match values {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What of a checkpoint payload both servers must agree on.
fn checkpoint_shape(p: &Value) -> Value {
    let tasks: Vec<Value> = p["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            json!({
                "name": t["name"],
                "interrupts": t["interrupts"].as_array().map(|l| l.iter().map(|i| i["value"].clone()).collect::<Vec<_>>()),
                "result": t.get("result"),
                "state": t["state"],
                "keys": keys(t),
            })
        })
        .collect();
    let config_keys: Vec<bool> = ["thread_id", "checkpoint_ns", "checkpoint_id"]
        .iter()
        .map(|k| p["config"]["configurable"].get(*k).is_some())
        .collect();
    json!({
        "keys": keys(p),
        "config_keys": config_keys,
        "has_parent": !p["parent_config"].is_null(),
        "values": written(&p["values"]),
        "source": p["metadata"]["source"],
        "step": p["metadata"]["step"],
        "parents": p["metadata"]["parents"],
        "next": p["next"],
        "tasks": tasks,
    })
}

/// What of a task or task-result payload both servers must agree on.
fn task_shape(p: &Value) -> Value {
    let error = &p["error"];
    json!({
        "keys": keys(p),
        "name": p["name"],
        "input": p.get("input").map(written),
        "triggers": p.get("triggers"),
        "result": p.get("result"),
        "interrupts": p.get("interrupts").and_then(Value::as_array)
            .map(|l| l.iter().map(|i| (i["value"].clone(), i["id"].is_string())).collect::<Vec<_>>()),
        "error_keys": keys(error),
        "error_message": error.get("message"),
    })
}

/// Each frame as (event, debug type, step, shape).
fn shapes(reply: &Reply) -> Vec<Value> {
    reply
        .events()
        .into_iter()
        .filter(|(name, ..)| name != "metadata")
        .map(|(name, data, _)| match name.as_str() {
            "checkpoints" => json!(["checkpoints", checkpoint_shape(&data)]),
            "tasks" => json!(["tasks", task_shape(&data)]),
            "debug" => {
                let p = &data["payload"];
                let shape = match data["type"].as_str() {
                    Some("checkpoint") => checkpoint_shape(p),
                    _ => task_shape(p),
                };
                json!(["debug", data["type"], data["step"], keys(&data), shape])
            }
            "error" => json!(["error", keys(&data)]),
            other => json!([other]),
        })
        .collect()
}

/// Our answer to `body` on thread `t`.
async fn stream(api: &common::Api, t: &str, body: Value) -> Reply {
    let reply = api.post(&format!("/threads/{t}/runs/stream"), body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply
}

fn assert_same(ours: &Reply, theirs: &Reply) {
    let (ours, theirs) = (shapes(ours), shapes(theirs));
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "frame {i}: ours (left) and LangGraph's (right)");
    }
    assert_eq!(ours.len(), theirs.len(), "frames: ours {ours:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_debug_and_tasks_frames_match_langgraphs_through_an_interrupt_and_resume(
) -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let modes = json!(["checkpoints", "debug", "tasks"]);
    let first = stream(
        &api,
        &t,
        json!({"assistant_id": "approval", "input": {"log": []}, "stream_mode": modes}),
    )
    .await;
    assert_same(&first, &recorded("approval-debug.sse")?);
    let resumed = stream(
        &api,
        &t,
        json!({"assistant_id": "approval", "command": {"resume": "yes"}, "stream_mode": modes}),
    )
    .await;
    assert_same(&resumed, &recorded("approval-debug-resume.sse")?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_tasks_debug_result_carries_its_error_as_langgraphs_does() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let reply = stream(
        &api,
        &t,
        json!({"assistant_id": "boom", "input": {"log": []}, "stream_mode": "debug"}),
    )
    .await;
    assert_same(&reply, &recorded("boom-debug.sse")?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoints_tasks_are_the_tasks_the_next_step_runs() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let reply = stream(
        &api,
        &t,
        json!({"assistant_id": "chain", "input": {"log": []}, "stream_mode": ["checkpoints", "tasks"]}),
    )
    .await;
    let events = reply.events();
    let mut announced: Vec<String> = Vec::new();
    let mut ran = 0;
    for (name, data, _) in &events {
        match name.as_str() {
            "checkpoints" => {
                announced = data["tasks"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t["id"].as_str().map(str::to_owned))
                    .collect();
            }
            "tasks" if data.get("input").is_some() => {
                let id = data["id"].as_str().unwrap_or_default();
                assert!(
                    announced.iter().any(|a| a == id),
                    "task {id} was not announced in {announced:?}"
                );
                ran += 1;
            }
            _ => {}
        }
    }
    assert_eq!(ran, 3, "a, b and c ran: {events:#?}");
    // Each checkpoint's parent is the checkpoint before it.
    let ids: Vec<&Value> = events
        .iter()
        .filter(|e| e.0 == "checkpoints")
        .map(|e| &e.1)
        .collect();
    for pair in ids.windows(2) {
        assert_eq!(
            pair[1]["parent_config"]["configurable"]["checkpoint_id"],
            pair[0]["config"]["configurable"]["checkpoint_id"]
        );
    }
    Ok(())
}
