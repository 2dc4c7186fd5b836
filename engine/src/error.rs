//! Errors: one enum per operation, and the umbrella [`Error`].

use std::time::Duration;

use stategraph_checkpoints::{CheckpointError, CheckpointId, Namespace, TaskId, ThreadId};
use stategraph_reducers::ReduceError;

/// A boxed error from user code (a node, a router, a tool).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One problem found by [`StateGraph::compile`](crate::StateGraph::compile).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphProblem {
    /// Two nodes with the same name.
    #[error("duplicate node {name:?}")]
    DuplicateNode {
        /// The name.
        name: String,
    },
    /// A node name that is reserved (`__start__`, `__end__`) or empty.
    #[error("reserved or empty node name {name:?}")]
    ReservedName {
        /// The name.
        name: String,
    },
    /// An edge names a node that does not exist.
    #[error("edge {from:?} -> {to:?} names a missing node")]
    MissingNode {
        /// Edge source.
        from: String,
        /// Edge target.
        to: String,
    },
    /// An edge out of END or into START.
    #[error("invalid edge {from:?} -> {to:?}: {reason}")]
    InvalidEdge {
        /// Edge source.
        from: String,
        /// Edge target.
        to: String,
        /// Why.
        reason: &'static str,
    },
    /// No edge leaves START.
    #[error("no entry: add an edge from START")]
    NoEntry,
    /// A node that no path from START reaches.
    #[error("node {name:?} is unreachable from START")]
    Unreachable {
        /// The node.
        name: String,
    },
    /// A node from which neither END nor a node without outgoing edges can be reached.
    #[error("node {name:?} has no path to END (every path loops forever)")]
    NoPathToEnd {
        /// The node.
        name: String,
    },
    /// A conditional edge or goto destination list that names a missing node.
    #[error("{kind} of {from:?} declares missing target {target:?}")]
    UndeclaredTarget {
        /// "conditional edge" or "destinations".
        kind: &'static str,
        /// The source node.
        from: String,
        /// The missing target.
        target: String,
    },
    /// A fan-in edge with no source, or with a source named twice (it could never fire).
    #[error("join {sources:?} -> {to:?} needs at least one source, each named once")]
    InvalidJoin {
        /// The sources as given.
        sources: Vec<String>,
        /// The target.
        to: String,
    },
    /// A static interrupt that names a missing node.
    #[error("interrupt_{when} names missing node {name:?}")]
    UnknownInterruptNode {
        /// "before" or "after".
        when: &'static str,
        /// The node.
        name: String,
    },
    /// An error handler written for another state type than the graph's.
    #[error(
        "error handler of node {node:?} is for state {found}, the graph's state is {expected}"
    )]
    HandlerState {
        /// The node (`*` for the graph's default handler).
        node: String,
        /// The graph's state type.
        expected: &'static str,
        /// The handler's state type.
        found: &'static str,
    },
    /// A node's [`CachePolicy::key`](crate::cache::CachePolicy::key) reads another state
    /// type than the graph's.
    #[error("cache key of node {node:?} reads a {found}, but the graph's state is a {expected}")]
    CacheKeyState {
        /// The node.
        node: String,
        /// The graph's state type.
        expected: &'static str,
        /// The state type the key function reads.
        found: &'static str,
    },
}

