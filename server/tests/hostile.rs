//! Bad requests get a 4xx with a JSON `detail` that names what was wrong, nothing reaches
//! storage, and the file checks clean afterwards.

mod common;

use common::Served;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn detail(r: &common::Reply) -> String {
    r.json()["detail"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_a_4xx_with_json_naming_what_was_wrong_and_the_file_stays_clean(
) -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    // (method, path, body, status, words the detail must hold)
    let long_id = "x".repeat(5_000);
    let cases: Vec<(&str, String, Option<String>, u16, &str)> = vec![
        (
            "POST",
            "/threads".into(),
            Some("{not json".into()),
            422,
            "request body",
        ),
        (
            "POST",
            "/threads".into(),
            Some("[1, 2]".into()),
            422,
            "request body",
        ),
        (
            "GET",
            "/threads/no-such-thread".into(),
            None,
            404,
            "thread no-such-thread",
        ),
        ("GET", format!("/threads/{long_id}"), None, 422, "thread id"),
        ("GET", "/threads/a%01b".into(), None, 422, "thread id"),
        (
            "GET",
            format!("/threads/{t}/runs/no-such-run"),
            None,
            404,
            "run no-such-run",
        ),
        (
            "GET",
            "/assistants/nobody".into(),
            None,
            404,
            "assistant nobody",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"assistant_id": "nobody", "input": {}}).to_string()),
            422,
            "invalid assistant \"nobody\"",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"assistant_id": "00000000-0000-4000-8000-000000000000"}).to_string()),
            404,
            "assistant 00000000",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"assistant_id": "chain", "input": {"log": 5}}).to_string()),
            422,
            "input.log",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"assistant_id": "chain", "input": {"lgo": []}}).to_string()),
            422,
            "input.lgo",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"assistant_id": "chain", "input": "hello"}).to_string()),
            422,
            "input must be an object",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(
                json!({"assistant_id": "chain", "input": {}, "stream_mode": "everything"})
                    .to_string(),
            ),
            422,
            "everything",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"assistant_id": "chain", "input": {}, "durability": "never"}).to_string()),
            422,
            "durability",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(
                json!({"assistant_id": "chain", "input": {}, "multitask_strategy": "shove"})
                    .to_string(),
            ),
            422,
            "shove",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"assistant_id": "chain", "input": {}, "checkpoint_id": "zz"}).to_string()),
            422,
            "checkpoint_id",
        ),
        (
            "POST",
            "/threads/nobody/runs/wait".into(),
            Some(json!({"assistant_id": "chain", "input": {}}).to_string()),
            404,
            "thread nobody",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/wait"),
            Some(json!({"input": {}}).to_string()),
            422,
            "assistant_id",
        ),
        (
            "POST",
            "/threads/search".into(),
            Some(json!({"status": "sleepy"}).to_string()),
            422,
            "sleepy",
        ),
        (
            "POST",
            "/threads/search".into(),
            Some(json!({"sort_by": "x; DROP TABLE"}).to_string()),
            422,
            "sort_by",
        ),
        (
            "POST",
            "/threads/search".into(),
            Some(json!({"metadata": {"a\"b": 1}}).to_string()),
            422,
            "metadata key",
        ),
        (
            "POST",
            format!("/threads/{t}/runs/nobody/cancel?action=explode"),
            None,
            404,
            "run nobody",
        ),
        ("GET", "/no/such/route".into(), None, 404, "route"),
    ];
    for (method, path, body, status, words) in cases {
        let r = api.send(method, &path, body.as_deref()).await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert!(
            detail(&r).contains(words),
            "{method} {path}: detail {:?} should name {words:?}",
            detail(&r)
        );
    }
    // Nothing of those reached the thread: it has no runs and no checkpoints.
    let runs = api.get(&format!("/threads/{t}/runs")).await;
    assert_eq!(runs.json(), json!([]));
    let state = api.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state.json()["values"], json!({}));
    let file = s.file();
    s.server.shutdown().await;
    let report = stategraph_checkpoints::inspect::verify(&file).await?;
    assert!(report.is_ok(), "{:?}", report.problems);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_a_413_with_json() -> TestResult {
    let s = Served::start_with(|b| b.body_limit(1024)).await?;
    let big = json!({ "metadata": { "blob": "x".repeat(4096) } }).to_string();
    let r = s.api().send("POST", "/threads", Some(&big)).await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(detail(&r).contains("1024 bytes"), "{}", r.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_another_graph_on_a_thread_is_a_409_that_names_both() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let ok = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "chain", "input": {}}),
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "agent", "input": {}}),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(detail(&r).contains("graph chain") && detail(&r).contains("agent"));
    // Same state, other nodes: refused too (the thread's checkpoints name chain's nodes).
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "custom", "input": {}}),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    Ok(())
}
