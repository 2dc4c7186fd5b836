//! [`ModelNode`]: one model call over a user's state, through the toolbox's model chain.

use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;
use stategraph::reducers::MessagesUpdate;
use stategraph::{BoxError, Command, Node, NodeContext};

use super::{model_calls_in, view_of, Toolbox};
use crate::context::StopStamp;
use crate::message::Message;
use crate::middleware::{ModelCall, ModelLayer, ModelNext, PolicyLayer};
use crate::model::{ChatModel, ModelError, ModelRequest, ToolSchema};
use crate::state::MessagesState;
use crate::trace::CapabilityTrace;

/// A node calling a model on the conversation of a state `S` and appending its AI message
/// (build it with [`model_node`]). It routes nowhere itself: follow it with
/// [`tools_condition`](super::tools_condition). An answer calling tools when the run has
/// fewer than two steps left is replaced by [`NEED_MORE_STEPS`](crate::last_step::NEED_MORE_STEPS)
/// (see [`last_step`](crate::last_step)), as LangGraph's prebuilt agent does.
///
/// ```
/// use stategraph::{StateGraph, END, START};
/// use stategraph_nodes::toolbox::{model_node, ModelNode, Toolbox};
/// use stategraph_nodes::{ScriptedModel, ThreadState};
///
/// let node: ModelNode<ThreadState> = model_node(ScriptedModel::new("m", Vec::<stategraph_nodes::AiMessage>::new()), &Toolbox::new());
/// let graph = StateGraph::new().add_node("agent", node).add_edge(START, "agent").add_edge("agent", END);
/// assert!(graph.compile().is_ok());
/// ```
pub struct ModelNode<S> {
    inner: Arc<ModelInner>,
    _state: PhantomData<fn(S) -> S>,
}

/// What every task of a model node shares.
struct ModelInner {
    model: Arc<dyn ChatModel>,
    system: Option<String>,
    schemas: Vec<ToolSchema>,
    layers: Vec<Arc<dyn ModelLayer>>,
    toolbox: Toolbox,
}

impl<S> std::fmt::Debug for ModelNode<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelNode")
            .field("model", &self.inner.model.name())
            .field("tools", &self.inner.schemas.len())
            .finish_non_exhaustive()
    }
}

/// A model node over `S` showing `model` the toolbox's tools: each request carries the
/// toolbox's system prompt, the conversation, and every tool schema each policy lets the
/// model see (what was hidden, and what was shown on which call, goes into the toolbox's
/// trace; calls are numbered per conversation: the n-th AI message answers call n).
///
/// ```
/// use stategraph::{List, State, StateGraph, END, START};
/// use stategraph_nodes::toolbox::{model_node, Toolbox};
/// use stategraph_nodes::{impl_messages_state, AiMessage, Message, ScriptedModel};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Chat {
///     #[reduce(add_messages)]
///     messages: List<Message>,
/// }
/// impl_messages_state!(Chat, messages);
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let model = ScriptedModel::new("m", [AiMessage::text("hello")]);
/// let graph = StateGraph::<Chat>::new()
///     .add_node("agent", model_node(model.clone(), &Toolbox::new().system("Be brief.")))
///     .add_edge(START, "agent")
///     .add_edge("agent", END)
///     .compile()?;
/// let out = graph.invoke(Chat::update().messages(Message::human("hi").into()), &Default::default()).await?;
/// assert_eq!(out.state.messages.len(), 2);
/// assert_eq!(model.requests()[0].system.as_deref(), Some("Be brief."));
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub fn model_node<S: MessagesState>(model: impl ChatModel, toolbox: &Toolbox) -> ModelNode<S> {
    let specs = toolbox.spec_map();
    let mut layers: Vec<Arc<dyn ModelLayer>> = toolbox
        .policies
        .iter()
        .map(|p| {
            Arc::new(PolicyLayer::new(Arc::clone(p), Arc::clone(&specs))) as Arc<dyn ModelLayer>
        })
        .collect();
    layers.extend(toolbox.model_layers.iter().cloned());
    ModelNode {
        inner: Arc::new(ModelInner {
            model: Arc::new(model),
            system: toolbox.system.clone(),
            schemas: toolbox.tools.iter().map(|t| t.spec().schema()).collect(),
            layers,
            toolbox: toolbox.clone(),
        }),
        _state: PhantomData,
    }
}

impl ModelInner {
    /// One model call; the AI message as the state's update.
    async fn step<S: MessagesState>(
        &self,
        state: Arc<S>,
        ctx: NodeContext,
    ) -> Result<Command<S>, BoxError> {
        let run = self.toolbox.context_for(&ctx);
        let trace = CapabilityTrace::scoped(run.run_id.as_deref(), run.thread_id.as_deref());
        let view = view_of(&*state);
        let call = ModelCall {
            request: ModelRequest {
                system: self.system.clone(),
                messages: view.messages.clone(),
                tools: self.schemas.clone(),
            },
            number: model_calls_in(&view.messages).saturating_add(1),
            state: view,
            run,
            trace: trace.clone(),
            node: Some(ctx.clone()),
            stream: false,
            stop: StopStamp::default(),
        };
        let result = ModelNext::new(&self.layers, &[], self.model.as_ref())
            .run(call)
            .await;
        let entries = trace.entries();
        super::tools::emit(&ctx, &entries).await;
        self.toolbox.trace.extend(entries);
        let response = result.map_err(|e| match e {
            ModelError::Control(signal) => signal,
            // An interrupt a layer raised as its own error is still a signal, not a failure.
            ModelError::Other(e) if e.is::<stategraph::Interrupted>() => e,
            other => Box::new(other) as BoxError,
        })?;
        let mut ai = response.message;
        // The tool node takes one step for all of a message's calls.
        if !ai.tool_calls.is_empty() && crate::last_step::out_of_steps(&ctx, 1) {
            ai = crate::last_step::need_more_steps(&ai);
        }
        let update = S::messages_update(MessagesUpdate::from(Message::Ai(ai)));
        Ok(Command::new().update(update))
    }
}

impl<S: MessagesState> Node<S> for ModelNode<S> {
    fn run(
        &self,
        state: Arc<S>,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<Command<S>, BoxError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.step(state, ctx).await })
    }
}
