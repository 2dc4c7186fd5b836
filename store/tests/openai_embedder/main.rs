//! The OpenAI-compatible embeddings client against a loopback fixture server that records
//! what it was sent and answers with canned bodies.
#![cfg(feature = "live")]
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod server;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use server::{Reply, Server};
use stategraph_store::{
    EmbedError, Embedder, IndexConfig, MemoryStore, Namespace, OpenAiEmbedder,
    OpenAiEmbedderConfig, SearchOp, Store, StoreConfig,
};

fn config(server: &Server, dims: usize) -> OpenAiEmbedderConfig {
    OpenAiEmbedderConfig::new(&server.base_url, "embed-test", dims)
        .with_proxy_env(false)
        .with_timeout(Duration::from_secs(10))
}

/// An embeddings answer holding `(index, vector)` in the given order.
fn answer(data: &[(usize, Vec<f32>)]) -> Value {
    let data: Vec<Value> = data
        .iter()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    json!({"object": "list", "data": data, "model": "embed-test",
           "usage": {"prompt_tokens": 3, "total_tokens": 3}})
}

fn texts(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

#[tokio::test]
async fn request_posts_model_inputs_dimensions_and_bearer_key() {
    let server = Server::start(vec![Reply::json(
        200,
        &answer(&[(0, vec![1.0, 0.0]), (1, vec![0.0, 1.0])]),
    )])
    .await;
    let embedder = OpenAiEmbedder::new(
        config(&server, 2)
            .with_api_key("sk-test")
            .with_dimensions_sent(true),
    )
    .unwrap();

    let vectors = embedder.embed(&texts(&["tea", "boat"])).await.unwrap();

    assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.request_line, "POST /v1/embeddings HTTP/1.1");
    assert_eq!(sent.headers["authorization"], "Bearer sk-test");
    assert_eq!(
        sent.body,
        json!({"model": "embed-test", "input": ["tea", "boat"], "dimensions": 2})
    );
}

#[tokio::test]
async fn dimensions_are_not_sent_unless_asked() {
    let server = Server::start(vec![Reply::json(200, &answer(&[(0, vec![1.0])]))]).await;
    let embedder = OpenAiEmbedder::new(config(&server, 1)).unwrap();

    embedder.embed(&texts(&["tea"])).await.unwrap();

    let sent = &server.requests()[0];
    assert_eq!(sent.body, json!({"model": "embed-test", "input": ["tea"]}));
    assert!(!sent.headers.contains_key("authorization"));
}

#[tokio::test]
async fn vectors_come_back_in_input_order_whatever_the_answer_order() {
    let server = Server::start(vec![Reply::json(
        200,
        &answer(&[(2, vec![2.0]), (0, vec![0.0]), (1, vec![1.0])]),
    )])
    .await;
    let embedder = OpenAiEmbedder::new(config(&server, 1)).unwrap();

    let vectors = embedder.embed(&texts(&["a", "b", "c"])).await.unwrap();

    assert_eq!(vectors, vec![vec![0.0], vec![1.0], vec![2.0]]);
}

#[tokio::test]
async fn many_texts_go_in_batches_and_keep_their_order() {
    let server = Server::start(vec![
        Reply::json(200, &answer(&[(1, vec![1.0]), (0, vec![0.0])])),
        Reply::json(200, &answer(&[(0, vec![2.0]), (1, vec![3.0])])),
        Reply::json(200, &answer(&[(0, vec![4.0])])),
    ])
    .await;
    let embedder = OpenAiEmbedder::new(config(&server, 1).with_batch_size(2)).unwrap();

    let vectors = embedder
        .embed(&texts(&["a", "b", "c", "d", "e"]))
        .await
        .unwrap();

    assert_eq!(vectors, (0..5).map(|i| vec![i as f32]).collect::<Vec<_>>());
    let inputs: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|r| r.body["input"].clone())
        .collect();
    assert_eq!(
        inputs,
        vec![json!(["a", "b"]), json!(["c", "d"]), json!(["e"])]
    );
}

