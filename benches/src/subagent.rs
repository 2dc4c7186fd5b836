//! The `subagent` workload: what one delegation costs (assemble and compile the child's graph,
//! run a one-turn child, return its result), with the compile time reported apart from the run,
//! and 100 parallel delegations under a global limit of 8 (wall time, peak concurrency and
//! resident memory, which should follow the limit, not the 100).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::BoxError;
use stategraph_nodes::subagent::{
    DelegationRequest, SubagentLimiter, SubagentSpec, SubagentStatus, Subagents,
};
use stategraph_nodes::{
    AiMessage, ChatModel, FnTool, Message, ModelError, ModelRequest, ModelResponse, RunContext,
    ThreadState, ToolCall, ToolContext, ToolMessage, ToolSource, ToolSpec,
};

use crate::report::{median, peak_rss_mb, round, rss_mb, Record};
use crate::{pad, Args, ENGINE};

/// How many single delegations the cost row measures.
const SINGLE_RUNS: usize = 200;
/// How many delegations run in parallel in the capacity row, and under which global limit.
const PARALLEL: usize = 100;
const GLOBAL_LIMIT: usize = 8;

/// A child model: answers at once (`work: false`), or calls `work` once and then answers.
struct Child {
    work: bool,
}

impl ChatModel for Child {
    fn name(&self) -> &str {
        "bench-child"
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let reply = match request.messages.last() {
            Some(Message::Human { .. }) if self.work => {
                AiMessage::calls([ToolCall::new("w", "work", json!({}))])
            }
            _ => AiMessage::text(pad(160)),
        };
        Box::pin(async move { Ok(reply.into()) })
    }
}

/// A tool that holds its slot 5 ms and counts how many run at once.
fn work(now: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> FnTool {
    FnTool::new(
        ToolSpec::new("work", "work a while", ToolSource::BuiltIn).read_only(true),
        move |call, _cx| {
            let (now, peak) = (Arc::clone(&now), Arc::clone(&peak));
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolMessage::new(call.id, "work", pad(160)).into())
            }
        },
    )
}

fn request() -> DelegationRequest {
    DelegationRequest {
        description: "bench".into(),
        prompt: pad(160),
        subagent_type: "worker".into(),
    }
}

fn parent() -> ToolContext {
    ToolContext::detached(
        ThreadState::default(),
        RunContext::new("bench", "u").run("r"),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(crate) async fn run_subagent(_args: &Args) -> Result<(), BoxError> {
    let subagents = Subagents::new(Arc::new(Child { work: false })).register(SubagentSpec::new(
        "worker",
        "d",
        "You work.",
    ));
    let cx = parent();
    let (mut compile, mut run, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..SINGLE_RUNS + 10 {
        let t0 = Instant::now();
        let report = subagents.delegate("c", request(), &cx).await;
        let wall = t0.elapsed();
        if report.outcome.status != SubagentStatus::Completed {
            return Err(format!("subagent: delegation ended {:?}", report.outcome).into());
        }
        if i >= 10 {
            compile.push(ms(report.compile_time));
            run.push(ms(report.run_time));
            total.push(ms(wall));
        }
    }
    let (c, r) = (median(&compile), median(&run));
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "subagent")
        .kv("variant", "one_delegation")
        .kv("runs", SINGLE_RUNS)
        .kv("compile_ms_median", round(c, 4))
        .kv("child_run_ms_median", round(r, 4))
        .kv("delegation_ms_median", round(median(&total), 4))
        .kv("compile_to_run_ratio", round(c / r, 3))
        .kv("peak_rss_mb", peak_rss_mb())
        .emit();
    parallel().await
}

/// 100 delegations at once under a global limit of 8.
async fn parallel() -> Result<(), BoxError> {
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let subagents = Arc::new(
        Subagents::new(Arc::new(Child { work: true }))
            .builtin(Arc::new(work(now, Arc::clone(&peak))))
            .limiter(SubagentLimiter::new(GLOBAL_LIMIT, Duration::from_secs(600)))
            .register(SubagentSpec::new("worker", "d", "You work.")),
    );
    let cx = parent();
    let rss_before = rss_mb();
    let t0 = Instant::now();
    let runs = (0..PARALLEL).map(|i| {
        let (subagents, cx) = (Arc::clone(&subagents), cx.clone());
        async move { subagents.delegate(&format!("c{i}"), request(), &cx).await }
    });
    let reports = futures::future::join_all(runs).await;
    let wall = t0.elapsed().as_secs_f64();
    let completed = reports
        .iter()
        .filter(|r| r.outcome.status == SubagentStatus::Completed)
        .count();
    if completed != PARALLEL {
        return Err(format!("subagent: {completed} of {PARALLEL} delegations completed").into());
    }
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "subagent")
        .kv("variant", "parallel")
        .kv("delegations", PARALLEL)
        .kv("global_limit", GLOBAL_LIMIT)
        .kv("peak_concurrent", peak.load(Ordering::SeqCst))
        .kv("wall_s", round(wall, 6))
        .kv("rss_before_mb", rss_before)
        .kv("rss_after_mb", rss_mb())
        .kv("peak_rss_mb", peak_rss_mb())
        .emit();
    Ok(())
}
