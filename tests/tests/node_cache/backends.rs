//! One contract for every cache backend: in memory, a table of the SQLite file, a table of
//! the PostgreSQL schema (skipped without `STATEGRAPH_PG_URL`). Each clause runs on each.

use std::sync::Arc;
use std::time::Duration;

use stategraph::cache::{CacheEntry, CacheKey, CachePolicy, MemoryCache, NodeCache};
use stategraph::checkpoints::SqliteSaver;
use stategraph::prelude::*;
use stategraph::store::{ManualClock, Timestamp};

use super::pg_support;
use super::{double_graph, Counter, TestResult, S};

fn key(ns: &str, k: &str) -> CacheKey {
    CacheKey {
        ns: ns.to_owned(),
        key: k.to_owned(),
    }
}

fn entry(ns: &str, k: &str, value: serde_json::Value, expires: Option<i64>) -> CacheEntry {
    CacheEntry {
        key: key(ns, k),
        value,
        expires_at_ms: expires,
    }
}

/// Entries are read back by key, replaced, expire at their time, and are dropped by
/// namespace.
async fn stores_expires_and_clears(cache: &dyn NodeCache) -> TestResult {
    let v = |n: i64| serde_json::json!({"updates": [{"log": [n]}], "goto": []});
    cache
        .put_cached(vec![
            entry("g/a", "1", v(1), None),
            entry("g/a", "2", v(2), Some(5_000)),
            entry("g/b", "1", v(3), None),
        ])
        .await?;
    let keys = [
        key("g/a", "1"),
        key("g/a", "2"),
        key("g/b", "1"),
        key("g/c", "1"),
    ];
    assert_eq!(
        cache.get_cached(&keys, 4_999).await?,
        [Some(v(1)), Some(v(2)), Some(v(3)), None]
    );
    assert_eq!(
        cache.get_cached(&keys[1..2], 5_000).await?,
        [None],
        "expired"
    );
    cache
        .put_cached(vec![entry("g/a", "1", v(9), None)])
        .await?;
    assert_eq!(
        cache.get_cached(&keys[..1], 0).await?,
        [Some(v(9))],
        "replaced"
    );
    // The expired entry may already be gone (the memory cache drops it when read).
    let dropped = cache.clear_cached(&["g/a".to_owned()]).await?;
    assert!((1..=2).contains(&dropped), "{dropped}");
    assert_eq!(
        cache.get_cached(&keys, 0).await?,
        [None, None, Some(v(3)), None]
    );
    Ok(())
}

/// A graph on the cache: the second run is a hit; a ttl expires by the clock.
async fn a_graph_hits_and_expires(cache: Arc<dyn NodeCache>) -> TestResult {
    let runs = Counter::default();
    let clock = ManualClock::at(Timestamp(1_000));
    let policy = CachePolicy::new().ttl(Duration::from_secs(10));
    let graph = double_graph(&runs, policy).with_cache_clock(cache, Arc::new(clock.clone()));
    for _ in 0..2 {
        let out = graph.invoke(S::update().x(4), &RunConfig::new()).await?;
        assert_eq!(out.state.log, [8]);
    }
    assert_eq!(runs.get(), 1);
    clock.advance(Duration::from_secs(10));
    graph.invoke(S::update().x(4), &RunConfig::new()).await?;
    assert_eq!(runs.get(), 2, "expired after its ttl");
    assert_eq!(graph.clear_cache(&["double"]).await?, 1);
    Ok(())
}

#[tokio::test]
async fn memory_cache_keeps_the_contract() -> TestResult {
    stores_expires_and_clears(&MemoryCache::new()).await?;
    a_graph_hits_and_expires(Arc::new(MemoryCache::new())).await
}

#[tokio::test]
async fn sqlite_cache_keeps_the_contract() -> TestResult {
    let dir = tempfile::tempdir()?;
    let saver = SqliteSaver::open(dir.path().join("c.db"))?;
    stores_expires_and_clears(&saver).await?;
    let saver = SqliteSaver::open(dir.path().join("g.db"))?;
    a_graph_hits_and_expires(Arc::new(saver)).await
}

#[tokio::test]
async fn postgres_cache_keeps_the_contract() -> TestResult {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("node_cache").await else {
        return Ok(());
    };
    stores_expires_and_clears(&saver).await?;
    saver.clear_cached(&["g/b".to_owned()]).await?;
    a_graph_hits_and_expires(Arc::new(saver)).await
}

#[tokio::test]
async fn the_sqlite_cache_survives_a_reopen_of_the_file() -> TestResult {
    let lg = stategraph_tests::langgraph::recorded("node_cache_sqlite")?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("graph.db");
    let runs = Counter::default();
    {
        let saver = Arc::new(SqliteSaver::open(&path)?);
        let graph = double_graph(&runs, CachePolicy::new())
            .with_checkpointer(saver.clone())
            .with_cache(saver.clone());
        graph
            .invoke(S::update().x(4), &RunConfig::new().thread("t1"))
            .await?;
        saver.close()?;
    }
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let graph = double_graph(&runs, CachePolicy::new())
        .with_checkpointer(saver.clone())
        .with_cache(saver);
    let out = graph
        .invoke(S::update().x(4), &RunConfig::new().thread("t2"))
        .await?;
    assert_eq!(out.state.log, [8]);
    assert_eq!(
        runs.get() as i64,
        lg["calls"].as_i64().ok_or("no calls")?,
        "as LangGraph's SqliteCache"
    );
    // The table lives in the checkpoint file, next to the checkpoints.
    let conn = rusqlite::Connection::open(&path)?;
    let rows: i64 = conn.query_row("SELECT count(*) FROM sg_node_cache", [], |r| r.get(0))?;
    assert_eq!(rows, 1);
    Ok(())
}

#[tokio::test]
async fn a_file_whose_graphs_use_no_cache_has_no_cache_table_and_its_lookups_miss() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("graph.db");
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let graph =
        double_graph(&Counter::default(), CachePolicy::new()).with_checkpointer(saver.clone());
    graph
        .invoke(S::update().x(4), &RunConfig::new().thread("t"))
        .await?;
    let has_table = |path: &std::path::Path| -> Result<bool, rusqlite::Error> {
        rusqlite::Connection::open(path)?.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'sg_node_cache'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n == 1),
        )
    };
    assert!(!has_table(&path)?, "no page for a cache nobody used");
    let key = CacheKey {
        ns: "graph/double".into(),
        key: "k".into(),
    };
    assert_eq!(
        saver.get_cached(std::slice::from_ref(&key), 0).await?,
        [None]
    );
    assert_eq!(saver.clear_cached(&["graph/double".to_owned()]).await?, 0);
    let entry = CacheEntry {
        key: key.clone(),
        value: serde_json::json!(1),
        expires_at_ms: None,
    };
    saver.put_cached(vec![entry]).await?;
    assert!(has_table(&path)?, "the first store makes the table");
    assert_eq!(
        saver.get_cached(&[key], 0).await?,
        [Some(serde_json::json!(1))]
    );
    Ok(())
}
