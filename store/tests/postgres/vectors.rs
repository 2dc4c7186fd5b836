//! Vector search: the fallback against the reference and across processes, pgvector.

use std::sync::Arc;

use serde_json::json;
use stategraph_store::{
    Filter, HashEmbedder, IndexConfig, ManualClock, MemoryStore, Namespace, Op, PutOp, SearchOp,
    Store, StoreConfig, StoreError, Timestamp, VectorBackend,
};

use crate::support::*;

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
    // Another process: a store of its own, with its own mirror, on the same tables.
    let (here, there) = two_mirrors(&saver, &clock).await;
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
/// dimensions: the fallback's mirror (loaded, and catching up after another handle's put),
/// the same search in a batch that wrote vectors (ranked over vectors read from the table),
/// and pgvector when the server has it. Run by hand:
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
    for i in 0..3 {
        let key = format!("k{i:06}");
        fallback
            .put(&ns(&["docs"]), &key, words_item(i + 1))
            .await
            .expect("put");
        let t = std::time::Instant::now();
        other.search(search.clone()).await.expect("search");
        time("fallback, search after another handle's put (catches up from the log)")(t.elapsed());
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
async fn a_fallback_mirror_sees_the_writes_of_a_store_without_an_index() {
    let Some(saver) = saver("vec_plain").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let here = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    // Another process on the same tables with no index (a server's store): its writes
    // leave the items without vectors.
    let plain = vector_store(&saver, clocked(&clock), VectorBackend::Auto)
        .await
        .expect("open");
    let at = ns(&["docs"]);
    for (key, text) in [
        ("tea", "green tea"),
        ("swept", "green tea too"),
        ("boat", "a boat"),
    ] {
        let put = PutOp::new(at.clone(), key, obj(json!({"text": text})));
        let put = match key {
            "swept" => put.ttl(stategraph_store::Ttl::After(
                std::time::Duration::from_secs(1),
            )),
            _ => put,
        };
        here.batch(vec![Op::Put(put)]).await.expect("put");
    }
    let query = SearchOp::new(at.clone()).query("green tea");
    let found = keys(&here.search(query.clone()).await.expect("search"));
    assert_eq!(found, ["tea", "swept", "boat"]);
    // Overwritten, deleted then put again, and swept then put again by the plain store:
    // none of the three has a vector any more.
    plain
        .put(&at, "tea", obj(json!({"text": "green tea"})))
        .await
        .expect("put");
    plain.delete(&at, "boat").await.expect("delete");
    plain
        .put(&at, "boat", obj(json!({"text": "a boat"})))
        .await
        .expect("put");
    clock.advance(std::time::Duration::from_secs(2));
    assert_eq!(plain.sweep().await.expect("sweep"), 1);
    plain
        .put(&at, "swept", obj(json!({"text": "green tea too"})))
        .await
        .expect("put");
    let found = here.search(query).await.expect("search");
    assert_eq!(keys(&found), Vec::<String>::new(), "{found:?}");
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn every_sweep_prunes_the_vector_log_even_when_nothing_expired() {
    let Some(saver) = saver("vec_prune").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    let store = vector_store(&saver, indexed(&clock), VectorBackend::Fallback)
        .await
        .expect("open");
    let at = ns(&["docs"]);
    store
        .put(&at, "tea", obj(json!({"text": "green tea"})))
        .await
        .expect("put");
    let client = saver.connection().await.expect("connection");
    let log = format!("\"{}\".sg_store_vector_log", saver.schema());
    let count = format!("SELECT count(*) FROM {log}");
    let logged: i64 = client.query_one(&count, &[]).await.expect("count").get(0);
    assert_eq!(logged, 1);
    // Twenty thousand generations later (other writers), with nothing to expire.
    client
        .batch_execute(&format!(
            "UPDATE \"{}\".sg_store_meta SET value = '20000' WHERE key = 'vector_generation'",
            saver.schema()
        ))
        .await
        .expect("raise the generation");
    assert_eq!(store.sweep().await.expect("sweep"), 0);
    let logged: i64 = client.query_one(&count, &[]).await.expect("count").get(0);
    assert_eq!(
        logged, 0,
        "the log keeps generations a mirror can no longer use"
    );
    drop(client);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_batch_writing_an_item_twice_reaches_every_mirror_as_its_last_write() {
    let Some(saver) = saver("vec_twice").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    // Another process, whose mirror hears of `here`'s batches through the vector log.
    let (here, there) = two_mirrors(&saver, &clock).await;
    // A store without an index, which writes no vectors.
    let plain = vector_store(&saver, clocked(&clock), VectorBackend::Auto)
        .await
        .expect("open");
    let at = ns(&["docs"]);
    let put =
        |key: &str, text: &str| Op::Put(PutOp::new(at.clone(), key, obj(json!({ "text": text }))));
    let delete = |key: &str| Op::Put(PutOp::delete(at.clone(), key));
    let query = SearchOp::new(at.clone()).query("green tea");
    let found = |store: &stategraph_store::PostgresStore| {
        let (store, query) = (store.clone(), query.clone());
        async move {
            let mut found = keys(&store.search(query).await.expect("search"));
            found.sort();
            found
        }
    };
    here.batch(vec![put("tea", "green tea"), put("boat", "green boat")])
        .await
        .expect("batch");
    // Both mirrors loaded: `here` applies its own batches, `there` reads the log.
    assert_eq!(found(&here).await, ["boat", "tea"]);
    assert_eq!(found(&there).await, ["boat", "tea"]);
    // An item new to the tables, put then deleted; an item deleted then put again.
    here.batch(vec![
        put("cup", "green tea cup"),
        delete("cup"),
        delete("boat"),
        put("boat", "green tea boat"),
    ])
    .await
    .expect("batch");
    assert_eq!(found(&here).await, ["boat", "tea"]);
    assert_eq!(found(&there).await, ["boat", "tea"]);
    // Put again without vectors: a mirror that kept the deleted item's would find it.
    plain
        .put(&at, "cup", obj(json!({"text": "green tea cup"})))
        .await
        .expect("put");
    assert_eq!(found(&here).await, ["boat", "tea"]);
    assert_eq!(found(&there).await, ["boat", "tea"]);
    // Without an index: a put over an item with vectors drops them, a second put of it
    // in the same batch finds none left.
    plain
        .batch(vec![put("tea", "green tea"), put("tea", "green tea")])
        .await
        .expect("batch");
    assert_eq!(found(&here).await, ["boat"]);
    assert_eq!(found(&there).await, ["boat"]);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_put_that_waits_on_a_writer_giving_the_item_vectors_drops_them() {
    let Some((saver, _, plain)) = plain_store("alone_race").await else {
        return;
    };
    let at = ns(&["docs"]);
    plain
        .put(&at, "tea", obj(json!({"text": "green tea"})))
        .await
        .expect("put");
    // Another process's indexed batch, held open: under the item's advisory lock, it
    // writes the item and gives it a vector.
    let schema = saver.schema().to_owned();
    let mut writer = saver.connection().await.expect("connection");
    let tx = writer.transaction().await.expect("begin");
    let lock = item_lock(&schema, "docs", "tea");
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({lock}); \
         UPDATE \"{schema}\".sg_store_items SET updated_at = 2000 WHERE key = 'tea'; \
         INSERT INTO \"{schema}\".sg_store_vectors VALUES ('docs', 'tea', 0, '{{1,0}}')"
    ))
    .await
    .expect("write");
    // The single put starts and waits for the writer.
    let put = tokio::spawn({
        let (plain, at) = (plain.clone(), at.clone());
        async move {
            plain
                .put(&at, "tea", obj(json!({"text": "black tea"})))
                .await
        }
    });
    let watcher = saver.connection().await.expect("connection");
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
         AND query LIKE '%\"{schema}\".sg_store_put%'"
    );
    for _ in 0..200 {
        let row = watcher.query_one(&waiting, &[]).await.expect("watch");
        if row.get::<_, i64>(0) > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tx.commit().await.expect("commit");
    put.await.expect("join").expect("put");
    let item = plain.get(&at, "tea").await.expect("get").expect("found");
    assert_eq!(item.value, obj(json!({"text": "black tea"})));
    let left = watcher
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".sg_store_vectors"),
            &[],
        )
        .await
        .expect("count");
    assert_eq!(
        left.get::<_, i64>(0),
        0,
        "the writer's vector outlived the put"
    );
    drop((watcher, writer));
    saver.drop_schema().await.expect("drop");
}

/// The advisory lock key a batch takes for an item: FNV-1a of the schema, namespace and key,
/// NUL-separated, as the store computes it.
fn item_lock(schema: &str, ns: &str, key: &str) -> i64 {
    let h = [schema, ns, key]
        .join("\0")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    i64::from_ne_bytes(h.to_ne_bytes())
}
