//! The PostgreSQL store against a real server (`STATEGRAPH_PG_URL`, started by
//! `.ci/postgres.sh`; without it these tests skip, and fail under `CI=true`). Each test has
//! a schema of its own, so they run in parallel. Where the memory store is the reference,
//! a test runs the same operations on both and compares.
#![cfg(feature = "postgres")]
#![allow(clippy::expect_used, clippy::unwrap_used)]

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
    // Labels whose joined form sorts otherwise than the labels do ("a-c" < "a.b").
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
async fn a_newer_schema_version_is_refused_untouched() {
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
            "UPDATE \"{}\".sg_store_meta SET value = '99' WHERE key = 'schema_version'",
            saver.schema()
        ))
        .await
        .expect("raise the version");
    drop(client);
    let refused = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock)).await;
    assert!(
        matches!(
            refused,
            Err(StoreError::SchemaTooNew {
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

/// A store in `saver`'s schema ranking vectors by `vectors`, or the reason it cannot.
async fn vector_store(
    saver: &PostgresSaver,
    config: StoreConfig,
    vectors: VectorBackend,
) -> Result<stategraph_store::PostgresStore, StoreError> {
    stategraph_store::PostgresStore::from_saver_with(saver, config, vectors).await
}

fn words_item(n: usize) -> Map<String, Value> {
    const WORDS: [&str; 8] = [
        "tea", "green", "boat", "river", "coffee", "stone", "bird", "rain",
    ];
    let text: Vec<&str> = (0..3)
        .map(|i| WORDS[(n * (i + 3) + i) % WORDS.len()])
        .collect();
    obj(json!({"text": text.join(" "), "group": n % 7, "n": n}))
}

#[tokio::test]
async fn fallback_vector_search_ranks_as_the_reference_through_filters_and_pages() {
    let Some(saver) = saver("vec_reference").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    assert_eq!(pg.vector_backend(), Some(VectorBackend::Fallback));
    let mem = MemoryStore::new(indexed(&clock));
    let ops: Vec<Op> = (0..300)
        .map(|n| {
            let at = ns(&["docs", if n % 2 == 0 { "even" } else { "odd" }]);
            Op::Put(PutOp::new(at, format!("k{n:03}"), words_item(n)))
        })
        .collect();
    pg.batch(ops.clone()).await.expect("pg puts");
    mem.batch(ops).await.expect("memory puts");
    // A filter that only one item in seven meets: the mirror's first candidates mostly fail.
    let rare = Filter::from_json(json!({"group": 3}).as_object().expect("object")).expect("filter");
    for (prefix, filter, limit, offset) in [
        (Namespace::root(), Filter::default(), 10, 0),
        (ns(&["docs", "odd"]), Filter::default(), 5, 20),
        (Namespace::root(), rare.clone(), 30, 0),
        (ns(&["docs", "even"]), rare, 10, 10),
    ] {
        let op = SearchOp::new(prefix)
            .query("green tea by the river")
            .filter(filter)
            .page(limit, offset);
        let got = pg.search(op.clone()).await.expect("pg search");
        let want = mem.search(op.clone()).await.expect("memory search");
        assert_eq!(keys(&got), keys(&want), "{op:?}");
        for (g, w) in got.iter().zip(&want) {
            let (g, w) = (g.score.expect("score"), w.score.expect("score"));
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn the_fallback_mirror_sees_another_processs_writes() {
    let Some(saver) = saver("vec_other").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let here = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    // Another process: a store of its own, with its own mirror, on the same tables.
    let there = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    let at = ns(&["docs"]);
    here.put(&at, "boat", obj(json!({"text": "a boat on the river"})))
        .await
        .expect("put");
    here.put(&at, "tea", obj(json!({"text": "green tea"})))
        .await
        .expect("put");
    let query = SearchOp::new(at.clone()).query("green tea");
    assert_eq!(
        keys(&here.search(query.clone()).await.expect("search"))[0],
        "tea"
    );
    there
        .put(
            &at,
            "more",
            obj(json!({"text": "green tea, more green tea"})),
        )
        .await
        .expect("put");
    there.delete(&at, "tea").await.expect("delete");
    let found = keys(&here.search(query.clone()).await.expect("search"));
    assert_eq!(found, ["more", "boat"]);
    // And this process's own write, applied to its mirror without a reload.
    here.put(&at, "boat", obj(json!({"text": "green tea"})))
        .await
        .expect("put");
    let found = here.search(query).await.expect("search");
    assert_eq!(keys(&found), ["boat", "more"]);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_vector_search_sees_the_puts_earlier_in_its_batch() {
    let Some(saver) = saver("vec_batch").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    let at = ns(&["docs"]);
    pg.put(&at, "boat", obj(json!({"text": "a boat"})))
        .await
        .expect("put");
    let results = pg
        .batch(vec![
            Op::Put(PutOp::new(
                at.clone(),
                "tea",
                obj(json!({"text": "green tea"})),
            )),
            Op::Search(SearchOp::new(at.clone()).query("green tea")),
        ])
        .await
        .expect("batch");
    match &results[1] {
        stategraph_store::OpResult::Items(found) => assert_eq!(keys(found)[0], "tea"),
        other => panic!("expected items, got {other:?}"),
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn pgvector_ranks_as_the_fallback_when_the_server_has_it() {
    let Some(saver) = saver("vec_pgvector").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pgvector = match vector_store(&saver, indexed(&clock), VectorBackend::PgVector).await {
        Ok(store) => store,
        Err(StoreError::Invalid {
            what: "vector backend",
            why,
        }) => {
            eprintln!("skipped: {why}");
            saver.drop_schema().await.expect("drop");
            return;
        }
        Err(e) => panic!("opening with pgvector: {e}"),
    };
    let fallback = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    let ops: Vec<Op> = (0..100)
        .map(|n| Op::Put(PutOp::new(ns(&["docs"]), format!("k{n:03}"), words_item(n))))
        .collect();
    pgvector.batch(ops).await.expect("puts");
    let rare = Filter::from_json(json!({"group": 3}).as_object().expect("object")).expect("filter");
    for filter in [Filter::default(), rare] {
        let op = SearchOp::new(Namespace::root())
            .query("green tea by the river")
            .filter(filter)
            .page(10, 2);
        let got = pgvector.search(op.clone()).await.expect("pgvector");
        let want = fallback.search(op).await.expect("fallback");
        assert_eq!(keys(&got), keys(&want));
    }
    saver.drop_schema().await.expect("drop");
}

/// Timings of a vector search over `STATEGRAPH_STORE_BENCH_N` items (default 10,000) of 384
/// dimensions: the fallback's mirror, the same search in a batch that wrote vectors (ranked
/// over vectors read from the table), and pgvector when the server has it. Run by hand:
/// `cargo test -p stategraph-store --all-features --release --test postgres -- --ignored
/// --nocapture vector_search_timings`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn vector_search_timings() {
    let Some(saver) = saver("vec_timings").await else {
        return;
    };
    let n: usize = std::env::var("STATEGRAPH_STORE_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let config = StoreConfig::default()
        .index(IndexConfig::new(Arc::new(HashEmbedder::new(384))).fields(["text"]));
    let fallback = vector_store(&saver, config.clone(), VectorBackend::Fallback)
        .await
        .expect("open");
    let started = std::time::Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        let ops = chunk
            .iter()
            .map(|i| {
                Op::Put(PutOp::new(
                    ns(&["docs"]),
                    format!("k{i:06}"),
                    words_item(*i),
                ))
            })
            .collect();
        fallback.batch(ops).await.expect("puts");
    }
    eprintln!("put {n} items: {:?}", started.elapsed());
    let search = SearchOp::new(Namespace::root()).query("green tea by the river");
    let time = |label: &'static str| {
        move |d: std::time::Duration| eprintln!("{label}: {:.1} ms", d.as_secs_f64() * 1e3)
    };
    let other = vector_store(&saver, config.clone(), VectorBackend::Fallback)
        .await
        .expect("open");
    let t = std::time::Instant::now();
    other.search(search.clone()).await.expect("search");
    time("fallback, first search (loads the mirror)")(t.elapsed());
    for _ in 0..3 {
        let t = std::time::Instant::now();
        other.search(search.clone()).await.expect("search");
        time("fallback, mirror loaded")(t.elapsed());
    }
    let put = PutOp::new(ns(&["docs"]), "k000000", words_item(0));
    let t = std::time::Instant::now();
    other
        .batch(vec![Op::Put(put), Op::Search(search.clone())])
        .await
        .expect("batch");
    time("fallback, put + search in one batch (vectors read from the table)")(t.elapsed());
    match vector_store(&saver, config, VectorBackend::PgVector).await {
        Ok(pgvector) => {
            for _ in 0..3 {
                let t = std::time::Instant::now();
                pgvector.search(search.clone()).await.expect("search");
                time("pgvector, exact scan")(t.elapsed());
            }
        }
        Err(e) => eprintln!("pgvector: skipped: {e}"),
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_ttl_too_long_to_count_lasts_and_refreshes_without_failing() {
    let Some(saver) = saver("ttl_huge").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let at = ns(&["users", "a"]);
    let huge = Ttl::After(Duration::from_secs(u64::MAX));
    let put = PutOp::new(at.clone(), "k", obj(json!({"text": "tea"}))).ttl(huge);
    pg.batch(vec![Op::Put(put)]).await.expect("put");
    clock.advance(Duration::from_secs(1));
    assert!(pg.get(&at, "k").await.expect("get").is_some());
    let found = pg
        .search(SearchOp::new(at.clone()).query("tea"))
        .await
        .expect("search");
    assert_eq!(keys(&found), ["k"]);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_fallback_mirror_sees_the_writes_of_a_pgvector_store() {
    let Some(saver) = saver("vec_mixed").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let pgvector = match vector_store(&saver, indexed(&clock), VectorBackend::PgVector).await {
        Ok(store) => store,
        Err(StoreError::Invalid {
            what: "vector backend",
            why,
        }) => {
            eprintln!("skipped: {why}");
            saver.drop_schema().await.expect("drop");
            return;
        }
        Err(e) => panic!("opening with pgvector: {e}"),
    };
    let fallback = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    let at = ns(&["docs"]);
    pgvector
        .put(&at, "boat", obj(json!({"text": "a boat"})))
        .await
        .expect("put");
    let query = SearchOp::new(at.clone()).query("green tea");
    assert_eq!(
        keys(&fallback.search(query.clone()).await.expect("search")),
        ["boat"]
    );
    pgvector
        .put(&at, "tea", obj(json!({"text": "green tea"})))
        .await
        .expect("put");
    let found = fallback.search(query).await.expect("search");
    assert_eq!(keys(&found), ["tea", "boat"]);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn connect_opens_the_store_in_the_options_schema() {
    let Some(saver) = saver("connect").await else {
        return;
    };
    let url = std::env::var("STATEGRAPH_PG_URL").expect("url");
    let options = PostgresOptions {
        schema: saver.schema().to_owned(),
        ..PostgresOptions::default()
    };
    let store = stategraph_store::PostgresStore::connect(&url, options, StoreConfig::default())
        .await
        .expect("connect");
    assert_eq!(store.saver().schema(), saver.schema());
    assert_eq!(store.vector_backend(), None, "no index, no vector backend");
    let at = ns(&["users", "a"]);
    store
        .put(&at, "k", obj(json!({"v": 1})))
        .await
        .expect("put");
    let seen = stategraph_store::PostgresStore::from_saver(&saver, StoreConfig::default())
        .await
        .expect("open");
    assert!(seen.get(&at, "k").await.expect("get").is_some());
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn opening_a_schema_in_use_waits_for_no_writer() {
    let Some(saver) = saver("open_busy").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    stategraph_store::PostgresStore::from_saver(&saver, indexed(&clock))
        .await
        .expect("open");
    // A writer in the middle of its transaction holds what every put holds.
    let mut writer = saver.connection().await.expect("connection");
    let tx = writer.transaction().await.expect("begin");
    tx.batch_execute(&format!(
        "LOCK TABLE \"{0}\".sg_store_items, \"{0}\".sg_store_vectors IN ROW EXCLUSIVE MODE",
        saver.schema()
    ))
    .await
    .expect("lock");
    let opened = tokio::time::timeout(
        Duration::from_secs(3),
        stategraph_store::PostgresStore::from_saver(&saver, indexed(&clock)),
    )
    .await;
    assert!(matches!(opened, Ok(Ok(_))), "{opened:?}");
    tx.rollback().await.expect("rollback");
    drop(writer);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_writing_the_same_items_in_opposite_orders_all_land() {
    let Some(saver) = saver("crossed").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    // With an index (batches also take the generation's lock) and without.
    for config in [indexed(&clock), clocked(&clock)] {
        crossed_batches(&saver, config).await;
    }
    saver.drop_schema().await.expect("drop");
}

async fn crossed_batches(saver: &PostgresSaver, config: StoreConfig) {
    let store = Arc::new(
        stategraph_store::PostgresStore::from_saver(saver, config)
            .await
            .expect("open"),
    );
    let at = ns(&["docs"]);
    let batch = |first: &str, second: &str, round: usize| {
        vec![
            Op::Put(PutOp::new(
                at.clone(),
                first,
                obj(json!({"text": format!("tea {round}")})),
            )),
            Op::Put(PutOp::new(
                at.clone(),
                second,
                obj(json!({"text": format!("boat {round}")})),
            )),
        ]
    };
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let store = store.clone();
            let ops: Vec<Vec<Op>> = (0..15)
                .map(|round| match task % 2 {
                    0 => batch("x", "y", round),
                    _ => batch("y", "x", round),
                })
                .collect();
            tokio::spawn(async move {
                for ops in ops {
                    store.batch(ops).await?;
                }
                Ok::<(), StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        let landed = task.await.expect("task");
        assert!(landed.is_ok(), "{landed:?}");
    }
}
