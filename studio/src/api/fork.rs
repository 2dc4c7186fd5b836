//! `POST /api/threads/{thread}/fork`: a new branch of the thread from a checkpoint, with
//! edited values, made by the library's [`ForkPlan`] with the same rules as `stategraph
//! fork` (decision 0044's shape check: a value of a kind the field never held is refused
//! unless `force`). The body is checked whole before the file is opened for writing, for
//! this request only (a database is written through the studio's own connections); in
//! read-only mode the request is refused. A fork starts a branch of the root graph: a
//! subgraph's checkpoints are not forked on their own (the parent would not resume them).
//!
//! Body: `{"checkpoint": ID, "set": [{"path": "/field/...", "value": "JSON text"}],
//! "force": false}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use stategraph_checkpoints::fork::{FieldEdit, FieldPath, ForkError, ForkPlan};
use stategraph_checkpoints::inspect::{self, Store};
use stategraph_checkpoints::shape::Fit;
use stategraph_checkpoints::{Namespace, ThreadId};

use super::checkpoint::load;
use super::{checkpoint_id, cut, thread_id, ApiError, ApiResult};
use crate::server::AppState;

/// The most edits one fork takes.
const MAX_EDITS: usize = 64;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    checkpoint: String,
    #[serde(default)]
    set: Vec<SetBody>,
    #[serde(default)]
    force: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetBody {
    path: String,
    /// The new value as JSON text.
    value: String,
}

/// Fork the thread.
pub(crate) async fn fork(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
    body: Bytes,
) -> ApiResult {
    if state.read_only {
        return Err(ApiError::Forbidden(
            "the studio is read-only (--read-only): forking is off".to_owned(),
        ));
    }
    let thread = thread_id(&thread)?;
    let body: ForkBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("the fork request is not valid: {e}")))?;
    if body.set.len() > MAX_EDITS {
        return Err(ApiError::BadRequest(format!(
            "{} edits: at most {MAX_EDITS} per fork",
            body.set.len()
        )));
    }
    let at = checkpoint_id(&body.checkpoint)?;
    let edits: Vec<FieldEdit> = body.set.iter().map(edit).collect::<Result<_, _>>()?;
    // The base is read (and a missing one reported) through the read-only saver first.
    let base = load(&state, &thread, &Namespace::root(), at).await?;
    let _one_at_a_time = state.fork_lock.lock().await;
    let saver = match &state.saver {
        Store::File(_) => Store::File(
            inspect::open_existing(&state.file).map_err(|e| ApiError::Internal(e.to_string()))?,
        ),
        database => database.clone(),
    };
    let result = plan_and_write(&saver, &thread, base, &edits, body.force).await;
    let closed = saver.close();
    let (id, warnings) = result?;
    closed.map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(json!({
        "thread": thread.as_str(),
        "checkpoint": id.to_string(),
        "parent": at.to_string(),
        "warnings": warnings,
    })))
}

/// One `set` entry as an edit; 400 for a bad path or value.
fn edit(s: &SetBody) -> Result<FieldEdit, ApiError> {
    let path = FieldPath::parse(&s.path)
        .map_err(|e| ApiError::BadRequest(format!("path `{}`: {e}", cut(&s.path))))?;
    let value: Value = serde_json::from_str(&s.value).map_err(|e| {
        ApiError::BadRequest(format!(
            "{path}: the value is not JSON ({e}); a string needs quotes, e.g. \"text\""
        ))
    })?;
    Ok(FieldEdit { path, value })
}

/// Apply the edits with the CLI's shape rules and write the fork; the new id and warnings.
async fn plan_and_write(
    saver: &Store,
    thread: &ThreadId,
    base: stategraph_checkpoints::LoadedCheckpoint,
    edits: &[FieldEdit],
    force: bool,
) -> Result<(stategraph_checkpoints::CheckpointId, Vec<String>), ApiError> {
    let shapes = saver
        .field_shapes(thread, &Namespace::root())
        .await
        .map_err(ApiError::from)?;
    let mut plan = ForkPlan::new(thread, base, thread).map_err(fork_error)?;
    let mut warnings = Vec::new();
    for e in edits {
        let retyped = plan
            .edit(e)
            .map_err(|err| ApiError::BadRequest(format!("{}: {err}", e.path)))?;
        let field = e.path.field();
        let fit = shapes
            .get(field)
            .zip(plan.value(field))
            .map(|(s, v)| s.fit(v));
        match fit {
            Some(Fit::Misfit(why)) if !force => {
                return Err(ApiError::Conflict(format!(
                    "{}: field {field}: {why}, so the program's type would fail to load the \
                     branch; nothing was written (fork with force to write it anyway)",
                    e.path
                )))
            }
            Some(Fit::Misfit(why) | Fit::Doubt(why)) => {
                warnings.push(format!("{}: field {field}: {why}", e.path));
            }
            Some(Fit::Fits) => {}
            None => {
                if let Some(r) = retyped {
                    warnings.push(format!(
                        "{}: field {} was a {} and is now a {}",
                        r.path,
                        r.path.field(),
                        r.was,
                        r.now
                    ));
                }
            }
        }
    }
    let id = plan.write(&**saver).await.map_err(fork_error)?;
    Ok((id, warnings))
}

fn fork_error(e: ForkError) -> ApiError {
    match e {
        ForkError::Copy(e) => ApiError::from(e),
        other => ApiError::Internal(other.to_string()),
    }
}
