//! `GET /api/threads` (the threads with status, step count, last update and their runs) and
//! `GET /api/threads/{thread}/runs` (one thread's runs with their delivery receipts).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_checkpoints::{CheckpointError, RunRecord, ThreadId};

use super::{newest, thread_id, ApiResult};
use crate::server::AppState;

/// The threads of the file, each with its runs (without receipts).
pub(crate) async fn list(State(state): State<Arc<AppState>>) -> ApiResult {
    let mut out = Vec::new();
    for info in state.saver.list_threads().await? {
        let runs = runs_of(&state, &info.thread).await?;
        out.push(json!({
            "thread": info.thread.as_str(),
            "checkpoints": info.checkpoints,
            "last_step": info.last_step,
            "status": info.status.as_str(),
            "updated_at_ms": info.updated_at_ms,
            "updated_at": format_utc_ms(info.updated_at_ms),
            "runs": runs.iter().map(run_json).collect::<Vec<_>>(),
        }));
    }
    Ok(Json(Value::Array(out)))
}

/// One thread's runs, newest first, each with its delivery receipt (or `null`).
pub(crate) async fn runs(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    newest(&state, &thread, &stategraph_checkpoints::Namespace::root()).await?;
    let mut out = Vec::new();
    for run in runs_of(&state, &thread).await? {
        let receipt = state.saver.get_receipt(&run.run_id).await?;
        let mut v = run_json(&run);
        v["receipt"] = receipt.map_or(Value::Null, |r| r.into_json());
        out.push(v);
    }
    Ok(Json(Value::Array(out)))
}

/// The runs of `thread`; none from a file whose saver keeps no runs.
async fn runs_of(state: &AppState, thread: &ThreadId) -> Result<Vec<RunRecord>, CheckpointError> {
    match state.saver.list_runs(thread).await {
        Err(CheckpointError::Unsupported { .. }) => Ok(Vec::new()),
        other => other,
    }
}

/// A run as JSON.
fn run_json(run: &RunRecord) -> Value {
    json!({
        "run_id": run.run_id.as_str(),
        "status": run.status.as_str(),
        "reason": run.reason,
        "stop_reason": run.stop_reason,
        "created_at": format_utc_ms(run.created_at_ms),
        "updated_at": format_utc_ms(run.updated_at_ms),
        "metadata": run.metadata,
    })
}
