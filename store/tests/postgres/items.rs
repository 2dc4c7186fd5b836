//! Items: writes, filters against the reference, namespaces, full-text search, TTL.

use std::time::Duration;

use serde_json::json;
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use stategraph_store::{
    Filter, ListNamespacesOp, ManualClock, MatchCondition, MemoryStore, Namespace, Op,
    PostgresStore, PutOp, SearchOp, Store, StoreError, Timestamp, Ttl, TtlConfig,
};

use crate::support::*;

#[tokio::test]
async fn filters_select_what_the_reference_selects() {
    let Some((saver, clock, pg)) = plain_store("filters").await else {
        return;
    };
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
    let Some((saver, _, pg)) = plain_store("prefix").await else {
        return;
    };
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
    let Some((saver, clock, pg)) = plain_store("recent").await else {
        return;
    };
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
    let Some((saver, clock, pg)) = plain_store("listing").await else {
        return;
    };
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
    let Some((saver, clock, pg)) = plain_store("overwrite").await else {
        return;
    };
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
    let Some((saver, _, pg)) = plain_store("atomic").await else {
        return;
    };
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
    let Some((saver, _, pg)) = plain_store("fulltext").await else {
        return;
    };
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
async fn a_ttl_too_long_to_count_lasts_and_refreshes_without_failing() {
    let Some((saver, clock, pg)) = plain_store("ttl_huge").await else {
        return;
    };
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
async fn a_failed_batch_leaves_its_connection_outside_any_transaction() {
    let Some(saver) = saver("atomic_conn").await else {
        return;
    };
    let url = std::env::var("STATEGRAPH_PG_URL").expect("url");
    // One connection, so the batches after the failure run on the one that failed.
    let options = PostgresOptions {
        schema: saver.schema().to_owned(),
        pool_size: 1,
        ..PostgresOptions::default()
    };
    let single = PostgresSaver::connect_with(&url, options)
        .await
        .expect("connect");
    let clock = ManualClock::at(Timestamp(1_000));
    let pg = PostgresStore::from_saver(&single, clocked(&clock))
        .await
        .expect("open");
    let other = PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let at = ns(&["users", "a"]);
    for _ in 0..2 {
        let failed = pg
            .batch(vec![
                Op::Put(PutOp::new(at.clone(), "first", obj(json!({"v": 1})))),
                Op::Put(PutOp::delete(at.clone(), "none")),
                // PostgreSQL's jsonb refuses the NUL character: this put fails.
                Op::Put(PutOp::new(at.clone(), "bad", obj(json!({"v": "a\u{0}b"})))),
                Op::Put(PutOp::new(at.clone(), "last", obj(json!({"v": 3})))),
            ])
            .await;
        assert!(matches!(failed, Err(StoreError::Database(_))), "{failed:?}");
    }
    pg.put(&at, "after", obj(json!({"v": 2})))
        .await
        .expect("put");
    // Committed: another connection reads it, and none of the failed batches' puts.
    let after = other.get(&at, "after").await.expect("get");
    assert_eq!(after.map(|i| i.value), Some(obj(json!({"v": 2}))));
    for key in ["first", "last"] {
        assert!(other.get(&at, key).await.expect("get").is_none(), "{key}");
        assert!(pg.get(&at, key).await.expect("get").is_none(), "{key}");
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn prepared_gets_and_writes_read_refresh_and_fail_as_unnamed_ones() {
    let Some(saver) = saver("prepared_get").await else {
        return;
    };
    let url = std::env::var("STATEGRAPH_PG_URL").expect("url");
    let options = PostgresOptions {
        schema: saver.schema().to_owned(),
        pool_size: 1,
        prepared_statements: true,
        ..PostgresOptions::default()
    };
    let prepared = PostgresSaver::connect_with(&url, options)
        .await
        .expect("connect");
    let clock = ManualClock::at(Timestamp(1_000));
    let config = clocked(&clock).ttl(TtlConfig {
        refresh_on_read: true,
        ..TtlConfig::default()
    });
    let pg = PostgresStore::from_saver(&prepared, config)
        .await
        .expect("open");
    let at = ns(&["users", "a"]);
    pg.put(&at, "plain", obj(json!({"v": 1})))
        .await
        .expect("put");
    let lasting = PutOp::new(at.clone(), "lasting", obj(json!({"v": 2})));
    let lasting = lasting.ttl(Ttl::After(Duration::from_secs(10)));
    pg.batch(vec![Op::Put(lasting)]).await.expect("put");
    // Each statement prepared once, then run from the connection's cache.
    for _ in 0..3 {
        let plain = pg.get(&at, "plain").await.expect("get");
        assert_eq!(plain.map(|i| i.value), Some(obj(json!({"v": 1}))));
        assert!(pg.get(&at, "missing").await.expect("get").is_none());
    }
    // A get restarts the TTL: 10 s from each read.
    for _ in 0..3 {
        clock.advance(Duration::from_secs(8));
        let lasting = pg.get(&at, "lasting").await.expect("get");
        assert_eq!(lasting.map(|i| i.value), Some(obj(json!({"v": 2}))));
    }
    clock.advance(Duration::from_secs(11));
    assert!(pg.get(&at, "lasting").await.expect("get").is_none());
    // A failed batch of prepared writes applies nothing and leaves the connection usable.
    for _ in 0..2 {
        let failed = pg
            .batch(vec![
                Op::Put(PutOp::new(at.clone(), "first", obj(json!({"v": 1})))),
                Op::Put(PutOp::new(at.clone(), "bad", obj(json!({"v": "a\u{0}b"})))),
            ])
            .await;
        assert!(matches!(failed, Err(StoreError::Database(_))), "{failed:?}");
    }
    assert!(pg.get(&at, "first").await.expect("get").is_none());
    pg.put(&at, "after", obj(json!({"v": 3})))
        .await
        .expect("put");
    let after = pg.get(&at, "after").await.expect("get");
    assert_eq!(after.map(|i| i.value), Some(obj(json!({"v": 3}))));
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn single_puts_without_an_index_reach_another_store_whole() {
    let Some(saver) = saver("alone_put").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let ttl = TtlConfig {
        default_ttl: Some(Duration::from_secs(10)),
        refresh_on_read: false,
    };
    let writer = PostgresStore::from_saver(&saver, clocked(&clock).ttl(ttl))
        .await
        .expect("open");
    let reader = PostgresStore::from_saver(&saver, clocked(&clock).ttl(ttl))
        .await
        .expect("open");
    let at = ns(&["users", "a"]);
    writer
        .put(&at, "k", obj(json!({"text": "green tea"})))
        .await
        .expect("put");
    clock.advance(Duration::from_secs(5));
    writer
        .put(&at, "k", obj(json!({"text": "black coffee"})))
        .await
        .expect("put");
    let item = reader.get(&at, "k").await.expect("get").expect("found");
    assert_eq!(item.value, obj(json!({"text": "black coffee"})));
    assert_eq!(
        (item.created_at, item.updated_at),
        (Timestamp(1_000), Timestamp(6_000)),
        "an overwrite keeps created_at"
    );
    let text = |words: &str| SearchOp::new(at.clone()).query(words);
    assert_eq!(
        keys(&reader.search(text("coffee")).await.expect("search")),
        ["k"]
    );
    assert!(reader.search(text("tea")).await.expect("search").is_empty());
    // The TTL restarted at the overwrite: live at 15 s, gone after 16 s; then put again
    // over the expired item, which starts anew.
    clock.advance(Duration::from_secs(9));
    assert!(reader.get(&at, "k").await.expect("get").is_some());
    clock.advance(Duration::from_secs(2));
    assert!(reader.get(&at, "k").await.expect("get").is_none());
    writer
        .put(&at, "k", obj(json!({"text": "water"})))
        .await
        .expect("put");
    let item = reader.get(&at, "k").await.expect("get").expect("found");
    assert_eq!(item.created_at, Timestamp(17_000));
    saver.drop_schema().await.expect("drop");
}
