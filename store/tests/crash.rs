//! A process SIGKILLed while it writes large batches leaves each batch wholly in the file or
//! wholly out of it: the items, their full-text rows and their vector rows.
//!
//! The test binary runs itself as the writer (`crash_child`, a no-op unless
//! `STATEGRAPH_STORE_CRASH_CHILD` names the file), kills it at seeded random instants, and
//! checks the file after every kill. `STATEGRAPH_STORE_CRASH_KILLS=N` sets the kills (default
//! 6), `STATEGRAPH_STORE_CRASH_SEED=S` the seed.
#![cfg(unix)]
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_store::{
    HashEmbedder, IndexConfig, Namespace, Op, PutOp, SqliteStore, Store, StoreConfig,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const CHILD_ENV: &str = "STATEGRAPH_STORE_CRASH_CHILD";
/// Items each batch puts; it also deletes half of the previous batch's.
const BATCH: i64 = 400;

fn config() -> StoreConfig {
    StoreConfig::default().index(IndexConfig::new(Arc::new(HashEmbedder::new(16))).fields(["text"]))
}

fn batch_ns(n: i64) -> Namespace {
    Namespace::new(["crash".to_owned(), format!("b{n:06}")]).unwrap()
}

fn meta_ns() -> Namespace {
    Namespace::new(["meta"]).unwrap()
}

/// Batch `n`: its items, half of batch `n - 1` deleted, and the counter moved to `n + 1`.
fn batch(n: i64) -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..BATCH {
        let value = json!({"text": format!("payload batch {n} item {i}"), "n": n});
        let value = value.as_object().cloned().unwrap_or_default();
        ops.push(Op::Put(PutOp::new(batch_ns(n), format!("k{i}"), value)));
    }
    if n > 0 {
        for i in 0..BATCH / 2 {
            ops.push(Op::Put(PutOp::delete(batch_ns(n - 1), format!("k{i}"))));
        }
    }
    let next = json!({"next": n + 1})
        .as_object()
        .cloned()
        .unwrap_or_default();
    ops.push(Op::Put(PutOp::new(meta_ns(), "counter", next)));
    ops
}

async fn next_batch(store: &SqliteStore) -> Result<i64, Box<dyn std::error::Error + Send + Sync>> {
    Ok(store
        .get(&meta_ns(), "counter")
        .await?
        .and_then(|item| item.value.get("next").and_then(|n| n.as_i64()))
        .unwrap_or(0))
}

/// The writer: batches until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() -> TestResult {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return Ok(());
    };
    let store = SqliteStore::open(&path, config())?;
    let mut n = next_batch(&store).await?;
    loop {
        store.batch(batch(n)).await?;
        n += 1;
    }
}

fn count(conn: &rusqlite::Connection, sql: &str, ns: Option<&str>) -> i64 {
    match ns {
        Some(ns) => conn.query_row(sql, [ns], |r| r.get(0)),
        None => conn.query_row(sql, [], |r| r.get(0)),
    }
    .unwrap()
}

/// Checks every batch after a kill; the number of committed batches.
async fn verify(path: &Path) -> Result<i64, Box<dyn std::error::Error + Send + Sync>> {
    let store = SqliteStore::open(path, config())?;
    let next = next_batch(&store).await?;
    drop(store);
    let conn = rusqlite::Connection::open(path)?;
    let per_batch = "SELECT count(*) FROM sg_store_items WHERE ns = ?1";
    for n in 0..=next {
        let want = if n + 1 < next {
            BATCH - BATCH / 2
        } else if n + 1 == next {
            BATCH
        } else {
            0
        };
        let got = count(&conn, per_batch, Some(&batch_ns(n).to_string()));
        assert_eq!(
            got, want,
            "batch {n} of {next} committed: {got} items, not {want}"
        );
    }
    let items = count(&conn, "SELECT count(*) FROM sg_store_items", None);
    let vectors = count(&conn, "SELECT count(*) FROM sg_store_vectors", None);
    let texts = count(
        &conn,
        "SELECT count(*) FROM sg_store_fts WHERE sg_store_fts MATCH 'payload'",
        None,
    );
    assert_eq!(
        vectors,
        items - 1,
        "one vector per batch item (the counter has no text)"
    );
    assert_eq!(texts, items - 1, "one full-text row per batch item");
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    assert_eq!(check, "ok");
    Ok(next)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cut_by_sigkill_is_wholly_present_or_absent() -> TestResult {
    let kills = env_u64("STATEGRAPH_STORE_CRASH_KILLS", 6);
    let mut seed = env_u64("STATEGRAPH_STORE_CRASH_SEED", 0x5eed_cafe) | 1;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("crash.db");
    let exe = std::env::current_exe()?;
    let mut committed = Vec::new();
    for _ in 0..kills {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(150 + seed % 600);
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        tokio::time::sleep(delay).await;
        let finished = child.try_wait()?;
        assert!(
            finished.is_none(),
            "the writer stopped by itself: {finished:?}"
        );
        child.kill()?; // SIGKILL
        child.wait()?;
        committed.push(verify(&path).await?);
    }
    eprintln!("batches committed after each kill: {committed:?}");
    assert!(
        committed.last().copied().unwrap_or(0) > 0,
        "no batch was committed before the kills: {committed:?}"
    );
    Ok(())
}
