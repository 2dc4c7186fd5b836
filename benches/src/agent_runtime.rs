//! The `agent_runtime` workload: the `agent` workload's conversation (200 turns of one tool
//! call each, then a final answer) run by `stategraph_nodes::AgentBuilder` instead of a
//! hand-built graph — so the cost of the runtime itself (request assembly, layer chains, the
//! call-time re-check, the capability trace, one task per tool call) shows next to LangGraph's
//! `agent` workload, whose graph is the same shape.
//!
//! Two variants: `plain` (one config tool) and `guarded` (the same tool behind authorization,
//! a guardrail, and a deferred MCP-style tool promoted once through `tool_search`).

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::{BoxError, RunConfig};
use stategraph_nodes::{
    AiMessage, AllowlistProvider, Authorization, ChatModel, FnTool, Guardrail, Message, ModelError,
    ModelRequest, ModelResponse, RoleTable, RunContext, ThreadState, ToolCall, ToolMessage,
    ToolSource, ToolSpec, TOOL_SEARCH,
};

use crate::report::{peak_rss_mb, round, Record};
use crate::sqlite_db::SqliteDb;
use crate::{pad, Args, Saver, ENGINE};

/// Answers by counting the tool messages so far, like the `agent` workload's model node (no
/// request recording, so the model costs what LangGraph's scripted node costs).
struct Scripted {
    turns: usize,
    guarded: bool,
}

impl ChatModel for Scripted {
    fn name(&self) -> &str {
        "bench-scripted"
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let n_tool = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Tool(_)))
            .count();
        let reply = if self.guarded && n_tool == 0 {
            AiMessage::calls([ToolCall::new(
                "find",
                TOOL_SEARCH,
                json!({"query": "select:lookup"}),
            )])
        } else if n_tool < self.turns + usize::from(self.guarded) {
            let tool = if self.guarded { "lookup" } else { "search" };
            AiMessage {
                content: pad(100),
                ..AiMessage::calls([ToolCall::new(
                    format!("call_{n_tool}"),
                    tool,
                    json!({"q": format!("query {n_tool}")}),
                )])
            }
        } else {
            AiMessage::text("final answer")
        };
        Box::pin(async move { Ok(reply.into()) })
    }
}

fn tool(name: &str, source: ToolSource) -> FnTool {
    let n = name.to_owned();
    FnTool::new(
        ToolSpec::new(name, "look something up", source).read_only(true),
        move |call, _cx| {
            let n = n.clone();
            async move { Ok(ToolMessage::new(call.id, n, pad(160)).into()) }
        },
    )
}

async fn agent(turns: usize, guarded: bool) -> Result<stategraph_nodes::Agent, BoxError> {
    let model = Scripted { turns, guarded };
    let mut b = stategraph_nodes::AgentBuilder::new(model).max_turns(turns + 10);
    b = if guarded {
        b.tool(tool("lookup", ToolSource::Mcp))
            .tool(tool("search", ToolSource::Config))
            .authorization(Authorization::new(
                RoleTable::new().allow("analyst", ["lookup", "search"]),
            ))
            .guardrail(Guardrail::new(
                AllowlistProvider::allow_all().deny(["delete"]),
            ))
    } else {
        b.tool(tool("search", ToolSource::Config))
    };
    Ok(b.assemble(RunContext::new("bench", "u").role("analyst"))
        .await?)
}

fn input() -> stategraph_nodes::ThreadStateUpdate {
    ThreadState::human_input(pad(160))
}

pub(crate) async fn run_agent_runtime(args: &Args) -> Result<(), BoxError> {
    let turns = args.agent_turns;
    for (variant, guarded) in [("plain", false), ("guarded", true)] {
        let model_turns = turns + usize::from(guarded);
        let base = |cp: &str| {
            Record::new()
                .kv("engine", ENGINE)
                .kv("workload", "agent_runtime")
                .kv("variant", variant)
                .kv("checkpointer", cp)
                .kv("turns", turns)
        };
        // Warm-up.
        let a = agent(turns, guarded).await?;
        a.invoke(input(), &a.run_config()).await?;

        if args.checkpointers.contains(&Saver::None) {
            let a = agent(turns, guarded).await?;
            let t0 = Instant::now();
            let out = a.invoke(input(), &a.run_config()).await?;
            let wall = t0.elapsed().as_secs_f64();
            check(&out.state, model_turns)?;
            base("none")
                .kv("final_messages", out.state.messages.len())
                .kv("trace_entries", a.trace().len())
                .kv("wall_s", round(wall, 6))
                .kv("per_turn_ms", round(wall * 1000.0 / turns as f64, 6))
                .kv("peak_rss_mb", peak_rss_mb())
                .emit();
        }
        if !args.checkpointers.contains(&Saver::Sqlite) {
            continue;
        }
        for (dname, durability) in &args.durabilities {
            let db = SqliteDb::open(
                &args.workdir,
                &format!("agent-runtime-{variant}-{dname}"),
                args.sqlite_options(),
            )?;
            let a = agent(turns, guarded).await?;
            let g = a.graph().with_checkpointer(Arc::new(db.saver.clone()));
            let cfg: RunConfig = a.run_config().thread("agent-rt-1").durability(*durability);
            let t0 = Instant::now();
            let out = g.invoke(input(), &cfg).await?;
            let wall = t0.elapsed().as_secs_f64();
            check(&out.state, model_turns)?;
            drop(g);
            let st = db.close(args.keep_db)?;
            base("sqlite")
                .kv("durability", dname.as_str())
                .kv("sqlite_synchronous", args.sqlite_sync.as_str())
                .kv("final_messages", out.state.messages.len())
                .kv("wall_s", round(wall, 6))
                .kv("per_turn_ms", round(wall * 1000.0 / turns as f64, 6))
                .kv("checkpoint_rows", st.checkpoint_rows)
                .kv("db_file_bytes", st.db_file_bytes.unwrap_or(0))
                .kv("peak_rss_mb", peak_rss_mb())
                .emit();
        }
    }
    Ok(())
}

/// The run did the whole conversation: human, `model_turns` (AI, tool) pairs, final answer.
fn check(state: &ThreadState, model_turns: usize) -> Result<(), BoxError> {
    let want = 2 + 2 * model_turns;
    if state.messages.len() != want {
        return Err(format!(
            "agent_runtime: {} messages, not {want}",
            state.messages.len()
        )
        .into());
    }
    if state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .any(ToolMessage::is_error)
    {
        return Err("agent_runtime: a tool call was refused".into());
    }
    Ok(())
}
