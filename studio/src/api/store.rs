//! The file's long-term store, read-only: `GET /api/store/namespaces` (`prefix`, `depth`),
//! `GET /api/store/items` (`namespace`, `key`) and `GET /api/store/search` (`prefix`,
//! `query`, `filter`, `limit`). Namespaces are written as their labels joined with `.`;
//! reads refresh no TTL. A file without a store (or a PostgreSQL schema) shows none.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_store::{
    Filter, GetOp, Item, ListNamespacesOp, MatchCondition, Namespace, Op, OpResult, SearchOp,
    SqliteStore, Store, StoreError,
};

use super::{cut, ApiError, ApiResult, Params};
use crate::server::AppState;

/// Most items a search returns at once.
const MAX_LIMIT: usize = 100;

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Namespace(_) | StoreError::Filter(_) | StoreError::Invalid { .. } => {
                ApiError::BadRequest(e.to_string())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// The file's store, opened for this request, or `None` when it has none.
async fn open(state: &AppState) -> Result<Option<SqliteStore>, ApiError> {
    if !matches!(state.saver, stategraph_checkpoints::inspect::Store::File(_)) {
        return Ok(None);
    }
    let file = state.file.clone();
    tokio::task::spawn_blocking(move || crate::open_store(&file))
        .await
        .map_err(|e| ApiError::Internal(format!("opening the store: {e}")))?
        .map_err(ApiError::from)
}

fn namespace(params: &Params, name: &str) -> Result<Namespace, ApiError> {
    let text = params.get(name).map(String::as_str).unwrap_or_default();
    Namespace::from_joined(text)
        .map_err(|e| ApiError::BadRequest(format!("{name} `{}`: {e}", cut(text))))
}

fn number(params: &Params, name: &str, default: usize) -> Result<usize, ApiError> {
    match params.get(name) {
        None => Ok(default),
        Some(text) => text.parse().map_err(|_| {
            ApiError::BadRequest(format!("{name} `{}`: not a whole number", cut(text)))
        }),
    }
}

/// An item as the page reads it.
fn item_json(item: &Item, score: Option<f64>) -> Value {
    json!({
        "namespace": item.namespace.labels(),
        "key": item.key,
        "value": item.value,
        "created_at": format_utc_ms(u64::try_from(item.created_at.millis()).unwrap_or(0)),
        "updated_at": format_utc_ms(u64::try_from(item.updated_at.millis()).unwrap_or(0)),
        "score": score,
    })
}

/// `GET /api/store/namespaces`.
pub(crate) async fn namespaces(State(state): State<Arc<AppState>>, params: Params) -> ApiResult {
    let mut op = ListNamespacesOp::new();
    let prefix = namespace(&params, "prefix")?;
    if !prefix.is_empty() {
        op = op.condition(MatchCondition::prefix(prefix.labels().to_vec()));
    }
    if params.contains_key("depth") {
        op = op.max_depth(number(&params, "depth", 0)?.max(1));
    }
    op.limit = number(&params, "limit", 1000)?;
    let list = match open(&state).await? {
        Some(store) => {
            let list = store.list_namespaces(op).await;
            store.close();
            list?
        }
        None => Vec::new(),
    };
    let list: Vec<&[String]> = list.iter().map(Namespace::labels).collect();
    Ok(Json(json!({ "namespaces": list })))
}

/// `GET /api/store/items`: one item; 404 when there is none.
pub(crate) async fn item(State(state): State<Arc<AppState>>, params: Params) -> ApiResult {
    let ns = namespace(&params, "namespace")?;
    let key = params.get("key").cloned().unwrap_or_default();
    let missing = || ApiError::NotFound(format!("no store item {ns}/{}", cut(&key)));
    let store = open(&state).await?.ok_or_else(missing)?;
    let mut op = GetOp::new(ns.clone(), key.clone());
    op.refresh_ttl = false;
    let got = store.batch(vec![Op::Get(op)]).await;
    store.close();
    match got?.pop() {
        Some(OpResult::Item(Some(item))) => Ok(Json(item_json(&item, None))),
        _ => Err(missing()),
    }
}

/// `GET /api/store/search`: items under `prefix`, newest first or ranked by `query`.
pub(crate) async fn search(State(state): State<Arc<AppState>>, params: Params) -> ApiResult {
    let filter = match params.get("filter").filter(|f| !f.trim().is_empty()) {
        None => Filter::default(),
        Some(text) => {
            let map: Map<String, Value> = serde_json::from_str(text).map_err(|e| {
                ApiError::BadRequest(format!("filter `{}`: not a JSON object: {e}", cut(text)))
            })?;
            Filter::from_json(&map).map_err(|e| ApiError::BadRequest(format!("filter: {e}")))?
        }
    };
    let limit = number(&params, "limit", 20)?.min(MAX_LIMIT);
    let mut op = SearchOp::new(namespace(&params, "prefix")?)
        .filter(filter)
        .page(limit, number(&params, "offset", 0)?);
    op.query = params
        .get("query")
        .filter(|q| !q.trim().is_empty())
        .cloned();
    op.refresh_ttl = false;
    let found = match open(&state).await? {
        Some(store) => {
            let found = store.search(op).await;
            store.close();
            found?
        }
        None => Vec::new(),
    };
    let items: Vec<Value> = found.iter().map(|f| item_json(&f.item, f.score)).collect();
    Ok(Json(json!({ "items": items })))
}
