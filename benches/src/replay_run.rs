//! The `replay10k` workload: replay of one long thread with unchanged code. The thread is
//! recorded in memory (`MemorySaver`): a node that appends one chain message (about 190 bytes)
//! and counts, looping until it has run `--replay-steps` times (default `2500,10000`, one row
//! each), so the state grows to that many messages. Then `replay` runs the whole branch again
//! from its first checkpoint and compares every checkpoint with its twin. `per_step_us` is the
//! replay's wall time over the checkpoints it compared: flat across sizes when a replay costs
//! what each step changed, growing with the thread when it costs the whole state per step.

use std::sync::Arc;
use std::time::Instant;

use stategraph::checkpoints::{ListOptions, MemorySaver};
use stategraph::{BoxError, CompiledGraph, NodeContext, RunConfig, StateGraph};
use stategraph::{END, START};

use crate::chain::{make_msg, ChainState};
use crate::report::{median, min, peak_rss_mb, round, Record};
use crate::{Args, ENGINE};

/// One node, `step`, looping until the counter reaches `steps`.
fn build(steps: i64) -> Result<CompiledGraph<ChainState>, BoxError> {
    Ok(StateGraph::<ChainState>::new()
        .add_node("step", |s: Arc<ChainState>, _ctx: NodeContext| async move {
            let c = s.counter + 1;
            Ok::<_, BoxError>(
                ChainState::update()
                    .messages(vec![make_msg("node", c)])
                    .counter(c),
            )
        })
        .add_edge(START, "step")
        .add_conditional_edges(
            "step",
            move |s: &ChainState| if s.counter < steps { "step" } else { END },
            ["step", END],
        )
        .compile()?)
}

/// Record a thread of `steps` steps, then replay it `repeats` times: the wall times in
/// seconds and the checkpoints each replay compared.
async fn replay_times(steps: usize, repeats: usize) -> Result<(Vec<f64>, usize), BoxError> {
    let saver = Arc::new(MemorySaver::new());
    let n = i64::try_from(steps)?;
    let g = build(n)?.with_checkpointer(saver);
    let cfg = RunConfig::new().thread("long").recursion_limit(steps + 10);
    g.invoke(crate::chain::fresh_chain_input(), &cfg).await?;
    let first = g
        .get_state_history("long", ListOptions::default())
        .await?
        .pop()
        .ok_or("replay10k: the recorded thread has no checkpoint")?;
    let mut times = Vec::with_capacity(repeats);
    let mut compared = 0;
    for _ in 0..repeats {
        let t0 = Instant::now();
        let report = g.replay("long", first.checkpoint.id, None).await?;
        times.push(t0.elapsed().as_secs_f64());
        if let Some(d) = report.divergence {
            return Err(format!("replay10k: unchanged code diverged: {d:?}").into());
        }
        compared = report.steps_compared;
    }
    Ok((times, compared))
}

pub(crate) async fn run_replay(args: &Args) -> Result<(), BoxError> {
    replay_times(10, 1).await?; // warm-up
    for &steps in &args.replay_steps {
        let (times, compared) = replay_times(steps, args.repeats).await?;
        let wall = median(&times);
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "replay10k")
            .kv("checkpointer", "memory")
            .kv("steps", steps)
            .kv("steps_compared", compared)
            .kv("repeats", args.repeats)
            .kv("wall_s_median", round(wall, 6))
            .kv("wall_s_min", round(min(&times), 6))
            .kv("per_step_us", round(wall * 1e6 / compared.max(1) as f64, 3))
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }
    Ok(())
}
