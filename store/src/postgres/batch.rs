//! A batch's operations, each run as statements in the batch's one transaction.

use std::collections::HashMap;

use tokio_postgres::types::Type;
use tokio_postgres::Transaction;

use super::mirror::Change;
use super::rows::{self, col, ITEM_COLUMNS};
use super::schema::named;
use super::sql::{big, db, Query};
use super::vectors;
use crate::{
    text, GetOp, Item, ListNamespacesOp, Namespace, PutOp, SearchItem, SearchOp, StoreConfig,
    StoreError, Timestamp,
};

/// A found item, and whether it has a TTL to restart.
pub(super) type Found = (SearchItem, bool);

/// What every operation of one batch shares.
pub(super) struct Batch<'a> {
    pub(super) tx: &'a Transaction<'a>,
    pub(super) schema: &'a str,
    pub(super) config: &'a StoreConfig,
    pub(super) now: Timestamp,
    pub(super) vectors: &'a vectors::Vectors,
    /// Whether an earlier put of this batch changed vectors (so the mirror, which holds
    /// only committed ones, cannot answer this batch's searches).
    pub(super) wrote_vectors: bool,
    /// The generation this batch raised the vectors' to, when it did.
    pub(super) generation: Option<i64>,
    /// The changes to the vectors, for this process's mirror once committed.
    pub(super) changes: Vec<Change>,
}

