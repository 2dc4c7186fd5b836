//! One run on its graph, from its first frame (`metadata`) to its end: the engine's events
//! become the log's frames; the end, what the run's and the thread's status become.

use std::sync::{Arc, PoisonError};

use serde_json::{json, Value};
use stategraph::checkpoints::{ListOptions, Saver, ThreadId};
use stategraph::{Durability, RunConfig, RunError};

use super::frames::Modes;
use super::{Active, StopAction};
use crate::error::{ApiError, ApiResult};
use crate::graph::{checkpoint_id, RunInput, ServedGraph};
use crate::runner::RunFailure;
use crate::store::{RunRow, RunStatus, ThreadStatus};
use crate::wire::NodeList;
use crate::Shared;

/// How a run ended, for its record and its thread's.
pub(crate) enum End {
    Done { interrupted: bool },
    Stopped(StopAction),
    Failed { error: String, message: String },
}

impl From<ApiError> for End {
    fn from(e: ApiError) -> Self {
        End::Failed {
            error: e.kind().to_owned(),
            message: e.to_string(),
        }
    }
}

impl Shared {
    /// Run `row` on its graph, its frames going to the run's log; with `saver`, the graph
    /// checkpoints through it (a saver fenced by the run's lease) if its runner can.
    pub(crate) async fn drive(
        &self,
        row: &RunRow,
        active: &Arc<Active>,
        saver: Option<Arc<dyn Saver>>,
    ) -> End {
        let log = &active.log;
        log.push(
            "metadata",
            &json!({ "run_id": row.run_id, "attempt": row.attempt }),
        );
        let Some(registered) = self.graphs.get(&row.graph_id) else {
            return ApiError::Internal(format!(
                "graph {} is not served by this process",
                row.graph_id
            ))
            .into();
        };
        let graph = match saver.and_then(|s| registered.graph.rebind(s)) {
            Some(fenced) => fenced,
            None => registered.graph.clone(),
        };
        let req = &row.request;
        let modes = match Modes::parse(
            &req.stream_mode
                .as_ref()
                .map(|m| m.to_vec())
                .unwrap_or_default(),
            req.stream_subgraphs.unwrap_or(false),
        ) {
            Ok(m) => m,
            Err(e) => return e.into(),
        };
        let started = async {
            let (input, fresh) = self.input_of(row).await?;
            let config = run_config(row, graph.as_ref(), active, fresh)?;
            graph
                .start(row.run_id.clone(), input, config, modes.engine())
                .await
        };
        let mut live = match started.await {
            Ok(live) => live,
            Err(e) => return e.into(),
        };
        let mut frames = Vec::new();
        let mut framer = modes.framer(&row.thread_id, message_metadata(row));
        while let Some(ev) = live.next_event().await {
            framer.frames(&ev, &mut frames);
            for (event, data) in frames.drain(..) {
                log.push(event, &data);
            }
        }
        match live.ended().await {
            Ok(ended) => {
                let mut values = ended.values;
                let pending: Vec<Value> = ended
                    .interrupts
                    .iter()
                    .filter(|i| !stategraph::run::is_static_interrupt(&i.id))
                    .map(crate::graph::interrupt_json)
                    .collect();
                if let (Value::Object(map), false) = (&mut values, pending.is_empty()) {
                    map.insert("__interrupt__".to_owned(), Value::Array(pending));
                }
                log.set_result(values);
                End::Done {
                    interrupted: !ended.interrupts.is_empty(),
                }
            }
            Err(RunFailure::Engine(RunError::Cancelled { .. })) => End::Stopped(stop_of(active)),
            Err(RunFailure::Engine(e)) => End::Failed {
                error: run_error_kind(&e).to_owned(),
                message: run_error_message(e),
            },
            Err(RunFailure::Other { kind, message }) => End::Failed {
                error: kind,
                message,
            },
        }
    }

    /// What the run starts from, and whether it starts afresh (its input applied, from the
    /// checkpoint it names if any). A run picked up again after a restart goes on from its
    /// thread's newest checkpoint if that is its own: its input was applied, from there.
    async fn input_of(&self, row: &RunRow) -> ApiResult<(RunInput, bool)> {
        if row.attempt > 1 && self.head_is_of_run(row).await? {
            return Ok((RunInput::Continue, false));
        }
        let req = &row.request;
        let input = match (&req.command, &req.input) {
            (Some(c), _) => RunInput::Command(c.clone()),
            (None, Some(v)) if !v.is_null() => RunInput::Values(v.clone()),
            _ => RunInput::Continue,
        };
        Ok((input, true))
    }

    async fn head_is_of_run(&self, row: &RunRow) -> ApiResult<bool> {
        let thread = ThreadId::new(&row.thread_id)?;
        let head = self.saver.head(&thread, &crate::graph::root()).await?;
        Ok(head.is_some_and(|h| {
            h.checkpoint.metadata.get("run_id") == Some(&Value::String(row.run_id.clone()))
        }))
    }

