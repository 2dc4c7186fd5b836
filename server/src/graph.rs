//! A registered graph with its state type erased: JSON in (input, commands, state updates),
//! JSON and typed events out. The only place the server knows a graph is generic.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use stategraph::checkpoints::graph_shape::GraphShape;
use stategraph::checkpoints::{CheckpointId, ListOptions, Namespace, Resume, Saver, ThreadId};
use stategraph::diff::state_to_json;
use stategraph::state::Field;
use stategraph::{
    Command, CompiledGraph, ContextSchema, ContextValue, Event, Input, Interrupt, RunConfig,
    SendTo, State, StateSnapshot, StreamMode,
};

use crate::error::{ApiError, ApiResult};
use crate::ids::rfc3339;
use crate::runner::{RunEvents, RunFailure, Runner};
use crate::wire::{CommandIn, GotoIn, OneOrMany};

/// What a run starts from, as a request gave it.
#[derive(Debug, Clone)]
pub(crate) enum RunInput {
    /// New input: an object of state fields.
    Values(Value),
    /// A command: resume, update, goto.
    Command(CommandIn),
    /// Go on from the checkpoint (no input).
    Continue,
}

/// How a run ended: the final values and the interrupts it paused on.
#[derive(Debug, Clone)]
pub(crate) struct Ended {
    pub(crate) values: Value,
    pub(crate) interrupts: Vec<Interrupt>,
}

/// A running graph's events, then its end.
pub(crate) trait LiveRun: Send {
    /// The next event; `None` once the run has ended.
    fn next_event(&mut self) -> BoxFuture<'_, Option<Event>>;
    /// The run's end (after the events).
    fn ended(self: Box<Self>) -> BoxFuture<'static, Result<Ended, RunFailure>>;
}

/// A graph the server runs, whatever its state type.
pub(crate) trait ServedGraph: Send + Sync {
    /// Its shape (nodes and edges).
    fn shape(&self) -> Arc<GraphShape>;
    /// Its state's field names, in declaration order.
    fn fields(&self) -> Vec<&'static str>;
    /// Its node names.
    fn nodes(&self) -> Vec<String>;
    /// Check a run's input or command before the run is accepted (a 422 names the field).
    fn check(&self, input: &RunInput) -> ApiResult<()>;
    /// A run's `context` as the graph's declared context type (see [`run_context`]).
    fn context(&self, json: Option<&Value>) -> ApiResult<Option<ContextValue>>;
    /// Start run `run`.
    fn start(
        &self,
        run: String,
        input: RunInput,
        config: RunConfig,
        mode: StreamMode,
    ) -> BoxFuture<'_, ApiResult<Box<dyn LiveRun>>>;
    /// The thread's state at its head or at `checkpoint`, as a `ThreadState`.
    fn state(
        &self,
        thread: String,
        checkpoint: Option<CheckpointId>,
    ) -> BoxFuture<'_, ApiResult<Option<Value>>>;
    /// The thread's checkpoints, newest first, as `ThreadState`s.
    fn history(&self, thread: String, options: ListOptions)
        -> BoxFuture<'_, ApiResult<Vec<Value>>>;
    /// Write `values` as `as_node` (or, without one, as an amendment that keeps what the
    /// thread had left to run).
    fn update_state(
        &self,
        thread: String,
        checkpoint: Option<CheckpointId>,
        values: Value,
        as_node: Option<String>,
    ) -> BoxFuture<'_, ApiResult<CheckpointId>>;
    /// Make the thread's head a copy of checkpoint `to` (a fork checkpoint).
    fn restore(&self, thread: String, to: CheckpointId) -> BoxFuture<'_, ApiResult<()>>;
    /// The same graph checkpointing through `saver` (one fenced by a run's lease), if its
    /// runner can be bound again ([`Runner::rebind`]).
    fn rebind(&self, saver: Arc<dyn Saver>) -> Option<Arc<dyn ServedGraph>>;
}

/// A runner bound to the server's saver.
pub(crate) struct Served<S: State, R: Runner<S>> {
    runner: R,
    _state: std::marker::PhantomData<fn() -> S>,
}

