//! What the SQLite backend adds to the contract: its file, shared with a checkpoint saver and
//! other handles, and the version of its tables.

#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::sync::Arc;

use serde_json::{json, Map, Value};
use stategraph_checkpoints::{CheckpointError, SqliteSaver};
use stategraph_store::{
    HashEmbedder, IndexConfig, Namespace, SearchOp, SqliteStore, Store, StoreConfig, StoreError,
    SCHEMA_VERSION,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn indexed() -> StoreConfig {
    StoreConfig::default().index(IndexConfig::new(Arc::new(HashEmbedder::new(32))).fields(["text"]))
}

#[tokio::test]
async fn a_file_with_a_newer_store_schema_is_refused_untouched() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    drop(SqliteStore::open(&path, StoreConfig::default())?);
    let conn = rusqlite::Connection::open(&path)?;
    conn.execute(
        "UPDATE sg_store_meta SET value = ?1 WHERE key = 'schema_version'",
        [(SCHEMA_VERSION + 1).to_string()],
    )?;
    drop(conn);
    let err = SqliteStore::open(&path, StoreConfig::default()).map(drop);
    match err {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    let conn = rusqlite::Connection::open(&path)?;
    let version: String = conn.query_row(
        "SELECT value FROM sg_store_meta WHERE key = 'schema_version'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(version, (SCHEMA_VERSION + 1).to_string());
    Ok(())
}

#[tokio::test]
async fn the_store_lives_in_a_checkpoint_file_beside_an_open_saver() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    let saver = SqliteSaver::open(&path)?;
    let store = SqliteStore::open(&path, StoreConfig::default())?;
    let ns = Namespace::new(["users", "u1"])?;
    store.put(&ns, "k", obj(json!({"text": "tea"}))).await?;
    let thread = stategraph_checkpoints::ThreadId::new("t1")?;
    let root = stategraph_checkpoints::Namespace::root();
    assert!(
        stategraph_checkpoints::Saver::get(&saver, &thread, &root, None)
            .await?
            .is_none()
    );
    drop(saver);
    drop(store);
    let _saver = SqliteSaver::open(&path)?;
    let store = SqliteStore::open(&path, StoreConfig::default())?;
    assert!(store.get(&ns, "k").await?.is_some());
    Ok(())
}

#[tokio::test]
async fn a_saver_opens_a_file_the_store_made_first() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    let store = SqliteStore::open(&path, StoreConfig::default())?;
    store
        .put(&Namespace::new(["a"])?, "k", obj(json!({})))
        .await?;
    let saver = SqliteSaver::open(&path);
    assert!(
        !matches!(saver, Err(CheckpointError::ForeignDatabase { .. })),
        "{saver:?}"
    );
    saver?;
    assert!(store.get(&Namespace::new(["a"])?, "k").await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_sees_vectors_another_handle_wrote() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let a = SqliteStore::open(&path, indexed())?;
    let b = SqliteStore::open(&path, indexed())?;
    let ns = Namespace::new(["docs"])?;
    a.put(&ns, "tea", obj(json!({"text": "green tea"}))).await?;
    let search = || SearchOp::new(Namespace::new(["docs"]).unwrap()).query("green tea");
    assert_eq!(b.search(search()).await?.len(), 1, "b loads what a wrote");
    a.put(&ns, "boat", obj(json!({"text": "a boat"}))).await?;
    let found = b.search(search()).await?;
    assert_eq!(found.len(), 2, "b reloads after a's second write");
    assert_eq!(found[0].item.key, "tea");
    a.delete(&ns, "tea").await?;
    let found = b.search(search()).await?;
    assert_eq!(
        found
            .iter()
            .map(|f| f.item.key.as_str())
            .collect::<Vec<_>>(),
        ["boat"]
    );
    b.put(&ns, "tea2", obj(json!({"text": "green tea"})))
        .await?;
    assert_eq!(a.search(search()).await?[0].item.key, "tea2");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_and_vectors_outlive_the_handle() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let ns = Namespace::new(["docs"])?;
    {
        let store = SqliteStore::open(&path, indexed())?;
        store
            .put(&ns, "tea", obj(json!({"text": "green tea"})))
            .await?;
        store
            .put(&ns, "boat", obj(json!({"text": "a boat"})))
            .await?;
    }
    let store = SqliteStore::open(&path, indexed())?;
    let found = store.search(SearchOp::new(ns).query("a boat")).await?;
    assert_eq!(found[0].item.key, "boat");
    assert!((found[0].score.unwrap() - 1.0).abs() < 1e-5);
    Ok(())
}

#[tokio::test]
async fn a_closed_store_says_so() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path().join("s.db"), StoreConfig::default())?;
    store.close();
    let err = store.get(&Namespace::new(["a"])?, "k").await;
    assert!(matches!(err, Err(StoreError::Closed)), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn vectors_of_another_length_in_the_file_are_reported() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let ns = Namespace::new(["docs"])?;
    SqliteStore::open(&path, indexed())?
        .put(&ns, "tea", obj(json!({"text": "green tea"})))
        .await?;
    let other = StoreConfig::default().index(IndexConfig::new(Arc::new(HashEmbedder::new(16))));
    let store = SqliteStore::open(&path, other)?;
    let err = store.search(SearchOp::new(ns).query("tea")).await;
    match err {
        Err(StoreError::Corrupt { why, .. }) => assert!(why.contains("16 dimensions"), "{why}"),
        other => panic!("expected a Corrupt error, got {other:?}"),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_from_two_handles_all_land() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let handles = [
        SqliteStore::open(&path, indexed())?,
        SqliteStore::open(&path, indexed())?,
    ];
    let mut tasks = Vec::new();
    for (h, store) in handles.iter().enumerate() {
        for t in 0..4 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let ns = Namespace::new(["c".to_owned(), format!("h{h}t{t}")])?;
                for i in 0..25 {
                    let value = obj(json!({"text": format!("note {i} of {h} {t}")}));
                    store.put(&ns, &format!("k{i}"), value).await?;
                }
                Ok::<(), StoreError>(())
            }));
        }
    }
    for task in tasks {
        task.await??;
    }
    for store in &handles {
        let op = SearchOp::new(Namespace::new(["c"])?).page(1000, 0);
        assert_eq!(store.search(op.clone()).await?.len(), 200);
        assert_eq!(store.search(op.query("note")).await?.len(), 200);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_go_on_while_another_connection_holds_the_write_lock() -> TestResult {
    use stategraph_store::{Op, PutOp, SqliteStoreOptions, Ttl, TtlConfig};
    use std::time::Duration;

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.db");
    let options = SqliteStoreOptions {
        busy_timeout: Duration::from_millis(200),
        ..SqliteStoreOptions::default()
    };
    let config = StoreConfig::default().ttl(TtlConfig {
        refresh_on_read: true,
        ..TtlConfig::default()
    });
    let store = SqliteStore::open_with(&path, config, options)?;
    let ns = Namespace::new(["users", "u1"])?;
    let timed = PutOp::new(ns.clone(), "timed", obj(json!({"text": "x"})))
        .ttl(Ttl::After(Duration::from_secs(60)));
    store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "plain", obj(json!({"text": "y"})))),
            Op::Put(timed),
        ])
        .await?;

    let writer = rusqlite::Connection::open(&path)?;
    writer.execute_batch("BEGIN IMMEDIATE")?;
    assert!(store.get(&ns, "plain").await?.is_some());
    // Newest first, ties by key: the page holds "plain" only.
    let found = store
        .search(SearchOp::new(Namespace::new(["users"])?).page(1, 0))
        .await?;
    assert_eq!(found[0].item.key, "plain");
    // A read that restarts a TTL writes, so it waits for the lock (here: past the timeout).
    assert!(matches!(
        store.get(&ns, "timed").await,
        Err(StoreError::Database(_))
    ));
    writer.execute_batch("COMMIT")?;
    assert!(store.get(&ns, "timed").await?.is_some());
    Ok(())
}

/// Lone gets answer on the calling task when the handle is free and as a batch when another
/// task's write holds it: either way each task reads the put it committed just before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gets_racing_writes_on_one_handle_read_each_committed_put() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path().join("s.db"), StoreConfig::default())?;
    let mut tasks = Vec::new();
    for t in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let ns = Namespace::new(["race", &format!("t{t}")])?;
            for i in 0..50 {
                let value = json!({"i": i}).as_object().cloned().unwrap_or_default();
                store.put(&ns, &format!("k{i}"), value.clone()).await?;
                let got = store.get(&ns, &format!("k{i}")).await?;
                assert_eq!(got.map(|item| item.value), Some(value), "task {t}, put {i}");
            }
            Ok::<_, StoreError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}