#[tokio::test]
async fn http_error_status_names_status_and_message() {
    let server = Server::start(vec![Reply::json(
        401,
        &json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
    )])
    .await;
    let embedder = OpenAiEmbedder::new(config(&server, 2)).unwrap();

    let err = embedder.embed(&texts(&["tea"])).await.unwrap_err();

    match &err {
        EmbedError::Status { status, body } => {
            assert_eq!(
                (*status, body.as_str()),
                (401, "Incorrect API key provided")
            );
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    assert!(err.to_string().contains("HTTP 401"), "{err}");
}

#[tokio::test]
async fn vector_of_wrong_length_is_rejected() {
    let server = Server::start(vec![Reply::json(200, &answer(&[(0, vec![1.0, 2.0, 3.0])]))]).await;
    let embedder = OpenAiEmbedder::new(config(&server, 2)).unwrap();

    let err = embedder.embed(&texts(&["tea"])).await.unwrap_err();

    assert!(
        matches!(err, EmbedError::Dims { dims: 2, got: 3 }),
        "{err:?}"
    );
}

#[tokio::test]
async fn answer_with_too_few_vectors_or_no_list_is_rejected() {
    let server = Server::start(vec![
        Reply::json(200, &answer(&[(0, vec![1.0])])),
        Reply::json(200, &json!({"oops": true})),
    ])
    .await;
    let embedder = OpenAiEmbedder::new(config(&server, 1)).unwrap();

    let short = embedder.embed(&texts(&["a", "b"])).await.unwrap_err();
    let garbled = embedder.embed(&texts(&["a"])).await.unwrap_err();

    assert!(
        matches!(short, EmbedError::Count { asked: 2, got: 1 }),
        "{short:?}"
    );
    assert!(
        matches!(garbled, EmbedError::Decode(ref m) if m.contains("oops")),
        "{garbled:?}"
    );
}

#[tokio::test]
async fn unusable_configuration_is_refused_naming_the_value() {
    let bad_url = OpenAiEmbedderConfig::new("ftp://example.invalid/v1", "m", 4);
    let no_model = OpenAiEmbedderConfig::new("http://127.0.0.1:1/v1", " ", 4);
    let no_batch = OpenAiEmbedderConfig::new("http://127.0.0.1:1/v1", "m", 4).with_batch_size(0);

    for (config, needle) in [
        (bad_url, "ftp://"),
        (no_model, "model"),
        (no_batch, "batch_size (0)"),
    ] {
        let err = OpenAiEmbedder::new(config).unwrap_err();
        assert!(matches!(err, EmbedError::Config(_)), "{err:?}");
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[tokio::test]
async fn a_store_indexes_and_ranks_with_the_served_vectors() {
    let server = Server::start(vec![
        Reply::json(200, &answer(&[(0, vec![1.0, 0.0]), (1, vec![0.0, 1.0])])),
        Reply::json(200, &answer(&[(0, vec![0.1, 0.9])])),
    ])
    .await;
    let embedder = Arc::new(OpenAiEmbedder::new(config(&server, 2)).unwrap());
    let store =
        MemoryStore::new(StoreConfig::default().index(IndexConfig::new(embedder).fields(["text"])));
    let ns = Namespace::new(["users", "u-1"]).unwrap();
    let value = |t: &str| json!({"text": t}).as_object().unwrap().clone();
    let puts = vec![
        stategraph_store::Op::Put(stategraph_store::PutOp::new(
            ns.clone(),
            "tea",
            value("tea"),
        )),
        stategraph_store::Op::Put(stategraph_store::PutOp::new(
            ns.clone(),
            "boat",
            value("boat"),
        )),
    ];
    store.batch(puts).await.unwrap();

    let found = store
        .search(SearchOp::new(Namespace::new(["users"]).unwrap()).query("sailing"))
        .await
        .unwrap();

    assert_eq!(found[0].item.key, "boat");
    assert!(found[0].score > found[1].score);
    assert_eq!(server.requests()[1].body["input"], json!(["sailing"]));
}
