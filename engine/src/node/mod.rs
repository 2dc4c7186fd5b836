//! Nodes: the [`Node`] trait, the [`NodeContext`] a task sees, and per-node options.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde::{de::DeserializeOwned, Serialize};
use stategraph_checkpoints::{Namespace, TaskId, ThreadId};
use tokio::sync::Notify;

use crate::event::{Event, EventKind, EventSink, MessagePart, Shared};
use crate::graph::TaskOutput;
use crate::{BoxError, Command, Interrupt, Interrupted, RunError, State};
use stategraph_checkpoints::sync::Unpoisoned;

mod options;

/// A node of a graph over state `S`.
///
/// Any `Fn(Arc<S>, NodeContext) -> impl Future<Output = Result<O, E>>` is a node, where `O`
/// converts into a [`Command<S>`] (the state's update type does) and `E` into a [`BoxError`].
/// All tasks of a step share one `Arc<S>` snapshot: reading it is free, and no task sees
/// another's writes before the next step.
pub trait Node<S: State>: Send + Sync + 'static {
    /// Run one task.
    fn run(
        &self,
        state: Arc<S>,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<Command<S>, BoxError>>;
}

impl<S, F, Fut, O, E> Node<S> for F
where
    S: State,
    F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<Command<S>>,
    E: Into<BoxError>,
{
    fn run(
        &self,
        state: Arc<S>,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<Command<S>, BoxError>> {
        let fut = (self)(state, ctx);
        Box::pin(async move { fut.await.map(Into::into).map_err(Into::into) })
    }
}

pub use options::{NodeOptions, RetryPolicy};

/// Cooperative cancellation of a run: cancel it from anywhere; the run stops at the next
/// step boundary (running tasks are dropped) with [`RunError::Cancelled`].
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<(AtomicBool, Notify)>,
    parent: Option<Arc<(AtomicBool, Notify)>>,
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A token cancelled by its own `cancel` or by this one's.
    pub fn child(&self) -> Self {
        CancelToken {
            inner: Arc::default(),
            parent: Some(self.inner.clone()),
        }
    }

    /// Cancel.
    pub fn cancel(&self) {
        self.inner.0.store(true, Ordering::SeqCst);
        self.inner.1.notify_waiters();
    }

    /// Whether [`CancelToken::cancel`] was called (on this token or its parent).
    pub fn is_cancelled(&self) -> bool {
        self.inner.0.load(Ordering::SeqCst)
            || self
                .parent
                .as_ref()
                .is_some_and(|p| p.0.load(Ordering::SeqCst))
    }

    /// Wait until cancelled.
    pub async fn cancelled(&self) {
        loop {
            let own = self.inner.1.notified();
            let parent = self.parent.as_ref().map(|p| p.1.notified());
            if self.is_cancelled() {
                return;
            }
            match parent {
                Some(parent) => {
                    tokio::select! {
                        _ = own => {}
                        _ = parent => {}
                    }
                }
                None => own.await,
            }
        }
    }
}

/// How a node's run ended, as the engine sees it: an output, or why there is none.
pub(crate) enum NodeResult<S: State> {
    /// The node returned: its updates and routing.
    Output(TaskOutput<S>),
    /// The node (or a subgraph it runs) paused on these interrupts.
    Interrupted(Vec<Interrupt>),
    /// A subgraph node's child run failed: its error, passed up unchanged.
    Child(RunError),
    /// The node failed with its own error.
    Failed(BoxError),
}

impl<S: State> NodeResult<S> {
    /// A user node's result. This is the one place where a user's [`BoxError`] enters the
    /// engine: a user node signals an interrupt by propagating [`Interrupted`] with `?`, so
    /// it is recognised here, by one downcast, and travels on as a value.
    pub(crate) fn from_user(result: Result<Command<S>, BoxError>) -> Self {
        match result {
            Ok(cmd) => NodeResult::Output(TaskOutput {
                updates: cmd.update.into_iter().collect(),
                goto: cmd.goto,
                parents: cmd.parent.into_iter().collect(),
                handled: None,
            }),
            Err(e) => match e.downcast::<Interrupted>() {
                Ok(i) => NodeResult::Interrupted(i.interrupts),
                Err(e) => NodeResult::Failed(e),
            },
        }
    }
}

/// Resume values given to a run, shared by every level of subgraphs: by the id of the
/// interrupt each answers (a bare value is given the id of the one pending interrupt), so
/// that each reaches the task that asked, in whatever order the tasks ask again.
#[derive(Debug, Default)]
pub(crate) struct ResumeInput {
    pub(crate) map: BTreeMap<String, serde_json::Value>,
}

