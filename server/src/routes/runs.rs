//! Runs: created streaming, in the background or waited for, on a thread or stateless;
//! listed, read, joined, re-streamed from `Last-Event-ID`, cancelled, deleted.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::header::{CONTENT_LOCATION, LOCATION};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::threads::existing;
use crate::error::{ApiError, ApiResult};
use crate::graph::{thread_id, RunInput};
use crate::guard::Body;
use crate::ids::rfc3339;
use crate::runs::frames::Modes;
use crate::runs::{NewRun, RunLog, StopAction};
use crate::sse::stream_response;
use crate::store::{RunRow, RunStatus};
use crate::wire::{IfNotExists, OnDisconnect, RunCreate};
use crate::Shared;

fn run_json(r: &RunRow) -> Value {
    json!({
        "run_id": r.run_id,
        "thread_id": r.thread_id,
        "assistant_id": r.assistant_id,
        "created_at": rfc3339(r.created_at),
        "updated_at": rfc3339(r.updated_at),
        "status": r.status.as_str(),
        "metadata": r.metadata,
        "multitask_strategy": r.multitask.as_str(),
        "kwargs": {},
        "usage": r.usage,
    })
}

/// The input a request gives, checked against the graph before the run is accepted.
fn input_of(req: &RunCreate) -> RunInput {
    match (&req.command, &req.input) {
        (Some(c), _) => RunInput::Command(c.clone()),
        (None, Some(v)) if !v.is_null() => RunInput::Values(v.clone()),
        _ => RunInput::Continue,
    }
}

/// Check a run request and accept it on `thread` (or a stateless thread of its own).
async fn accept(
    shared: &Arc<Shared>,
    thread: Option<String>,
    req: RunCreate,
) -> ApiResult<(RunRow, Arc<RunLog>)> {
    let graph = shared.run_assistant(&req.assistant_id)?.clone();
    graph.graph.check(&input_of(&req))?;
    graph.graph.context(req.context.as_ref())?;
    Modes::parse(
        &req.stream_mode
            .as_ref()
            .map(|m| m.to_vec())
            .unwrap_or_default(),
        false,
    )?;
    if let Some(d) = req.durability.as_deref() {
        if !matches!(d, "sync" | "async" | "exit") {
            return Err(ApiError::Invalid(format!(
                "durability {d:?}: expected sync, async or exit"
            )));
        }
    }
    if let Some(id) = req.checkpoint_id() {
        crate::graph::checkpoint_id(id)?;
    }
    let (thread, stateless) = match thread {
        Some(t) => {
            thread_id(&t)?;
            let row = match shared.book.thread(&t).await? {
                Some(row) => row,
                None if req.if_not_exists == Some(IfNotExists::Create) => shared
                    .book
                    .create_thread(&t, &serde_json::Map::new())
                    .await?
                    .ok_or_else(|| ApiError::Conflict(format!("thread {t} was just made")))?,
                None => return Err(ApiError::not_found("thread", &t)),
            };
            // Another graph may take the thread over only if it has the same state fields and
            // nodes: the thread's checkpoints name both (decision 0079).
            if let Some(other) = row.graph_id().filter(|g| *g != graph.name) {
                let same = shared.graphs.get(other).is_some_and(|o| {
                    same_names(o.graph.fields(), graph.graph.fields())
                        && same_names(o.graph.nodes(), graph.graph.nodes())
                });
                if !same {
                    return Err(ApiError::Conflict(format!(
                        "thread {t} holds the state of graph {other}, whose fields or nodes \
                         differ from those of {}; run it with an assistant of {other}",
                        graph.name
                    )));
                }
            }
            let stamped = row.graph_id() == Some(graph.name.as_str())
                && row.metadata.get("assistant_id").and_then(Value::as_str)
                    == Some(graph.assistant_id.as_str());
            if !stamped {
                let mut stamp = serde_json::Map::new();
                stamp.insert("graph_id".to_owned(), json!(graph.name));
                stamp.insert("assistant_id".to_owned(), json!(graph.assistant_id));
                shared.book.merge_metadata(&t, &stamp).await?;
            }
            (t, false)
        }
        None => (shared.stateless_thread().await?, true),
    };
    shared
        .submit(NewRun {
            thread_id: thread,
            graph_id: graph.name.clone(),
            assistant_id: graph.assistant_id.clone(),
            request: req,
            stateless,
        })
        .await
}

