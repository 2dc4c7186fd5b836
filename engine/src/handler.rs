//! Node error handlers: the [`ErrorHandler`] a node (or a graph, for all its nodes) is given,
//! the [`NodeError`] it receives when the node fails after its retries, and the
//! [`HandledFailure`] record a checkpoint keeps of each failure a handler took over.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use stategraph_checkpoints::{Checkpoint, TaskId};

use crate::timeout::TimeoutLimit;
use crate::{BoxError, Command, NodeContext, RunError, State};

/// The checkpoint metadata key under which a step's handled failures are recorded: a list of
/// [`HandledFailure`]s, in the order of the step's tasks (absent when none was handled).
///
/// ```
/// assert_eq!(stategraph::HANDLED_ERRORS_KEY, "handled_errors");
/// ```
pub const HANDLED_ERRORS_KEY: &str = "handled_errors";

/// What a node's error handler receives: which task failed, after how many attempts, and
/// the error the run would have failed with.
///
/// Control flow never reaches a handler: an interrupt, a cancellation, and a subgraph's
/// interrupt errors pass unchanged.
///
/// ```
/// use std::sync::Arc;
/// use stategraph::prelude::*;
/// use stategraph::NodeError;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("quota exceeded")]
/// struct Quota;
///
/// #[derive(State, Clone, Default, Debug)]
/// struct S { note: String }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let graph = StateGraph::<S>::new()
///     .add_node_with(
///         "call",
///         |_s: Arc<S>, _cx: NodeContext| async move { Err::<SUpdate, BoxError>(Box::new(Quota)) },
///         NodeOptions::new().error_handler(|_s: Arc<S>, e: NodeError, _cx: NodeContext| async move {
///             // The node's own error, typed; the task and step identify the failure.
///             let quota = e.node_error().is_some_and(|err| err.is::<Quota>());
///             Ok::<_, BoxError>(S::update().note(format!("quota: {quota}, attempts: {}", e.attempts)))
///         }),
///     )
///     .add_edge(START, "call")
///     .add_edge("call", END)
///     .compile()?;
/// let out = graph.invoke(S::update(), &RunConfig::new()).await?;
/// assert_eq!(out.state.note, "quota: true, attempts: 1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, thiserror::Error)]
#[error("node {node:?} failed at step {step} (task {task}) after {attempts} attempt(s): {source}")]
#[non_exhaustive]
pub struct NodeError {
    /// The node that failed.
    pub node: String,
    /// The superstep.
    pub step: i64,
    /// The task (the same on every re-execution of the task).
    pub task: TaskId,
    /// How many attempts were made (retries included).
    pub attempts: u32,
    /// The failure: [`RunError::Node`] with the node's own error, [`RunError::Timeout`], or a
    /// subgraph's run error.
    #[source]
    pub source: Arc<RunError>,
}

