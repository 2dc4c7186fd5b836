//! The long-term store's routes: items live in the server's file and outlive the server,
//! and a bad field is a 422 that names it.

mod common;

use common::Served;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_items_outlive_the_server_in_its_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("kept.db");
    let first = Served::start_with(|b| b.file(&file)).await?;
    let put = json!({"namespace": ["users", "alice"], "key": "tea", "value": {"text": "green"}});
    let r = first
        .api()
        .send("PUT", "/store/items", Some(&put.to_string()))
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    first.server.shutdown().await;

    let second = Served::start_with(|b| b.file(&file)).await?;
    let r = second
        .api()
        .get("/store/items?namespace=users.alice&key=tea")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["value"], json!({"text": "green"}));
    assert_eq!(r.json()["namespace"], json!(["users", "alice"]));
    let r = second
        .api()
        .post("/store/namespaces", json!({"prefix": ["users"]}))
        .await;
    assert_eq!(r.json(), json!({"namespaces": [["users", "alice"]]}));
    second.server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_store_field_is_a_422_that_names_it() -> TestResult {
    let served = Served::start().await?;
    let api = served.api();
    let cases = [
        (
            "PUT",
            "/store/items",
            json!({"namespace": "users", "key": "k", "value": {}}),
            "namespace",
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["a.b"], "key": "k", "value": {}}),
            "a.b",
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": [], "key": "k", "value": {}}),
            "namespace",
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["u"], "key": "", "value": {}}),
            "key",
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["u"], "key": "k", "value": 5}),
            "value",
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["u"], "key": "k", "value": {}, "ttl": -1}),
            "ttl",
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["u"], "key": "k", "value": {}, "index": "x"}),
            "index",
        ),
        ("DELETE", "/store/items", json!({"namespace": ["u"]}), "key"),
        (
            "POST",
            "/store/items/search",
            json!({"filter": {"n": {"$in": [1]}}}),
            "$in",
        ),
        (
            "POST",
            "/store/items/search",
            json!({"filter": [1]}),
            "filter",
        ),
        ("POST", "/store/items/search", json!({"limit": -1}), "limit"),
        ("POST", "/store/items/search", json!({"query": 3}), "query"),
        (
            "POST",
            "/store/items/search",
            json!({"refresh_ttl": "yes"}),
            "refresh_ttl",
        ),
        (
            "POST",
            "/store/namespaces",
            json!({"max_depth": 0}),
            "max_depth",
        ),
        (
            "POST",
            "/store/namespaces",
            json!({"suffix": [1]}),
            "suffix",
        ),
    ];
    for (method, path, body, names) in cases {
        let r = api.send(method, path, Some(&body.to_string())).await;
        assert_eq!(r.status, 422, "{method} {path} {body}: {}", r.body);
        let detail = r.json()["detail"].as_str().unwrap_or_default().to_owned();
        assert!(detail.contains(names), "{body}: {detail}");
    }
    for query in [
        "key=k",
        "namespace=u",
        "namespace=u..v&key=k",
        "namespace=u&key=k&refresh_ttl=maybe",
    ] {
        let r = api.get(&format!("/store/items?{query}")).await;
        assert_eq!(r.status, 422, "{query}: {}", r.body);
    }
    Ok(())
}

#[derive(stategraph::State, Clone, Default, Debug, serde::Serialize, serde::Deserialize)]
struct Recall {
    seen: String,
}

/// A graph whose node reads `users/alice/tea` from the store and puts `users/alice/seen`.
fn recall_graph() -> Result<stategraph::CompiledGraph<Recall>, Box<dyn std::error::Error>> {
    use std::sync::Arc;

    use stategraph::prelude::*;
    use stategraph_store::Namespace;
    let graph = StateGraph::<Recall>::new()
        .add_node("recall", |_s: Arc<Recall>, cx: NodeContext| async move {
            let store = cx.store().ok_or("the server gave no store")?;
            let alice = Namespace::new(["users", "alice"])?;
            let tea = store.get(&alice, "tea").await?.ok_or("no tea")?;
            let text = tea.value["text"].as_str().unwrap_or_default().to_owned();
            let seen = json!({"by": "recall"})
                .as_object()
                .cloned()
                .unwrap_or_default();
            store.put(&alice, "seen", seen).await?;
            Ok::<_, BoxError>(Recall::update().seen(text))
        })
        .add_edge(START, "recall")
        .add_edge("recall", END)
        .compile()?;
    Ok(graph)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_graph_reads_and_writes_the_store_the_routes_serve() -> TestResult {
    let graph = recall_graph()?;
    let served = Served::start_with(|b| b.graph("recall", &graph)).await?;
    let api = served.api();
    let put = json!({"namespace": ["users", "alice"], "key": "tea", "value": {"text": "green"}});
    let r = api
        .send("PUT", "/store/items", Some(&put.to_string()))
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = api
        .post("/runs/wait", json!({"assistant_id": "recall", "input": {}}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["seen"], "green", "{}", r.body);
    let r = api.get("/store/items?namespace=users.alice&key=seen").await;
    assert_eq!(r.json()["value"], json!({"by": "recall"}), "{}", r.body);
    served.server.shutdown().await;
    Ok(())
}
