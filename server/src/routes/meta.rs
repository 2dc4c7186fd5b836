//! `GET /ok` and `GET /info`.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::Shared;

pub(crate) async fn ok() -> Json<Value> {
    Json(json!({ "ok": true }))
}

pub(crate) async fn info(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let mut graphs: Vec<&String> = shared.graphs.keys().collect();
    graphs.sort();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "server": "stategraph",
        "graphs": graphs,
        "flags": { "assistants": true, "crons": false, "langsmith": false },
    }))
}
