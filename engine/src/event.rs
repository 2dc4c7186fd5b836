//! Streaming: the typed [`Event`]s a run emits.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use stategraph_checkpoints::{CheckpointId, Namespace, Source, TaskId};
use tokio::sync::mpsc;

use crate::{Interrupt, RunError, State};

/// Which kinds of events a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamMode {
    /// The whole state after each step.
    pub values: bool,
    /// Each task's update, per node, streamed as the task finishes (none for the input).
    pub updates: bool,
    /// Events emitted by nodes with [`NodeContext::emit`](crate::NodeContext::emit).
    pub custom: bool,
    /// Messages as they are generated: each chat-model call's chunks, then the whole message
    /// ([`EventKind::Messages`]). Off by default: a model called through a node's context
    /// streams only when this is asked for.
    pub messages: bool,
    /// Task start (with its input) and end (with its result), as LangGraph's `tasks` mode.
    pub tasks: bool,
    /// Each checkpoint written, with its values, metadata and next tasks
    /// ([`CheckpointEvent`]), as LangGraph's `checkpoints` mode.
    pub checkpoints: bool,
    /// Include events from subgraphs (with their namespace).
    pub subgraphs: bool,
}

impl StreamMode {
    /// Every kind of event, subgraphs included.
    pub fn all() -> Self {
        StreamMode {
            values: true,
            updates: true,
            custom: true,
            messages: true,
            tasks: true,
            checkpoints: true,
            subgraphs: true,
        }
    }

    /// Only values after each step.
    pub fn values() -> Self {
        StreamMode {
            values: true,
            ..Self::none()
        }
    }

    /// Only per-node updates.
    pub fn updates() -> Self {
        StreamMode {
            updates: true,
            ..Self::none()
        }
    }

    /// Only messages as they are generated.
    pub fn messages() -> Self {
        StreamMode {
            messages: true,
            ..Self::none()
        }
    }

    /// Only checkpoints ([`EventKind::Checkpoint`]), as LangGraph's `checkpoints` mode.
    pub fn checkpoints() -> Self {
        StreamMode {
            checkpoints: true,
            ..Self::none()
        }
    }

    /// Only task starts and ends ([`EventKind::TaskStart`], [`EventKind::TaskEnd`]), as
    /// LangGraph's `tasks` mode.
    pub fn tasks() -> Self {
        StreamMode {
            tasks: true,
            ..Self::none()
        }
    }

    /// Checkpoints and tasks: what LangGraph's `debug` mode streams.
    pub fn debug() -> Self {
        StreamMode {
            checkpoints: true,
            tasks: true,
            ..Self::none()
        }
    }

    /// Nothing.
    pub fn none() -> Self {
        StreamMode {
            values: false,
            updates: false,
            custom: false,
            messages: false,
            tasks: false,
            checkpoints: false,
            subgraphs: false,
        }
    }
}

impl Default for StreamMode {
    fn default() -> Self {
        StreamMode {
            values: true,
            updates: true,
            custom: true,
            ..Self::none()
        }
    }
}

/// A shared, typed view of a value whose type depends on the graph that emitted it (a
/// subgraph's state type may differ from its parent's). Whatever its type, it can also be
/// read as JSON ([`Shared::to_json`]): a state as its fields' stored JSON, an update as its
/// serde form (only the fields it writes).
#[derive(Clone)]
pub struct Shared {
    value: Arc<dyn Any + Send + Sync>,
    json: fn(&(dyn Any + Send + Sync)) -> Result<serde_json::Value, RunError>,
}

impl Shared {
    /// A graph's state after a step.
    pub(crate) fn state<S: State>(state: Arc<S>) -> Self {
        Shared {
            value: state,
            json: |v| match v.downcast_ref::<S>() {
                Some(s) => crate::diff::state_to_json(s),
                None => Ok(serde_json::Value::Null),
            },
        }
    }

    /// One task's update.
    pub(crate) fn update<S: State>(update: S::Update) -> Self {
        Shared {
            value: Arc::new(update),
            json: |v| match v.downcast_ref::<S::Update>() {
                Some(u) => serde_json::to_value(u).map_err(|source| RunError::Encode {
                    field: "update",
                    source,
                }),
                None => Ok(serde_json::Value::Null),
            },
        }
    }

