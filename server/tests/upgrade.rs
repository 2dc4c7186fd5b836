//! A file an earlier build served, whose runs it kept in `server_runs`: the server that
//! opens it moves them into the run queue, runs the one left pending, lists the ended one,
//! and drops the old table.

mod common;

use std::time::{Duration, Instant};

use common::Served;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A checkpoint file with the tables of the earlier build: a thread, an ended run and a
/// pending one.
fn write_old_file(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    drop(stategraph::checkpoints::SqliteSaver::open(path)?);
    let c = rusqlite::Connection::open(path)?;
    c.execute_batch(
        "CREATE TABLE server_threads (thread_id TEXT PRIMARY KEY, created_at INTEGER NOT NULL,
             updated_at INTEGER NOT NULL, metadata TEXT NOT NULL, status TEXT NOT NULL,
             error TEXT);
         CREATE TABLE server_runs (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL,
             assistant_id TEXT NOT NULL, graph_id TEXT NOT NULL, status TEXT NOT NULL,
             created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, metadata TEXT NOT NULL,
             multitask_strategy TEXT NOT NULL, request TEXT NOT NULL, attempt INTEGER NOT NULL,
             stateless INTEGER NOT NULL);
         INSERT INTO server_threads VALUES
             ('00000000-0000-4000-8000-000000000001', 1, 1, '{\"graph_id\":\"chain\"}',
              'busy', NULL);
         INSERT INTO server_runs VALUES
             ('00000000-0000-7000-8000-00000000000a', '00000000-0000-4000-8000-000000000001',
              'chain', 'chain', 'success', 2, 3, '{\"who\":\"old\"}', 'enqueue',
              '{\"assistant_id\":\"chain\",\"input\":{\"log\":[\"x\"]}}', 1, 0),
             ('00000000-0000-7000-8000-00000000000b', '00000000-0000-4000-8000-000000000001',
              'chain', 'chain', 'pending', 4, 4, '{}', 'enqueue',
              '{\"assistant_id\":\"chain\",\"input\":{\"log\":[\"y\"]}}', 1, 0);",
    )?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_an_earlier_build_kept_move_into_the_queue_and_the_pending_one_runs() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("server.db");
    write_old_file(&file)?;
    let s = Served::start_with(|b| b.file(&file)).await?;
    let api = s.api();
    let thread = "00000000-0000-4000-8000-000000000001";
    let start = Instant::now();
    let runs = loop {
        let runs = api.get(&format!("/threads/{thread}/runs")).await.json();
        if runs[0]["status"] == "success" {
            break runs;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{runs}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ids: Vec<&str> = runs
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["run_id"].as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "00000000-0000-7000-8000-00000000000b",
            "00000000-0000-7000-8000-00000000000a"
        ]
    );
    assert_eq!(runs[1]["metadata"], json!({"who": "old"}));
    let state = api.get(&format!("/threads/{thread}/state")).await.json();
    assert_eq!(state["values"]["log"], json!(["y", "a", "b", "c"]));
    let t = api.get(&format!("/threads/{thread}")).await.json();
    assert_eq!(t["status"], "idle", "{t}");
    let c = rusqlite::Connection::open(&file)?;
    let old: i64 = c.query_row(
        "SELECT count(*) FROM sqlite_master WHERE name = 'server_runs'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(old, 0, "the old table is dropped");
    Ok(())
}
