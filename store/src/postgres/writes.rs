//! A put's and a delete's statements, built apart from running them, so that a batch sends
//! the statements of a run of writes before it awaits any answer: one round trip for the run,
//! where awaiting each took two per put.

use serde_json::{Map, Value};
use tokio_postgres::types::Type;

use super::rows;
use super::schema::named;
use super::sql::Query;
use crate::{PutOp, StoreConfig, StoreError, Timestamp};

/// The statement that deletes the item's old vectors and writes `value` at `op`'s namespace
/// and key (created once; updated, with a new TTL, on every later put; a put over an expired
/// item creates it again). It answers one row: how many vectors it deleted.
pub(super) fn item(
    schema: &str,
    config: &StoreConfig,
    now: Timestamp,
    op: &PutOp,
    value: &Map<String, Value>,
) -> Result<Query, StoreError> {
    let ttl = config.ttl.resolve(op.ttl);
    let ttl_ms = ttl.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let expires = ttl.map(|d| now.plus(d).millis());
    let mut q = Query::new("");
    let ns = q.bind(op.namespace.to_string(), Type::TEXT);
    let key = q.bind(op.key.clone(), Type::TEXT);
    let json = q.bind(rows::json_text(value)?, Type::TEXT);
    let words = q.bind(crate::searchable_text(value), Type::TEXT);
    let at = q.bind(now.millis(), Type::INT8);
    let ttl = q.bind(ttl_ms, Type::INT8);
    let expires = q.bind(expires, Type::INT8);
    let row = format!(
        "{ns}, {key}, {json}::jsonb, to_tsvector('simple', {words}), {at}, {at}, {ttl}, {expires}"
    );
    let insert = "INSERT INTO {s}.sg_store_items AS i \
                  (ns, key, value, tsv, created_at, updated_at, ttl_ms, expires_at)";
    let upsert = format!(
        " ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, \
         tsv = EXCLUDED.tsv, updated_at = EXCLUDED.updated_at, \
         created_at = CASE WHEN i.expires_at IS NULL OR i.expires_at > {at} \
         THEN i.created_at ELSE EXCLUDED.created_at END, \
         ttl_ms = EXCLUDED.ttl_ms, expires_at = EXCLUDED.expires_at"
    );
    let its_vectors = format!("{{s}}.sg_store_vectors WHERE ns = {ns} AND key = {key}");
    let text = format!(
        "WITH dropped AS (DELETE FROM {its_vectors} RETURNING 1), \
         written AS ({insert} VALUES ({row}){upsert} RETURNING 1) \
         SELECT count(*) FROM dropped"
    );
    q.push(&named(schema, &text));
    Ok(q)
}

/// The statement that stores the item's vector of its `field`-th indexed field.
pub(super) fn vector(schema: &str, op: &PutOp, field: usize, vector: &[f32]) -> Query {
    let mut q = Query::new("");
    let ns = q.bind(op.namespace.to_string(), Type::TEXT);
    let key = q.bind(op.key.clone(), Type::TEXT);
    let field = q.bind(i32::try_from(field).unwrap_or(i32::MAX), Type::INT4);
    let vec = q.bind(vector.to_vec(), Type::FLOAT4_ARRAY);
    q.push(&named(
        schema,
        &format!(
            "INSERT INTO {{s}}.sg_store_vectors (ns, key, field, vec) \
             VALUES ({ns}, {key}, {field}, {vec})"
        ),
    ));
    q
}

/// The statement that deletes the item at `op`'s namespace and key, its vectors with it
/// (the vectors table's foreign key cascades).
pub(super) fn delete(schema: &str, op: &PutOp) -> Query {
    let mut q = Query::new("");
    let ns = q.bind(op.namespace.to_string(), Type::TEXT);
    let key = q.bind(op.key.clone(), Type::TEXT);
    q.push(&named(
        schema,
        &format!("DELETE FROM {{s}}.sg_store_items WHERE ns = {ns} AND key = {key}"),
    ));
    q
}
