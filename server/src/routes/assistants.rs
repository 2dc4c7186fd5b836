//! Assistants: one per registered graph, its id a UUID derived from the graph's name (the
//! name is accepted as the id too).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Map, Value};
use stategraph::checkpoints::graph_shape::EdgeKind;

use crate::error::ApiResult;
use crate::guard::Body;
use crate::ids::rfc3339;
use crate::wire::AssistantSearch;
use crate::{Registered, Shared};

fn assistant_json(shared: &Shared, g: &Registered) -> Value {
    let at = rfc3339(shared.started_ms);
    json!({
        "assistant_id": g.assistant_id,
        "graph_id": g.name,
        "name": g.name,
        "description": null,
        "config": {},
        "context": {},
        "metadata": { "created_by": "system" },
        "version": 1,
        "created_at": at,
        "updated_at": at,
    })
}

pub(crate) async fn search(
    State(shared): State<Arc<Shared>>,
    Body(q): Body<AssistantSearch>,
) -> Json<Vec<Value>> {
    let mut graphs: Vec<&Arc<Registered>> = shared
        .graphs
        .values()
        .filter(|g| q.graph_id.as_ref().is_none_or(|id| *id == g.name))
        .filter(|g| q.name.as_ref().is_none_or(|n| *n == g.name))
        .collect();
    graphs.sort_by(|a, b| a.name.cmp(&b.name));
    let out = graphs
        .into_iter()
        .skip(q.offset.unwrap_or(0))
        .take(q.limit.unwrap_or(10))
        .map(|g| assistant_json(&shared, g))
        .collect();
    Json(out)
}

pub(crate) async fn get_one(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let g = shared.assistant(&id)?;
    Ok(Json(assistant_json(&shared, g)))
}

/// The graph's nodes and edges, in the shape LangGraph's `/graph` answers.
pub(crate) async fn graph(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let g = shared.assistant(&id)?;
    let shape = g.graph.shape();
    let mut nodes = vec![json!({ "id": "__start__", "type": "schema", "data": "__start__" })];
    for n in &shape.nodes {
        nodes.push(json!({ "id": n.name, "type": "runnable", "data": {
            "id": ["stategraph", n.name], "name": n.name,
        }}));
    }
    nodes.push(json!({ "id": "__end__", "type": "schema", "data": "__end__" }));
    let edges: Vec<Value> = shape
        .edges
        .iter()
        .map(|e| {
            let conditional = !matches!(e.kind, EdgeKind::Static | EdgeKind::Join);
            json!({ "source": e.from, "target": e.to, "conditional": conditional })
        })
        .collect();
    Ok(Json(json!({ "nodes": nodes, "edges": edges })))
}

/// The state's schema: an object with one property per field.
pub(crate) async fn schemas(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let g = shared.assistant(&id)?;
    let properties: Map<String, Value> = g
        .graph
        .fields()
        .into_iter()
        .map(|f| (f.to_owned(), json!({ "title": f })))
        .collect();
    let state = json!({ "title": g.name, "type": "object", "properties": properties });
    Ok(Json(json!({
        "graph_id": g.name,
        "input_schema": state,
        "output_schema": state,
        "state_schema": state,
        "config_schema": null,
        "context_schema": null,
    })))
}

/// Subgraphs: the graph's subgraph nodes by namespace (none of their schemas yet).
pub(crate) async fn subgraphs(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let g = shared.assistant(&id)?;
    let out: Map<String, Value> = g
        .graph
        .shape()
        .nodes
        .iter()
        .filter(|n| n.subgraph.is_some())
        .map(|n| (n.name.clone(), json!({})))
        .collect();
    Ok(Json(Value::Object(out)))
}
