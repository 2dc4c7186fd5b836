//! Reading rows back: typed columns without panics, and items from their columns.

use serde_json::{Map, Value};
use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

use crate::{Item, Namespace, StoreError, Timestamp};

/// The columns every item query selects, in the order [`item`] and [`lasts`] read them.
pub(super) const ITEM_COLUMNS: &str =
    "ns, key, value::text, created_at, updated_at, ttl_ms IS NOT NULL";

/// Column `at` of `row`, or a database error naming it.
pub(super) fn col<'a, T: FromSql<'a>>(row: &'a Row, at: usize) -> Result<T, StoreError> {
    row.try_get(at)
        .map_err(|e| StoreError::Database(format!("reading column {at} of a store row: {e}")))
}

/// The item of a row selected with [`ITEM_COLUMNS`] from column `from` on.
pub(super) fn item(row: &Row, from: usize) -> Result<Item, StoreError> {
    let ns: String = col(row, from)?;
    let key: String = col(row, from + 1)?;
    let text: String = col(row, from + 2)?;
    let corrupt = |why: String| StoreError::Corrupt {
        namespace: ns.clone(),
        key: key.clone(),
        why,
    };
    let namespace = Namespace::from_joined(&ns).map_err(|e| corrupt(e.to_string()))?;
    let value = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => map,
        Ok(other) => return Err(corrupt(format!("its value is not an object: {other}"))),
        Err(e) => return Err(corrupt(e.to_string())),
    };
    Ok(Item {
        namespace,
        key,
        value,
        created_at: Timestamp(col(row, from + 3)?),
        updated_at: Timestamp(col(row, from + 4)?),
    })
}

/// Whether the item of a row selected with [`ITEM_COLUMNS`] from column `from` on has a
/// TTL (which a refreshing read restarts).
pub(super) fn lasts(row: &Row, from: usize) -> Result<bool, StoreError> {
    col(row, from + 5)
}

/// A value as the text PostgreSQL reads as `jsonb`.
pub(super) fn json_text(value: &Map<String, Value>) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid {
        what: "value",
        why: e.to_string(),
    })
}
