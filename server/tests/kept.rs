//! A resumable run's log is kept in the SQLite file: after the server restarts, a client
//! that reconnects with the last id it saw gets the rest of the run's frames, and `join`
//! its result, from the file.

mod common;

use common::Served;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_runs_log_outlives_its_server_and_is_replayed_from_the_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("kept.db");
    let first = Served::start_with(|b| b.file(&file)).await?;
    let api = first.api();
    let thread = api.thread().await;
    let streamed = api
        .post(
            &format!("/threads/{thread}/runs/stream"),
            json!({
                "assistant_id": "chain",
                "input": { "log": ["x"] },
                "stream_mode": ["values", "updates"],
                "stream_resumable": true,
            }),
        )
        .await;
    let events = streamed.events();
    assert!(events.len() >= 5, "{}", streamed.body);
    let run = events[0].1["run_id"].as_str().expect("run id").to_owned();
    first.server.shutdown().await;

    let second = Served::start_with(|b| b.file(&file)).await?;
    let api = second.api();
    let seen = events[1].2.clone().expect("frames carry ids");
    let rest = api
        .clone()
        .with_header("Last-Event-ID", &seen)
        .get(&format!("/threads/{thread}/runs/{run}/stream"))
        .await;
    assert_eq!(rest.status, 200, "{}", rest.body);
    assert_eq!(rest.events(), events[2..].to_vec(), "{}", rest.body);
    let joined = api.get(&format!("/threads/{thread}/runs/{run}/join")).await;
    assert_eq!(joined.json(), json!({ "log": ["x", "a", "b", "c"] }));
    // A run that was not resumable has no log to replay: its stream ends at once.
    let plain = api
        .post(
            &format!("/threads/{thread}/runs/wait"),
            json!({ "assistant_id": "chain", "input": {} }),
        )
        .await;
    assert_eq!(plain.status, 200, "{}", plain.body);
    let runs = api.get(&format!("/threads/{thread}/runs")).await.json();
    let plain_run = runs[0]["run_id"].as_str().expect("run id").to_owned();
    second.server.shutdown().await;
    let third = Served::start_with(|b| b.file(&file)).await?;
    let ended = third
        .api()
        .get(&format!("/threads/{thread}/runs/{plain_run}/stream"))
        .await;
    assert_eq!(ended.status, 200, "{}", ended.body);
    assert!(ended.events().is_empty(), "{}", ended.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_with_wait_a_run_queued_before_a_restart_answers_at_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("queued.db");
    let first = Served::start_with(|b| b.file(&file)).await?;
    let api = first.api();
    let thread = api.thread().await;
    let long = json!({ "assistant_id": "slow", "input": { "steps": 200, "delay_ms": 50 } });
    api.post(&format!("/threads/{thread}/runs"), long).await;
    let queued = api
        .post(
            &format!("/threads/{thread}/runs"),
            json!({ "assistant_id": "slow", "input": { "steps": 0, "delay_ms": 0 } }),
        )
        .await
        .json();
    let queued = queued["run_id"].as_str().expect("run id").to_owned();
    first.server.shutdown().await;

    let second = Served::start_with(|b| b.file(&file)).await?;
    let api = second.api();
    let started = std::time::Instant::now();
    let cancelled = api
        .post(
            &format!("/threads/{thread}/runs/{queued}/cancel?wait=1"),
            json!({}),
        )
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "the cancel waited {:?} for a run that will never run",
        started.elapsed()
    );
    let run = api
        .get(&format!("/threads/{thread}/runs/{queued}"))
        .await
        .json();
    assert_eq!(run["status"], "interrupted", "{run}");
    Ok(())
}