fn same_names<T: Ord>(mut a: Vec<T>, mut b: Vec<T>) -> bool {
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// `Content-Location` naming the run, and `Location` its `join`.
fn with_location(mut resp: Response, row: &RunRow) -> Response {
    let location = format!("/threads/{}/runs/{}", row.thread_id, row.run_id);
    if let Ok(v) = HeaderValue::from_str(&format!("{location}/join")) {
        resp.headers_mut().insert(LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(CONTENT_LOCATION, v);
    }
    resp
}

async fn stream(
    shared: Arc<Shared>,
    thread: Option<String>,
    req: RunCreate,
) -> ApiResult<Response> {
    // As LangGraph's server: a run goes on when its client goes, unless asked otherwise.
    let cancel = req.on_disconnect == Some(OnDisconnect::Cancel);
    let (row, log) = accept(&shared, thread, req).await?;
    Ok(stream_response(
        shared,
        &row.thread_id,
        &row.run_id,
        log,
        0,
        cancel,
    ))
}

/// The run's final values once it ends. The answer's head goes out at once and a newline
/// every heartbeat until then (JSON allows the whitespace), so no proxy or client read
/// timeout ends a long wait, as on LangGraph's server.
async fn wait(shared: Arc<Shared>, thread: Option<String>, req: RunCreate) -> ApiResult<Response> {
    let (row, log) = accept(&shared, thread, req).await?;
    let every = shared.options.heartbeat;
    let result = Box::pin(async move { log.result().await.unwrap_or(Value::Null) });
    let body = futures::stream::unfold(Some(result), move |pending| async move {
        let mut result = pending?;
        let chunk = match tokio::time::timeout(every, &mut result).await {
            Ok(value) => {
                return Some((
                    Ok::<_, std::convert::Infallible>(value.to_string().into()),
                    None,
                ))
            }
            Err(_) => axum::body::Bytes::from_static(b"\n"),
        };
        Some((Ok(chunk), Some(result)))
    });
    let mut resp = axum::body::Body::from_stream(body).into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(with_location(resp, &row))
}

async fn background(
    shared: Arc<Shared>,
    thread: Option<String>,
    req: RunCreate,
) -> ApiResult<Response> {
    let (row, _) = accept(&shared, thread, req).await?;
    Ok(with_location(Json(run_json(&row)).into_response(), &row))
}

pub(crate) async fn create_stream(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Response> {
    stream(shared, Some(id), req).await
}

pub(crate) async fn create_wait(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Response> {
    wait(shared, Some(id), req).await
}

pub(crate) async fn create_background(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Response> {
    background(shared, Some(id), req).await
}

pub(crate) async fn stateless_stream(
    State(shared): State<Arc<Shared>>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Response> {
    stream(shared, None, req).await
}

pub(crate) async fn stateless_wait(
    State(shared): State<Arc<Shared>>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Response> {
    wait(shared, None, req).await
}

pub(crate) async fn stateless_background(
    State(shared): State<Arc<Shared>>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Response> {
    background(shared, None, req).await
}

/// The run `run` of thread `thread`, or a 404.
async fn run_of(shared: &Shared, thread: &str, run: &str) -> ApiResult<RunRow> {
    existing(shared, thread).await?;
    shared
        .run_record(run)
        .await?
        .filter(|r| r.thread_id == thread)
        .ok_or_else(|| ApiError::not_found("run", run))
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListParams {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    status: Option<String>,
}

pub(crate) async fn list(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(p): Query<ListParams>,
) -> ApiResult<Json<Vec<Value>>> {
    existing(&shared, &id).await?;
    let status = match p.status.as_deref() {
        Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
            ApiError::Invalid(format!(
                "status {s:?}: expected pending, running, success, error, interrupted or timeout"
            ))
        })?),
        None => None,
    };
    let page = (p.limit.unwrap_or(10), p.offset.unwrap_or(0));
    let rows = shared.runs_of(&id, page, status).await?;
    Ok(Json(rows.iter().map(run_json).collect()))
}

pub(crate) async fn get_one(
    State(shared): State<Arc<Shared>>,
    Path((id, run)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(run_json(&run_of(&shared, &id, &run).await?)))
}

pub(crate) async fn delete(
    State(shared): State<Arc<Shared>>,
    Path((id, run)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let row = run_of(&shared, &id, &run).await?;
    if !row.status.is_terminal() {
        return Err(ApiError::Conflict(format!(
            "run {run} is {}: cancel it first",
            row.status.as_str()
        )));
    }
    if !shared.delete_run(&run).await? {
        return Err(ApiError::Conflict(format!(
            "run {run} started again before it could be deleted: cancel it first"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn join(
    State(shared): State<Arc<Shared>>,
    Path((id, run)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let run = run_of(&shared, &id, &run).await?;
    if let Some(result) = shared.log_of(&run).await.result().await {
        return Ok(Json(result));
    }
    let row = existing(&shared, &id).await?;
    let state = super::threads::thread_json(&shared, &row).await?;
    Ok(Json(state["values"].clone()))
}

#[derive(Debug, Deserialize)]
pub(crate) struct JoinParams {
    #[serde(default)]
    cancel_on_disconnect: Option<String>,
}

pub(crate) async fn join_stream(
    State(shared): State<Arc<Shared>>,
    Path((id, run)): Path<(String, String)>,
    Query(p): Query<JoinParams>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let row = run_of(&shared, &id, &run).await?;
    let cancel = flag("cancel_on_disconnect", p.cancel_on_disconnect.as_deref())?;
    let log = shared.log_of(&row).await;
    let from = match headers.get("last-event-id").map(HeaderValue::to_str) {
        None => 0,
        Some(Ok(text)) => log.after(text).ok_or_else(|| {
            ApiError::Invalid(format!(
                "Last-Event-ID {text:?}: expected -1 or an id this server sent (attempt-number)"
            ))
        })?,
        Some(Err(_)) => return Err(ApiError::Invalid("Last-Event-ID is not text".to_owned())),
    };
    Ok(stream_response(shared, &id, &run, log, from, cancel))
}

#[derive(Debug, Deserialize)]
pub(crate) struct CancelParams {
    #[serde(default)]
    wait: Option<String>,
    #[serde(default)]
    action: Option<String>,
}

/// A query flag as the SDKs send it (`1`/`0`, `true`/`false`).
fn flag(name: &str, value: Option<&str>) -> ApiResult<bool> {
    match value {
        None => Ok(false),
        Some("1" | "true" | "True") => Ok(true),
        Some("0" | "false" | "False") => Ok(false),
        Some(other) => Err(ApiError::Invalid(format!(
            "{name} {other:?}: expected true or false"
        ))),
    }
}

/// Cancel a pending or running run: 202 at once, or with `wait` 200 once it has stopped.
/// A run that has already ended is a 404, as on LangGraph's server.
pub(crate) async fn cancel(
    State(shared): State<Arc<Shared>>,
    Path((id, run)): Path<(String, String)>,
    Query(p): Query<CancelParams>,
) -> ApiResult<Response> {
    let row = run_of(&shared, &id, &run).await?;
    let wait = flag("wait", p.wait.as_deref())?;
    let action = match p.action.as_deref() {
        None | Some("interrupt") => StopAction::Interrupt,
        Some("rollback") => StopAction::Rollback,
        Some(other) => {
            return Err(ApiError::Invalid(format!(
                "action {other:?}: expected interrupt or rollback"
            )))
        }
    };
    if row.status.is_terminal() || !shared.stop(&run, action).await? {
        return Err(ApiError::not_found("pending or running run", &run));
    }
    if !wait {
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    shared.log_of(&row).await.result().await;
    Ok(with_location(Json(json!({})).into_response(), &row))
}
