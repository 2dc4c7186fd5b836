//! What a model node answers when the run has too few steps left to finish a turn
//! (LangGraph's prebuilt agent's rule, on the engine's managed values).
//!
//! A model answer that calls tools starts a turn that needs its tool steps and one more model
//! step. When the run's [`remaining_steps`](stategraph::NodeContext::remaining_steps) are
//! fewer, the answer is replaced by an AI message saying [`NEED_MORE_STEPS`] (keeping the
//! answer's id and name, with no tool calls), so the run ends with an answer instead of
//! failing with the recursion limit. With one batch of tool calls (every turn of
//! LangGraph's `create_react_agent`) that is LangGraph's `remaining_steps < 2`.
//!
//! ```
//! use serde_json::json;
//! use stategraph_nodes::last_step::NEED_MORE_STEPS;
//! use stategraph_nodes::prelude::*;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let call = |id: &str| AiMessage::calls([ToolCall::new(id, "look", json!({}))]);
//! let model = ScriptedModel::new("m", [call("c1"), call("c2")]);
//! let look = FnTool::new(ToolSpec::new("look", "Looks.", ToolSource::Config), |call, _cx| async move {
//!     Ok(ToolMessage::new(call.id, "look", "seen").into())
//! });
//! let agent = AgentBuilder::new(model).tool(look).assemble(RunContext::default()).await?;
//! // Steps: start, model, tools, model: the second answer's calls could not be acted on.
//! let config = agent.run_config().recursion_limit(4);
//! let out = agent.invoke(ThreadState::human_input("go"), &config).await?;
//! assert_eq!(out.state.last_ai().map(|m| m.content.as_str()), Some(NEED_MORE_STEPS));
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```

use stategraph::NodeContext;

use crate::message::AiMessage;

/// The text that replaces an answer the run has no steps left to act on (LangGraph's).
pub const NEED_MORE_STEPS: &str = "Sorry, need more steps to process this request.";

/// Whether a turn that needs `tool_steps` tool steps and one model step after them does not
/// fit in the run's remaining steps.
pub(crate) fn out_of_steps(cx: &NodeContext, tool_steps: usize) -> bool {
    let needed = i64::try_from(tool_steps)
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    cx.remaining_steps() < needed
}

/// The answer that replaces `ai`: [`NEED_MORE_STEPS`], with `ai`'s id and name.
pub(crate) fn need_more_steps(ai: &AiMessage) -> AiMessage {
    AiMessage {
        id: ai.id.clone(),
        name: ai.name.clone(),
        ..AiMessage::text(NEED_MORE_STEPS)
    }
}
