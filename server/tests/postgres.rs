//! Several servers on one PostgreSQL schema: any of them accepts a request, one worker runs
//! each run, and a client's stream is relayed from whichever server runs it. (The SDK
//! scenarios run on PostgreSQL too, in `sdk_clients.rs`; the kill test is the CLI's.)
//!
//! Without `STATEGRAPH_PG_URL` these tests skip, except under `CI=true`.

#![allow(clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{fresh_schema, Api, Served};
use serde_json::{json, Value};

/// Two servers on one fresh schema.
async fn two(test: &str) -> Option<(Served, Served)> {
    let schema = fresh_schema(test);
    let a = Served::start_postgres(&schema).await?;
    let b = Served::start_postgres(&schema).await?;
    Some((a, b))
}

async fn wait_for_status(api: &Api, thread: &str, run: &str, status: &str) -> Value {
    let start = Instant::now();
    loop {
        let r = api
            .get(&format!("/threads/{thread}/runs/{run}"))
            .await
            .json();
        if r["status"] == status {
            return r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "run {run} never became {status}: {r}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_submitted_to_one_server_streams_whole_from_another_and_both_see_its_end() {
    let Some((a, b)) = two("relay").await else {
        return;
    };
    let (a, b) = (a.api(), b.api());
    let thread = a.thread().await;
    let body = json!({
        "assistant_id": "chain",
        "input": { "log": ["start"] },
        "stream_mode": ["values", "updates"],
    });
    let streamed = b
        .post(&format!("/threads/{thread}/runs/stream"), body)
        .await;
    assert_eq!(streamed.status, 200, "{}", streamed.body);
    let names = streamed.event_names();
    assert_eq!(
        names.first().map(String::as_str),
        Some("metadata"),
        "{names:?}"
    );
    // Three updates (a, b, c) and each step's values: nothing lost in the relay.
    assert_eq!(
        names.iter().filter(|n| *n == "updates").count(),
        3,
        "{names:?}"
    );
    let last_values = streamed
        .events()
        .into_iter()
        .rev()
        .find(|e| e.0 == "values")
        .expect("values");
    assert_eq!(last_values.1["log"], json!(["start", "a", "b", "c"]));
    // The other server sees the thread idle with the same values, and the run a success.
    let t = a.get(&format!("/threads/{thread}")).await.json();
    assert_eq!(t["status"], "idle", "{t}");
    assert_eq!(t["values"]["log"], json!(["start", "a", "b", "c"]));
    let runs = a.get(&format!("/threads/{thread}/runs")).await.json();
    assert_eq!(runs[0]["status"], "success", "{runs}");
    let run = runs[0]["run_id"].as_str().expect("run id");
    // Joined late on the first server: the run's result, relayed from the database.
    let joined = a.get(&format!("/threads/{thread}/runs/{run}/join")).await;
    assert_eq!(joined.json()["log"], json!(["start", "a", "b", "c"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_answers_409_on_one_server_while_the_thread_runs_on_another() {
    let Some((a, b)) = two("reject").await else {
        return;
    };
    let (a, b) = (a.api(), b.api());
    let thread = a.thread().await;
    let slow = json!({ "assistant_id": "slow", "input": { "steps": 50, "delay_ms": 40 } });
    let first = a
        .post(&format!("/threads/{thread}/runs"), slow)
        .await
        .json();
    let run = first["run_id"].as_str().expect("run id").to_owned();
    let busy = b.get(&format!("/threads/{thread}")).await.json();
    assert_eq!(busy["status"], "busy", "{busy}");
    let refused = b
        .post(
            &format!("/threads/{thread}/runs"),
            json!({ "assistant_id": "slow", "input": {}, "multitask_strategy": "reject" }),
        )
        .await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.json()["detail"]
        .as_str()
        .is_some_and(|d| d.contains(&run)));
    // Cancelled through the second server, wherever it runs.
    wait_for_status(&b, &thread, &run, "running").await;
    let cancelled = b
        .post(
            &format!("/threads/{thread}/runs/{run}/cancel?wait=1"),
            json!({}),
        )
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    wait_for_status(&a, &thread, &run, "interrupted").await;
    let t = a.get(&format!("/threads/{thread}")).await.json();
    assert_eq!(t["status"], "interrupted", "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_from_two_servers_run_one_at_a_time_in_the_order_submitted() {
    let Some((a, b)) = two("enqueue").await else {
        return;
    };
    let (a, b) = (a.api(), b.api());
    let thread = a.thread().await;
    let mut runs = Vec::new();
    for (i, api) in [&a, &b, &a, &b].into_iter().enumerate() {
        let body = json!({ "assistant_id": "chain", "input": { "log": [format!("r{i}")] } });
        let r = api
            .post(&format!("/threads/{thread}/runs"), body)
            .await
            .json();
        runs.push(r["run_id"].as_str().expect("run id").to_owned());
    }
    let last = runs.last().expect("runs");
    let joined = b
        .get(&format!("/threads/{thread}/runs/{last}/join"))
        .await
        .json();
    let expected: Vec<String> = (0..4)
        .flat_map(|i| [format!("r{i}"), "a".into(), "b".into(), "c".into()])
        .collect();
    assert_eq!(joined["log"], json!(expected));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_run_waited_for_on_one_server_answers_its_values_whichever_server_runs_it() {
    let Some((a, b)) = two("stateless").await else {
        return;
    };
    let (a, b) = (a.api(), b.api());
    for api in [&a, &b, &a, &b] {
        let r = api
            .post(
                "/runs/wait",
                json!({ "assistant_id": "chain", "input": { "log": ["s"] } }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json(), json!({ "log": ["s", "a", "b", "c"] }));
    }
    let threads = b
        .post("/threads/search", json!({ "limit": 100 }))
        .await
        .json();
    assert_eq!(threads, json!([]), "no stateless thread stays behind");
}
