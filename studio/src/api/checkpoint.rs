//! `GET /api/threads/{thread}/checkpoints/{id}` (header, state, pending writes, interrupts,
//! metadata) and `GET /api/threads/{thread}/diff?to=ID[&from=ID]` (against the parent when
//! `from` is left out), both through the library's stored JSON and `diff`; each takes
//! `ns=NS` for a subgraph's checkpoints (the root graph's by default).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};
use stategraph_checkpoints::diff::{diff_values, fields_to_json, parts_to_json};
use stategraph_checkpoints::{
    CheckpointId, FieldPart, LoadedCheckpoint, Namespace, ThreadId, WriteKind,
};

use super::{
    checkpoint_id, cut, header_json, namespace, thread_id, thread_label, ApiError, ApiResult,
    Params,
};
use crate::server::AppState;
use stategraph_checkpoints::inspect::pending_json;

/// One checkpoint with its state.
pub(crate) async fn show(
    State(state): State<Arc<AppState>>,
    Path((thread, id)): Path<(String, String)>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let id = checkpoint_id(&id)?;
    let ns = namespace(&params)?;
    let loaded = load(&state, &thread, &ns, id).await?;
    let mut values = state_json(&loaded)?;
    let mut cut_lists = Vec::new();
    cut_long_lists(&mut values, &mut String::new(), &mut cut_lists);
    let pending: Vec<Value> = loaded.pending.iter().map(pending_json).collect();
    let interrupts: Vec<Value> = loaded
        .pending
        .iter()
        .filter(|w| matches!(w.kind, WriteKind::Interrupt { .. }))
        .map(pending_json)
        .collect();
    Ok(Json(json!({
        "thread": thread.as_str(),
        "ns": ns.as_str(),
        "checkpoint": header_json(&loaded.checkpoint),
        "state": values,
        "cut_lists": cut_lists,
        "pending": pending,
        "interrupts": interrupts,
    })))
}

/// Items of a list the checkpoint answer carries; the rest come by [`list`].
pub(crate) const LIST_PAGE: usize = 100;

/// Cut every list longer than [`LIST_PAGE`] in `value` to its first items, noting
/// `{"path", "len"}` of each (its JSON pointer and full length) in `cut`.
fn cut_long_lists(value: &mut Value, path: &mut String, cut: &mut Vec<Value>) {
    let len = path.len();
    match value {
        Value::Array(items) => {
            if items.len() > LIST_PAGE {
                cut.push(json!({ "path": path.clone(), "len": items.len() }));
                items.truncate(LIST_PAGE);
            }
            for (i, item) in items.iter_mut().enumerate() {
                path.push('/');
                path.push_str(&i.to_string());
                cut_long_lists(item, path, cut);
                path.truncate(len);
            }
        }
        Value::Object(members) => {
            for (k, v) in members.iter_mut() {
                path.push('/');
                path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                cut_long_lists(v, path, cut);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// `GET /api/threads/{thread}/checkpoints/{id}/list?path=P&offset=N&limit=M`: a page of the
/// list at JSON pointer `P` in the checkpoint's state, `{"len", "offset", "items"}`.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    Path((thread, id)): Path<(String, String)>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let id = checkpoint_id(&id)?;
    let number = |name: &str, default: usize, max: usize| -> Result<usize, ApiError> {
        match params.get(name) {
            None => Ok(default),
            Some(t) => t
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "{name} `{}`: expected a number up to {max}",
                        cut(t)
                    ))
                }),
        }
    };
    let offset = number("offset", 0, usize::MAX)?;
    let limit = number("limit", LIST_PAGE, super::history::MAX_PAGE)?;
    let path = params
        .get("path")
        .ok_or_else(|| ApiError::BadRequest("list needs `path` (a JSON pointer)".to_owned()))?;
    let loaded = load(&state, &thread, &namespace(&params)?, id).await?;
    let values = state_json(&loaded)?;
    let Some(Value::Array(items)) = values.pointer(path) else {
        return Err(ApiError::NotFound(format!(
            "no list at `{}` in checkpoint {id}",
            cut(path)
        )));
    };
    let page: Vec<&Value> = items.iter().skip(offset).take(limit).collect();
    Ok(Json(
        json!({ "len": items.len(), "offset": offset, "items": page }),
    ))
}

/// The diff between two checkpoints of a thread.
pub(crate) async fn diff(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let ns = namespace(&params)?;
    let to_text = params
        .get("to")
        .ok_or_else(|| ApiError::BadRequest("diff needs `to` (a checkpoint id)".to_owned()))?;
    let to = load(&state, &thread, &ns, checkpoint_id(to_text)?).await?;
    let from_id = match params.get("from") {
        Some(f) => Some(checkpoint_id(f)?),
        None => to.checkpoint.parent,
    };
    let to_state = state_json(&to)?;
    let shortcut = match (params.get("from"), to.checkpoint.parent) {
        (None, Some(parent)) => parent_by_appends(&state, &thread, &ns, &to, &to_state)
            .await?
            .map(|s| (Some(json!({ "id": parent.to_string() })), s)),
        _ => None,
    };
    let (from_header, from_state) = match (shortcut, from_id) {
        (Some(found), _) => found,
        (None, Some(f)) => {
            let from = load(&state, &thread, &ns, f).await?;
            (Some(header_json(&from.checkpoint)), state_json(&from)?)
        }
        (None, None) => (None, json!({})),
    };
    let d = diff_values(&from_state, &to_state);
    Ok(Json(json!({
        "from": from_header,
        "to": header_json(&to.checkpoint),
        "diff": serde_json::to_value(&d).unwrap_or(Value::Null),
        "patch": d.to_json_patch(),
        "text": d.to_string(),
    })))
}

/// The parent's state rebuilt from `to`'s own when its step only appended to lists (what
/// `Saver::changes` tells without loading the parent): a long thread's step diff then
/// decodes one state, not two. `None` when the step did more.
async fn parent_by_appends(
    state: &AppState,
    thread: &ThreadId,
    ns: &Namespace,
    to: &LoadedCheckpoint,
    to_state: &Value,
) -> Result<Option<Value>, ApiError> {
    let changes = state.saver.changes(thread, ns, to.checkpoint.id).await?;
    let mut from = to_state.clone();
    for (field, parts) in &changes.fields {
        if !parts.iter().all(|p| matches!(p, FieldPart::Tail(_))) {
            return Ok(None);
        }
        let added = match parts_to_json(parts) {
            Ok(Value::Array(items)) => items.len(),
            _ => return Ok(None),
        };
        match from.get_mut(field) {
            Some(Value::Array(list)) if list.len() >= added => list.truncate(list.len() - added),
            _ => return Ok(None),
        }
    }
    Ok(Some(from))
}

/// Checkpoint `id` of the thread's namespace `ns`; 404 when it has none.
pub(crate) async fn load(
    state: &AppState,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<LoadedCheckpoint, ApiError> {
    match state.saver.get(thread, ns, Some(id)).await {
        Ok(Some(l)) => Ok(l),
        Ok(None) | Err(stategraph_checkpoints::CheckpointError::NotFound { .. }) => {
            Err(ApiError::NotFound(format!(
                "no checkpoint {id} in {}",
                thread_label(thread, ns)
            )))
        }
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
