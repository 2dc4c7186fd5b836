//! Agent steps for your own graph: a [`model_node`] and a [`tool_node`] over any state with a
//! messages field ([`MessagesState`]), sharing one [`Toolbox`], and the [`tools_condition`]
//! router between them (LangGraph's `ToolNode`, `tools_condition` and `MessagesState`).
//!
//! ```
//! use stategraph::{List, State, StateGraph, END, START};
//! use stategraph_nodes::prelude::*;
//! use stategraph_nodes::impl_messages_state;
//! use stategraph_nodes::toolbox::{model_node, tool_node, tools_condition, Toolbox, TOOLS};
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Research {
//!     topic: String,
//!     #[reduce(add_messages)]
//!     messages: List<Message>,
//! }
//! impl_messages_state!(Research, messages);
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = ScriptedModel::new("m", [
//!     AiMessage::calls([ToolCall::new("c1", "lookup", serde_json::json!({}))]),
//!     AiMessage::text("found it"),
//! ]);
//! let lookup = FnTool::new(
//!     ToolSpec::new("lookup", "Look something up", ToolSource::Config).read_only(true),
//!     |call, _cx| async move { Ok(ToolMessage::new(&call.id, "lookup", "a source").into()) },
//! );
//! let tools = Toolbox::new().tool(lookup);
//! let graph = StateGraph::<Research>::new()
//!     .add_node("agent", model_node(model.clone(), &tools))
//!     .add_node(TOOLS, tool_node(&tools))
//!     .add_edge(START, "agent")
//!     .add_conditional_edges("agent", tools_condition, [TOOLS, END])
//!     .add_edge(TOOLS, "agent")
//!     .compile()?;
//! let input = Research::update().topic("rust".into()).messages(Message::human("go").into());
//! let out = graph.invoke(input, &Default::default()).await?;
//! assert_eq!(out.state.messages.last().map(Message::text), Some("found it"));
//! assert_eq!(out.state.topic, "rust");
//! assert!(tools.trace().reached("lookup", Stage::Returned));
//! model.verify()?;
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```
//!
//! # What a tool node over your state carries
//!
//! Every call goes through a tool chain before its handler runs: error handling (a failure
//! becomes an `Error: ...` tool message, a call to a tool the toolbox does not have is refused
//! and traced as denied by `catalog`), then each [`ToolPolicy`]'s `check_call` (the same rule
//! that decided what the model node showed, asked again at call time), then your tool layers.
//! Interrupts and cancellation pass through unchanged. Calls of one AI message run in batches
//! as the agent's do (consecutive read-only calls together, every other call alone, in the
//! model's order), all within the one tool-node task.
//!
//! It does not carry what needs the assembled agent's runtime: authorization by a provider,
//! the deferred catalog and `tool_search`, skills and their tool policy, the sandbox, secrets,
//! run settlement. Tools see a [`ThreadState`] holding only your conversation
//! (`cx.state.messages`), and a tool's `Command` may write only `messages` and route. For
//! those, assemble an [`Agent`](crate::Agent) and put it into your graph with
//! [`Agent::as_node`](crate::Agent::as_node).

use std::collections::HashMap;
use std::sync::Arc;

use crate::context::RunContext;
use crate::message::Message;
use crate::middleware::{ModelLayer, ToolLayer, ToolMap, ToolPolicy};
use crate::state::{MessagesState, ThreadState};
use crate::tool::{Tool, ToolSpec};
use crate::trace::{CapabilityTrace, Stage};

mod model;
mod tools;

pub use model::{model_node, ModelNode};
pub use tools::{tool_node, ToolNode, ToolNodeError};

/// The name [`tools_condition`] routes to when the last AI message calls tools: name your
/// tool node so.
///
/// ```
/// assert_eq!(stategraph_nodes::toolbox::TOOLS, "tools");
/// ```
pub const TOOLS: &str = "tools";

/// Route after a model node: to [`TOOLS`] when the last message is an AI message with tool
/// calls, otherwise to [`END`](stategraph::END).
///
/// ```
/// use stategraph_nodes::toolbox::{tools_condition, TOOLS};
/// use stategraph_nodes::{AiMessage, Message, ThreadState, ToolCall};
///
/// let mut state = ThreadState::default();
/// state.messages.push(Message::Ai(AiMessage::text("done")));
/// assert_eq!(tools_condition(&state), stategraph::END);
/// state.messages.push(Message::Ai(AiMessage::calls([ToolCall::new("c1", "x", Default::default())])));
/// assert_eq!(tools_condition(&state), TOOLS);
/// ```
pub fn tools_condition<S: MessagesState>(state: &S) -> &'static str {
    match state.last_ai_message() {
        Some(ai) if !ai.tool_calls.is_empty() => TOOLS,
        _ => stategraph::END,
    }
}

/// The tools, policies and layers a [`model_node`] and a [`tool_node`] share, and the
/// capability trace both record into. Clones share the trace.
///
/// ```
/// use stategraph_nodes::toolbox::Toolbox;
/// use stategraph_nodes::{FnTool, RunContext, ToolMessage, ToolSource, ToolSpec};
///
/// let echo = FnTool::new(ToolSpec::new("echo", "Echo", ToolSource::Config), |call, _cx| async move {
///     Ok(ToolMessage::new(&call.id, "echo", call.args.to_string()).into())
/// });
/// let tools = Toolbox::new().tool(echo).context(RunContext::new("ignored", "ana"));
/// assert_eq!(tools.tool_names(), ["echo"]);
/// ```
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: Vec<Arc<dyn Tool>>,
    policies: Vec<Arc<dyn ToolPolicy>>,
    tool_layers: Vec<Arc<dyn ToolLayer>>,
    model_layers: Vec<Arc<dyn ModelLayer>>,
    system: Option<String>,
    context: RunContext,
    trace: CapabilityTrace,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.tool_names())
            .field("policies", &self.policies.len())
            .finish_non_exhaustive()
    }
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a tool. A tool whose name is already taken is left out (the first of a name
    /// wins, as in an agent's catalog) and traced as removed at `Available`.
    pub fn tool(mut self, tool: impl Tool) -> Self {
        let name = tool.spec().name.clone();
        if self.tools.iter().any(|t| t.spec().name == name) {
            self.trace.remove(
                &name,
                Stage::Available,
                "toolbox",
                "a tool of this name was added before",
            );
        } else {
            self.trace.pass(&name, Stage::Available);
            self.tools.push(Arc::new(tool));
        }
        self
    }

    /// Add a [`ToolPolicy`]: asked when the model node builds a request (what the model
    /// sees) and again by the tool node before each call runs.
    pub fn policy(mut self, policy: impl ToolPolicy) -> Self {
        self.policies.push(Arc::new(policy));
        self
    }

    /// Add a layer around tool calls (inside the policies; registration order is outermost
    /// first).
    pub fn tool_layer(mut self, layer: impl ToolLayer) -> Self {
        self.tool_layers.push(Arc::new(layer));
        self
    }

    /// Add a layer around model calls (inside the policies; registration order is outermost
    /// first).
    pub fn model_layer(mut self, layer: impl ModelLayer) -> Self {
        self.model_layers.push(Arc::new(layer));
        self
    }

    /// The system prompt the model node sends before the conversation.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// Who runs the nodes (user, role, attributes) as tools, layers and policies see it. Its
    /// thread is always the thread of the graph run executing the node (none when the run has
    /// none), whatever `context` names.
    pub fn context(mut self, context: RunContext) -> Self {
        self.context = context;
        self
    }

    /// The names of the toolbox's tools, in the order added.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.spec().name.clone()).collect()
    }

    /// The capability trace of every node built from this toolbox: each entry names the
    /// thread it was recorded on (see [`CapabilityTrace::for_thread`]).
    pub fn trace(&self) -> &CapabilityTrace {
        &self.trace
    }

    /// The tools by name.
    fn tool_map(&self) -> ToolMap {
        self.tools
            .iter()
            .map(|t| (t.spec().name.clone(), Arc::clone(t)))
            .collect()
    }

    /// The tools' specs by name.
    fn spec_map(&self) -> Arc<HashMap<String, ToolSpec>> {
        Arc::new(
            self.tools
                .iter()
                .map(|t| (t.spec().name.clone(), t.spec().clone()))
                .collect(),
        )
    }

    /// The context a task of `ctx` runs under: the toolbox's, on the task's thread.
    fn context_for(&self, ctx: &stategraph::NodeContext) -> Arc<RunContext> {
        Arc::new(RunContext {
            thread_id: ctx.thread().map(|t| t.as_str().to_owned()),
            ..self.context.clone()
        })
    }
}

/// What tools and policies see of a user's state: a [`ThreadState`] holding only its
/// conversation (shared, not copied).
fn view_of<S: MessagesState>(state: &S) -> Arc<ThreadState> {
    Arc::new(ThreadState {
        messages: state.messages().clone(),
        ..ThreadState::default()
    })
}

/// The model calls a conversation already holds: AI messages (the next call's number is
/// one more, so numbering is per thread and survives restarts).
fn model_calls_in(messages: &stategraph::List<Message>) -> u32 {
    let n = messages
        .iter()
        .filter(|m| matches!(m, Message::Ai(_)))
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}
