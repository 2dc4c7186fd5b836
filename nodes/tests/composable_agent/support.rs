//! Shared helpers: a user state with a conversation, counted tools, a graph wiring a model
//! node and a tool node with `tools_condition`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stategraph::{CompileError, CompiledGraph, List, State, StateGraph, END, START};
use stategraph_nodes::impl_messages_state;
use stategraph_nodes::prelude::*;
use stategraph_nodes::toolbox::{model_node, tool_node, tools_condition, Toolbox, TOOLS};

pub(crate) type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A user's state: its own fields around a conversation.
#[derive(State, Clone, Default, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub(crate) struct Research {
    pub(crate) topic: String,
    #[reduce(append)]
    pub(crate) notes: Vec<String>,
    #[reduce(add_messages)]
    pub(crate) chat: List<Message>,
}
impl_messages_state!(Research, chat);

/// A tool that counts its runs and answers `"<name> ok"`.
pub(crate) fn counted(name: &str, read_only: bool, runs: &Arc<AtomicUsize>) -> FnTool {
    let runs = Arc::clone(runs);
    let n = name.to_owned();
    FnTool::new(
        ToolSpec::new(name, format!("the {name} tool"), ToolSource::Config).read_only(read_only),
        move |call, _cx| {
            runs.fetch_add(1, Ordering::SeqCst);
            let n = n.clone();
            async move { Ok(ToolMessage::new(call.id, &n, format!("{n} ok")).into()) }
        },
    )
}

pub(crate) fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id, name, serde_json::json!({}))
}

/// START → agent ⇄ tools (by `tools_condition`) → END, over [`Research`].
pub(crate) fn research_graph(
    model: &ScriptedModel,
    tools: &Toolbox,
) -> Result<CompiledGraph<Research>, CompileError> {
    StateGraph::<Research>::new()
        .add_node("agent", model_node(model.clone(), tools))
        .add_node(TOOLS, tool_node(tools))
        .add_edge(START, "agent")
        .add_conditional_edges("agent", tools_condition, [TOOLS, END])
        .add_edge(TOOLS, "agent")
        .compile()
}

/// The tool messages of a conversation, in order.
pub(crate) fn tool_messages(chat: &List<Message>) -> Vec<ToolMessage> {
    chat.iter().filter_map(Message::as_tool).cloned().collect()
}

/// A human turn as the research state's input.
pub(crate) fn ask(topic: &str, text: &str) -> ResearchUpdate {
    Research::update()
        .topic(topic.to_owned())
        .chat(Message::human(text).into())
}
