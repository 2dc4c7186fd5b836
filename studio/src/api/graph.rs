//! `GET /api/threads/{thread}/graph?checkpoint=ID`: the graph that made the checkpoint (the
//! newest by default), as the shape stored with the thread and as SVG laid out here.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::json;
use stategraph_checkpoints::Saver;

use super::{checkpoint_id, newest, thread_id, ApiResult, Params};
use crate::layout;
use crate::server::AppState;

/// The graph of a checkpoint; `svg` is `null` when the file holds no shape for it.
pub(crate) async fn graph(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let at = params
        .get("checkpoint")
        .map(|c| checkpoint_id(c))
        .transpose()?;
    newest(&state, &thread).await?;
    let shape = state.saver.graph_of(&thread, at).await?;
    Ok(Json(match shape {
        Some(shape) => json!({
            "key": shape.key(),
            "svg": layout::draw(&shape),
            "shape": shape,
        }),
        None => json!({
            "key": null,
            "svg": null,
            "shape": null,
            "note": "this file holds no graph shape for the thread (written by an older build)",
        }),
    }))
}
