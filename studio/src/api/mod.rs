//! The JSON API and the routes: one module per resource, every handler reading through the
//! read-only saver; ids from a request are parsed and validated, and only ever bound as SQL
//! values (no request text reaches the file system).

mod checkpoint;
mod fork;
mod graph;
mod history;
mod namespaces;
mod store;
mod threads;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use serde_json::json;
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, ListOptions, Namespace, ThreadId,
};

use crate::server::AppState;
// The JSON form shared with the CLI.
use crate::{assets, auth};
pub(crate) use stategraph_checkpoints::inspect::header_json;

/// The query parameters of a request.
pub(crate) type Params = axum::extract::Query<BTreeMap<String, String>>;
/// What a handler returns.
pub(crate) type ApiResult = Result<Json<serde_json::Value>, ApiError>;

/// The largest request body accepted (a fork's edits).
const MAX_BODY: usize = 1 << 20;

/// Every route, behind the token check.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/api/info", get(info))
        .route("/api/threads", get(threads::list))
        .route("/api/threads/{thread}/runs", get(threads::runs))
        .route("/api/threads/{thread}/namespaces", get(namespaces::list))
        .route("/api/threads/{thread}/history", get(history::page))
        .route("/api/threads/{thread}/head", get(history::head))
        .route("/api/threads/{thread}/graph", get(graph::graph))
        .route(
            "/api/threads/{thread}/checkpoints/{id}",
            get(checkpoint::show),
        )
        .route(
            "/api/threads/{thread}/checkpoints/{id}/list",
            get(checkpoint::list),
        )
        .route("/api/threads/{thread}/diff", get(checkpoint::diff))
        .route("/api/threads/{thread}/fork", post(fork::fork))
        .route("/api/store/namespaces", get(store::namespaces))
        .route("/api/store/items", get(store::item))
        .route("/api/store/search", get(store::search))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// A request the API refuses or could not serve, answered as `{"error": message}`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ApiError {
    /// 400: a malformed id, parameter or body.
    #[error("{0}")]
    BadRequest(String),
    /// 403: a fork in read-only mode.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such thread, checkpoint or route.
    #[error("{0}")]
    NotFound(String),
    /// 409: a fork refused by the field's recorded shape.
    #[error("{0}")]
    Conflict(String),
    /// 500: the file could not be read or written.
    #[error("{0}")]
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, Json(json!({ "error": self.to_string() }))).into_response()
    }
}

impl From<CheckpointError> for ApiError {
    fn from(e: CheckpointError) -> Self {
        match e {
            CheckpointError::NotFound { .. } | CheckpointError::RunNotFound { .. } => {
                ApiError::NotFound(e.to_string())
            }
            CheckpointError::InvalidCheckpointId { .. }
            | CheckpointError::InvalidThreadId { .. } => ApiError::BadRequest(e.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such page or API route".to_owned())
}

/// `GET /api/info`: the file's name (or the database URL without its password), which
/// store it is (`sqlite` or `postgres`) and whether forks are allowed.
async fn info(axum::extract::State(state): axum::extract::State<Arc<AppState>>) -> ApiResult {
    let store = match state.saver {
        stategraph_checkpoints::inspect::Store::File(_) => "sqlite",
        _ => "postgres",
    };
    Ok(Json(json!({
        "file": state.label,
        "store": store,
        "read_only": state.read_only,
    })))
}

/// A thread id from the path; 400 when it is not one.
pub(crate) fn thread_id(text: &str) -> Result<ThreadId, ApiError> {
    ThreadId::new(text).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// A full checkpoint id (32 hex digits); 400 otherwise.
pub(crate) fn checkpoint_id(text: &str) -> Result<CheckpointId, ApiError> {
    text.parse::<CheckpointId>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{}` is not a checkpoint id (32 hex digits)",
            cut(text)
        ))
    })
}

/// At most 64 characters of `text`, for messages.
pub(crate) fn cut(text: &str) -> String {
    text.chars().take(64).collect()
}

/// The longest namespace a request may name.
const MAX_NS_LEN: usize = 4096;

/// The namespace a request's `ns` parameter names: the root one when it is absent or empty,
/// a subgraph's as `GET /api/threads/{thread}/namespaces` lists it; 400 for one too long to
/// be stored.
pub(crate) fn namespace(params: &Params) -> Result<Namespace, ApiError> {
    match params.get("ns") {
        None => Ok(Namespace::root()),
        Some(text) if text.len() > MAX_NS_LEN => Err(ApiError::BadRequest(format!(
            "namespace `{}…`: longer than {MAX_NS_LEN} bytes",
            cut(text)
        ))),
        Some(text) => Ok(Namespace::parse(text)),
    }
}

/// `thread t`, with its namespace unless it is the root one.
pub(crate) fn thread_label(thread: &ThreadId, ns: &Namespace) -> String {
    if ns.is_root() {
        format!("thread {thread}")
    } else {
        format!("thread {thread} (namespace {})", cut(ns.as_str()))
    }
}

/// The newest checkpoint of `thread`'s namespace `ns`; 404 for an unknown thread or a
/// namespace without checkpoints.
pub(crate) async fn newest(
    state: &AppState,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Checkpoint, ApiError> {
    let options = ListOptions {
        limit: Some(1),
        ..ListOptions::default()
    };
    state
        .saver
        .list(thread, ns, options)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
            ApiError::NotFound(if ns.is_root() {
                format!("no thread {thread} in the file")
            } else {
                format!("no checkpoints in {}", thread_label(thread, ns))
            })
        })
}