impl<S: State, R: Runner<S>> Served<S, R> {
    pub(crate) fn new(
        runner: R,
        saver: Arc<dyn Saver>,
        store: Arc<dyn stategraph_store::Store>,
    ) -> Self {
        Served {
            runner: runner.with_saver(saver).with_store(store),
            _state: std::marker::PhantomData,
        }
    }

    fn graph(&self) -> &CompiledGraph<S> {
        self.runner.graph()
    }
}

/// `value` as an update of `S`, or a 422 naming the field that does not fit.
pub(crate) fn parse_update<S: State>(value: &Value, what: &str) -> ApiResult<S::Update> {
    let object = match value {
        Value::Null => return Ok(S::Update::default()),
        Value::Object(o) => o,
        other => {
            return Err(ApiError::Invalid(format!(
                "{what} must be an object of state fields, not {}",
                kind_of(other)
            )))
        }
    };
    for key in object.keys() {
        if S::Field::from_name(key).is_none() {
            let known: Vec<&str> = S::Field::ALL.iter().map(|f| f.name()).collect();
            return Err(ApiError::Invalid(format!(
                "{what}.{key}: not a field of the state (its fields: {})",
                known.join(", ")
            )));
        }
    }
    serde_json::from_value::<S::Update>(value.clone()).map_err(|whole| {
        for (key, v) in object {
            let one = Value::Object(Map::from_iter([(key.clone(), v.clone())]));
            if let Err(e) = serde_json::from_value::<S::Update>(one) {
                return ApiError::Invalid(format!("{what}.{key}: {e}"));
            }
        }
        ApiError::Invalid(format!("{what}: {whole}"))
    })
}