/// Where a task is in its interrupts: the resume values it has received, by position, and
/// how many `interrupt` calls the current execution made.
#[derive(Debug, Default)]
pub(crate) struct ResumeCursor {
    /// Resume values this task has received, by position.
    pub(crate) resume: Vec<serde_json::Value>,
    /// How many `interrupt` calls the current execution made.
    pub(crate) calls: usize,
}

/// Everything a task knows about where it runs.
pub(crate) struct TaskInfo {
    pub(crate) node: Arc<str>,
    pub(crate) task: TaskId,
    pub(crate) step: i64,
    /// The last step the task's graph level may run (see [`crate::managed`]).
    pub(crate) stop: i64,
    pub(crate) ns: Namespace,
    pub(crate) thread: Option<ThreadId>,
    pub(crate) arg: Option<Arc<serde_json::Value>>,
    pub(crate) sink: Option<EventSink>,
    pub(crate) cursor: Mutex<ResumeCursor>,
    /// How many message ids this run of the task has handed out.
    pub(crate) message_ids: std::sync::atomic::AtomicU32,
    /// The task paused or failed in an earlier attempt of this step.
    pub(crate) resumed: bool,
    pub(crate) resume: Arc<Mutex<ResumeInput>>,
    pub(crate) cancel: CancelToken,
    pub(crate) run: Arc<crate::run::RunShared>,
    pub(crate) scope: CheckpointScope,
    /// The idle clock, when the node has an idle limit.
    pub(crate) heartbeat: Option<Box<crate::timeout::Heartbeat>>,
    /// The subtasks of a workflow's task ([`crate::func`]); `None` for any other node.
    pub(crate) subtasks: Option<Box<crate::run::subtask::SubtaskLink>>,
}

/// Where the task's graph checkpoints (what a subgraph node inherits).
pub(crate) struct CheckpointScope {
    pub(crate) ns: Namespace,
    pub(crate) saver: Option<Arc<dyn stategraph_checkpoints::Saver>>,
    pub(crate) ephemeral: bool,
    /// The long-term store of the graph level (see [`NodeContext::store`]).
    pub(crate) store: Option<Arc<dyn stategraph_store::Store>>,
}

/// What a running task can see and do besides reading the state: its identity, its `Send`
/// argument, custom events, interrupts, cancellation.
#[derive(Clone)]
pub struct NodeContext {
    pub(crate) inner: Arc<TaskInfo>,
}

impl fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeContext")
            .field("node", &self.inner.node)
            .field("task", &self.inner.task)
            .field("step", &self.inner.step)
            .field("ns", &self.inner.ns)
            .finish_non_exhaustive()
    }
}

impl NodeContext {
    /// The node's name.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// The task's id: the same on every re-execution of this task (after a crash, a retry
    /// or an interrupt), different in a fork. Use it as an idempotency key for side effects.
    pub fn task_id(&self) -> TaskId {
        self.inner.task
    }

    /// The superstep.
    pub fn step(&self) -> i64 {
        self.inner.step
    }

    /// The namespace of the graph running this task (root: empty).
    pub fn namespace(&self) -> &Namespace {
        &self.inner.ns
    }

    /// The thread, if the run has one.
    pub fn thread(&self) -> Option<&ThreadId> {
        self.inner.thread.as_ref()
    }

    /// The graph's long-term store ([`CompiledGraph::with_store`](crate::CompiledGraph::with_store)),
    /// the same for every thread; a subgraph run by a task sees its parent's (its own only
    /// when the parent has none). `None` when there is none.
    pub fn store(&self) -> Option<&Arc<dyn stategraph_store::Store>> {
        self.inner.scope.store.as_ref()
    }

    /// The [`SendTo`](crate::SendTo) argument of this task, decoded as `T`.
    ///
    /// # Errors
    /// If the task was not started by a `Send`, or the argument is not a `T`.
    pub fn arg<T: DeserializeOwned>(&self) -> Result<T, BoxError> {
        match &self.inner.arg {
            Some(v) => T::deserialize(v.as_ref()).map_err(|e| {
                format!(
                    "node {:?}: Send argument is not a {}: {e}",
                    &*self.inner.node,
                    std::any::type_name::<T>()
                )
                .into()
            }),
            None => Err(format!("node {:?} was not started by a Send", &*self.inner.node).into()),
        }
    }

