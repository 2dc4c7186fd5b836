//! Growth and retention (reliability.md R-25), on SQLite, at PR size: a 1,000-step thread where
//! one 100 KB field never changes, a 100-byte one and a counter change every step.
//!
//! - the 100 KB value is stored once (content addressing), each 100-byte value once, the
//!   counter in the records (small values are kept inline), and the file stays small;
//! - pruning to the newest 10 checkpoints collects exactly the values no kept checkpoint uses
//!   (every remaining value row is one a kept checkpoint holds, and every kept checkpoint loads);
//! - the pruned thread resumes and its oldest kept checkpoint forks, both to the reference state;
//! - `VACUUM` returns the freed pages and everything still loads.
//!
//! `STATEGRAPH_GROWTH_STEPS=10000` runs the nightly size.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::collections::BTreeSet;
use std::sync::Arc;

use stategraph::checkpoints::envelope::{seal, CODEC_JSON};
use stategraph::checkpoints::{ListOptions, Retention, Saver, SqliteSaver, ThreadId};
use stategraph::prelude::*;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(State, Clone, Default, Debug)]
struct Doc {
    /// Set once by the input, never changed.
    big: String,
    /// Changed by every step.
    counter: u64,
    /// Changed by every step; too large to be kept in the record.
    label: String,
    #[reduce(append)]
    items: List<u64>,
}

fn graph(steps: u64, saver: Arc<SqliteSaver>) -> Result<CompiledGraph<Doc>, BoxError> {
    let route = move |s: &Doc| if s.counter < steps { "step" } else { END };
    Ok(StateGraph::<Doc>::new()
        .add_node("step", |s: Arc<Doc>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Doc::update()
                    .counter(s.counter + 1)
                    .label(label(s.counter + 1))
                    .items(vec![s.counter]),
            )
        })
        .add_conditional_edges(START, route, ["step", END])
        .add_conditional_edges("step", route, ["step", END])
        .compile()?
        .with_checkpointer(saver))
}

/// The 100-byte value step `n` writes.
fn label(n: u64) -> String {
    format!("{n:0>100}")
}

fn value_hashes(path: &std::path::Path) -> BTreeSet<Vec<u8>> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare("SELECT hash FROM sg_blobs").unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn key(value: &impl serde::Serialize) -> Vec<u8> {
    seal(CODEC_JSON, &serde_json::to_vec(value).unwrap())
        .1
        .to_vec()
}

fn pages(path: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_big_value_is_stored_once_and_pruning_collects_exactly_the_unused_values(
) -> TestResult {
    let steps: u64 = std::env::var("STATEGRAPH_GROWTH_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("growth.db");
    let big = "x".repeat(100 * 1024);
    let cfg = RunConfig::new()
        .thread("t")
        .durability(Durability::Async)
        .recursion_limit(steps as usize + 20);
    {
        let saver = Arc::new(SqliteSaver::open(&path)?);
        let g = graph(steps, saver.clone())?;
        let out = g.invoke(Doc::update().big(big.clone()), &cfg).await?;
        assert_eq!(out.state.counter, steps);
        // The big value is one row, the labels one row each; the counters are in the records.
        let hashes = value_hashes(&path);
        assert!(hashes.contains(&key(&big)));
        assert!(hashes.contains(&key(&label(steps))));
        assert!(!hashes.contains(&key(&steps)));
        assert_eq!(
            hashes.len() as u64,
            steps + 1,
            "big, and label 1..=steps (the default, empty, is never written)"
        );
        saver.close()?;
    }
    let size = std::fs::metadata(&path)?.len();
    assert!(
        size < 400 * 1024 + steps * 1024,
        "{size} bytes for {steps} steps and one 100 KB value"
    );

    let saver = Arc::new(SqliteSaver::open(&path)?);
    let pruned = saver
        .prune(&ThreadId::new("t")?, Retention::KeepLast(10))
        .await?;
    assert_eq!(
        pruned as u64,
        steps + 2 - 10,
        "input, start and every step but 10"
    );
    let g = graph(steps, saver.clone())?;
    let kept = g.get_state_history("t", ListOptions::default()).await?;
    assert_eq!(kept.len(), 10);
    // Exactly the values the kept checkpoints hold remain: none missing (each loads), none
    // left over.
    let mut wanted: BTreeSet<Vec<u8>> = kept.iter().map(|s| key(&s.values.label)).collect();
    wanted.insert(key(&big));
    for snap in &kept {
        let again = g
            .get_state("t", Some(snap.checkpoint.id))
            .await?
            .ok_or("a kept checkpoint is gone")?;
        assert_eq!(again.values.big.len(), big.len());
        assert_eq!(again.values.label, label(again.values.counter));
        assert!(again
            .values
            .items
            .iter()
            .copied()
            .eq(0..again.values.counter));
    }
    assert_eq!(value_hashes(&path), wanted);

    // The pruned thread resumes, and its oldest kept checkpoint forks.
    let longer = graph(steps + 5, saver.clone())?;
    // The head is a finished run: new (empty) input starts the next one from it.
    let resumed = longer.invoke(Doc::update(), &cfg).await?;
    assert_eq!(resumed.state.counter, steps + 5);
    assert!(resumed.state.items.iter().copied().eq(0..steps + 5));
    let oldest = kept.last().ok_or("no kept checkpoint")?.checkpoint.id;
    let forked = longer
        .invoke(Input::Continue, &cfg.clone().checkpoint(oldest))
        .await?;
    assert_eq!(forked.state.counter, steps + 5);
    assert!(forked.state.items.iter().copied().eq(0..steps + 5));
    assert_eq!(forked.state.big.len(), big.len());
    saver.close()?;
    drop((g, longer));

    // VACUUM gives the freed pages back; everything still loads.
    let before = pages(&path);
    rusqlite::Connection::open(&path)?.execute_batch("VACUUM")?;
    let after = pages(&path);
    assert!(
        after < before,
        "VACUUM freed nothing: {before} -> {after} pages"
    );
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let g = graph(steps + 5, saver)?;
    for snap in g.get_state_history("t", ListOptions::default()).await? {
        assert_eq!(snap.values.big.len(), big.len());
    }
    Ok(())
}
