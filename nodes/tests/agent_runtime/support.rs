//! Shared helpers of the agent runtime tests: counted tools, scripted calls, tool messages.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::prelude::*;

pub(crate) type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A tool that counts its runs and answers `"<name> ok"`.
pub(crate) fn counted(name: &str, source: ToolSource, runs: &Arc<AtomicUsize>) -> FnTool {
    let runs = Arc::clone(runs);
    let n = name.to_owned();
    FnTool::new(
        ToolSpec::new(name, format!("the {name} tool"), source),
        move |call, _cx| {
            runs.fetch_add(1, Ordering::SeqCst);
            let n = n.clone();
            async move { Ok(ToolMessage::new(call.id, &n, format!("{n} ok")).into()) }
        },
    )
}

pub(crate) fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id, name, json!({}))
}

/// A model that calls `tool` once (call id `id`), then answers `text`.
pub(crate) fn call_then(id: &str, tool: &str, text: &str) -> ScriptedModel {
    ScriptedModel::new(
        "m",
        [AiMessage::calls([call(id, tool)]), AiMessage::text(text)],
    )
}

pub(crate) fn tool_messages(state: &ThreadState) -> Vec<&ToolMessage> {
    state.messages.iter().filter_map(Message::as_tool).collect()
}
