//! Thread search by metadata: a key's value must be there, of the same JSON type and equal.

mod common;

use common::Served;
use serde_json::{json, Value};

type TestResult = Result<(), Box<dyn std::error::Error>>;

async fn found(api: &common::Api, metadata: Value) -> Vec<String> {
    let r = api
        .post(
            "/threads/search",
            json!({ "metadata": metadata, "limit": 100 }),
        )
        .await;
    let mut ids: Vec<String> = r
        .json()
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_search_matches_present_keys_of_the_same_type_and_value() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    for metadata in [
        json!({"name": "a", "flag": true, "n": 1, "gone": null, "tags": {"k": "v"}}),
        json!({"name": "b", "flag": 1, "n": 1.0}),
        json!({"name": "c"}),
    ] {
        let r = api.post("/threads", json!({ "metadata": metadata })).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert_eq!(found(&api, json!({"flag": true})).await, ["a"]);
    assert_eq!(found(&api, json!({"flag": 1})).await, ["b"]);
    assert_eq!(found(&api, json!({"gone": null})).await, ["a"]);
    assert_eq!(found(&api, json!({"tags": {"k": "v"}})).await, ["a"]);
    // Numbers compare as numbers, as PostgreSQL's jsonb containment does.
    assert_eq!(found(&api, json!({"n": 1})).await, ["a", "b"]);
    assert_eq!(found(&api, json!({})).await, ["a", "b", "c"]);
    Ok(())
}
