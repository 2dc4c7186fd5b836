//! The `turn1000` workload: one agent turn of many parallel read-only tool calls, run by
//! `stategraph_nodes::AgentBuilder` without a checkpointer (in memory) — the scripted model
//! answers the human with one AI message of `--turn-calls` calls of one read-only tool, then
//! with a final answer. Each size of `--turn-calls` (default `250,1000`) prints one row:
//! `per_turn_ms` (the whole invocation: both model calls and every tool call) and
//! `per_call_us` (that over the calls), so two sizes show how the turn's cost grows with its
//! calls (linear: `per_call_us` stays put).

use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::BoxError;
use stategraph_nodes::{
    AiMessage, ChatModel, FnTool, Message, ModelError, ModelRequest, ModelResponse, RunContext,
    ThreadState, ToolCall, ToolMessage, ToolSource, ToolSpec,
};

use crate::report::{median, min, peak_rss_mb, round, Record};
use crate::{pad, Args, ENGINE};

/// Calls `calls` tools in its first reply, answers in its second.
struct Fanning {
    calls: usize,
}

impl ChatModel for Fanning {
    fn name(&self) -> &str {
        "bench-fanning"
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let called = request.messages.iter().any(|m| matches!(m, Message::Ai(_)));
        let reply = if called {
            AiMessage::text("final answer")
        } else {
            AiMessage::calls((0..self.calls).map(|i| {
                ToolCall::new(
                    format!("call_{i}"),
                    "read",
                    json!({"q": format!("query {i}")}),
                )
            }))
        };
        Box::pin(async move { Ok(reply.into()) })
    }
}

async fn agent(calls: usize) -> Result<stategraph_nodes::Agent, BoxError> {
    let read = FnTool::new(
        ToolSpec::new("read", "look something up", ToolSource::Config).read_only(true),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "read", pad(160)).into()) },
    );
    let b = stategraph_nodes::AgentBuilder::new(Fanning { calls })
        .max_turns(4)
        .tool(read);
    Ok(b.assemble(RunContext::new("bench", "u")).await?)
}

/// One turn of `calls` calls: its wall time in seconds, checked.
async fn one_turn(calls: usize) -> Result<f64, BoxError> {
    let a = agent(calls).await?;
    let t0 = Instant::now();
    let out = a
        .invoke(ThreadState::human_input(pad(160)), &a.run_config())
        .await?;
    let wall = t0.elapsed().as_secs_f64();
    let tools = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .filter(|m| !m.is_error())
        .count();
    if tools != calls || out.state.messages.len() != calls + 3 {
        return Err(format!(
            "turn1000: {tools} tool results and {} messages for {calls} calls",
            out.state.messages.len()
        )
        .into());
    }
    Ok(wall)
}

pub(crate) async fn run_turn_calls(args: &Args) -> Result<(), BoxError> {
    one_turn(10).await?; // warm-up
    for &calls in &args.turn_calls {
        let mut times = Vec::with_capacity(args.repeats);
        for _ in 0..args.repeats {
            times.push(one_turn(calls).await?);
        }
        let wall = median(&times);
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "turn1000")
            .kv("checkpointer", "none")
            .kv("calls", calls)
            .kv("repeats", args.repeats)
            .kv("wall_s_median", round(wall, 6))
            .kv("wall_s_min", round(min(&times), 6))
            .kv("per_turn_ms", round(wall * 1000.0, 3))
            .kv("per_call_us", round(wall * 1e6 / calls.max(1) as f64, 3))
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }
    Ok(())
}