    /// Any serializable value, shared: what a node streams as a message
    /// ([`NodeContext::emit_message`](crate::NodeContext::emit_message)), read back typed
    /// with [`Shared::get`] or as its serde JSON with [`Shared::to_json`].
    ///
    /// ```
    /// use stategraph::Shared;
    ///
    /// let shared = Shared::new(vec![1u32, 2]);
    /// assert_eq!(shared.get::<Vec<u32>>(), Some(&vec![1, 2]));
    /// assert_eq!(shared.to_json()?, serde_json::json!([1, 2]));
    /// # Ok::<(), stategraph::RunError>(())
    /// ```
    pub fn new<T: serde::Serialize + Send + Sync + 'static>(value: T) -> Self {
        Shared {
            value: Arc::new(value),
            json: |v| match v.downcast_ref::<T>() {
                Some(t) => serde_json::to_value(t).map_err(|source| RunError::Encode {
                    field: "message",
                    source,
                }),
                None => Ok(serde_json::Value::Null),
            },
        }
    }

    /// The value, if it is a `T`.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }

    /// The value as JSON, whatever graph emitted it: what a client outside the process
    /// (the Agent Server's stream) is sent.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use futures::StreamExt;
    /// use stategraph::prelude::*;
    /// use stategraph::EventKind;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S {
    ///     #[reduce(append)]
    ///     log: Vec<String>,
    ///     n: u32,
    /// }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("a", |_s: Arc<S>, _cx: NodeContext| async move {
    ///         Ok::<_, BoxError>(S::update().log(vec!["a".into()]))
    ///     })
    ///     .add_edge(START, "a")
    ///     .add_edge("a", END)
    ///     .compile()?;
    /// let mut stream = graph.stream(S::update(), &RunConfig::new(), StreamMode::default());
    /// let mut json = Vec::new();
    /// while let Some(ev) = stream.next().await {
    ///     match ev.kind {
    ///         EventKind::Values(v) => json.push(v.to_json()?),
    ///         EventKind::Updates { update, .. } => json.push(update.to_json()?),
    ///         _ => {}
    ///     }
    /// }
    /// assert_eq!(json, [
    ///     serde_json::json!({"log": [], "n": 0}),      // after the input
    ///     serde_json::json!({"log": ["a"]}),          // a's update: only what it wrote
    ///     serde_json::json!({"log": ["a"], "n": 0}),  // after a's step
    /// ]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`RunError::Encode`] if a field cannot be serialized.
    pub fn to_json(&self) -> Result<serde_json::Value, RunError> {
        (self.json)(&*self.value)
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Shared(..)")
    }
}

/// What a [`EventKind::Messages`] event carries of its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessagePart {
    /// A piece of a message being generated: a text delta, a tool-call fragment, or the last
    /// piece (finish reason, usage). Joined in order, a message's chunks make the message.
    Chunk,
    /// The whole message, after its chunks were streamed.
    End,
    /// A whole message that was not streamed in chunks (a tool's result).
    Whole,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStatus {
    /// It returned an update or command.
    Succeeded,
    /// Its writes were taken from the pending writes of an earlier attempt; it did not run.
    Reused,
    /// Its writes were taken from the node cache ([`crate::cache`]); it did not run.
    Cached,
    /// It failed: the node's own error message (for a node that returned an error or
    /// panicked), else the run error's.
    Failed(String),
    /// It paused on an interrupt.
    Interrupted,
}

/// What scheduled a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskTrigger {
    /// The `__start__` task, which applies a run's input.
    Start,
    /// An edge into the node, or a join whose sources have all finished.
    Edge,
    /// The `k`-th [`SendTo`](crate::SendTo) of the step before.
    Sent(usize),
}

/// A task the step after a checkpoint runs ([`CheckpointEvent::next`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NextTask {
    /// Its id: the id the task runs under.
    pub id: TaskId,
    /// The node it runs (`__start__` for the task applying input).
    pub node: Arc<str>,
    /// Whether the node is a subgraph ([`StateGraph::add_subgraph`](crate::StateGraph::add_subgraph)).
    pub subgraph: bool,
    /// What the task already recorded, when the checkpoint is the head a run resumes from
    /// (LangGraph streams that head again first): the updates it returned (each a `Shared`
    /// holding an `S::Update`) if it finished before the pause; empty otherwise.
    pub updates: Vec<Shared>,
    /// The interrupts it paused on, when the checkpoint is the head a run resumes from.
    pub interrupts: Vec<Interrupt>,
    /// Its error, when it failed in the step after the checkpoint a run resumes from.
    pub error: Option<String>,
}

