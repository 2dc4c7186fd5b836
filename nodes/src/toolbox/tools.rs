//! [`ToolNode`]: the tool calls of the last AI message over a user's state, each through the
//! toolbox's tool chain.

use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;
use stategraph::reducers::{MessageOp, MessagesUpdate};
use stategraph::{BoxError, Command, Goto, Node, NodeContext};

use super::{view_of, Toolbox};
use crate::agent::batches::batches;
use crate::context::RunContext;
use crate::message::{Message, ToolCall};
use crate::middleware::{
    PolicyLayer, ToolErrorHandling, ToolInvocation, ToolLayer, ToolMap, ToolNext,
};
use crate::state::{MessagesState, ThreadState};
use crate::tool::{ToolContext, ToolError, ToolOutput};
use crate::trace::{CapabilityTrace, Stage, TraceEntry, Verdict};

/// A tool node could not turn the last AI message's calls into an update.
///
/// ```
/// use stategraph_nodes::toolbox::ToolNodeError;
///
/// let e = ToolNodeError::NoToolCalls { node: "tools".into() };
/// assert!(e.to_string().contains("not an AI message with tool calls"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolNodeError {
    /// The last message is not an AI message with tool calls (route to the tool node with
    /// [`tools_condition`](super::tools_condition)).
    #[error("node {node:?}: the last message is not an AI message with tool calls")]
    NoToolCalls {
        /// The node.
        node: String,
    },
    /// A tool returned a `Command` writing fields of [`ThreadState`] other than `messages`:
    /// a tool node carries a command's messages and routing only (the calls of one message
    /// answer with one update of the node's state), so the write would be lost. Tools that
    /// write other fields (`present_files`, `task`, ...) need the assembled agent.
    #[error("tool {tool:?} (call {call_id:?}) wrote {fields:?}; a tool node carries only `messages` and routing from a tool's command")]
    UnmappedUpdate {
        /// The tool.
        tool: String,
        /// The call.
        call_id: String,
        /// The fields it wrote besides `messages`.
        fields: Vec<&'static str>,
    },
    /// A tool returned a command for a parent graph, which a tool node does not forward.
    #[error("tool {tool:?} (call {call_id:?}) sent a command to a parent graph; a tool node does not forward it")]
    ParentCommand {
        /// The tool.
        tool: String,
        /// The call.
        call_id: String,
    },
}

/// A node running the tool calls of the last AI message of a state `S` (build it with
/// [`tool_node`]). See the [module docs](super) for what its chain carries.
///
/// ```
/// use stategraph::{StateGraph, END, START};
/// use stategraph_nodes::toolbox::{tool_node, ToolNode, Toolbox, TOOLS};
/// use stategraph_nodes::ThreadState;
///
/// let node: ToolNode<ThreadState> = tool_node(&Toolbox::new());
/// let graph = StateGraph::new().add_node(TOOLS, node).add_edge(START, TOOLS).add_edge(TOOLS, END);
/// assert!(graph.compile().is_ok());
/// ```
pub struct ToolNode<S> {
    inner: Arc<ToolInner>,
    _state: PhantomData<fn(S) -> S>,
}

/// What every task of a tool node shares.
struct ToolInner {
    tools: ToolMap,
    layers: Vec<Arc<dyn ToolLayer>>,
    toolbox: Toolbox,
}

impl<S> std::fmt::Debug for ToolNode<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolNode")
            .field("tools", &self.inner.tools.len())
            .field("layers", &self.inner.layers.len())
            .finish_non_exhaustive()
    }
}

