//! Cached node writes in the PostgreSQL schema (`sg_node_cache`), and [`NodeCache`] for
//! [`PostgresSaver`]: one statement per call, whatever the number of keys.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use tokio_postgres::types::Type;

use super::sql::col;
use super::PostgresSaver;
use crate::node_cache::{live, CacheEntry, CacheKey, NodeCache};
use crate::{CheckpointError, StorageError};

/// The namespaces and keys of `keys`, as two parallel arrays.
fn columns(keys: &[CacheKey]) -> (Vec<&str>, Vec<&str>) {
    keys.iter().map(|k| (k.ns.as_str(), k.key.as_str())).unzip()
}

impl NodeCache for PostgresSaver {
    fn get_cached<'a>(
        &'a self,
        keys: &'a [CacheKey],
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<Option<serde_json::Value>>, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let (ns, key) = columns(keys);
            let rows = self
                .inner
                .sql
                .query(
                    &**client,
                    "SELECT c.ns, c.key, c.expires_at, c.value FROM {s}.sg_node_cache c \
                     JOIN unnest($1::text[], $2::text[]) AS k(ns, key) \
                     ON c.ns = k.ns AND c.key = k.key",
                    &[(&ns, Type::TEXT_ARRAY), (&key, Type::TEXT_ARRAY)],
                    "reading node cache entries",
                )
                .await?;
            let mut found = BTreeMap::new();
            for row in &rows {
                let expires: Option<i64> = col(row, 2)?;
                if !live(expires, now_ms) {
                    continue;
                }
                let (ns, key, text): (String, String, String) =
                    (col(row, 0)?, col(row, 1)?, col(row, 3)?);
                let value =
                    serde_json::from_str(&text).map_err(|e| CheckpointError::Integrity {
                        thread: "-".to_owned(),
                        checkpoint: "-".to_owned(),
                        blob: format!("sg_node_cache entry {ns}/{key}"),
                        detail: e.to_string(),
                    })?;
                found.insert(CacheKey { ns, key }, value);
            }
            Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
        })
    }

    fn put_cached(&self, entries: Vec<CacheEntry>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            // One row per key (the last entry wins): an upsert may not touch a row twice.
            let mut rows = BTreeMap::new();
            for e in entries {
                let text = serde_json::to_string(&e.value)
                    .map_err(|err| StorageError::new("encoding a node cache entry", err))?;
                rows.insert(e.key, (e.expires_at_ms, text));
            }
            if rows.is_empty() {
                return Ok(());
            }
            let keys: Vec<CacheKey> = rows.keys().cloned().collect();
            let (ns, key) = columns(&keys);
            let expires: Vec<Option<i64>> = rows.values().map(|(at, _)| *at).collect();
            let values: Vec<&str> = rows.values().map(|(_, v)| v.as_str()).collect();
            let client = self.client().await?;
            self.inner
                .sql
                .query(
                    &**client,
                    "INSERT INTO {s}.sg_node_cache (ns, key, expires_at, value) \
                     SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[]) \
                     ON CONFLICT (ns, key) DO UPDATE \
                     SET expires_at = EXCLUDED.expires_at, value = EXCLUDED.value",
                    &[
                        (&ns, Type::TEXT_ARRAY),
                        (&key, Type::TEXT_ARRAY),
                        (&expires, Type::INT8_ARRAY),
                        (&values, Type::TEXT_ARRAY),
                    ],
                    "storing node cache entries",
                )
                .await?;
            Ok(())
        })
    }

    fn clear_cached<'a>(
        &'a self,
        namespaces: &'a [String],
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = self
                .inner
                .sql
                .query(
                    &**client,
                    "DELETE FROM {s}.sg_node_cache WHERE ns = ANY($1::text[]) RETURNING 1",
                    &[(&namespaces, Type::TEXT_ARRAY)],
                    "clearing node cache entries",
                )
                .await?;
            Ok(rows.len())
        })
    }
}
