//! The `node_cache` workload: a cached node's hit against its cost when it runs. One node
//! does a fixed amount of work (`WORK_ROUNDS` rounds of an integer mix, about a millisecond
//! in a release build) on `x`; each invocation is timed three ways, `INVOKES` times each:
//! `run_us` on the graph without a cache, `miss_us` with a cache and a new `x` every time
//! (lookup, run, store), `hit_us` with the cache and one `x` stored before (lookup only).
//! One row per backend: the in-memory cache and the table of a SQLite file (no checkpointer,
//! so the rows show the cache's own cost). `hit_speedup` is `run_us / hit_us`.

use std::sync::Arc;
use std::time::Instant;

use stategraph::cache::{CachePolicy, MemoryCache, NodeCache};
use stategraph::checkpoints::SqliteSaver;
use stategraph::{BoxError, CompiledGraph, NodeContext, NodeOptions, RunConfig, StateGraph};
use stategraph::{END, START};

use crate::report::{median, peak_rss_mb, round, Record};
use crate::{Args, ENGINE};

/// Invocations per timing.
const INVOKES: usize = 300;
/// Rounds of the node's fixed work.
const WORK_ROUNDS: u64 = 400_000;

/// The workload's state.
#[derive(stategraph::State, Clone, Default, Debug)]
pub(crate) struct WorkState {
    x: u64,
    out: u64,
}

/// The node's fixed work on `x`.
fn work(x: u64) -> u64 {
    let mut h = x ^ 0x9E37_79B9_7F4A_7C15;
    for i in 0..WORK_ROUNDS {
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
        h = h.wrapping_add(i);
    }
    std::hint::black_box(h)
}

/// START -> work -> END, `work` cached with the default key.
fn build() -> Result<CompiledGraph<WorkState>, BoxError> {
    Ok(StateGraph::<WorkState>::new()
        .add_node_with(
            "work",
            |s: Arc<WorkState>, _cx: NodeContext| async move {
                Ok::<_, BoxError>(WorkState::update().out(work(s.x)))
            },
            NodeOptions::new().cache(CachePolicy::new()),
        )
        .add_edge(START, "work")
        .add_edge("work", END)
        .compile()?)
}

/// Microseconds per invocation of `graph` over `INVOKES` inputs `x_of(i)`.
async fn per_invoke_us(
    graph: &CompiledGraph<WorkState>,
    x_of: impl Fn(usize) -> u64,
) -> Result<f64, BoxError> {
    let config = RunConfig::new();
    let t0 = Instant::now();
    for i in 0..INVOKES {
        graph
            .invoke(WorkState::update().x(x_of(i)), &config)
            .await?;
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / INVOKES as f64)
}

/// The three timings (run, miss, hit), each the median of `repeats`.
async fn timings(cache: Arc<dyn NodeCache>, repeats: usize) -> Result<(f64, f64, f64), BoxError> {
    let plain = build()?;
    let cached = plain.with_cache(cache);
    let (mut run, mut miss, mut hit) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..repeats {
        run.push(per_invoke_us(&plain, |i| i as u64).await?);
        // Inputs no earlier repeat stored.
        let base = 1_000_000 * (r as u64 + 1);
        miss.push(per_invoke_us(&cached, |i| base + i as u64).await?);
        cached
            .invoke(WorkState::update().x(7), &RunConfig::new())
            .await?;
        hit.push(per_invoke_us(&cached, |_| 7).await?);
    }
    Ok((median(&run), median(&miss), median(&hit)))
}

pub(crate) async fn run_node_cache(args: &Args) -> Result<(), BoxError> {
    let dir = tempfile::tempdir_in(&args.workdir)?;
    let sqlite: Arc<dyn NodeCache> = Arc::new(SqliteSaver::open(dir.path().join("cache.db"))?);
    let memory: Arc<dyn NodeCache> = Arc::new(MemoryCache::new());
    for (backend, cache) in [("memory", memory), ("sqlite", sqlite)] {
        let (run, miss, hit) = timings(cache, args.repeats).await?;
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "node_cache")
            .kv("cache", backend)
            .kv("invokes", INVOKES)
            .kv("repeats", args.repeats)
            .kv("run_us", round(run, 2))
            .kv("miss_us", round(miss, 2))
            .kv("hit_us", round(hit, 2))
            .kv("hit_speedup", round(run / hit.max(1e-9), 2))
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }
    Ok(())
}