impl NodeError {
    /// The node's own error, when it returned one (`None` for a timeout or a subgraph's
    /// failure): downcast it to the type the node failed with.
    pub fn node_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self.source.as_ref() {
            RunError::Node { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }

    /// The limit that fired, when the last attempt timed out.
    pub fn timeout(&self) -> Option<TimeoutLimit> {
        match self.source.as_ref() {
            RunError::Timeout { limit, .. } => Some(*limit),
            _ => None,
        }
    }

    /// The record a checkpoint keeps of this failure.
    pub(crate) fn record(&self) -> HandledFailure {
        HandledFailure {
            node: self.node.clone(),
            step: self.step,
            task: self.task.to_string(),
            attempts: self.attempts,
            kind: match self.source.as_ref() {
                RunError::Node { .. } => FailureKind::Node,
                RunError::Timeout { limit, .. } => FailureKind::Timeout(*limit),
                _ => FailureKind::Subgraph,
            },
            error: match self.source.as_ref() {
                RunError::Node { source, .. } => source.to_string(),
                other => other.to_string(),
            },
        }
    }
}

/// A node's error handler: called when the node fails after its retries, with the state the
/// node saw, the [`NodeError`] and the task's [`NodeContext`]; it returns the task's output
/// instead (an update, or a [`Command`], for example a `goto` to a fallback node).
///
/// The handler's output takes the failed task's place: the node's own edges, joins and
/// conditional edges do not fire after it (a handled failure goes only where the handler's
/// `goto` says), its writes are recorded like a task's, and a resumed run reuses them without
/// calling the handler again. A handler that fails fails the run with
/// [`RunError::ErrorHandler`], naming the node's failure and its own. It runs once: no retry,
/// no timeout.
///
/// Any `Fn(Arc<S>, NodeError, NodeContext) -> impl Future<Output = Result<O, E>>` is a
/// handler, where `O` converts into a [`Command<S>`] and `E` into a [`BoxError`].
///
/// ```
/// use std::sync::Arc;
/// use stategraph::prelude::*;
/// use stategraph::NodeError;
///
/// #[derive(State, Clone, Default, Debug)]
/// struct S {
///     #[reduce(append)]
///     log: Vec<String>,
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let recover = |_s: Arc<S>, e: NodeError, _cx: NodeContext| async move {
///     Ok::<_, BoxError>(Command::new().update(S::update().log(vec![format!("{} failed", e.node)])).goto("fallback"))
/// };
/// let graph = StateGraph::<S>::new()
///     .add_node_with(
///         "call_api",
///         |_s: Arc<S>, _cx: NodeContext| async move { Err::<SUpdate, BoxError>("503".into()) },
///         NodeOptions::new().error_handler(recover).destinations(["fallback"]),
///     )
///     .add_node("fallback", |_s: Arc<S>, _cx: NodeContext| async move {
///         Ok::<_, BoxError>(S::update().log(vec!["cached answer".to_owned()]))
///     })
///     .add_edge(START, "call_api")
///     .add_edge("call_api", END)
///     .add_edge("fallback", END)
///     .compile()?;
/// let out = graph.invoke(S::update(), &RunConfig::new()).await?;
/// assert_eq!(out.state.log, ["call_api failed", "cached answer"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub trait ErrorHandler<S: State>: Send + Sync + 'static {
    /// Handle one failure.
    fn handle(
        &self,
        state: Arc<S>,
        error: NodeError,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<Command<S>, BoxError>>;
}

impl<S, F, Fut, O, E> ErrorHandler<S> for F
where
    S: State,
    F: Fn(Arc<S>, NodeError, NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<Command<S>>,
    E: Into<BoxError>,
{
    fn handle(
        &self,
        state: Arc<S>,
        error: NodeError,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<Command<S>, BoxError>> {
        let fut = (self)(state, error, ctx);
        Box::pin(async move { fut.await.map(Into::into).map_err(Into::into) })
    }
}

/// A handler for some state type, as [`NodeOptions`](crate::NodeOptions) keeps it (options
/// are not generic over the state); `compile` checks that it is one for the graph's state.
#[derive(Clone)]
pub(crate) struct ErasedHandler {
    handler: Arc<dyn Any + Send + Sync>,
    state: &'static str,
}

/// The typed handler inside an [`ErasedHandler`].
struct HandlerOf<S: State>(Arc<dyn ErrorHandler<S>>);

impl ErasedHandler {
    /// Erase `handler`'s state type.
    pub(crate) fn new<S: State, H: ErrorHandler<S>>(handler: H) -> Self {
        let typed: Arc<dyn ErrorHandler<S>> = Arc::new(handler);
        ErasedHandler {
            handler: Arc::new(HandlerOf(typed)),
            state: std::any::type_name::<S>(),
        }
    }

    /// The handler, if it is one for state `S`.
    pub(crate) fn get<S: State>(&self) -> Option<Arc<dyn ErrorHandler<S>>> {
        self.handler
            .downcast_ref::<HandlerOf<S>>()
            .map(|h| h.0.clone())
    }

    /// The name of the state type the handler was written for.
    pub(crate) fn state_name(&self) -> &'static str {
        self.state
    }
}

impl fmt::Debug for ErasedHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ErrorHandler<{}>", self.state)
    }
}

/// What kind of failure a handler took over; stored as `"node"`, `"subgraph"` or
/// `{"timeout": "run" | "idle"}`.
///
/// ```
/// use stategraph::{FailureKind, TimeoutLimit};
///
/// let kind = FailureKind::Timeout(TimeoutLimit::Idle);
/// assert_eq!(serde_json::to_value(kind).unwrap(), serde_json::json!({"timeout": "idle"}));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The node returned an error (or panicked).
    Node,
    /// Its last attempt exceeded this limit of its [`TimeoutPolicy`](crate::TimeoutPolicy).
    Timeout(TimeoutLimit),
    /// The subgraph it runs failed.
    Subgraph,
}

/// A failure an error handler took over, as the checkpoint of its step records it (under
/// [`HANDLED_ERRORS_KEY`]): read it from a [`StateSnapshot`](crate::StateSnapshot) of
/// `get_state` or the history with [`HandledFailure::of`].
///
/// ```
/// use stategraph::{FailureKind, HandledFailure, HANDLED_ERRORS_KEY};
/// use stategraph::checkpoints::{Checkpoint, CheckpointId, Control, Source};
///
/// let mut checkpoint = Checkpoint {
///     id: CheckpointId::generate(),
///     parent: None,
///     step: 1,
///     source: Source::Loop,
///     created_at_ms: 0,
///     control: Control::default(),
///     metadata: Default::default(),
/// };
/// assert!(HandledFailure::of(&checkpoint).is_empty());
/// checkpoint.metadata.insert(
///     HANDLED_ERRORS_KEY.to_owned(),
///     serde_json::json!([{"node": "fetch", "step": 0, "task": "t", "attempts": 3,
///                         "kind": "node", "error": "503"}]),
/// );
/// let handled = HandledFailure::of(&checkpoint);
/// assert_eq!(handled[0].node, "fetch");
/// assert_eq!(handled[0].kind, FailureKind::Node);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HandledFailure {
    /// The node that failed.
    pub node: String,
    /// The superstep it failed in.
    pub step: i64,
    /// The task's id.
    pub task: String,
    /// How many attempts were made.
    pub attempts: u32,
    /// What kind of failure it was.
    pub kind: FailureKind,
    /// The failure's message (the node's own error's, for [`FailureKind::Node`]).
    pub error: String,
}

impl HandledFailure {
    /// The failures handled in the step that made `checkpoint` (none when the key is absent;
    /// entries of another form are skipped).
    pub fn of(checkpoint: &Checkpoint) -> Vec<HandledFailure> {
        let Some(serde_json::Value::Array(items)) = checkpoint.metadata.get(HANDLED_ERRORS_KEY)
        else {
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|v| HandledFailure::deserialize(v).ok())
            .collect()
    }

    /// The stored form of `records`.
    pub(crate) fn to_metadata(records: &[HandledFailure]) -> serde_json::Value {
        serde_json::to_value(records).unwrap_or(serde_json::Value::Null)
    }
}

impl<S> crate::StateSnapshot<S> {
    /// The failures error handlers took over in the step that made this checkpoint.
    pub fn handled_errors(&self) -> Vec<HandledFailure> {
        HandledFailure::of(&self.checkpoint)
    }
}