    /// Add `usage` to the run's token usage: the totals [`RunOutcome::usage`] shows (shared by
    /// every graph level of the run) and the config's [`UsageMeter`]s get. A node that calls a
    /// model records each answer's usage (the agent runtime's model calls do); a node that
    /// runs a separate graph run adds that run's totals.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use stategraph::prelude::*;
    /// use stategraph::TokenUsage;
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct S { n: u32 }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("ask", |_s: Arc<S>, cx: NodeContext| async move {
    ///         cx.record_usage(TokenUsage::of_call(100, 20, 120));
    ///         Ok::<_, BoxError>(S::update())
    ///     })
    ///     .add_edge(START, "ask")
    ///     .add_edge("ask", END)
    ///     .compile()?;
    /// let outcome = graph.invoke(S::update(), &RunConfig::new()).await?;
    /// assert_eq!(outcome.usage, TokenUsage::of_call(100, 20, 120));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// [`RunOutcome::usage`]: crate::RunOutcome::usage
    /// [`UsageMeter`]: crate::UsageMeter
    pub fn record_usage(&self, usage: stategraph_checkpoints::TokenUsage) {
        self.inner.run.usage.add(usage);
    }

    /// The meters this run's usage goes to, for a run this task starts itself (a
    /// subagent's): given to its config ([`RunConfig::usage_meter`](crate::RunConfig::usage_meter)),
    /// each of its calls counts in this run as it is made, however that run or this one ends.
    pub fn usage_meters(&self) -> Vec<crate::UsageMeter> {
        self.inner.run.usage.meters()
    }

    /// The run's token usage so far (every level of it).
    pub fn run_usage(&self) -> stategraph_checkpoints::TokenUsage {
        self.inner.run.usage.total()
    }

    /// Emit a custom stream event (progress for the idle limit of a
    /// [`TimeoutPolicy`](crate::TimeoutPolicy), streamed or not).
    pub async fn emit(&self, payload: impl Serialize) {
        self.heartbeat();
        if let Some(sink) = &self.inner.sink {
            if sink.mode.custom && (self.inner.ns.is_root() || sink.mode.subgraphs) {
                let payload = serde_json::to_value(payload).unwrap_or(serde_json::Value::Null);
                sink.send(Event {
                    ns: self.inner.ns.clone(),
                    step: self.inner.step,
                    kind: EventKind::Custom {
                        node: self.inner.node.clone(),
                        payload,
                    },
                })
                .await;
            }
        }
    }

    /// Whether someone listens to messages from this task: the run streams the `messages`
    /// mode, and this task's graph is the root or subgraphs stream too. A caller that must
    /// build its chunks (a model called streaming) asks first, so that nothing is streamed,
    /// built or sent when nobody listens.
    pub fn streams_messages(&self) -> bool {
        self.message_sink().is_some()
    }

    fn message_sink(&self) -> Option<&EventSink> {
        self.inner
            .sink
            .as_ref()
            .filter(|s| s.mode.messages && (self.inner.ns.is_root() || s.mode.subgraphs))
    }

    /// A new message id: `run-<task id>-<n>` for the n-th id this run of the task asks for.
    /// It is unique in the thread's history and the same when the task runs again from its
    /// step (a resume, a replay), so a message streamed under it is the message the state
    /// keeps.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use stategraph::prelude::*;
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct S { ids: Vec<String> }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("n", |_s: Arc<S>, cx: NodeContext| async move {
    ///         Ok::<_, BoxError>(S::update().ids(vec![cx.message_id(), cx.message_id()]))
    ///     })
    ///     .add_edge(START, "n")
    ///     .add_edge("n", END)
    ///     .compile()?;
    /// let ids = graph.invoke(S::update(), &RunConfig::new()).await?.state.ids.clone();
    /// assert_ne!(ids[0], ids[1]);
    /// assert!(ids[0].starts_with("run-") && ids[0].ends_with("-0"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn message_id(&self) -> String {
        let n = self.inner.message_ids.fetch_add(1, Ordering::Relaxed);
        format!("run-{}-{n}", self.inner.task)
    }

    /// Stream a message or a piece of one ([`EventKind::Messages`]), with this task's node,
    /// step and namespace; nothing when nobody listens ([`NodeContext::streams_messages`]).
    /// Either way it is progress for the idle limit of a [`TimeoutPolicy`](crate::TimeoutPolicy).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use futures::StreamExt;
    /// use stategraph::prelude::*;
    /// use stategraph::{EventKind, MessagePart, Shared};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S {
    ///     text: String,
    /// }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("talk", |_s: Arc<S>, cx: NodeContext| async move {
    ///         for word in ["Hel", "lo"] {
    ///             cx.emit_message(MessagePart::Chunk, Shared::new(word.to_owned())).await;
    ///         }
    ///         Ok::<_, BoxError>(S::update().text("Hello".to_owned()))
    ///     })
    ///     .add_edge(START, "talk")
    ///     .add_edge("talk", END)
    ///     .compile()?;
    /// let mut stream = graph.stream(S::update(), &RunConfig::new(), StreamMode::messages());
    /// let mut words = String::new();
    /// while let Some(ev) = stream.next().await {
    ///     if let EventKind::Messages { node, message, .. } = ev.kind {
    ///         assert_eq!(&*node, "talk");
    ///         words.push_str(message.get::<String>().unwrap());
    ///     }
    /// }
    /// assert_eq!(words, "Hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn emit_message(&self, part: MessagePart, message: Shared) {
        self.heartbeat();
        if let Some(sink) = self.message_sink() {
            sink.send(Event {
                ns: self.inner.ns.clone(),
                step: self.inner.step,
                kind: EventKind::Messages {
                    node: self.inner.node.clone(),
                    task: self.inner.task,
                    part,
                    message,
                },
            })
            .await;
        }
    }

    /// Whether [`NodeContext::forward_message`] passes events on: someone listens to this
    /// task's messages and subgraphs stream. A task that runs a graph itself asks first, so
    /// that the inner graph streams only what reaches someone.
    pub fn forwards_messages(&self) -> bool {
        self.message_sink().is_some_and(|s| s.mode.subgraphs)
    }

    /// Pass on a [`EventKind::Messages`] event of a graph this task runs itself (a
    /// subagent's ephemeral graph) as this task's subgraph's: its namespace goes under
    /// `node:task` of this task, as a subgraph's would; its node, step and task stay the
    /// inner graph's. Other events, and any event while subgraphs do not stream, are dropped.
    pub async fn forward_message(&self, event: Event) {
        self.heartbeat();
        let Some(sink) = self.message_sink().filter(|s| s.mode.subgraphs) else {
            return;
        };
        if !matches!(event.kind, EventKind::Messages { .. }) {
            return;
        }
        let mut ns = self
            .inner
            .ns
            .child(&format!("{}:{}", self.inner.node, self.inner.task));
        for level in event.ns.levels() {
            ns = ns.child(level);
        }
        sink.send(Event { ns, ..event }).await;
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Cancel the run this task belongs to, as its [`CancelToken`] would: the run stops now
    /// with [`RunError::Cancelled`] and its running tasks are
    /// dropped. A node that meets a cancellation it cannot pass on as a value (a layer, a
    /// provider) calls this rather than failing, which would be reported as a node failure.
    pub fn cancel_run(&self) {
        self.inner.cancel.cancel();
    }

    /// The id interrupts of this task carry.
    pub fn interrupt_id(&self) -> String {
        interrupt_id(self.inner.task)
    }

    /// Pause the run and ask the caller for a value.
    ///
    /// The k-th call in a task returns the k-th resume value given to this task: a resume
    /// answers by interrupt id ([`NodeContext::interrupt_id`]), so each task gets the answer
    /// to its own question, whatever order the tasks of a step ask in. While no
    /// value exists, it returns an error carrying [`Interrupted`]: propagate it with `?`, and
    /// the run pauses; a resume re-runs the node **from the top**, with earlier calls returning
    /// their stored answers in order (so code before an interrupt runs again).
    ///
    /// # Errors
    /// The interrupt signal (propagate it), or a resume value that does not decode as `T`.
    pub fn interrupt<T: DeserializeOwned>(&self, value: impl Serialize) -> Result<T, BoxError> {
        let id = self.interrupt_id();
        let mut cursor = self.inner.cursor.lock().unpoisoned();
        let k = cursor.calls;
        cursor.calls += 1;
        let answer = match cursor.resume.get(k) {
            Some(v) => Some(v.clone()),
            None => {
                let mut input = self.inner.resume.lock().unpoisoned();
                let fresh = input.map.remove(&id);
                if let Some(v) = &fresh {
                    cursor.resume.push(v.clone());
                }
                fresh
            }
        };
        match answer {
            Some(v) => T::deserialize(&v).map_err(|e| {
                format!(
                    "resume value for node {:?} is not a {}: {e}",
                    &*self.inner.node,
                    std::any::type_name::<T>()
                )
                .into()
            }),
            None => {
                let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
                Err(Box::new(Interrupted {
                    interrupts: vec![Interrupt {
                        id,
                        value,
                        node: self.inner.node.to_string(),
                    }],
                }))
            }
        }
    }
}

pub(crate) fn interrupt_id(task: TaskId) -> String {
    TaskId::derive(&[b"interrupt", task.to_string().as_bytes()]).to_string()
}
