//! The long-term store: put, get and delete an item, search items, list namespaces
//! (`/store/items`, `/store/items/search`, `/store/namespaces`), as LangGraph's clients
//! call them. A bad field is answered 422 naming it.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use stategraph_store::{
    Filter, Item, ListNamespacesOp, MatchCondition, Namespace, PutOp, SearchItem, SearchOp,
};

use crate::error::{ApiError, ApiResult};
use crate::guard::Body;
use crate::ids::rfc3339;
use crate::wire::store::{
    flag, index_fields, labels, namespace, page, required_string, short, ttl, Fields,
};
use crate::Shared;

/// An item as the clients read it: its namespace as a list, times in RFC 3339.
pub(crate) fn item_json(item: &Item) -> Value {
    json!({
        "namespace": item.namespace.labels(),
        "key": item.key,
        "value": item.value,
        "created_at": rfc3339(item.created_at.millis()),
        "updated_at": rfc3339(item.updated_at.millis()),
    })
}

/// A search's item: the item and its score (`null` when the search had no query).
pub(crate) fn search_item_json(found: &SearchItem) -> Value {
    let mut out = item_json(&found.item);
    if let Value::Object(map) = &mut out {
        map.insert("score".to_owned(), json!(found.score));
    }
    out
}

pub(crate) async fn put(
    State(shared): State<Arc<Shared>>,
    Body(body): Body<Fields>,
) -> ApiResult<StatusCode> {
    let ns = namespace(&body, "namespace")?;
    let key = required_string(&body, "key")?;
    let value = match body.get("value") {
        Some(Value::Object(value)) => value.clone(),
        Some(other) => {
            return Err(ApiError::Invalid(format!(
                "value: expected a JSON object, got {}",
                short(other)
            )))
        }
        None => return Err(ApiError::Invalid("value: required".to_owned())),
    };
    let op = PutOp::new(ns, key, value)
        .index(index_fields(&body)?)
        .ttl(ttl(&body)?);
    shared
        .store
        .batch(vec![stategraph_store::Op::Put(op)])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /store/items`'s query: the namespace `.`-joined, as both SDKs send it.
#[derive(Debug, Deserialize)]
pub(crate) struct GetParams {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    refresh_ttl: Option<String>,
}

pub(crate) async fn get(
    State(shared): State<Arc<Shared>>,
    Query(p): Query<GetParams>,
) -> ApiResult<Json<Value>> {
    let joined = p.namespace.unwrap_or_default();
    let ns = Namespace::from_joined(&joined)
        .map_err(|e| ApiError::Invalid(format!("namespace {joined:?}: {e}")))?;
    if ns.is_empty() {
        return Err(ApiError::Invalid(
            "namespace: required, its labels joined with '.'".to_owned(),
        ));
    }
    let key = p
        .key
        .ok_or_else(|| ApiError::Invalid("key: required".to_owned()))?;
    let refresh = match p.refresh_ttl.as_deref() {
        None => true,
        Some(s) => parse_bool(s).ok_or_else(|| {
            ApiError::Invalid(format!("refresh_ttl: expected true or false, got {s:?}"))
        })?,
    };
    let mut op = stategraph_store::GetOp::new(ns, key);
    op.refresh_ttl = refresh;
    let found = match shared
        .store
        .batch(vec![stategraph_store::Op::Get(op)])
        .await?
        .pop()
    {
        Some(stategraph_store::OpResult::Item(item)) => item,
        _ => None,
    };
    // LangGraph answers a missing item 200 with `null`, which both SDKs return as is.
    Ok(Json(found.as_ref().map_or(Value::Null, item_json)))
}

pub(crate) async fn delete(
    State(shared): State<Arc<Shared>>,
    Body(body): Body<Fields>,
) -> ApiResult<StatusCode> {
    let ns = namespace(&body, "namespace")?;
    let key = required_string(&body, "key")?;
    shared.store.delete(&ns, &key).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn search(
    State(shared): State<Arc<Shared>>,
    Body(body): Body<Fields>,
) -> ApiResult<Json<Value>> {
    let prefix = match body.get("namespace_prefix") {
        None | Some(Value::Null) => Namespace::root(),
        Some(_) => namespace_prefix(&body)?,
    };
    let filter = match body.get("filter") {
        None | Some(Value::Null) => Filter::default(),
        Some(Value::Object(map)) => {
            Filter::from_json(map).map_err(|e| ApiError::Invalid(format!("filter: {e}")))?
        }
        Some(other) => {
            return Err(ApiError::Invalid(format!(
                "filter: expected a JSON object, got {}",
                short(other)
            )))
        }
    };
    let query = match body.get("query") {
        None | Some(Value::Null) => None,
        Some(Value::String(q)) => Some(q.clone()),
        Some(other) => {
            return Err(ApiError::Invalid(format!(
                "query: expected a string, got {}",
                short(other)
            )))
        }
    };
    let (limit, offset) = page(&body, 10)?;
    let mut op = SearchOp::new(prefix).filter(filter).page(limit, offset);
    op.query = query;
    op.refresh_ttl = flag(&body, "refresh_ttl")?.unwrap_or(true);
    let items = shared.store.search(op).await?;
    let items: Vec<Value> = items.iter().map(search_item_json).collect();
    Ok(Json(json!({ "items": items })))
}

fn namespace_prefix(body: &Fields) -> ApiResult<Namespace> {
    let list = labels(body, "namespace_prefix")?.unwrap_or_default();
    Namespace::new(list).map_err(|e| ApiError::Invalid(format!("namespace_prefix: {e}")))
}

pub(crate) async fn namespaces(
    State(shared): State<Arc<Shared>>,
    Body(body): Body<Fields>,
) -> ApiResult<Json<Value>> {
    let mut op = ListNamespacesOp::new();
    if let Some(prefix) = labels(&body, "prefix")? {
        op = op.condition(MatchCondition::prefix(prefix));
    }
    if let Some(suffix) = labels(&body, "suffix")? {
        op = op.condition(MatchCondition::suffix(suffix));
    }
    match body.get("max_depth") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64().and_then(|d| usize::try_from(d).ok()) {
            Some(depth) if depth > 0 => op = op.max_depth(depth),
            _ => {
                return Err(ApiError::Invalid(format!(
                    "max_depth: expected a positive integer, got {}",
                    short(v)
                )))
            }
        },
    }
    (op.limit, op.offset) = page(&body, 100)?;
    let list = shared.store.list_namespaces(op).await?;
    let list: Vec<&[String]> = list.iter().map(Namespace::labels).collect();
    Ok(Json(json!({ "namespaces": list })))
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_reads_as_langgraph_writes_it() -> Result<(), Box<dyn std::error::Error>> {
        let item = Item {
            namespace: Namespace::new(["users", "alice"])?,
            key: "tea".to_owned(),
            value: json!({"text": "green"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            created_at: stategraph_store::Timestamp(0),
            updated_at: stategraph_store::Timestamp(1_000),
        };
        let found = search_item_json(&SearchItem {
            item,
            score: Some(0.5),
        });
        assert_eq!(
            found,
            json!({
                "namespace": ["users", "alice"],
                "key": "tea",
                "value": {"text": "green"},
                "created_at": "1970-01-01T00:00:00.000000+00:00",
                "updated_at": "1970-01-01T00:00:01.000000+00:00",
                "score": 0.5,
            })
        );
        Ok(())
    }
}