    /// Undo a stopped run: the thread's head becomes a copy of the checkpoint it had before
    /// the run (its own checkpoints stay behind as a branch nobody continues; decision 0079).
    pub(crate) async fn roll_back(&self, row: &RunRow) -> ApiResult<()> {
        let thread = ThreadId::new(&row.thread_id)?;
        let mut options = ListOptions::default();
        options
            .filter
            .insert("run_id".to_owned(), Value::String(row.run_id.clone()));
        let own = self
            .saver
            .list(&thread, &crate::graph::root(), options)
            .await?;
        let Some(first) = own.last() else {
            return Ok(());
        };
        let Some(graph) = self.graphs.get(&row.graph_id) else {
            return Ok(());
        };
        // The head the thread had before the run: the newest checkpoint older than the run's
        // first (not that one's parent, which for a run from an older checkpoint is the fork
        // point).
        let before = ListOptions {
            limit: Some(1),
            before: Some(first.id),
            ..ListOptions::default()
        };
        let head = self
            .saver
            .list(&thread, &crate::graph::root(), before)
            .await?;
        match head.first() {
            Some(head) => graph.graph.restore(row.thread_id.clone(), head.id).await,
            None => {
                self.saver.delete_thread(&thread).await?;
                Ok(())
            }
        }
    }
}

/// What a run's end makes of it and of its thread (with the thread's error), as on
/// LangGraph's server: a run that paused on an interrupt succeeded (its thread is
/// interrupted); a cancelled run is interrupted, and so is its thread. A failure's `error`
/// frame and the `__error__` result go to the run's log.
pub(crate) fn outcome(end: &End, active: &Active) -> (RunStatus, ThreadStatus, Option<Value>) {
    match end {
        End::Done { interrupted: true } => (RunStatus::Success, ThreadStatus::Interrupted, None),
        End::Done { interrupted: false } => (RunStatus::Success, ThreadStatus::Idle, None),
        End::Stopped(_) => (
            RunStatus::Interrupted,
            ThreadStatus::Interrupted,
            Some(json!({ "error": "UserInterrupt", "message": "the run was cancelled" })),
        ),
        End::Failed { error, message } => {
            let payload = json!({ "error": error, "message": message });
            active.log.push("error", &payload);
            active.log.set_result(json!({ "__error__": payload }));
            (RunStatus::Error, ThreadStatus::Error, Some(payload))
        }
    }
}

/// The error's kind as the `error` event names it (LangGraph sends the exception's class).
fn run_error_kind(e: &RunError) -> &'static str {
    match e {
        RunError::Node { .. } => "NodeError",
        RunError::Timeout { .. } => "TimeoutError",
        RunError::RecursionLimit { .. } => "GraphRecursionError",
        RunError::Reduce { .. } => "InvalidUpdateError",
        RunError::Checkpoint(_) => "CheckpointError",
        _ => "RunError",
    }
}

/// The error's message as the `error` event carries it: a node's own error as it gave it
/// (LangGraph sends the exception's text), any other error whole.
fn run_error_message(e: RunError) -> String {
    match e {
        RunError::Node { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

pub(crate) fn stop_of(active: &Active) -> StopAction {
    active
        .stop
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .unwrap_or(StopAction::Interrupt)
}

/// The engine's config for a run; `fresh` when it applies its input (from the checkpoint
/// the request names, if any), not when it goes on from its own newest checkpoint.
/// The metadata every streamed message's starts from: the run's, as its checkpoints have it.
fn message_metadata(row: &RunRow) -> serde_json::Map<String, Value> {
    let mut meta = row.metadata.clone();
    meta.insert("thread_id".into(), json!(row.thread_id));
    meta.insert("run_id".into(), json!(row.run_id));
    meta.insert("graph_id".into(), json!(row.graph_id));
    meta.insert("assistant_id".into(), json!(row.assistant_id));
    meta
}

fn run_config(
    row: &RunRow,
    graph: &dyn ServedGraph,
    active: &Active,
    fresh: bool,
) -> ApiResult<RunConfig> {
    let req = &row.request;
    let mut config = RunConfig::new()
        .thread(row.thread_id.clone())
        .cancel_token(active.cancel.clone())
        .usage_meter(active.usage.clone())
        .metadata("run_id", row.run_id.clone())
        .metadata("graph_id", row.graph_id.clone())
        .metadata("assistant_id", row.assistant_id.clone());
    for (k, v) in &row.metadata {
        if !matches!(k.as_str(), "run_id" | "graph_id" | "assistant_id") {
            config = config.metadata(k.clone(), v.clone());
        }
    }
    if let Some(context) = graph.context(req.context.as_ref())? {
        config = config.context_value(context);
    }
    if let Some(limit) = req.config.as_ref().and_then(|c| c.recursion_limit) {
        config = config.recursion_limit(limit);
    }
    if let Some(id) = req.checkpoint_id().filter(|_| fresh) {
        config = config.checkpoint(checkpoint_id(id)?);
    }
    if let Some(d) = &req.durability {
        config = config.durability(match d.as_str() {
            "sync" => Durability::Sync,
            "async" => Durability::Async,
            "exit" => Durability::Exit,
            other => {
                return Err(ApiError::Invalid(format!(
                    "durability {other:?}: expected sync, async or exit"
                )))
            }
        });
    }
    let nodes = |list: &NodeList| -> Vec<String> {
        match list {
            NodeList::All(s) if s == "*" => graph.nodes(),
            NodeList::All(s) => vec![s.clone()],
            NodeList::Nodes(v) => v.clone(),
        }
    };
    if let Some(list) = &req.interrupt_before {
        config = config.interrupt_before(nodes(list));
    }
    if let Some(list) = &req.interrupt_after {
        config = config.interrupt_after(nodes(list));
    }
    Ok(config)
}