/// A tool node over `S` running the toolbox's tools. Each call of the last AI message goes
/// through error handling, then every policy's `check_call`, then the toolbox's tool layers,
/// and only then its handler; a call to a tool the toolbox does not have is refused with an
/// error tool message. The tool messages are appended in the model's call order.
///
/// ```
/// use stategraph::{List, State, StateGraph, END, START};
/// use stategraph_nodes::toolbox::{tool_node, Toolbox};
/// use stategraph_nodes::{impl_messages_state, AiMessage, Message, Stage, ToolCall};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Chat {
///     #[reduce(add_messages)]
///     messages: List<Message>,
/// }
/// impl_messages_state!(Chat, messages);
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let tools = Toolbox::new(); // no tools: any call is refused
/// let graph = StateGraph::<Chat>::new()
///     .add_node("tools", tool_node(&tools))
///     .add_edge(START, "tools")
///     .add_edge("tools", END)
///     .compile()?;
/// let ai = AiMessage::calls([ToolCall::new("c1", "rm", serde_json::json!({}))]);
/// let out = graph.invoke(Chat::update().messages(Message::Ai(ai).into()), &Default::default()).await?;
/// assert!(out.state.messages.last().is_some_and(|m| m.text().starts_with("Error:")));
/// assert!(!tools.trace().reached("rm", Stage::Executed));
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub fn tool_node<S: MessagesState>(toolbox: &Toolbox) -> ToolNode<S> {
    let specs = toolbox.spec_map();
    let mut layers: Vec<Arc<dyn ToolLayer>> = vec![Arc::new(ToolErrorHandling)];
    layers.extend(toolbox.policies.iter().map(|p| {
        Arc::new(PolicyLayer::new(Arc::clone(p), Arc::clone(&specs))) as Arc<dyn ToolLayer>
    }));
    layers.extend(toolbox.tool_layers.iter().cloned());
    ToolNode {
        inner: Arc::new(ToolInner {
            tools: toolbox.tool_map(),
            layers,
            toolbox: toolbox.clone(),
        }),
        _state: PhantomData,
    }
}

impl<S: MessagesState> Node<S> for ToolNode<S> {
    fn run(
        &self,
        state: Arc<S>,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<Command<S>, BoxError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.step(state, ctx).await })
    }
}

/// One task's view: what each call of the task sees.
struct Task {
    view: Arc<ThreadState>,
    run: Arc<RunContext>,
    trace: CapabilityTrace,
    ctx: NodeContext,
}

impl ToolInner {
    /// Every call of the last AI message, batch by batch; their messages as one update.
    async fn step<S: MessagesState>(
        &self,
        state: Arc<S>,
        ctx: NodeContext,
    ) -> Result<Command<S>, BoxError> {
        let calls = match state.last_ai_message() {
            Some(ai) if !ai.tool_calls.is_empty() => ai.tool_calls.clone(),
            _ => {
                return Err(Box::new(ToolNodeError::NoToolCalls {
                    node: ctx.node().to_owned(),
                }))
            }
        };
        let run = self.toolbox.context_for(&ctx);
        let task = Task {
            view: view_of(&*state),
            trace: CapabilityTrace::scoped(run.run_id.as_deref(), run.thread_id.as_deref()),
            run,
            ctx: ctx.clone(),
        };
        let result = self.run_batches(&calls, &task).await;
        let entries = task.trace.entries();
        emit(&ctx, &entries).await;
        self.toolbox.trace.extend(entries);
        let outputs = match result {
            Ok(outputs) => outputs,
            // A cancellation from any layer ends the run as cancelled (not as a failed node).
            Err(ToolError::Cancelled { .. }) => {
                ctx.cancel_run();
                return std::future::pending().await;
            }
            Err(e) => return Err(e.into_box()),
        };
        let mut messages = MessagesUpdate::new();
        let mut gotos: Vec<Goto> = Vec::new();
        for (call, output) in calls.iter().zip(outputs) {
            match output {
                ToolOutput::Message(m) => {
                    let mut message = Message::Tool(m);
                    crate::tokens::emit_whole(&ctx, &mut message).await;
                    messages.push(MessageOp::Upsert(message));
                }
                ToolOutput::Command(command) => {
                    translate(call, command, &mut messages, &mut gotos)?;
                }
            }
        }
        Ok(Command::new()
            .update(S::messages_update(messages))
            .goto_all(gotos))
    }