/// A run's `context` field as the context its nodes read: decoded as the graph's declared
/// type ([`StateGraph::context_schema`](stategraph::StateGraph::context_schema)), or, for a
/// graph that declares none, the JSON value itself (a [`Value`]). A context that does not
/// decode is a 422 naming the type and what serde found wrong. No field and `null` are `{}`,
/// as LangGraph's server stores them; `{}` that the declared type cannot be made from (a
/// field without a default) is no context, where LangGraph fails the run (decision 0094).
pub(crate) fn run_context(
    schema: Option<ContextSchema>,
    json: Option<&Value>,
) -> ApiResult<Option<ContextValue>> {
    let json = match json {
        None | Some(Value::Null) => &Value::Object(Map::new()),
        Some(v) => v,
    };
    let empty = json.as_object().is_some_and(Map::is_empty);
    match schema {
        Some(schema) => match schema.decode(json) {
            Ok(value) => Ok(Some(value)),
            Err(_) if empty => Ok(None),
            Err(e) => Err(ApiError::Invalid(e.to_string())),
        },
        None => Ok(Some(ContextValue::new(json.clone()))),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A command for `S`, with `resume` read as answers by interrupt id when it is an object
/// whose keys are all ids of `pending` interrupts.
fn parse_command<S: State>(cmd: &CommandIn, pending: &[Interrupt]) -> ApiResult<Command<S>> {
    let mut out = match &cmd.resume {
        None => Command::new(),
        Some(Value::Object(map))
            if !map.is_empty() && map.keys().all(|k| pending.iter().any(|i| &i.id == k)) =>
        {
            Command::resume(Resume::Map(
                map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            ))
        }
        Some(v) => Command::resume(Resume::Value(v.clone())),
    };
    if let Some(update) = &cmd.update {
        out = out.update(parse_update::<S>(update, "command.update")?);
    }
    for goto in cmd.goto.iter().flat_map(OneOrMany::to_vec) {
        out = match goto {
            GotoIn::Node(node) => out.goto(node),
            GotoIn::Send { node, input } => out.goto(SendTo::new(node, input)),
        };
    }
    Ok(out)
}

/// An interrupt as the clients read it.
pub(crate) fn interrupt_json(i: &Interrupt) -> Value {
    json!({ "value": i.value, "id": i.id })
}

fn checkpoint_json(thread: &str, id: CheckpointId) -> Value {
    json!({
        "thread_id": thread,
        "checkpoint_ns": "",
        "checkpoint_id": id.to_string(),
        "checkpoint_map": null,
    })
}

/// A snapshot as a `ThreadState`.
fn thread_state<S: State>(thread: &str, snap: &StateSnapshot<S>) -> ApiResult<Value> {
    let header = &snap.checkpoint;
    let mut metadata: Map<String, Value> = header
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.insert("source".to_owned(), json!(header.source.as_str()));
    metadata.insert("step".to_owned(), json!(header.step));
    metadata.insert("thread_id".to_owned(), json!(thread));
    metadata.entry("parents").or_insert_with(|| json!({}));
    let tasks: Vec<Value> = snap
        .next
        .iter()
        .map(|node| {
            let error = snap.errors.iter().find(|(n, _)| n == node).map(|e| &e.1);
            let interrupts: Vec<Value> = snap
                .interrupts
                .iter()
                .filter(|i| &i.node == node)
                .map(interrupt_json)
                .collect();
            json!({
                "id": format!("{}:{node}", header.id),
                "name": node,
                "path": ["__pregel_pull", node],
                "error": error,
                "interrupts": interrupts,
                "checkpoint": null,
                "state": null,
                "result": null,
            })
        })
        .collect();
    Ok(json!({
        "values": state_to_json(&*snap.values)?,
        "next": snap.next,
        "tasks": tasks,
        "metadata": metadata,
        "created_at": rfc3339(i64::try_from(header.created_at_ms).unwrap_or(i64::MAX)),
        "checkpoint": checkpoint_json(thread, header.id),
        "parent_checkpoint": header.parent.map(|p| checkpoint_json(thread, p)),
        "checkpoint_id": header.id.to_string(),
        "parent_checkpoint_id": header.parent.map(|p| p.to_string()),
        "interrupts": snap.interrupts.iter().map(interrupt_json).collect::<Vec<_>>(),
    }))
}

struct Live<S: State>(Box<dyn RunEvents<S>>);

impl<S: State> LiveRun for Live<S> {
    fn next_event(&mut self) -> BoxFuture<'_, Option<Event>> {
        self.0.next_event()
    }

    fn ended(self: Box<Self>) -> BoxFuture<'static, Result<Ended, RunFailure>> {
        Box::pin(async move {
            let outcome = self.0.end().await?;
            Ok(Ended {
                values: state_to_json(&*outcome.state).map_err(RunFailure::Engine)?,
                interrupts: outcome.interrupts,
            })
        })
    }
}

impl<S: State, R: Runner<S>> ServedGraph for Served<S, R> {
    fn shape(&self) -> Arc<GraphShape> {
        self.graph().shape()
    }

