//! A lead agent that delegates: two independent research tasks in parallel with `multi_task`,
//! then one exploring task with `task`, then a summary from the three results. Every child is
//! a new graph with no checkpointer, its own tool pool and its own trace.
//!
//! For each delegation it prints the status, the stop reason and the resolved tool pool (what
//! the child got, and why each other tool did not come along).
//!
//! Run with `cargo run --example delegate` (no network, no API key: the models are scripted).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{DelegationReport, SubagentSpec, Subagents};
use stategraph_nodes::{ModelError, ModelRequest, ModelResponse};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A researcher's model: looks the task up once, then reports what it found. It answers from
/// the request alone, so parallel researchers sharing it cannot mix up their turns.
#[derive(Debug)]
struct Researcher;

impl ChatModel for Researcher {
    fn name(&self) -> &str {
        "researcher-model"
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let reply = match request.messages.last() {
            Some(Message::Tool(t)) => AiMessage::text(format!("Found: {}", t.content)),
            Some(m) => AiMessage::calls([ToolCall::new(
                "look",
                "lookup",
                json!({ "topic": m.text() }),
            )]),
            None => AiMessage::text("Nothing to research."),
        };
        Box::pin(async move { Ok(reply.into()) })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Topic {
    topic: String,
}

/// The researchers' own (agent-local) tool.
fn lookup() -> FnTool {
    FnTool::typed(
        ToolSpec::new("lookup", "Look a topic up", ToolSource::Other).read_only(true),
        |args: Topic, _cx| async move { Ok(format!("three sources agree on '{}'", args.topic)) },
    )
}

/// The runtime's built-in tools: one that reads the project notes, one that writes them.
fn builtins() -> Vec<Arc<dyn Tool>> {
    let read = FnTool::new(
        ToolSpec::new("read_notes", "Read the project notes", ToolSource::BuiltIn).read_only(true),
        |call, _cx| async move {
            Ok(ToolMessage::new(call.id, "read_notes", "the cache is rebuilt nightly").into())
        },
    );
    let write = FnTool::new(
        ToolSpec::new(
            "write_notes",
            "Overwrite the project notes",
            ToolSource::BuiltIn,
        ),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "write_notes", "written").into()) },
    );
    vec![Arc::new(read), Arc::new(write)]
}

fn task(description: &str, prompt: &str, subagent_type: &str) -> serde_json::Value {
    json!({"description": description, "prompt": prompt, "subagent_type": subagent_type})
}

/// The lead's script: fan out two research tasks, then one exploring task, then summarise.
fn lead_script() -> Vec<AiMessage> {
    vec![
        AiMessage::calls([ToolCall::new(
            "fan-out",
            "multi_task",
            json!({"tasks": [
                task("Rust async", "How do Rust futures get cancelled?", "researcher"),
                task("SQLite WAL", "What does SQLite's WAL mode change?", "researcher"),
            ]}),
        )]),
        AiMessage::calls([ToolCall::new(
            "explore",
            "task",
            json!(task("Notes", "What do the project notes say about the cache?", "explorer")),
        )]),
        AiMessage::text("Summary: futures cancel on drop, WAL lets readers run beside one writer, and the cache is rebuilt nightly."),
    ]
}

/// The explorer's script: read the notes, then answer.
fn explorer_script() -> ScriptedModel {
    ScriptedModel::new(
        "explorer-model",
        [
            AiMessage::calls([ToolCall::new("r", "read_notes", json!({}))]),
            AiMessage::text("The notes say the cache is rebuilt nightly."),
        ],
    )
}

/// Print one delegation: status, stop reason, pool.
fn print_report(report: &DelegationReport) {
    let stop = report.outcome.stop_reason.map_or("none", |r| r.as_str());
    println!(
        "\n[{}] {} ({}): status {}, stop reason {stop}, model {}",
        report.id,
        report.request.description,
        report.request.subagent_type,
        report.outcome.status.as_str(),
        report.model.as_deref().unwrap_or("-"),
    );
    if let Some(pool) = &report.pool {
        print!("{}", pool.render());
    }
}

/// Run the lead once; returns its final answer and every delegation report.
///
/// # Errors
/// Assembly or run errors of the lead.
pub(crate) async fn delegate() -> Result<(String, Vec<DelegationReport>), Error> {
    let explorer_model = explorer_script();
    let mut subagents = Subagents::new(Arc::new(Researcher))
        .parent_tool(ToolSpec::new(
            "journal",
            "The lead's journal",
            ToolSource::Config,
        ))
        .register(
            SubagentSpec::new(
                "researcher",
                "Researches one question",
                "You research one question.",
            )
            .max_turns(4)
            .custom_tool(lookup())
            .deny(["write_notes"]),
        )
        .register(
            SubagentSpec::new(
                "explorer",
                "Reads the project, changes nothing",
                "You only look.",
            )
            .model(explorer_model.clone())
            .exploring(true),
        );
    for tool in builtins() {
        subagents = subagents.builtin(tool);
    }
    let lead_model = ScriptedModel::new("lead-model", lead_script());
    let journal = FnTool::new(
        ToolSpec::new("journal", "The lead's journal", ToolSource::Config),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "journal", "noted").into()) },
    );
    let lead = AgentBuilder::new(lead_model.clone())
        .system_prompt("You lead a small research team.")
        .tool(journal)
        // `task`, `multi_task`, their log and the per-run delegation limit, in one call.
        .subagents(subagents)
        .assemble(RunContext::new("delegate-demo", "ana").run("run-1"))
        .await?;
    let out = lead
        .ask("Brief me on async cancellation, WAL and our cache.")
        .await?;
    lead_model.verify()?;
    explorer_model.verify()?;
    let reports = lead
        .delegation_log()
        .map(|log| log.reports())
        .unwrap_or_default();
    for report in &reports {
        print_report(report);
    }
    let answer = out
        .state
        .last_ai()
        .map(|a| a.content.clone())
        .unwrap_or_default();
    println!("\nlead: {answer}");
    Ok((answer, reports))
}

#[allow(dead_code)] // a test includes this file as a module and calls `delegate`
#[tokio::main]
async fn main() -> Result<(), Error> {
    delegate().await.map(|_| ())
}
