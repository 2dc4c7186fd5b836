//! Shared helpers of the subagent tests: a lead with the delegation tools, simple tools, a
//! model that works one tool call and then answers.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::Subagents;
use stategraph_nodes::subagent_tools::{DelegationLog, MultiTaskTool, TaskTool};
use stategraph_nodes::{ModelError, ModelRequest, ModelResponse};

pub(crate) type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A tool answering `"<name> ok"`.
pub(crate) fn ok_tool(name: &str, source: ToolSource, read_only: bool) -> FnTool {
    let n = name.to_owned();
    FnTool::new(
        ToolSpec::new(name, format!("the {name} tool"), source).read_only(read_only),
        move |call, _cx| {
            let n = n.clone();
            async move { Ok(ToolMessage::new(call.id, &n, format!("{n} ok")).into()) }
        },
    )
}

/// A `task` call delegating `prompt` to `subagent_type`.
pub(crate) fn task_call(id: &str, subagent_type: &str, prompt: &str) -> ToolCall {
    ToolCall::new(
        id,
        "task",
        json!({"description": format!("job {id}"), "prompt": prompt, "subagent_type": subagent_type}),
    )
}

/// A lead around `model` with `task` and `multi_task` over `subagents`.
pub(crate) fn lead(model: ScriptedModel, subagents: Subagents) -> (AgentBuilder, DelegationLog) {
    let log = DelegationLog::new();
    let subagents = Arc::new(subagents);
    let builder = AgentBuilder::new(model)
        .tool(TaskTool::new(Arc::clone(&subagents), log.clone()))
        .tool(MultiTaskTool::new(subagents, log.clone()));
    (builder, log)
}

pub(crate) fn tool_messages(state: &ThreadState) -> Vec<&ToolMessage> {
    state.messages.iter().filter_map(Message::as_tool).collect()
}

pub(crate) fn tool_names(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

/// A model that calls `tool` once when the last message is not a tool result, then answers
/// `done: <result>`: every child run on it takes exactly two turns, whatever the interleaving.
#[derive(Debug, Clone)]
pub(crate) struct WorkOnce {
    pub(crate) tool: String,
}

impl ChatModel for WorkOnce {
    fn name(&self) -> &str {
        "work-once"
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let reply = match request.messages.last() {
            Some(Message::Tool(t)) => AiMessage::text(format!("done: {}", t.content)),
            _ => AiMessage::calls([ToolCall::new("w1", &self.tool, json!({}))]),
        };
        Box::pin(async move { Ok(reply.into()) })
    }
}

/// Runs `agent` on "go" under `config`, cancelling the run once `started` is notified (a
/// child's tool began).
pub(crate) async fn ask_then_cancel(
    agent: &stategraph_nodes::Agent,
    config: stategraph::RunConfig,
    started: &tokio::sync::Notify,
) -> Result<stategraph_nodes::AgentOutcome, stategraph_nodes::AgentRunError> {
    let token = stategraph::CancelToken::new();
    let config = config.cancel_token(token.clone());
    let run = agent.invoke(ThreadState::human_input("go"), &config);
    let cancel = async {
        started.notified().await;
        token.cancel();
    };
    tokio::join!(run, cancel).0
}
