//! Readers during writes (reliability.md R-19): 16 readers poll a thread's state and history
//! while a 1,000-step run writes it to a SQLite file. Every state read is a committed prefix of
//! the run (items `0..k` with the checksum after `k` steps: no torn read), no read fails (no busy
//! error reaches a caller), every history page is one chain, newest first, and the WAL file
//! stays under 64 MiB.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use stategraph::checkpoints::{ListOptions, SqliteSaver};
use stategraph::prelude::*;
use stategraph_tests::tally::{self, check, Tally};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const STEPS: u64 = 1000;
const READERS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_see_only_committed_prefixes_while_a_sync_run_writes() -> TestResult {
    readers_during(Durability::Sync).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_see_only_committed_prefixes_while_an_async_run_writes() -> TestResult {
    readers_during(Durability::Async).await
}

async fn readers_during(durability: Durability) -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("busy.db");
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let graph = tally::graph(STEPS)?.with_checkpointer(saver.clone());
    let done = Arc::new(AtomicBool::new(false));
    // States read while the run was between its first and its last step.
    let mid_run = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (graph, done, mid_run) = (graph.clone(), done.clone(), mid_run.clone());
            tokio::spawn(async move {
                let mut seen = 0u64;
                let mut n = 0u64;
                while !done.load(Ordering::SeqCst) || n == 0 {
                    n += 1;
                    if n % 4 == 0 {
                        let page = graph
                            .get_state_history(
                                "t",
                                ListOptions {
                                    limit: Some(20),
                                    ..Default::default()
                                },
                            )
                            .await
                            .map_err(|e| format!("reader {r}: history: {e}"))?;
                        for pair in page.windows(2) {
                            if pair[0].checkpoint.parent != Some(pair[1].checkpoint.id) {
                                return Err(format!("reader {r}: history page is not one chain"));
                            }
                        }
                        for snap in &page {
                            check(&snap.values, &format!("reader {r} history"))?;
                        }
                    } else if let Some(snap) = graph
                        .get_state("t", None)
                        .await
                        .map_err(|e| format!("reader {r}: state: {e}"))?
                    {
                        let k = check(&snap.values, &format!("reader {r} state"))?;
                        if k < seen {
                            return Err(format!("reader {r}: state went back from {seen} to {k}"));
                        }
                        seen = k;
                        if 0 < k && k < STEPS {
                            mid_run.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    tokio::task::yield_now().await;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    let cfg = RunConfig::new()
        .thread("t")
        .durability(durability)
        .recursion_limit(STEPS as usize + 10);
    let out = graph.invoke(Tally::update(), &cfg).await?;
    done.store(true, Ordering::SeqCst);
    assert_eq!(check(&out.state, "final")?, STEPS);
    for reader in readers {
        reader.await?.map_err(|e| e.clone())?;
    }
    let mid = mid_run.load(Ordering::SeqCst);
    eprintln!("{durability:?}: {mid} states read mid-run by {READERS} readers");
    if durability == Durability::Sync {
        // A thousand fsyncs leave the readers plenty of time: the checks above ran on states
        // from the middle of the run, not only on the first and last.
        assert!(mid > 0, "no reader saw the run in progress");
    }
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_bytes = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert!(wal_bytes < 64 << 20, "WAL grew to {wal_bytes} bytes");
    let snap = graph.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(check(&snap.values, "stored")?, STEPS);
    Ok(())
}
