//! The event stream as the SDKs parse it, and what a stream's client decides: headers,
//! `metadata` first, `id:` only on resumable runs, heartbeats, the end; a client that goes
//! away cancels its run unless it said `continue`; a stateless run leaves no thread.

mod common;

use std::time::Duration;

use common::Served;
use serde_json::{json, Value};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_has_the_sse_headers_metadata_first_and_ids_only_when_resumable() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let plain = api
        .post(
            &format!("/threads/{t}/runs/stream"),
            json!({"assistant_id": "chain", "input": {}, "stream_mode": ["values", "updates"]}),
        )
        .await;
    assert_eq!(plain.status, 200);
    assert_eq!(
        plain.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let events = plain.events();
    let run = events[0].1["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(events[0].0, "metadata");
    assert_eq!(events[0].1["attempt"], 1);
    assert_eq!(
        plain.header("content-location"),
        Some(format!("/threads/{t}/runs/{run}").as_str())
    );
    assert_eq!(
        plain.header("location"),
        Some(format!("/threads/{t}/runs/{run}/stream").as_str())
    );
    assert_eq!(
        plain.event_names(),
        ["metadata", "values", "updates", "values", "updates", "values", "updates", "values"]
    );
    assert!(events.iter().all(|e| e.2.is_none()), "ids on a plain run");
    assert_eq!(events[2].1, json!({"a": {"log": ["a"]}}));

    let resumable = api
        .post(
            &format!("/threads/{t}/runs/stream"),
            json!({"assistant_id": "chain", "input": {}, "stream_resumable": true}),
        )
        .await;
    let ids: Vec<Option<String>> = resumable.events().into_iter().map(|e| e.2).collect();
    let want: Vec<Option<String>> = (0..5).map(|i| Some(format!("1-{i}"))).collect();
    assert_eq!(ids, want);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_stream_sends_heartbeats_and_closes_when_the_run_ends() -> TestResult {
    let s = Served::start_with(|b| b.heartbeat(Duration::from_millis(50))).await?;
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/stream"),
            json!({"assistant_id": "slow", "input": {"steps": 1, "delay_ms": 300},
                   "stream_mode": "updates"}),
        )
        .await;
    assert!(r.body.contains(": heartbeat\r\n\r\n"), "{}", r.body);
    assert_eq!(r.event_names(), ["metadata", "updates"]);
    Ok(())
}

async fn run_status(api: &common::Api, t: &str) -> String {
    let runs = api.get(&format!("/threads/{t}/runs")).await.json();
    runs[0]["status"].as_str().unwrap_or_default().to_owned()
}

async fn settled(api: &common::Api, t: &str) -> String {
    for _ in 0..500 {
        let status = run_status(api, t).await;
        if status != "running" && status != "pending" {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    "still running".to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_goes_on_when_its_client_goes_away_unless_it_said_cancel() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let slow = json!({"steps": 5, "delay_ms": 60});
    let t = api.thread().await;
    api.stream_prefix(
        &format!("/threads/{t}/runs/stream"),
        json!({"assistant_id": "slow", "input": slow}),
        "event: values",
    )
    .await;
    assert_eq!(settled(&api, &t).await, "success");
    let state = api.get(&format!("/threads/{t}/state")).await.json();
    assert_eq!(state["values"]["log"].as_array().map(Vec::len), Some(5));

    let t = api.thread().await;
    api.stream_prefix(
        &format!("/threads/{t}/runs/stream"),
        json!({"assistant_id": "slow", "input": slow, "on_disconnect": "cancel"}),
        "event: values",
    )
    .await;
    assert_eq!(settled(&api, &t).await, "interrupted");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_sends_newlines_until_its_answer() -> TestResult {
    let s = Served::start_with(|b| b.heartbeat(Duration::from_millis(50))).await?;
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "slow", "input": {"steps": 1, "delay_ms": 300}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(r.body.starts_with("\n"), "{:?}", r.body);
    let values: Value = serde_json::from_str(r.body.trim())?;
    assert_eq!(values["log"], json!(["tick0"]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_run_answers_and_leaves_no_thread_behind() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let r = api
        .post(
            "/runs/wait",
            json!({"assistant_id": "chain", "input": {"log": ["x"]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), json!({"log": ["x", "a", "b", "c"]}));
    let stream = api
        .post(
            "/runs/stream",
            json!({"assistant_id": "chain", "input": {}}),
        )
        .await;
    assert_eq!(
        stream.event_names().last().map(String::as_str),
        Some("values")
    );
    let threads = api
        .post("/threads/search", json!({"limit": 100}))
        .await
        .json();
    assert_eq!(threads, json!([]));
    Ok(())
}

/// A long run of `slow` in the background, then (once it ticks) a one-tick run under
/// `strategy`, waited for: the long run's id and the new run's values.
async fn long_run_then(api: &common::Api, runs: &str, strategy: &str) -> (String, Value) {
    let long = api
        .post(
            runs,
            json!({"assistant_id": "slow", "input": {"steps": 100, "delay_ms": 30}}),
        )
        .await
        .json();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let next = api
        .post(
            &format!("{runs}/wait"),
            json!({"assistant_id": "slow", "input": {"steps": 0},
                   "multitask_strategy": strategy}),
        )
        .await
        .json();
    let id = long["run_id"].as_str().unwrap_or_default().to_owned();
    (id, next)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_and_rollback_strategies_stop_the_running_run_and_rollback_undoes_it(
) -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let runs = format!("/threads/{t}/runs");
    let first = api
        .post(
            &runs,
            json!({"assistant_id": "slow", "input": {"steps": 2, "delay_ms": 1}}),
        )
        .await;
    assert_eq!(first.status, 200);
    api.get(&format!(
        "{runs}/{}/join",
        first.json()["run_id"].as_str().unwrap_or("")
    ))
    .await;
    // A long run, interrupted by the next: its ticks stay.
    let (long_id, next) = long_run_then(&api, &runs, "interrupt").await;
    let kept = next["log"].as_array().map_or(0, Vec::len);
    assert!(kept > 2, "the interrupted run's ticks stay: {next}");
    let long_run = api.get(&format!("{runs}/{long_id}")).await.json();
    assert_eq!(long_run["status"], "interrupted");
    // Another long run, rolled back by the next: the thread is as it was before it, and
    // the run is gone.
    let (long_id, after) = long_run_then(&api, &runs, "rollback").await;
    // What the thread had before the rolled-back run, plus the one tick of the new run.
    assert_eq!(after["log"].as_array().map_or(0, Vec::len), kept + 1);
    assert_eq!(api.get(&format!("{runs}/{long_id}")).await.status, 404);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_thread_stops_its_run_first_and_leaves_no_checkpoint_behind() -> TestResult {
    use stategraph_checkpoints::{Namespace, Saver, SqliteSaver, ThreadId};
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    api.post(
        &format!("/threads/{t}/runs"),
        json!({"assistant_id": "slow", "input": {"steps": 100, "delay_ms": 20}}),
    )
    .await;
    for _ in 0..500 {
        let state = api.get(&format!("/threads/{t}/state")).await.json();
        if state["values"]["log"]
            .as_array()
            .is_some_and(|l| l.len() >= 2)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        api.send("DELETE", &format!("/threads/{t}"), None)
            .await
            .status,
        204
    );
    assert_eq!(api.get(&format!("/threads/{t}")).await.status, 404);
    // Had the run gone on, its next step would have written into the deleted thread.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let file = s.file();
    s.server.shutdown().await;
    let saver = SqliteSaver::open_read_only(&file)?;
    let left = saver
        .list(&ThreadId::new(&t)?, &Namespace::root(), Default::default())
        .await?;
    assert!(left.is_empty(), "{} checkpoints left", left.len());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_runs_submitted_at_once_under_reject_one_is_refused() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    for _ in 0..10 {
        let t = api.thread().await;
        let body = json!({"assistant_id": "slow", "input": {"steps": 3, "delay_ms": 20},
                          "multitask_strategy": "reject"});
        let path = format!("/threads/{t}/runs");
        let (a, b) = tokio::join!(api.post(&path, body.clone()), api.post(&path, body));
        let mut statuses = [a.status, b.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "{} / {}", a.body, b.body);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_back_a_run_from_an_older_checkpoint_restores_the_head_before_it() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let runs = format!("/threads/{t}/runs");
    let wait = format!("{runs}/wait");
    api.post(
        &wait,
        json!({"assistant_id": "slow", "input": {"steps": 2, "delay_ms": 1}}),
    )
    .await;
    let after_two = api.get(&format!("/threads/{t}/state")).await.json();
    let fork_at = after_two["checkpoint"]["checkpoint_id"].clone();
    api.post(
        &wait,
        json!({"assistant_id": "slow", "input": {"steps": 4, "delay_ms": 1}}),
    )
    .await;
    // A long run from the checkpoint after two ticks (an edit), then rolled back.
    let long = api
        .post(
            &runs,
            json!({"assistant_id": "slow", "input": {"steps": 100, "delay_ms": 20},
                   "checkpoint_id": fork_at}),
        )
        .await
        .json();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let id = long["run_id"].as_str().unwrap_or_default();
    let cancel = api
        .send(
            "POST",
            &format!("{runs}/{id}/cancel?wait=true&action=rollback"),
            None,
        )
        .await;
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    // The head is the thread's before the run (four ticks), not the fork point (two).
    let state = api.get(&format!("/threads/{t}/state")).await.json();
    assert_eq!(
        state["values"]["log"],
        json!(["tick0", "tick1", "tick2", "tick3"])
    );
    Ok(())
}
