//! The fields of the store's request bodies, read one by one so that a wrong one is
//! answered 422 naming it (`namespace: expected a list of strings, got "a"`).

use std::time::Duration;

use serde_json::{Map, Value};
use stategraph_store::{IndexFields, Namespace, Ttl};

use crate::error::{ApiError, ApiResult};

/// A request body: a JSON object.
pub(crate) type Fields = Map<String, Value>;

/// A value as an error message shows it: its JSON, cut to 80 characters.
pub(crate) fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= 80 {
        return text;
    }
    let cut: String = text.chars().take(80).collect();
    format!("{cut}…")
}

fn wrong(field: &str, expected: &str, got: &Value) -> ApiError {
    ApiError::Invalid(format!("{field}: expected {expected}, got {}", short(got)))
}

/// The list of strings at `field` (`None` when absent or null).
pub(crate) fn labels(body: &Fields, field: &str) -> ApiResult<Option<Vec<String>>> {
    let list = match body.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(wrong(field, "a list of strings", other)),
    };
    list.iter()
        .map(|label| match label {
            Value::String(s) => Ok(s.clone()),
            other => Err(wrong(field, "a list of strings", other)),
        })
        .collect::<ApiResult<Vec<String>>>()
        .map(Some)
}

/// An item's namespace at `field`: required, at least one label, none empty or with `.`.
pub(crate) fn namespace(body: &Fields, field: &str) -> ApiResult<Namespace> {
    let list =
        labels(body, field)?.ok_or_else(|| ApiError::Invalid(format!("{field}: required")))?;
    let ns = Namespace::new(list).map_err(|e| ApiError::Invalid(format!("{field}: {e}")))?;
    ns.for_item()
        .map_err(|e| ApiError::Invalid(format!("{field}: {e}")))?;
    Ok(ns)
}

/// The string at `field`, required.
pub(crate) fn required_string(body: &Fields, field: &str) -> ApiResult<String> {
    match body.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(ApiError::Invalid(format!("{field}: required"))),
        Some(other) => Err(wrong(field, "a string", other)),
    }
}

/// The boolean at `field`, if given.
pub(crate) fn flag(body: &Fields, field: &str) -> ApiResult<Option<bool>> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong(field, "true or false", other)),
    }
}

fn count(body: &Fields, field: &str, default: usize) -> ApiResult<usize> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| wrong(field, "a non-negative integer", v)),
    }
}

/// `limit` (default `default_limit`) and `offset` (default 0).
pub(crate) fn page(body: &Fields, default_limit: usize) -> ApiResult<(usize, usize)> {
    Ok((
        count(body, "limit", default_limit)?,
        count(body, "offset", 0)?,
    ))
}

/// A put's `index`: absent or null the store's fields, `false` none, or a list of paths.
pub(crate) fn index_fields(body: &Fields) -> ApiResult<IndexFields> {
    match body.get("index") {
        None | Some(Value::Null) => Ok(IndexFields::Default),
        Some(Value::Bool(false)) => Ok(IndexFields::Off),
        Some(Value::Array(_)) => Ok(IndexFields::Fields(
            labels(body, "index")?.unwrap_or_default(),
        )),
        Some(other) => Err(wrong("index", "false or a list of field paths", other)),
    }
}

/// A put's `ttl` in minutes (fractions allowed): absent or null the store's default.
pub(crate) fn ttl(body: &Fields) -> ApiResult<Ttl> {
    match body.get("ttl") {
        None | Some(Value::Null) => Ok(Ttl::Default),
        Some(v) => {
            let minutes = v
                .as_f64()
                .filter(|m| m.is_finite() && *m >= 0.0 && *m <= 1e12)
                .ok_or_else(|| wrong("ttl", "a non-negative number of minutes", v))?;
            Ok(Ttl::After(Duration::from_secs_f64(minutes * 60.0)))
        }
    }
}
