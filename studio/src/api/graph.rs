//! `GET /api/threads/{thread}/graph?checkpoint=ID&ns=NS`: the graph that made the checkpoint
//! (the newest of the namespace by default), as the shape stored with the thread and as SVG
//! laid out here. For a subgraph's namespace it is the subgraph's own shape, found in the
//! stored shape under the node of each level.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::json;
use stategraph_checkpoints::graph_shape::GraphShape;
use stategraph_checkpoints::Namespace;

use super::namespaces::split_level;
use super::{checkpoint_id, namespace, newest, thread_id, ApiResult, Params};
use crate::layout;
use crate::server::AppState;

/// The graph of a checkpoint; `svg` is `null` when the file holds no shape for it.
pub(crate) async fn graph(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let ns = namespace(&params)?;
    let at = match params.get("checkpoint") {
        Some(c) => checkpoint_id(c)?,
        None => newest(&state, &thread, &ns).await?.id,
    };
    let stored = state.saver.graph_of(&thread, Some(at)).await?;
    let shape = match stored {
        Some(root) => subgraph_shape(root, &ns),
        None => Err(
            "this store holds no graph shape for the thread (written by an older build, or a \
             saver that keeps none)"
                .to_owned(),
        ),
    };
    Ok(Json(match shape {
        Ok(shape) => json!({
            "key": shape.key(),
            "svg": layout::draw(&shape),
            "shape": shape,
        }),
        Err(note) => json!({ "key": null, "svg": null, "shape": null, "note": note }),
    }))
}

/// The shape of namespace `ns` inside the root graph's `root`: the subgraph of the node of
/// each level in turn; why not when a level's node is missing or runs no stored subgraph.
fn subgraph_shape(root: GraphShape, ns: &Namespace) -> Result<GraphShape, String> {
    let mut shape = root;
    for level in ns.levels() {
        let (node, _) = split_level(level);
        let found = shape.nodes.iter().find(|n| n.name == node);
        shape = match found.and_then(|n| n.subgraph.as_deref()) {
            Some(sub) => sub.clone(),
            None => {
                return Err(format!(
                    "the stored graph `{}` has no subgraph shape for node `{node}` (a graph run \
                     inside the node's own code is not part of its shape)",
                    shape.name
                ))
            }
        };
    }
    Ok(shape)
}
