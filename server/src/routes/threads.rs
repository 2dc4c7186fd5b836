//! Threads: create, read, patch, delete, search, copy; their state, state updates and
//! history.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph::checkpoints::CheckpointId;

use crate::error::{ApiError, ApiResult};
use crate::graph::{checkpoint_id, empty_state, list_options, thread_id};
use crate::guard::Body;
use crate::ids::{rfc3339, uuid4};
use crate::runs::StopAction;
use crate::store::ThreadRow;
use crate::wire::{
    CheckpointRef, HistoryQuery, StateUpdate, ThreadCreate, ThreadPatch, ThreadSearch,
};
use crate::{Registered, Shared};

/// A thread as the clients read it, with its values and pending interrupts.
pub(crate) async fn thread_json(shared: &Shared, row: &ThreadRow) -> ApiResult<Value> {
    let state = match graph_of(shared, row) {
        Some(g) => g.graph.state(row.thread_id.clone(), None).await?,
        None => None,
    };
    let (values, interrupts) = match &state {
        Some(s) => {
            let mut by_task = Map::new();
            for task in s["tasks"].as_array().into_iter().flatten() {
                let list = &task["interrupts"];
                if list.as_array().is_some_and(|l| !l.is_empty()) {
                    let id = task["id"].as_str().unwrap_or_default().to_owned();
                    by_task.insert(id, list.clone());
                }
            }
            (s["values"].clone(), Value::Object(by_task))
        }
        None => (Value::Null, json!({})),
    };
    Ok(json!({
        "thread_id": row.thread_id,
        "created_at": rfc3339(row.created_at),
        "updated_at": rfc3339(row.updated_at),
        "metadata": row.metadata,
        "status": row.status.as_str(),
        "error": row.error,
        "state_updated_at": rfc3339(row.updated_at),
        "config": {},
        "values": values,
        "interrupts": interrupts,
    }))
}

/// The graph a thread's runs used, if it has run (or was made for one).
pub(crate) fn graph_of<'a>(shared: &'a Shared, row: &ThreadRow) -> Option<&'a Arc<Registered>> {
    row.graph_id().and_then(|g| shared.graphs.get(g))
}

/// The thread `id`, or a 404.
pub(crate) async fn existing(shared: &Shared, id: &str) -> ApiResult<ThreadRow> {
    thread_id(id)?;
    shared
        .book
        .thread(id)
        .await?
        .ok_or_else(|| ApiError::not_found("thread", id))
}

pub(crate) async fn create(
    State(shared): State<Arc<Shared>>,
    Body(req): Body<ThreadCreate>,
) -> ApiResult<Json<Value>> {
    let id = match req.thread_id {
        Some(id) => {
            thread_id(&id)?;
            id
        }
        None => uuid4(),
    };
    let mut metadata = req.metadata.unwrap_or_default();
    if let Some(graph) = req.graph_id {
        shared.assistant(&graph)?;
        metadata.insert("graph_id".to_owned(), Value::String(graph));
    }
    let row = match shared.book.create_thread(&id, &metadata).await? {
        Some(row) => row,
        None if req.if_exists.as_deref() == Some("do_nothing") => existing(&shared, &id).await?,
        None => return Err(ApiError::Conflict(format!("thread {id} already exists"))),
    };
    Ok(Json(thread_json(&shared, &row).await?))
}

pub(crate) async fn get_one(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let row = existing(&shared, &id).await?;
    Ok(Json(thread_json(&shared, &row).await?))
}

pub(crate) async fn patch(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Body(req): Body<ThreadPatch>,
) -> ApiResult<Json<Value>> {
    existing(&shared, &id).await?;
    let row = shared
        .book
        .merge_metadata(&id, &req.metadata.unwrap_or_default())
        .await?
        .ok_or_else(|| ApiError::not_found("thread", &id))?;
    Ok(Json(thread_json(&shared, &row).await?))
}

