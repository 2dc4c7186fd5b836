//! The PostgreSQL store against a real server (`STATEGRAPH_PG_URL`, started by
//! `.ci/postgres.sh`; without it these tests skip, and fail under `CI=true`). Each test has
//! a schema of its own, so they run in parallel. Where the memory store is the reference,
//! a test runs the same operations on both and compares.
#![cfg(feature = "postgres")]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use stategraph_store::{
    Filter, HashEmbedder, IndexConfig, ListNamespacesOp, ManualClock, MatchCondition, MemoryStore,
    Namespace, Op, PutOp, SearchOp, Store, StoreConfig, StoreError, Timestamp, Ttl, TtlConfig,
    VectorBackend,
};

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("an object")
}

fn ns(labels: &[&str]) -> Namespace {
    Namespace::new(labels.iter().copied()).expect("namespace")
}

/// The saver of a fresh schema named after the test, or `None` (skip) without a server.
async fn saver(test: &str) -> Option<PostgresSaver> {
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

fn clocked(clock: &ManualClock) -> StoreConfig {
    StoreConfig::default().clock(Arc::new(clock.clone()))
}

fn indexed(clock: &ManualClock) -> StoreConfig {
    clocked(clock).index(IndexConfig::new(Arc::new(HashEmbedder::new(64))).fields(["text"]))
}

/// Items of many shapes for filters to tell apart.
fn corpus() -> Vec<(Namespace, &'static str, Value)> {
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

async fn fill(stores: &[&dyn Store]) {
    for (namespace, key, value) in corpus() {
        for store in stores {
            store
                .put(&namespace, key, obj(value.clone()))
                .await
                .expect("put");
        }
    }
}

fn keys(found: &[stategraph_store::SearchItem]) -> Vec<String> {
    found.iter().map(|f| f.item.key.clone()).collect()
}

#[tokio::test]
async fn filters_select_what_the_reference_selects() {
    let Some(saver) = saver("filters").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let mem = MemoryStore::new(clocked(&clock));
    fill(&[&pg, &mem]).await;
    let filters = [
        json!({"n": 1}),
        json!({"n": {"$eq": 1.0}}),
        json!({"n": {"$ne": 1}}),
        json!({"n": {"$gt": 1}}),
        json!({"n": {"$gte": 1, "$lt": 100}}),
        json!({"n": {"$lte": "3"}}),
        json!({"s": {"$gt": "Zebra"}}),
        json!({"s": {"$lt": "apple pie"}}),
        json!({"s": {"$gte": "é"}}),
        json!({"s": {"$gt": 1}}),
        json!({"kind": null}),
        json!({"kind": {"$ne": "fact"}}),
        json!({"o": {"x": 1}}),
        json!({"arr": [1, 2]}),
        json!({"u.plan": "pro", "u.seats": {"$gte": 10}}),
        json!({"u.plan": {"$ne": "pro"}}),
        json!({"missing": {"$ne": "x"}}),
        json!({"missing": {"$lt": 1}}),
    ];
    for filter in filters {
        let f = Filter::from_json(filter.as_object().expect("object")).expect("filter");
        for prefix in [Namespace::root(), ns(&["users"]), ns(&["users", "b"])] {
            let op = SearchOp::new(prefix.clone()).filter(f.clone()).page(100, 0);
            let got = keys(&pg.search(op.clone()).await.expect("pg search"));
            let want = keys(&mem.search(op).await.expect("memory search"));
            assert_eq!(got, want, "filter {filter} under {prefix:?}");
        }
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_prefix_holds_its_namespace_and_those_below_not_a_longer_label() {
    let Some(saver) = saver("prefix").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    fill(&[&pg]).await;
    let mut found = keys(
        &pg.search(SearchOp::new(ns(&["users"])).page(100, 0))
            .await
            .expect("search"),
    );
    found.sort();
    assert_eq!(found, ["k1", "k2", "k3", "k4", "k6"]);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn unranked_pages_come_newest_first_in_the_reference_order() {
    let Some(saver) = saver("recent").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let mem = MemoryStore::new(clocked(&clock));
    fill(&[&pg, &mem]).await;
    // Labels whose joined form sorts otherwise than the labels do ("a.b" > "a-c").
    for store in [&pg as &dyn Store, &mem] {
        store
            .put(&ns(&["a", "b"]), "x", obj(json!({})))
            .await
            .expect("put");
        store
            .put(&ns(&["a-c"]), "x", obj(json!({})))
            .await
            .expect("put");
    }
    clock.advance(Duration::from_secs(1));
    for store in [&pg as &dyn Store, &mem] {
        store
            .put(&ns(&["users", "a"]), "k1", obj(json!({"n": 9})))
            .await
            .expect("put");
    }
    for (limit, offset) in [(100, 0), (3, 0), (3, 2), (2, 7)] {
        let op = SearchOp::new(Namespace::root()).page(limit, offset);
        let got = pg.search(op.clone()).await.expect("pg");
        let want = mem.search(op).await.expect("memory");
        assert_eq!(got, want, "page {limit}+{offset}");
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn namespace_listings_equal_the_reference() {
    let Some(saver) = saver("listing").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let mem = MemoryStore::new(clocked(&clock));
    fill(&[&pg, &mem]).await;
    let ops = [
        ListNamespacesOp::new(),
        ListNamespacesOp::new().condition(MatchCondition::prefix(["users"])),
        ListNamespacesOp::new().condition(MatchCondition::suffix(["b"])),
        ListNamespacesOp::new().condition(MatchCondition::prefix(["users", "*"])),
        ListNamespacesOp::new().max_depth(1),
        ListNamespacesOp {
            limit: 2,
            offset: 1,
            ..ListNamespacesOp::new()
        },
    ];
    for op in ops {
        let got = pg.list_namespaces(op.clone()).await.expect("pg");
        let want = mem.list_namespaces(op.clone()).await.expect("memory");
        assert_eq!(got, want, "{op:?}");
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn an_overwrite_keeps_created_at_and_a_delete_removes_the_item() {
    let Some(saver) = saver("overwrite").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let at = ns(&["users", "a"]);
    pg.put(&at, "k", obj(json!({"v": 1}))).await.expect("put");
    clock.advance(Duration::from_secs(5));
    pg.put(&at, "k", obj(json!({"v": 2, "big": 12345678901234567_i64})))
        .await
        .expect("put");
    let item = pg.get(&at, "k").await.expect("get").expect("found");
    assert_eq!(
        item.value,
        obj(json!({"v": 2, "big": 12345678901234567_i64}))
    );
    assert_eq!(
        (item.created_at, item.updated_at),
        (Timestamp(1_000), Timestamp(6_000))
    );
    pg.delete(&at, "k").await.expect("delete");
    assert!(pg.get(&at, "k").await.expect("get").is_none());
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_failed_batch_applies_nothing() {
    let Some(saver) = saver("atomic").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let at = ns(&["users", "a"]);
    let ops = vec![
        Op::Put(PutOp::new(at.clone(), "first", obj(json!({"v": 1})))),
        // PostgreSQL's jsonb refuses the NUL character: the second put fails.
        Op::Put(PutOp::new(
            at.clone(),
            "second",
            obj(json!({"v": "a\u{0}b"})),
        )),
    ];
    let failed = pg.batch(ops).await;
    assert!(matches!(failed, Err(StoreError::Database(_))), "{failed:?}");
    assert!(pg.get(&at, "first").await.expect("get").is_none());
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn full_text_ranks_items_holding_any_word_unstemmed() {
    let Some(saver) = saver("fulltext").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let at = ns(&["docs"]);
    for (key, text) in [
        ("both", "green tea and black tea"),
        ("one", "green grass"),
        ("stem", "greens and teas"),
        ("none", "a boat"),
    ] {
        pg.put(&at, key, obj(json!({"text": text, "kind": "doc"})))
            .await
            .expect("put");
    }
    let found = pg
        .search(SearchOp::new(Namespace::root()).query("Green TEA!"))
        .await
        .expect("search");
    assert_eq!(keys(&found), ["both", "one"]);
    assert!(found[0].score > found[1].score, "{found:?}");
    assert!(found.iter().all(|f| f.score.is_some_and(|s| s > 0.0)));
    let none = pg
        .search(SearchOp::new(Namespace::root()).query("?!"))
        .await
        .expect("search");
    assert!(none.is_empty());
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn ttl_expires_items_refreshes_on_read_and_sweep_deletes_them() {
    let Some(saver) = saver("ttl").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let ttl = TtlConfig {
        default_ttl: Some(Duration::from_secs(10)),
        refresh_on_read: true,
    };
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock).ttl(ttl))
        .await
        .expect("open");
    let at = ns(&["users", "a"]);
    for key in ["read", "searched", "idle"] {
        pg.put(&at, key, obj(json!({"text": key})))
            .await
            .expect("put");
    }
    let forever = PutOp::new(at.clone(), "forever", obj(json!({}))).ttl(Ttl::Never);
    pg.batch(vec![Op::Put(forever)]).await.expect("put");
    clock.advance(Duration::from_secs(8));
    assert!(pg.get(&at, "read").await.expect("get").is_some());
    let found = pg
        .search(SearchOp::new(at.clone()).query("searched"))
        .await
        .expect("search");
    assert_eq!(keys(&found), ["searched"]);
    clock.advance(Duration::from_secs(4));
    assert!(
        pg.get(&at, "idle").await.expect("get").is_none(),
        "expired at 10 s"
    );
    let listed = pg
        .search(SearchOp::new(at.clone()).page(10, 0))
        .await
        .expect("search");
    let mut live = keys(&listed);
    live.sort();
    assert_eq!(live, ["forever", "read", "searched"]);
    assert_eq!(pg.sweep().await.expect("sweep"), 1);
    clock.advance(Duration::from_secs(10));
    assert_eq!(pg.sweep().await.expect("sweep"), 2);
    let left = pg
        .search(SearchOp::new(at.clone()).page(10, 0))
        .await
        .expect("search");
    assert_eq!(keys(&left), ["forever"]);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_newer_format_is_refused_untouched() {
    let Some(saver) = saver("format").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let client = saver.connection().await.expect("connection");
    client
        .batch_execute(&format!(
            "UPDATE \"{}\".sg_store_meta SET value = '99' WHERE key = 'format_version'",
            saver.schema()
        ))
        .await
        .expect("raise the format");
    drop(client);
    let refused = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock)).await;
    assert!(
        matches!(
            refused,
            Err(StoreError::UnsupportedFormat {
                found: 99,
                supported: 1
            })
        ),
        "{refused:?}"
    );
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn an_index_of_other_dimensions_than_the_stored_vectors_is_refused() {
    let Some(saver) = saver("dims").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    stategraph_store::PostgresStore::from_saver(&saver, indexed(&clock))
        .await
        .expect("open");
    let other = clocked(&clock).index(IndexConfig::new(Arc::new(HashEmbedder::new(32))));
    let refused = stategraph_store::PostgresStore::from_saver(&saver, other).await;
    match refused {
        Err(StoreError::Invalid { what, why }) => {
            assert_eq!(what, "index dims");
            assert!(why.contains("64") && why.contains("32"), "{why}");
        }
        other => panic!("expected a dims error, got {other:?}"),
    }
    saver.drop_schema().await.expect("drop");
}