    fn fields(&self) -> Vec<&'static str> {
        S::Field::ALL.iter().map(|f| f.name()).collect()
    }

    fn nodes(&self) -> Vec<String> {
        self.graph()
            .node_names()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn check(&self, input: &RunInput) -> ApiResult<()> {
        match input {
            RunInput::Values(v) => parse_update::<S>(v, "input").map(drop),
            RunInput::Command(c) => parse_command::<S>(c, &[]).map(drop),
            RunInput::Continue => Ok(()),
        }
    }

    fn context(&self, json: Option<&Value>) -> ApiResult<Option<ContextValue>> {
        run_context(self.graph().context_schema(), json)
    }

    fn start(
        &self,
        run: String,
        input: RunInput,
        config: RunConfig,
        mode: StreamMode,
    ) -> BoxFuture<'_, ApiResult<Box<dyn LiveRun>>> {
        Box::pin(async move {
            let input: Input<S> = match input {
                RunInput::Values(v) => Input::Update(parse_update::<S>(&v, "input")?),
                RunInput::Continue => Input::Continue,
                RunInput::Command(c) => {
                    let pending = match (c.resume.is_some(), config.thread_name()) {
                        (true, Some(t)) => self
                            .graph()
                            .get_state(t, None)
                            .await?
                            .map(|s| s.interrupts)
                            .unwrap_or_default(),
                        _ => Vec::new(),
                    };
                    Input::Command(parse_command::<S>(&c, &pending)?)
                }
            };
            let live: Box<dyn LiveRun> =
                Box::new(Live(self.runner.start(&run, input, &config, mode)));
            Ok(live)
        })
    }

    fn state(
        &self,
        thread: String,
        checkpoint: Option<CheckpointId>,
    ) -> BoxFuture<'_, ApiResult<Option<Value>>> {
        Box::pin(async move {
            match self.graph().get_state(&thread, checkpoint).await? {
                Some(snap) => thread_state(&thread, &snap).map(Some),
                None => Ok(None),
            }
        })
    }

    fn history(
        &self,
        thread: String,
        options: ListOptions,
    ) -> BoxFuture<'_, ApiResult<Vec<Value>>> {
        Box::pin(async move {
            let snaps = self.graph().get_state_history(&thread, options).await?;
            snaps.iter().map(|s| thread_state(&thread, s)).collect()
        })
    }

    fn update_state(
        &self,
        thread: String,
        checkpoint: Option<CheckpointId>,
        values: Value,
        as_node: Option<String>,
    ) -> BoxFuture<'_, ApiResult<CheckpointId>> {
        Box::pin(async move {
            let update = parse_update::<S>(&values, "values")?;
            let id = match as_node {
                Some(node) => {
                    self.graph()
                        .update_state(&thread, checkpoint, update, &node)
                        .await?
                }
                None if checkpoint.is_none() => self.graph().amend_state(&thread, update).await?,
                None => {
                    return Err(ApiError::Invalid(
                        "values at an older checkpoint need as_node: the node the update \
                         is written as"
                            .to_owned(),
                    ))
                }
            };
            Ok(id)
        })
    }

    fn rebind(&self, saver: Arc<dyn Saver>) -> Option<Arc<dyn ServedGraph>> {
        let runner = self.runner.rebind(saver)?;
        Some(Arc::new(Served {
            runner,
            _state: std::marker::PhantomData,
        }))
    }

    fn restore(&self, thread: String, to: CheckpointId) -> BoxFuture<'_, ApiResult<()>> {
        Box::pin(self.restore_to(thread, to))
    }
}

impl<S: State, R: Runner<S>> Served<S, R> {
    async fn restore_to(&self, thread: String, to: CheckpointId) -> ApiResult<()> {
        self.graph()
            .fork(&thread, to, None, S::Update::default())
            .await?;
        Ok(())
    }
}

/// The empty state of a thread that has not run yet, as a `ThreadState`.
pub(crate) fn empty_state(thread: &str) -> Value {
    json!({
        "values": {},
        "next": [],
        "tasks": [],
        "metadata": {},
        "created_at": null,
        "checkpoint": { "thread_id": thread, "checkpoint_ns": "", "checkpoint_id": null,
                        "checkpoint_map": null },
        "parent_checkpoint": null,
        "interrupts": [],
    })
}

/// Parse a checkpoint id a request gave.
pub(crate) fn checkpoint_id(text: &str) -> ApiResult<CheckpointId> {
    text.parse::<CheckpointId>()
        .map_err(|e| ApiError::Invalid(format!("checkpoint_id {text:?}: {e}")))
}

/// A thread id a request gave, validated before anything reaches storage.
pub(crate) fn thread_id(text: &str) -> ApiResult<ThreadId> {
    ThreadId::new(text).map_err(|e| ApiError::Invalid(e.to_string()))
}

/// The metadata filter of a history query.
pub(crate) fn list_options(
    limit: Option<usize>,
    before: Option<CheckpointId>,
    filter: Option<&Map<String, Value>>,
) -> ListOptions {
    ListOptions {
        limit,
        before,
        filter: filter
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
    }
}

/// The root namespace (for checkpoint lookups).
pub(crate) fn root() -> Namespace {
    Namespace::root()
}