pub(crate) async fn delete(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    existing(&shared, &id).await?;
    // Its runs stop first: a run still running would write its next checkpoint into the
    // deleted thread.
    for run in shared.runs_of(&id, (usize::MAX, 0), None).await? {
        if !run.status.is_terminal() && shared.stop(&run.run_id, StopAction::Interrupt).await? {
            shared.log_of(&run).await.result().await;
        }
    }
    shared.saver.delete_thread(&thread_id(&id)?).await?;
    shared.book.delete_thread(&id).await?;
    shared.forget_runs(&id, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn search(
    State(shared): State<Arc<Shared>>,
    Body(q): Body<ThreadSearch>,
) -> ApiResult<Json<Vec<Value>>> {
    let rows = shared.book.search_threads(&q).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.push(thread_json(&shared, row).await?);
    }
    Ok(Json(out))
}

pub(crate) async fn copy(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let from = existing(&shared, &id).await?;
    let to = uuid4();
    let row = shared
        .book
        .create_thread(&to, &from.metadata)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("thread {to} already exists")))?;
    shared
        .saver
        .copy_thread(&thread_id(&id)?, &thread_id(&to)?)
        .await?;
    Ok(Json(thread_json(&shared, &row).await?))
}

async fn state_of(
    shared: &Shared,
    id: &str,
    checkpoint: Option<CheckpointId>,
) -> ApiResult<Json<Value>> {
    let row = existing(shared, id).await?;
    let state = match graph_of(shared, &row) {
        Some(g) => g.graph.state(id.to_owned(), checkpoint).await?,
        None => None,
    };
    match (state, checkpoint) {
        (Some(s), _) => Ok(Json(s)),
        (None, None) => Ok(Json(empty_state(id))),
        (None, Some(c)) => Err(ApiError::not_found("checkpoint", c.to_string())),
    }
}

pub(crate) async fn state(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    state_of(&shared, &id, None).await
}

pub(crate) async fn state_at(
    State(shared): State<Arc<Shared>>,
    Path((id, checkpoint)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    state_of(&shared, &id, Some(checkpoint_id(&checkpoint)?)).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateAt {
    #[serde(default)]
    checkpoint: Option<CheckpointRef>,
}

pub(crate) async fn state_at_body(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Body(req): Body<StateAt>,
) -> ApiResult<Json<Value>> {
    let at = match req.checkpoint.and_then(|c| c.checkpoint_id) {
        Some(c) => Some(checkpoint_id(&c)?),
        None => None,
    };
    state_of(&shared, &id, at).await
}

pub(crate) async fn update_state(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Body(req): Body<StateUpdate>,
) -> ApiResult<Json<Value>> {
    let row = existing(&shared, &id).await?;
    let graph = graph_of(&shared, &row).ok_or_else(|| {
        ApiError::Invalid(format!(
            "thread {id} has no graph yet: run it, or create it with graph_id, first"
        ))
    })?;
    let at = req
        .checkpoint
        .and_then(|c| c.checkpoint_id)
        .or(req.checkpoint_id);
    let at = match at {
        Some(c) => Some(checkpoint_id(&c)?),
        None => None,
    };
    let values = req.values.unwrap_or(Value::Null);
    let made = graph
        .graph
        .update_state(id.clone(), at, values, req.as_node)
        .await?;
    Ok(Json(json!({ "checkpoint": {
        "thread_id": id, "checkpoint_ns": "", "checkpoint_id": made.to_string(),
        "checkpoint_map": null,
    }})))
}

async fn history_of(shared: &Shared, id: &str, q: HistoryQuery) -> ApiResult<Json<Vec<Value>>> {
    let row = existing(shared, id).await?;
    let Some(graph) = graph_of(shared, &row) else {
        return Ok(Json(Vec::new()));
    };
    let before = match q.before.as_ref().and_then(|b| b.id()) {
        Some(b) => Some(checkpoint_id(b)?),
        None => None,
    };
    let options = list_options(Some(q.limit.unwrap_or(10)), before, q.metadata.as_ref());
    Ok(Json(graph.graph.history(id.to_owned(), options).await?))
}

pub(crate) async fn history(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Body(q): Body<HistoryQuery>,
) -> ApiResult<Json<Vec<Value>>> {
    history_of(&shared, &id, q).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct HistoryParams {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    before: Option<String>,
}

pub(crate) async fn history_get(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(p): Query<HistoryParams>,
) -> ApiResult<Json<Vec<Value>>> {
    let q = HistoryQuery {
        limit: p.limit,
        before: p.before.map(crate::wire::BeforeRef::Id),
        ..HistoryQuery::default()
    };
    history_of(&shared, &id, q).await
}
