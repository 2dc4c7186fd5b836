//! Partial superstep failure (reliability R-03): W parallel tasks, a random non-empty subset
//! fails once each, and the thread is resumed until it finishes. A failure stops its step
//! (tasks not finished yet run on resume, as in LangGraph), so: every task's successful run
//! happens exactly once across all attempts, every failing task runs exactly once more, the
//! final state equals a run without failures, and each failure is in the durable history before
//! the resume. Memory and SQLite savers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use stategraph::checkpoints::{MemorySaver, Saver, SqliteSaver};
use stategraph::prelude::*;
use stategraph::{CompiledGraph, Input, SendTo};
use stategraph_checkpoints::sync::Unpoisoned;

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Fan {
    #[reduce(append)]
    results: Vec<u64>,
    width: u64,
}

/// Shared between the graph and the test: runs per worker, and the workers still armed to fail.
#[derive(Default)]
struct Ledger {
    runs: HashMap<u64, usize>,
    armed: Vec<u64>,
}

fn graph(ledger: Arc<Mutex<Ledger>>) -> Result<CompiledGraph<Fan>, stategraph::CompileError> {
    StateGraph::<Fan>::new()
        .add_node_with(
            "fan",
            |s: Arc<Fan>, _ctx: NodeContext| async move {
                let sends: Vec<SendTo> = (0..s.width).map(|i| SendTo::new("work", i)).collect();
                Ok::<_, BoxError>(stategraph::Command::<Fan>::new().goto_all(sends))
            },
            NodeOptions::new().destinations(["work"]),
        )
        .add_node("work", move |_s: Arc<Fan>, ctx: NodeContext| {
            let ledger = Arc::clone(&ledger);
            async move {
                let i: u64 = ctx.arg()?;
                let fail = {
                    let mut l = ledger.lock().unpoisoned();
                    *l.runs.entry(i).or_default() += 1;
                    match l.armed.iter().position(|&a| a == i) {
                        Some(pos) => {
                            l.armed.remove(pos);
                            true
                        }
                        None => false,
                    }
                };
                if fail {
                    return Err::<FanUpdate, BoxError>(format!("worker {i} failed").into());
                }
                Ok(Fan::update().results(vec![i * i]))
            }
        })
        .add_edge(START, "fan")
        .add_edge("work", END)
        .compile()
}

async fn trial(width: u64, failing: Vec<u64>, saver: Arc<dyn Saver>) -> Result<(), TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    let clean = graph(Arc::default()).map_err(|e| fail(&e))?;
    let want = clean
        .invoke(Fan::update().width(width), &RunConfig::new())
        .await
        .map_err(|e| fail(&e))?;

    let ledger = Arc::new(Mutex::new(Ledger {
        armed: failing.clone(),
        ..Ledger::default()
    }));
    let g = graph(Arc::clone(&ledger))
        .map_err(|e| fail(&e))?
        .with_checkpointer(saver);
    let config = RunConfig::new().thread("t");
    let mut outcome = g.invoke(Fan::update().width(width), &config).await;
    let mut attempts = 1;
    while outcome.is_err() {
        prop_assert!(
            attempts <= failing.len(),
            "more failed attempts than failing workers"
        );
        let snapshot = g
            .get_state("t", None)
            .await
            .map_err(|e| fail(&e))?
            .ok_or_else(|| TestCaseError::fail("no checkpoint after the failure"))?;
        prop_assert!(
            !snapshot.errors.is_empty(),
            "the failure is not in the history"
        );
        prop_assert!(snapshot
            .errors
            .iter()
            .all(|(node, e)| node == "work" && e.contains("failed")));
        outcome = g.invoke(Input::Continue, &config).await;
        attempts += 1;
    }
    prop_assert!(attempts >= 2, "the run succeeded although workers failed");
    let done = outcome.map_err(|e| fail(&e))?;
    prop_assert_eq!(&*done.state, &*want.state);
    let runs = ledger.lock().unpoisoned().runs.clone();
    for i in 0..width {
        let expected = if failing.contains(&i) { 2 } else { 1 };
        prop_assert_eq!(runs.get(&i).copied(), Some(expected), "worker {}", i);
    }
    Ok(())
}

/// A width of 2..=8 and a non-empty subset of its workers.
fn case() -> impl Strategy<Value = (u64, Vec<u64>)> {
    (2u64..=8).prop_flat_map(|w| {
        (
            Just(w),
            prop::collection::btree_set(0..w, 1..=w as usize).prop_map(|s| s.into_iter().collect()),
        )
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, TestCaseError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn with_the_memory_saver_only_failed_tasks_run_again((width, failing) in case()) {
        runtime()?.block_on(trial(width, failing, Arc::new(MemorySaver::new())))?;
    }

    #[test]
    fn with_the_sqlite_saver_only_failed_tasks_run_again((width, failing) in case()) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let saver = SqliteSaver::open(dir.path().join("fan.db"))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        runtime()?.block_on(trial(width, failing, Arc::new(saver)))?;
    }
}
