//! `GET /api/threads/{thread}/checkpoints/{id}` (header, state, pending writes, interrupts,
//! metadata) and `GET /api/threads/{thread}/diff?to=ID[&from=ID]` (against the parent when
//! `from` is left out), both through the library's stored JSON and `diff`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};
use stategraph_checkpoints::diff::{diff_values, fields_to_json};
use stategraph_checkpoints::{
    CheckpointId, LoadedCheckpoint, Namespace, PendingWrite, Saver, ThreadId, WriteKind,
};

use super::{checkpoint_id, header_json, thread_id, ApiError, ApiResult, Params};
use crate::server::AppState;

/// One checkpoint with its state.
pub(crate) async fn show(
    State(state): State<Arc<AppState>>,
    Path((thread, id)): Path<(String, String)>,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let id = checkpoint_id(&id)?;
    let loaded = load(&state, &thread, id).await?;
    let values = state_json(&loaded)?;
    let pending: Vec<Value> = loaded.pending.iter().map(pending_json).collect();
    let interrupts: Vec<Value> = loaded
        .pending
        .iter()
        .filter(|w| matches!(w.kind, WriteKind::Interrupt { .. }))
        .map(pending_json)
        .collect();
    Ok(Json(json!({
        "thread": thread.as_str(),
        "checkpoint": header_json(&loaded.checkpoint),
        "state": values,
        "pending": pending,
        "interrupts": interrupts,
    })))
}

/// The diff between two checkpoints of a thread.
pub(crate) async fn diff(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let to_text = params
        .get("to")
        .ok_or_else(|| ApiError::BadRequest("diff needs `to` (a checkpoint id)".to_owned()))?;
    let to = load(&state, &thread, checkpoint_id(to_text)?).await?;
    let from_id = match params.get("from") {
        Some(f) => Some(checkpoint_id(f)?),
        None => to.checkpoint.parent,
    };
    let (from_header, from_state) = match from_id {
        Some(f) => {
            let from = load(&state, &thread, f).await?;
            (Some(header_json(&from.checkpoint)), state_json(&from)?)
        }
        None => (None, json!({})),
    };
    let to_state = state_json(&to)?;
    let d = diff_values(&from_state, &to_state);
    Ok(Json(json!({
        "from": from_header,
        "to": header_json(&to.checkpoint),
        "diff": serde_json::to_value(&d).unwrap_or(Value::Null),
        "patch": d.to_json_patch(),
        "text": d.to_string(),
    })))
}

/// Checkpoint `id` of the thread's root namespace; 404 when it has none.
pub(crate) async fn load(
    state: &AppState,
    thread: &ThreadId,
    id: CheckpointId,
) -> Result<LoadedCheckpoint, ApiError> {
    match state.saver.get(thread, &Namespace::root(), Some(id)).await {
        Ok(Some(l)) => Ok(l),
        Ok(None) | Err(stategraph_checkpoints::CheckpointError::NotFound { .. }) => Err(
            ApiError::NotFound(format!("no checkpoint {id} in thread {thread}")),
        ),
        Err(e) => Err(e.into()),
    }
}

/// A loaded checkpoint's state as one JSON object.
fn state_json(loaded: &LoadedCheckpoint) -> Result<Value, ApiError> {
    fields_to_json(&loaded.fields).map_err(|e| {
        ApiError::Internal(format!(
            "checkpoint {}: a stored value is not readable: {e}",
            loaded.checkpoint.id
        ))
    })
}

/// A pending write as JSON.
fn pending_json(w: &PendingWrite) -> Value {
    let task = w.task_id.to_string();
    match &w.kind {
        WriteKind::Output(v) => {
            json!({ "task": task, "node": w.node, "kind": "output", "value": v })
        }
        WriteKind::Error(m) => {
            json!({ "task": task, "node": w.node, "kind": "error", "message": m })
        }
        WriteKind::Interrupt { id, value } => json!({
            "task": task, "node": w.node, "kind": "interrupt", "id": id, "value": value
        }),
        WriteKind::Resume(values) => {
            json!({ "task": task, "node": w.node, "kind": "resume", "values": values })
        }
    }
}