impl Batch<'_> {
    fn sql(&self, text: &str) -> String {
        named(self.schema, text)
    }

    fn refreshes(&self, asked: bool) -> bool {
        asked && self.config.ttl.refresh_on_read
    }

    /// The live item, its TTL restarted when asked.
    pub(super) async fn get(&self, op: &GetOp) -> Result<Option<Item>, StoreError> {
        let mut q = Query::new("");
        let ns = q.bind(op.namespace.to_string(), Type::TEXT);
        let key = q.bind(op.key.clone(), Type::TEXT);
        let live = q.live(self.now);
        let select = format!(
            "SELECT {ITEM_COLUMNS} FROM {{s}}.sg_store_items \
             WHERE ns = {ns} AND key = {key} AND {live}"
        );
        let text = if self.refreshes(op.refresh_ttl) {
            let expiry = expiry(&q.bind(self.now.millis(), Type::INT8));
            // The update and the select read one snapshot: the select returns the row as
            // it was, which differs only in `expires_at`, not selected.
            format!(
                "WITH refreshed AS (UPDATE {{s}}.sg_store_items SET expires_at = {expiry} \
                 WHERE ns = {ns} AND key = {key} AND ttl_ms IS NOT NULL AND {live}) {select}"
            )
        } else {
            select
        };
        q.push(&self.sql(&text));
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("reading an item"))?;
        rows.first().map(|row| rows::item(row, 0)).transpose()
    }

    /// Writes or deletes one item and its vectors.
    pub(super) async fn put(&mut self, op: &PutOp, vecs: &[Vec<f32>]) -> Result<(), StoreError> {
        let (ns, key) = (op.namespace.to_string(), op.key.clone());
        let Some(value) = &op.value else {
            return self.delete(ns, key).await;
        };
        let ttl = self.config.ttl.resolve(op.ttl);
        let ttl_ms = ttl.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let expires = ttl.map(|d| self.now.plus(d).millis());
        let (json, words) = (rows::json_text(value)?, crate::searchable_text(value));
        self.tx
            .execute_typed(
                &self.sql(
                    "INSERT INTO {s}.sg_store_items AS i \
                     (ns, key, value, tsv, created_at, updated_at, ttl_ms, expires_at) \
                     VALUES ($1, $2, $3::jsonb, to_tsvector('simple', $4), $5, $5, $6, $7) \
                     ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, \
                     tsv = EXCLUDED.tsv, updated_at = EXCLUDED.updated_at, \
                     created_at = CASE WHEN i.expires_at IS NULL OR i.expires_at > $5 \
                     THEN i.created_at ELSE EXCLUDED.created_at END, \
                     ttl_ms = EXCLUDED.ttl_ms, expires_at = EXCLUDED.expires_at",
                ),
                &[
                    (&ns, Type::TEXT),
                    (&key, Type::TEXT),
                    (&json, Type::TEXT),
                    (&words, Type::TEXT),
                    (&self.now.millis(), Type::INT8),
                    (&ttl_ms, Type::INT8),
                    (&expires, Type::INT8),
                ],
            )
            .await
            .map_err(db("writing an item"))?;
        let replaced = self.drop_vectors(&ns, &key).await?;
        for (field, v) in vecs.iter().enumerate() {
            let field = i32::try_from(field).unwrap_or(i32::MAX);
            self.tx
                .execute_typed(
                    &self.sql(
                        "INSERT INTO {s}.sg_store_vectors (ns, key, field, vec) \
                         VALUES ($1, $2, $3, $4)",
                    ),
                    &[
                        (&ns, Type::TEXT),
                        (&key, Type::TEXT),
                        (&field, Type::INT4),
                        (v, Type::FLOAT4_ARRAY),
                    ],
                )
                .await
                .map_err(db("writing an item's vector"))?;
        }
        if replaced > 0 || !vecs.is_empty() {
            self.vectors_changed(ns, key, vecs.to_vec()).await?;
        }
        Ok(())
    }

    /// Deletes one item. A store with an index counts every delete as a change of the
    /// vectors; one without counts it only when the item had vectors (another process's
    /// index gave it some), which it drops first to know.
    async fn delete(&mut self, ns: String, key: String) -> Result<(), StoreError> {
        let dropped = match self.vectors.counted() {
            true => 0,
            false => self.drop_vectors(&ns, &key).await?,
        };
        let deleted = self
            .tx
            .execute_typed(
                &self.sql("DELETE FROM {s}.sg_store_items WHERE ns = $1 AND key = $2"),
                &[(&ns, Type::TEXT), (&key, Type::TEXT)],
            )
            .await
            .map_err(db("deleting an item"))?;
        if (deleted > 0 && self.vectors.counted()) || dropped > 0 {
            self.vectors_changed(ns, key, Vec::new()).await?;
        }
        Ok(())
    }

    /// Deletes an item's vectors; how many it had.
    async fn drop_vectors(&self, ns: &str, key: &str) -> Result<u64, StoreError> {
        self.tx
            .execute_typed(
                &self.sql("DELETE FROM {s}.sg_store_vectors WHERE ns = $1 AND key = $2"),
                &[(&ns, Type::TEXT), (&key, Type::TEXT)],
            )
            .await
            .map_err(db("deleting an item's vectors"))
    }

    /// Counts a change of the stored vectors, so that every process's mirror catches up.
    async fn vectors_changed(
        &mut self,
        ns: String,
        key: String,
        vectors: Vec<Vec<f32>>,
    ) -> Result<(), StoreError> {
        // Called by a store without an index only when vectors really changed: it takes the
        // generation row's lock here, not first, and a rare deadlock with a store that took
        // it first is retried (`locks`).
        if self.generation.is_none() {
            self.generation = Some(vectors::bump_generation(self.tx, self.schema).await?);
        }
        self.wrote_vectors = true;
        self.changes.push(Change { ns, key, vectors });
        Ok(())
    }

    /// The items a search finds, best first, their TTL restarted when asked.
    pub(super) async fn search(
        &self,
        op: &SearchOp,
        query_vector: Option<&Vec<f32>>,
    ) -> Result<Vec<SearchItem>, StoreError> {
        let found = match (query_vector, &op.query) {
            (Some(q), _) => vectors::search(self, op, q).await?,
            (None, Some(query)) => self.search_text(op, query).await?,
            (None, None) => self.search_recent(op).await?,
        };
        let lasting: Vec<&Item> = found.iter().filter(|f| f.1).map(|f| &f.0.item).collect();
        if self.refreshes(op.refresh_ttl) && !lasting.is_empty() {
            self.refresh(lasting.into_iter()).await?;
        }
        Ok(found.into_iter().map(|f| f.0).collect())
    }

    async fn search_recent(&self, op: &SearchOp) -> Result<Vec<Found>, StoreError> {
        let mut q = Query::new(self.sql(&format!(
            "SELECT {ITEM_COLUMNS} FROM {{s}}.sg_store_items WHERE true"
        )));
        q.push_search_conditions(self.now, &op.prefix, &op.filter);
        let (limit, offset) = (
            q.bind(big(op.limit), Type::INT8),
            q.bind(big(op.offset), Type::INT8),
        );
        q.push(&format!(
            " ORDER BY updated_at DESC, ns, key \
             LIMIT {limit} OFFSET {offset}"
        ));
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("searching items"))?;
        rows.iter()
            .map(|row| {
                let item = rows::item(row, 0)?;
                Ok((SearchItem { item, score: None }, rows::lasts(row, 0)?))
            })
            .collect()
    }

    /// Full-text search: items holding any of the query's words, by `ts_rank`.
    async fn search_text(&self, op: &SearchOp, query: &str) -> Result<Vec<Found>, StoreError> {
        let words = text::words(query);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        // Words are runs of letters and digits: quoted, none can be read as an operator.
        let tsquery: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let mut q = Query::new("");
        let tsq = q.bind(tsquery.join(" | "), Type::TEXT);
        q.push(&self.sql(&format!(
            "SELECT ts_rank(tsv, query)::float8, {ITEM_COLUMNS} \
             FROM {{s}}.sg_store_items, to_tsquery('simple', {tsq}) AS query \
             WHERE tsv @@ query"
        )));
        q.push_search_conditions(self.now, &op.prefix, &op.filter);
        let (limit, offset) = (
            q.bind(big(op.limit), Type::INT8),
            q.bind(big(op.offset), Type::INT8),
        );
        q.push(&format!(
            " ORDER BY 1 DESC, ns, key LIMIT {limit} OFFSET {offset}"
        ));
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("searching items by text"))?;
        rows.iter()
            .map(|row| {
                let score = Some(col::<f64>(row, 0)?);
                let item = rows::item(row, 1)?;
                Ok((SearchItem { item, score }, rows::lasts(row, 1)?))
            })
            .collect()
    }

    /// Restarts the TTL of `items`.
    async fn refresh<'i>(&self, items: impl Iterator<Item = &'i Item>) -> Result<(), StoreError> {
        let (ns, keys): (Vec<String>, Vec<String>) = items
            .map(|i| (i.namespace.to_string(), i.key.clone()))
            .unzip();
        let text = format!(
            "UPDATE {{s}}.sg_store_items SET expires_at = {} \
             WHERE ttl_ms IS NOT NULL \
             AND (ns, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
            expiry("$3")
        );
        self.tx
            .execute_typed(
                &self.sql(&text),
                &[
                    (&ns, Type::TEXT_ARRAY),
                    (&keys, Type::TEXT_ARRAY),
                    (&self.now.millis(), Type::INT8),
                ],
            )
            .await
            .map_err(db("restarting found items' TTL"))?;
        Ok(())
    }

    /// The live items' namespaces that meet every condition, cut to the depth, sorted.
    pub(super) async fn list_namespaces(
        &self,
        op: &ListNamespacesOp,
    ) -> Result<Vec<Namespace>, StoreError> {
        let mut q = Query::new("");
        let live = q.live(self.now);
        q.push(&self.sql(&format!(
            "SELECT DISTINCT ns FROM {{s}}.sg_store_items WHERE {live}"
        )));
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("listing namespaces"))?;
        let namespaces = rows
            .iter()
            .map(|row| Namespace::from_stored(&col::<String>(row, 0)?))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(op.select(namespaces))
    }

    /// The live items at these `(namespace, key)`s, in the order given (those gone left
    /// out), each with its score; only those `filter` keeps, when given: a search's prefix
    /// and filter.
    pub(super) async fn items_at(
        &self,
        ranked: Vec<(f32, (String, String))>,
        filter: Option<&SearchOp>,
    ) -> Result<Vec<Found>, StoreError> {
        let (ns, keys): (Vec<String>, Vec<String>) =
            ranked.iter().map(|(_, at)| at.clone()).unzip();
        let mut q = Query::new("");
        let (n, k) = (q.bind(ns, Type::TEXT_ARRAY), q.bind(keys, Type::TEXT_ARRAY));
        q.push(&self.sql(&format!(
            "SELECT {ITEM_COLUMNS} FROM {{s}}.sg_store_items \
             WHERE (ns, key) IN (SELECT * FROM unnest({n}::text[], {k}::text[]))"
        )));
        match filter {
            Some(op) => q.push_search_conditions(self.now, &op.prefix, &op.filter),
            None => {
                let live = q.live(self.now);
                q.push(&format!(" AND {live}"));
            }
        }
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("reading found items"))?;
        let mut found: HashMap<(String, String), (Item, bool)> = rows
            .iter()
            .map(|row| {
                let item = rows::item(row, 0)?;
                let at = (item.namespace.to_string(), item.key.clone());
                Ok((at, (item, rows::lasts(row, 0)?)))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(ranked
            .into_iter()
            .filter_map(|(score, at)| {
                let (item, lasts) = found.remove(&at)?;
                let score = Some(f64::from(score));
                Some((SearchItem { item, score }, lasts))
            })
            .collect())
    }
}

/// The expiry of an item whose TTL restarts at `now` (a placeholder): `now + ttl_ms`,
/// saturating at the largest `bigint` as [`Timestamp::plus`] saturates.
fn expiry(now: &str) -> String {
    format!(
        "(CASE WHEN ttl_ms > {max} - GREATEST({now}, 0) THEN {max} ELSE {now} + ttl_ms END)",
        max = i64::MAX
    )
}
