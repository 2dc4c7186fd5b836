//! The node cache: behaviour against LangGraph's recorded fixtures
//! (`fixtures/langgraph/node_cache_*.json`), its laws, and the same contract on every
//! backend (in memory, the SQLite file, PostgreSQL when `STATEGRAPH_PG_URL` is set).
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

mod backends;
mod langgraph;
mod levels;
#[path = "../pg_support/mod.rs"]
mod pg_support;
mod properties;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stategraph::cache::{CachePolicy, MemoryCache, NodeCache};
use stategraph::prelude::*;
use stategraph::store::{ManualClock, Timestamp};

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A counter shared between a test and its nodes.
#[derive(Clone, Default, Debug)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn hit(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// The probe's state: `x`, `y`, and an append log.
#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct S {
    pub x: i64,
    pub y: i64,
    #[reduce(append)]
    pub log: Vec<i64>,
}

/// START -> double -> END, where `double` appends `2 * x` and is cached by `policy`.
pub fn double_graph(runs: &Counter, policy: CachePolicy) -> CompiledGraph<S> {
    let runs = runs.clone();
    StateGraph::<S>::new()
        .add_node_with(
            "double",
            move |s: Arc<S>, _cx: NodeContext| {
                runs.hit();
                async move { Ok::<_, BoxError>(S::update().log(vec![s.x * 2])) }
            },
            NodeOptions::new().cache(policy),
        )
        .add_edge(START, "double")
        .add_edge("double", END)
        .compile()
        .expect("the graph compiles")
}

/// A memory cache and a clock the test moves.
pub fn memory_cache() -> (Arc<dyn NodeCache>, ManualClock) {
    (
        Arc::new(MemoryCache::new()),
        ManualClock::at(Timestamp(1_000_000)),
    )
}

/// `graph` with `cache` read at the time of `clock`.
pub fn cached<St: State>(
    graph: &CompiledGraph<St>,
    cache: &Arc<dyn NodeCache>,
    clock: &ManualClock,
) -> CompiledGraph<St> {
    graph.with_cache_clock(cache.clone(), Arc::new(clock.clone()))
}
