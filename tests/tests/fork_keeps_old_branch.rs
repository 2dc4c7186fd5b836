//! Fork and replay (reliability.md R-22), on SQLite: 50 forks from random checkpoints of a
//! 100-step history, each run to the end. Afterwards every row the original history had — its
//! checkpoints, its list parts, its values — is byte-identical; every original checkpoint still
//! loads its original state; each fork checkpoint's parent is the chosen checkpoint; and every
//! branch ends in the state an uninterrupted run reaches.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::collections::BTreeSet;
use std::sync::Arc;

use stategraph::checkpoints::{ListOptions, Source, SqliteSaver};
use stategraph::prelude::*;
use stategraph_tests::tally::{self, Tally};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const STEPS: u64 = 100;
const FORKS: usize = 50;

type Row = Vec<rusqlite::types::Value>;

/// Every row of the tables that hold checkpoints and values, as stored.
fn rows(path: &std::path::Path) -> BTreeSet<(String, Vec<String>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut out = BTreeSet::new();
    for (table, sql) in [
        ("sg_checkpoints", "SELECT * FROM sg_checkpoints"),
        ("sg_log_parts", "SELECT * FROM sg_log_parts"),
        ("sg_blobs", "SELECT * FROM sg_blobs"),
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let n = stmt.column_count();
        let all: Vec<Row> = stmt
            .query_map([], |r| (0..n).map(|i| r.get(i)).collect())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for row in all {
            out.insert((
                table.to_owned(),
                row.iter().map(|v| format!("{v:?}")).collect(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_forks_leave_the_original_history_byte_identical() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("forks.db");
    let graph = tally::graph(STEPS)?.with_checkpointer(Arc::new(SqliteSaver::open(&path)?));
    let cfg = RunConfig::new()
        .thread("t")
        .durability(Durability::Async)
        .recursion_limit(STEPS as usize + 10);
    let reference = graph.invoke(Tally::update(), &cfg).await?;
    let original = graph.get_state_history("t", ListOptions::default()).await?;
    let before = rows(&path);
    // Seeded choice of checkpoints to fork from (never the head: forking the head is a
    // plain continue).
    let mut seed = 0x5EED_F0C5_u64;
    let mut forks = Vec::new();
    for _ in 0..FORKS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let at = &original[1 + (seed as usize) % (original.len() - 1)];
        let out = graph
            .invoke(Input::Continue, &cfg.clone().checkpoint(at.checkpoint.id))
            .await?;
        assert_eq!(
            out.state.items, reference.state.items,
            "fork from {}",
            at.checkpoint.id
        );
        assert_eq!(out.state.checksum, reference.state.checksum);
        forks.push(at.checkpoint.id);
    }
    let after = rows(&path);
    let lost: Vec<_> = before.difference(&after).take(3).collect();
    assert!(
        lost.is_empty(),
        "original rows changed or vanished: {lost:?}"
    );
    let history = graph.get_state_history("t", ListOptions::default()).await?;
    let fork_parents: Vec<_> = history
        .iter()
        .filter(|s| s.checkpoint.source == Source::Fork)
        .map(|s| s.checkpoint.parent)
        .collect();
    assert_eq!(fork_parents.len(), FORKS);
    for parent in &forks {
        assert!(
            fork_parents.contains(&Some(*parent)),
            "no fork from {parent}"
        );
    }
    for snap in &original {
        let again = graph
            .get_state("t", Some(snap.checkpoint.id))
            .await?
            .ok_or("an original checkpoint is gone")?;
        assert_eq!(again.values.items, snap.values.items);
        assert_eq!(again.values.checksum, snap.values.checksum);
        assert_eq!(again.checkpoint.parent, snap.checkpoint.parent);
    }
    Ok(())
}