    /// The calls' outputs in call order: each batch of read-only calls concurrently, every
    /// other call alone, in the order [`batches`] gives. The first control-flow signal stops
    /// the task (it is passed on unchanged).
    async fn run_batches(
        &self,
        calls: &[ToolCall],
        task: &Task,
    ) -> Result<Vec<ToolOutput>, ToolError> {
        let read_only = |c: &ToolCall| self.tools.get(&c.name).is_some_and(|t| t.spec().read_only);
        let mut outputs: Vec<Option<ToolOutput>> = calls.iter().map(|_| None).collect();
        for batch in batches(calls, read_only) {
            let runs = batch.iter().map(|&i| self.call(&calls[i], task));
            let done = futures::future::join_all(runs).await;
            for (i, output) in batch.into_iter().zip(done) {
                outputs[i] = Some(output?);
            }
        }
        Ok(outputs.into_iter().flatten().collect())
    }

    /// One call through the chain, recorded as Returned when its handler ran.
    async fn call(&self, call: &ToolCall, task: &Task) -> Result<ToolOutput, ToolError> {
        let cx = ToolContext {
            state: Arc::clone(&task.view),
            run: Arc::clone(&task.run),
            node: Some(task.ctx.clone()),
            sandbox: None,
            trace: Some(task.trace.clone()),
            secrets: None,
            unanswered: None,
            store: None,
        };
        let invocation = ToolInvocation::new(call.clone(), cx, task.trace.clone());
        // This call's entries come after this point: the task's earlier calls are not read
        // again (a task of n calls reads O(n) entries, not O(n²)).
        let before = task.trace.len();
        let output = ToolNext::new(&self.layers, &self.tools)
            .run(invocation)
            .await?;
        let own =
            |e: &TraceEntry| e.call_id.as_deref() == Some(call.id.as_str()) && e.tool == call.name;
        let ran = !task
            .trace
            .entries_since(before, |e| {
                own(e) && e.stage == Stage::Executed && e.passed()
            })
            .is_empty();
        if ran {
            let verdict = match output.message() {
                Some(m) if m.is_error() => Verdict::Failed {
                    reason: m.content.clone(),
                },
                _ => Verdict::Passed,
            };
            task.trace
                .record(TraceEntry::new(&call.name, Stage::Returned, verdict).for_call(&call.id));
        }
        Ok(output)
    }
}

/// Adds what a tool's `command` (answering `call`) gives to the task's messages and routing.
fn translate(
    call: &ToolCall,
    command: Command<ThreadState>,
    messages: &mut MessagesUpdate<Message>,
    gotos: &mut Vec<Goto>,
) -> Result<(), ToolNodeError> {
    if command.has_parent() {
        return Err(ToolNodeError::ParentCommand {
            tool: call.name.clone(),
            call_id: call.id.clone(),
        });
    }
    gotos.extend(command.gotos().iter().cloned());
    let Some(update) = command.update_ref() else {
        return Ok(());
    };
    let fields: Vec<&'static str> = stategraph::state::written_fields::<ThreadState>(update)
        .into_iter()
        .map(stategraph::Field::name)
        .filter(|name| *name != "messages")
        .collect();
    if !fields.is_empty() {
        return Err(ToolNodeError::UnmappedUpdate {
            tool: call.name.clone(),
            call_id: call.id.clone(),
            fields,
        });
    }
    if let Some(update) = &update.messages {
        for op in update.ops() {
            messages.push(op.clone());
        }
    }
    Ok(())
}

/// Emit trace entries as custom stream events (`{"capability": entry}`).
pub(super) async fn emit(ctx: &NodeContext, entries: &[TraceEntry]) {
    /// The event's payload, serialised only if a listener takes custom events.
    #[derive(serde::Serialize)]
    struct CapabilityEvent<'a> {
        capability: &'a TraceEntry,
    }
    for entry in entries {
        ctx.emit(CapabilityEvent { capability: entry }).await;
    }
}
