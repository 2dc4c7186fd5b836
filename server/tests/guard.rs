//! The guard: with an API key every route but `/ok` needs `x-api-key`; CORS answers only the
//! origins it was given, and exposes the headers the SDKs read.

mod common;

use common::Served;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_api_key_a_request_without_it_is_a_401_and_with_it_is_served() -> TestResult {
    let s = Served::start_with(|b| b.api_key("sesame")).await?;
    let bare = s.api();
    assert_eq!(bare.get("/ok").await.status, 200);
    let refused = bare.post("/threads", json!({})).await;
    assert_eq!(refused.status, 401);
    assert!(refused.json()["detail"]
        .as_str()
        .is_some_and(|d| d.contains("x-api-key")));
    let wrong = s.api().with_header("x-api-key", "sesamf");
    assert_eq!(wrong.get("/info").await.status, 401);
    let keyed = s.api().with_header("x-api-key", "sesame");
    assert_eq!(keyed.post("/threads", json!({})).await.status, 200);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_from_an_allowed_page_carries_the_cors_headers() -> TestResult {
    let s =
        Served::start_with(|b| b.api_key("sesame").cors_origin("http://localhost:3000")).await?;
    let page = s.api().with_header("Origin", "http://localhost:3000");
    let refused = page.post("/threads", json!({})).await;
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.header("access-control-allow-origin"),
        Some("http://localhost:3000")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_only_allowed_origins_and_exposes_content_location() -> TestResult {
    let s = Served::start_with(|b| b.cors_origin("http://localhost:3000")).await?;
    let allowed = s
        .api()
        .with_header("Origin", "http://localhost:3000")
        .with_header("Access-Control-Request-Method", "POST")
        .with_header("Access-Control-Request-Headers", "content-type,x-api-key");
    let pre = allowed
        .send("OPTIONS", "/threads/x/runs/stream", None)
        .await;
    assert_eq!(pre.status, 204);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("http://localhost:3000")
    );
    assert_eq!(
        pre.header("access-control-allow-headers"),
        Some("content-type,x-api-key")
    );
    let t = allowed.thread().await;
    let stream = allowed
        .post(
            &format!("/threads/{t}/runs/stream"),
            json!({"assistant_id": "chain", "input": {}}),
        )
        .await;
    assert_eq!(
        stream.header("access-control-expose-headers"),
        Some("Content-Location, Location")
    );
    let other = s.api().with_header("Origin", "http://evil.example");
    let pre = other.send("OPTIONS", "/threads", None).await;
    assert_eq!(pre.header("access-control-allow-origin"), None);
    assert_eq!(
        other
            .get("/info")
            .await
            .header("access-control-allow-origin"),
        None
    );
    Ok(())
}
