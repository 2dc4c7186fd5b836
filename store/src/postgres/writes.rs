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
    let mut q = Query::new("");
    let item = item_row(&mut q, config, now, op, value)?;
    let (ns, key, row) = (&item.ns, &item.key, item.values());
    let upsert = upsert(&item.at);
    let its_vectors = format!("{{s}}.sg_store_vectors WHERE ns = {ns} AND key = {key}");
    let text = format!(
        "WITH dropped AS (DELETE FROM {its_vectors} RETURNING 1), \
         written AS ({INSERT} VALUES ({row}){upsert} RETURNING 1) \
         SELECT count(*) FROM dropped"
    );
    q.push(&named(schema, &text));
    Ok(q)
}

/// The statement of a put with a value run alone, outside any transaction, in a store
/// without an index ([`super::alone`]): a call of [`PUT_FUNCTION`], which writes the item
/// as [`item`] does when it has no vectors. It answers one row, `true` when it wrote the
/// item, `false` when it found vectors (the put must then run as a batch, which drops them
/// and logs it).
pub(super) fn item_alone(
    schema: &str,
    config: &StoreConfig,
    now: Timestamp,
    op: &PutOp,
    value: &Map<String, Value>,
) -> Result<Query, StoreError> {
    let mut q = Query::new("");
    let row = item_row(&mut q, config, now, op, value)?;
    let lock = q.bind(
        super::locks::lock_key(schema, &op.namespace.to_string(), &op.key),
        Type::INT8,
    );
    let ItemRow {
        ns,
        key,
        json,
        words,
        at,
        ttl,
        expires,
    } = row;
    q.push(&named(
        schema,
        &format!(
            "SELECT {{s}}.{PUT_FUNCTION}({ns}, {key}, {json}, {words}, {at}, {ttl}, \
             {expires}, {lock})"
        ),
    ));
    Ok(q)
}

/// The function a put run alone calls ([`item_alone`]), version 1 (a change to what it does
/// gets a new name, so that older and newer builds on one schema each call their own).
pub(super) const PUT_FUNCTION: &str = "sg_store_put_v1";

/// The definition of [`PUT_FUNCTION`] (`{s}` for the schema). It takes the item's advisory
/// lock ([`super::locks`]), then, reading a snapshot taken after the lock (each statement
/// of a PL/pgSQL function reads its own), returns `false` when the item has vectors, and
/// otherwise writes it as [`item`] does and returns `true`. The server plans its statements
/// once per connection, where an unnamed statement is parsed and planned on every call.
pub(super) fn put_function() -> String {
    format!(
        "CREATE OR REPLACE FUNCTION {{s}}.{PUT_FUNCTION}(p_ns text, p_key text, p_value text, \
         p_words text, p_at bigint, p_ttl_ms bigint, p_expires_at bigint, p_lock bigint) \
         RETURNS boolean LANGUAGE plpgsql AS $fn$ \
         BEGIN \
         PERFORM pg_advisory_xact_lock(p_lock); \
         IF EXISTS (SELECT 1 FROM {{s}}.sg_store_vectors WHERE ns = p_ns AND key = p_key) THEN \
         RETURN false; \
         END IF; \
         {INSERT} VALUES (p_ns, p_key, p_value::jsonb, to_tsvector('simple', p_words), \
         p_at, p_at, p_ttl_ms, p_expires_at){upsert}; \
         RETURN true; \
         END $fn$",
        upsert = upsert("p_at"),
    )
}

/// The placeholders of a put's item row ([`item_row`]).
struct ItemRow {
    ns: String,
    key: String,
    json: String,
    words: String,
    at: String,
    ttl: String,
    expires: String,
}

impl ItemRow {
    /// The row's values, as [`INSERT`] lists its columns.
    fn values(&self) -> String {
        let Self {
            ns,
            key,
            json,
            words,
            at,
            ttl,
            expires,
        } = self;
        format!(
            "{ns}, {key}, {json}::jsonb, to_tsvector('simple', {words}), {at}, {at}, {ttl}, \
             {expires}"
        )
    }
}

/// Binds a put's item row in `q`: its namespace and key, the value as JSON text and its
/// words, the time it is put, its TTL and expiry.
fn item_row(
    q: &mut Query,
    config: &StoreConfig,
    now: Timestamp,
    op: &PutOp,
    value: &Map<String, Value>,
) -> Result<ItemRow, StoreError> {
    let ttl = config.ttl.resolve(op.ttl);
    let ttl_ms = ttl.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let expires = ttl.map(|d| now.plus(d).millis());
    Ok(ItemRow {
        ns: q.bind(op.namespace.to_string(), Type::TEXT),
        key: q.bind(op.key.clone(), Type::TEXT),
        json: q.bind(rows::json_text(value)?, Type::TEXT),
        words: q.bind(crate::searchable_text(value), Type::TEXT),
        at: q.bind(now.millis(), Type::INT8),
        ttl: q.bind(ttl_ms, Type::INT8),
        expires: q.bind(expires, Type::INT8),
    })
}