/// A checkpoint written, as the `checkpoints` stream mode carries it: what LangGraph's
/// payload holds (its config, parent, values, metadata, next nodes and their tasks).
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use stategraph::checkpoints::MemorySaver;
/// use stategraph::prelude::*;
/// use stategraph::EventKind;
///
/// #[derive(State, Clone, Default, Debug)]
/// struct S {
///     #[reduce(append)]
///     log: Vec<String>,
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let graph = StateGraph::<S>::new()
///     .add_node("a", |_s: Arc<S>, _cx: NodeContext| async move {
///         Ok::<_, BoxError>(S::update().log(vec!["a".into()]))
///     })
///     .add_edge(START, "a")
///     .add_edge("a", END)
///     .compile()?
///     .with_checkpointer(Arc::new(MemorySaver::new()));
/// let mode = StreamMode::checkpoints();
/// let mut stream = graph.stream(S::update(), &RunConfig::new().thread("t"), mode);
/// let mut seen = Vec::new();
/// while let Some(ev) = stream.next().await {
///     if let EventKind::Checkpoint(cp) = ev.kind {
///         let next: Vec<String> = cp.next.iter().map(|t| t.node.to_string()).collect();
///         seen.push((ev.step, cp.source.as_str(), next, cp.values.to_json()?["log"].clone()));
///     }
/// }
/// assert_eq!(seen, [
///     (-1, "input", vec!["__start__".to_string()], serde_json::json!([])),
///     (0, "loop", vec!["a".to_string()], serde_json::json!([])),
///     (1, "loop", vec![], serde_json::json!(["a"])),
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CheckpointEvent {
    /// Its id.
    pub id: CheckpointId,
    /// The checkpoint before it on its branch.
    pub parent: Option<CheckpointId>,
    /// Why it was written.
    pub source: Source,
    /// The state it holds: `Shared` holds an `S` (the state type of the graph at `ns`).
    pub values: Shared,
    /// Its metadata, as stored (the run's metadata, and what a resume recorded).
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// The tasks the next step runs from it, in task order (empty at the end of a run).
    pub next: Vec<NextTask>,
}

/// What happened.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EventKind {
    /// The state after a step: `Shared` holds an `S` (the state type of the graph at `ns`).
    Values(Shared),
    /// A task's update: `Shared` holds an `S::Update`. Sent the moment the task finishes
    /// (finish order; the state still merges in task order), also when its step then fails
    /// or pauses; never for the input (`__start__`).
    Updates {
        /// The node.
        node: Arc<str>,
        /// The update.
        update: Shared,
        /// The task did not run: its writes came from the node cache ([`crate::cache`]).
        cached: bool,
    },
    /// A node's custom event.
    Custom {
        /// The node.
        node: Arc<str>,
        /// The payload.
        payload: serde_json::Value,
    },
    /// A message, or a piece of one, streamed by a node (a chat model's tokens, a tool's
    /// result): `message` holds what the node emitted (the agent runtime's message and
    /// message-chunk types), and reads as LangChain's message JSON. Chunks of one message
    /// share its id; chunks of parallel calls interleave but each carries its own id.
    Messages {
        /// The node.
        node: Arc<str>,
        /// The task.
        task: TaskId,
        /// Which part of a message this is.
        part: MessagePart,
        /// The message or chunk.
        message: Shared,
    },
    /// A task started.
    TaskStart {
        /// The node.
        node: Arc<str>,
        /// The task.
        task: TaskId,
        /// What scheduled it.
        trigger: TaskTrigger,
        /// Its input: the state snapshot it reads (a `Shared` holding an `S`), or for a task
        /// started by a `Send`, its argument (a `Shared` holding a `serde_json::Value`).
        input: Shared,
    },
    /// A task ended (right after its updates).
    TaskEnd {
        /// The node.
        node: Arc<str>,
        /// The task.
        task: TaskId,
        /// How.
        status: TaskStatus,
        /// The updates it returned, each a `Shared` holding an `S::Update` (empty unless it
        /// succeeded or its writes were reused).
        updates: Vec<Shared>,
        /// The interrupts it paused on (empty unless it paused).
        interrupts: Vec<Interrupt>,
    },
    /// A checkpoint was written (or, with durability `async`, handed to the writer). Only
    /// with a saver and a thread, as in LangGraph.
    Checkpoint(Box<CheckpointEvent>),
    /// The run paused, on these interrupts (a static pause as `before:<node>` or
    /// `after:<node>`).
    Interrupt(Vec<Interrupt>),
}

/// One streamed event.
#[derive(Debug, Clone)]
pub struct Event {
    /// The namespace of the graph that emitted it (root: empty).
    pub ns: Namespace,
    /// The superstep it belongs to.
    pub step: i64,
    /// What happened.
    pub kind: EventKind,
}

/// Where a run sends its events.
#[derive(Clone)]
pub(crate) struct EventSink {
    pub(crate) tx: mpsc::Sender<Event>,
    pub(crate) mode: StreamMode,
}

impl EventSink {
    pub(crate) async fn send(&self, event: Event) {
        // A closed receiver means nobody listens any more; the run goes on.
        let _ = self.tx.send(event).await;
    }
}