/// Every problem [`StateGraph::compile`](crate::StateGraph::compile) found, at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("graph does not compile: {}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct CompileError {
    /// The problems, in a stable order.
    pub problems: Vec<GraphProblem>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A node failed (after its retries).
    #[error("node {node:?} failed at step {step} (task {task}): {source}")]
    Node {
        /// The node.
        node: String,
        /// The superstep.
        step: i64,
        /// The task.
        task: TaskId,
        /// The node's error.
        #[source]
        source: BoxError,
    },
    /// A node's attempt exceeded a limit of its [`TimeoutPolicy`](crate::TimeoutPolicy).
    #[error("node {node:?} exceeded its {limit} timeout of {after:?} at step {step} (elapsed: {elapsed:?})")]
    Timeout {
        /// The node.
        node: String,
        /// The superstep.
        step: i64,
        /// Which limit fired.
        limit: crate::TimeoutLimit,
        /// The limit's value.
        after: Duration,
        /// How long the attempt had run.
        elapsed: Duration,
    },
    /// A node failed and its error handler failed too.
    #[error("error handler of node {node:?} failed at step {step} (task {task}): {source}; the node had failed with: {failure}")]
    ErrorHandler {
        /// The node.
        node: String,
        /// The superstep.
        step: i64,
        /// The task.
        task: TaskId,
        /// The node's failure, which the handler was given.
        failure: std::sync::Arc<RunError>,
        /// The handler's own error.
        #[source]
        source: BoxError,
    },
    /// A reducer rejected the writes of a step (for a last-value field: two writers).
    #[error("step {step}: field {field:?} written by {writers:?}: {source}")]
    Reduce {
        /// The field.
        field: &'static str,
        /// The nodes that wrote it, in task order.
        writers: Vec<String>,
        /// The superstep.
        step: i64,
        /// The reducer's error.
        #[source]
        source: ReduceError,
    },
    /// The run took more supersteps than its recursion limit allows.
    #[error("recursion limit of {limit} steps reached without finishing{}", on_thread(.thread))]
    RecursionLimit {
        /// The limit.
        limit: usize,
        /// The thread, if any.
        thread: Option<ThreadId>,
    },
    /// A `goto` or `Send` named a node the graph does not have.
    #[error("{from} routed to unknown node {name:?} at step {step}")]
    UnknownNode {
        /// The node name asked for.
        name: String,
        /// Who asked (a node name or "input").
        from: String,
        /// The superstep.
        step: i64,
    },
    /// A router returned a node outside its declared targets.
    #[error("router of {router:?} returned {value:?}, which is not among its declared targets")]
    UnknownRouteTarget {
        /// The node whose conditional edge it is.
        router: String,
        /// The returned target.
        value: String,
    },
    /// A `Send` whose argument could not be serialized or deserialized.
    #[error("send to {node:?}: bad argument: {detail}")]
    SendArg {
        /// Target node.
        node: String,
        /// What was wrong.
        detail: String,
    },
    /// `Command::to_parent` at the root graph, or with an update of the wrong state type.
    #[error("node {node:?} sent a command to its parent graph, but {reason}")]
    ParentCommand {
        /// The node.
        node: String,
        /// Why it could not be applied.
        reason: String,
    },
    /// A resume was given, but the thread has no pending interrupt.
    #[error("{} has no pending interrupt to resume", thread_text(.thread))]
    NoPendingInterrupt {
        /// The thread.
        thread: Option<ThreadId>,
    },
    /// One bare resume value while several interrupts are pending.
    #[error("several interrupts are pending ({pending:?}); resume with a map by interrupt id")]
    AmbiguousResume {
        /// Ids of the pending interrupts.
        pending: Vec<String>,
    },
    /// A resume map naming an interrupt that is not pending.
    #[error("no pending interrupt has id {id:?} (pending: {pending:?})")]
    UnknownInterruptId {
        /// The unknown id.
        id: String,
        /// Ids of the pending interrupts.
        pending: Vec<String>,
    },
    /// An empty resume map.
    #[error("empty resume map")]
    EmptyResume,
    /// `interrupt()` in a graph that has no checkpointer.
    #[error("node {node:?} called interrupt(), but the graph has no checkpointer to pause on")]
    InterruptWithoutCheckpointer {
        /// The node.
        node: String,
    },
    /// `interrupt()` inside a subgraph whose checkpointing is disabled.
    #[error("interrupt inside subgraph {subgraph:?}, whose checkpointing is disabled")]
    InterruptInEphemeralSubgraph {
        /// The subgraph's namespace.
        subgraph: Namespace,
    },
    /// Resumed code plans other tasks than the ones an earlier attempt of the step recorded
    /// (a node renamed, routing changed): the recorded writes are not applied to other tasks.
    #[error("step {step}: the recorded tasks {recorded:?} are not among the tasks this code plans {computed:?}")]
    DeterminismMismatch {
        /// The superstep.
        step: i64,
        /// Nodes of the recorded tasks.
        recorded: Vec<String>,
        /// Nodes of the tasks planned now.
        computed: Vec<String>,
    },
    /// A thread is needed (checkpointer present) but the config has none.
    #[error("the graph has a checkpointer: the run config needs a thread id")]
    MissingThread,
    /// The thread's newest checkpoint holds writes of a step that did not finish (tasks that
    /// finished before it failed or paused): a checkpoint written on top of it would make
    /// those tasks run again.
    #[error("{} holds {writes} recorded writes of an unfinished step at checkpoint {checkpoint}; continue or resume it first", thread_text(.thread))]
    RecordedWrites {
        /// The thread.
        thread: Option<ThreadId>,
        /// Its newest checkpoint.
        checkpoint: CheckpointId,
        /// How many writes it holds.
        writes: usize,
    },
    /// The run was cancelled.
    #[error("run cancelled at step {step}")]
    Cancelled {
        /// The superstep it stopped at.
        step: i64,
    },
    /// A stored value could not be decoded into the state type.
    #[error("cannot decode field {field} of a checkpoint{}: {detail}", on_thread(.thread))]
    Decode {
        /// The field.
        field: String,
        /// The thread.
        thread: Option<ThreadId>,
        /// What was wrong.
        detail: String,
    },
    /// A state value could not be encoded for a checkpoint.
    #[error("cannot encode field {field:?}: {source}")]
    Encode {
        /// The field.
        field: &'static str,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// Checkpoint storage failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A fork could not be made.
    #[error(transparent)]
    Fork(Box<stategraph_checkpoints::fork::ForkError>),
}

impl From<stategraph_checkpoints::fork::ForkError> for RunError {
    fn from(e: stategraph_checkpoints::fork::ForkError) -> Self {
        RunError::Fork(Box::new(e))
    }
}

/// The umbrella error of the crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Building the graph.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// Running it.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Checkpoint storage.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

/// ` on thread t`, or nothing for a run without a thread.
fn on_thread(thread: &Option<ThreadId>) -> String {
    thread
        .as_ref()
        .map_or_else(String::new, |t| format!(" on thread {t}"))
}

/// `thread t`, or `the run` for a run without a thread.
fn thread_text(thread: &Option<ThreadId>) -> String {
    thread
        .as_ref()
        .map_or_else(|| "the run".to_owned(), |t| format!("thread {t}"))
}