/// One statement for a run of puts of distinct items, all with values: it deletes their old
/// vectors, writes every item as [`item`] writes one, and, when any put changes the vectors
/// (it brings vectors, or its item had some), raises their generation and logs those puts.
/// It answers one row per such put, in order: the generation and the put's place in `puts`.
/// Every part reads the statement's one snapshot, so the check sees the vectors the delete
/// drops. `None` when a put deletes or an item comes twice (an upsert cannot touch a row
/// twice in one statement).
pub(super) fn items(
    schema: &str,
    config: &StoreConfig,
    now: Timestamp,
    puts: &[(&PutOp, &[Vec<f32>])],
) -> Result<Option<Query>, StoreError> {
    let mut seen = std::collections::HashSet::new();
    let mut rows = Rows::default();
    for (put, vectors) in puts {
        let Some(value) = &put.value else {
            return Ok(None);
        };
        let ns = put.namespace.to_string();
        if !seen.insert((ns.clone(), put.key.as_str())) {
            return Ok(None);
        }
        let ttl = config.ttl.resolve(put.ttl);
        rows.ns.push(ns);
        rows.keys.push(put.key.clone());
        rows.json.push(rows::json_text(value)?);
        rows.words.push(crate::searchable_text(value));
        rows.ttl
            .push(ttl.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
        rows.expires.push(ttl.map(|d| now.plus(d).millis()));
        rows.vectors.push(!vectors.is_empty());
    }
    let mut q = Query::new("");
    let arrays = [
        q.bind(rows.ns, Type::TEXT_ARRAY),
        q.bind(rows.keys, Type::TEXT_ARRAY),
        q.bind(rows.json, Type::TEXT_ARRAY),
        q.bind(rows.words, Type::TEXT_ARRAY),
        q.bind(rows.ttl, Type::INT8_ARRAY),
        q.bind(rows.expires, Type::INT8_ARRAY),
        q.bind(rows.vectors, Type::BOOL_ARRAY),
    ];
    let at = q.bind(now.millis(), Type::INT8);
    let [ns, key, json, words, ttl, expires, vectors] = &arrays;
    let text = format!(
        "WITH w AS (SELECT * FROM unnest({ns}::text[], {key}::text[], {json}::text[], \
         {words}::text[], {ttl}::int8[], {expires}::int8[], {vectors}::bool[]) WITH ORDINALITY \
         AS w(ns, key, json, words, ttl_ms, expires_at, vectors, at)), \
         changed AS (SELECT ns, key, at FROM w WHERE vectors OR EXISTS (SELECT 1 FROM \
         {{s}}.sg_store_vectors v WHERE v.ns = w.ns AND v.key = w.key)), \
         dropped AS (DELETE FROM {{s}}.sg_store_vectors v USING w \
         WHERE v.ns = w.ns AND v.key = w.key), \
         written AS ({INSERT} SELECT ns, key, json::jsonb, to_tsvector('simple', words), \
         {at}, {at}, ttl_ms, expires_at FROM w{upsert}), \
         {BUMP_AND_LOG} \
         SELECT generation, at - 1 FROM bumped, changed ORDER BY at",
        upsert = upsert(&at),
    );
    q.push(&named(schema, &text));
    Ok(Some(q))
}

/// The columns of [`items`]' rows.
#[derive(Default)]
struct Rows {
    ns: Vec<String>,
    keys: Vec<String>,
    json: Vec<String>,
    words: Vec<String>,
    ttl: Vec<Option<i64>>,
    expires: Vec<Option<i64>>,
    vectors: Vec<bool>,
}

/// The common table expressions that follow a `changed (ns, key, at)` of the writes that
/// change the vectors: when there is any, `bumped` raises the vectors' generation (its one
/// row), and `logged` logs each such write under it.
pub(super) const BUMP_AND_LOG: &str = "bumped AS (UPDATE {s}.sg_store_meta \
                                       SET value = (value::bigint + 1)::text \
                                       WHERE key = 'vector_generation' \
                                       AND EXISTS (SELECT 1 FROM changed) \
                                       RETURNING value::bigint AS generation), \
                                       logged AS (INSERT INTO {s}.sg_store_vector_log \
                                       (generation, ns, key) \
                                       SELECT generation, ns, key FROM bumped, changed)";

/// The insert of an item row.
const INSERT: &str = "INSERT INTO {s}.sg_store_items AS i \
                      (ns, key, value, tsv, created_at, updated_at, ttl_ms, expires_at)";

/// The upsert of an item row put at `at` (a placeholder): a later put updates it, with a
/// new TTL; a put over an expired item creates it again.
fn upsert(at: &str) -> String {
    format!(
        " ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, \
         tsv = EXCLUDED.tsv, updated_at = EXCLUDED.updated_at, \
         created_at = CASE WHEN i.expires_at IS NULL OR i.expires_at > {at} \
         THEN i.created_at ELSE EXCLUDED.created_at END, \
         ttl_ms = EXCLUDED.ttl_ms, expires_at = EXCLUDED.expires_at"
    )
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
