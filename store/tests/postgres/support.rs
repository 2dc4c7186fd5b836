//! What the PostgreSQL tests share: a fresh schema per test, configs, a corpus.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use stategraph_store::{
    HashEmbedder, IndexConfig, ManualClock, Namespace, Store, StoreConfig, StoreError,
    VectorBackend,
};

pub fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("an object")
}

pub fn ns(labels: &[&str]) -> Namespace {
    Namespace::new(labels.iter().copied()).expect("namespace")
}

/// The saver of a fresh schema named after the test, or `None` (skip) without a server.
pub async fn saver(test: &str) -> Option<PostgresSaver> {
    let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "STATEGRAPH_PG_URL is not set and CI=true: start one with .ci/postgres.sh"
        );
        eprintln!("skipped: STATEGRAPH_PG_URL is not set");
        return None;
    };
    let options = PostgresOptions {
        schema: format!("store_{test}_{}", std::process::id()),
        pool_size: 4,
        ..PostgresOptions::default()
    };
    let saver = PostgresSaver::connect_with(&url, options)
        .await
        .expect("connect");
    saver.drop_schema().await.expect("drop a leftover schema");
    Some(
        PostgresSaver::connect_with(
            &url,
            PostgresOptions {
                schema: saver.schema().to_owned(),
                pool_size: 4,
                ..PostgresOptions::default()
            },
        )
        .await
        .expect("reconnect"),
    )
}

/// A store without an index in a fresh schema named after the test, its clock at 1 s, and
/// the saver (to drop the schema); `None` (skip) without a server.
pub async fn plain_store(
    test: &str,
) -> Option<(PostgresSaver, ManualClock, stategraph_store::PostgresStore)> {
    let saver = saver(test).await?;
    let clock = ManualClock::at(stategraph_store::Timestamp(1_000));
    let store = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    Some((saver, clock, store))
}

pub fn clocked(clock: &ManualClock) -> StoreConfig {
    StoreConfig::default().clock(Arc::new(clock.clone()))
}

pub fn indexed(clock: &ManualClock) -> StoreConfig {
    clocked(clock).index(IndexConfig::new(Arc::new(HashEmbedder::new(64))).fields(["text"]))
}

/// Items of many shapes for filters to tell apart.
pub fn corpus() -> Vec<(Namespace, &'static str, Value)> {
    vec![
        (
            ns(&["users", "a"]),
            "k1",
            json!({"n": 1, "s": "apple", "kind": "fact", "o": {"x": 1}}),
        ),
        (
            ns(&["users", "a"]),
            "k2",
            json!({"n": 1.0, "s": "Zebra", "kind": "fact", "arr": [1, 2]}),
        ),
        (
            ns(&["users", "b"]),
            "k3",
            json!({"n": 2.5, "s": "éclair", "kind": "plan"}),
        ),
        (
            ns(&["users", "b", "deep"]),
            "k4",
            json!({"n": "3", "s": 7, "kind": null}),
        ),
        (
            ns(&["usersX"]),
            "k5",
            json!({"n": -4, "s": "apple pie", "o": {"x": 1.0}}),
        ),
        (
            ns(&["users"]),
            "k6",
            json!({"u": {"plan": "pro", "seats": 10}}),
        ),
        (
            ns(&["other"]),
            "k7",
            json!({"n": 100, "s": "", "arr": [1, 2.0]}),
        ),
    ]
}

pub async fn fill(stores: &[&dyn Store]) {
    for (namespace, key, value) in corpus() {
        for store in stores {
            store
                .put(&namespace, key, obj(value.clone()))
                .await
                .expect("put");
        }
    }
}

pub fn keys(found: &[stategraph_store::SearchItem]) -> Vec<String> {
    found.iter().map(|f| f.item.key.clone()).collect()
}

/// A store in `saver`'s schema ranking vectors by `vectors`, or the reason it cannot.
pub async fn vector_store(
    saver: &PostgresSaver,
    config: StoreConfig,
    vectors: VectorBackend,
) -> Result<stategraph_store::PostgresStore, StoreError> {
    stategraph_store::PostgresStore::from_saver_with(saver, config, vectors).await
}

/// Two indexed stores on `saver`'s tables with fallback mirrors of their own, as two
/// processes would open them: the first, whose writes the second hears of through the
/// vector log.
pub async fn two_mirrors(
    saver: &PostgresSaver,
    clock: &ManualClock,
) -> (
    stategraph_store::PostgresStore,
    stategraph_store::PostgresStore,
) {
    let open = || vector_store(saver, indexed(clock), VectorBackend::Fallback);
    (open().await.expect("open"), open().await.expect("open"))
}

pub fn words_item(n: usize) -> Map<String, Value> {
    const WORDS: [&str; 8] = [
        "tea", "green", "boat", "river", "coffee", "stone", "bird", "rain",
    ];
    let text: Vec<&str> = (0..3)
        .map(|i| WORDS[(n * (i + 3) + i) % WORDS.len()])
        .collect();
    obj(json!({"text": text.join(" "), "group": n % 7, "n": n}))
}
