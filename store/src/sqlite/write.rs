//! Puts, deletes and the sweep: the item row, its full-text row and its vector rows, in the
//! batch's transaction.

use rusqlite::{params, OptionalExtension};

use super::sql::db;
use super::Tx;
use crate::index::searchable_text;
use crate::{PutOp, StoreError};

impl Tx<'_> {
    /// Writes or deletes one item.
    pub(super) fn put(&mut self, put: PutOp, vectors: Vec<Vec<f32>>) -> Result<(), StoreError> {
        let ns = put.namespace.to_string();
        let Some(value) = put.value else {
            return self.delete(&ns, &put.key);
        };
        let now = self.now.millis();
        let ttl = self.config.ttl.resolve(put.ttl);
        let ttl_ms = ttl.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let expires_at = ttl.map(|d| self.now.plus(d).millis());
        let json = serde_json::to_string(&value)
            .map_err(|e| StoreError::Database(format!("encoding the value: {e}")))?;
        let id: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO sg_store_items
                     (ns, key, value, created_at, updated_at, ttl_ms, expires_at)
                 VALUES (?1, ?2, jsonb(?3), ?4, ?4, ?5, ?6)
                 ON CONFLICT (ns, key) DO UPDATE SET
                     value = excluded.value,
                     created_at = CASE
                         WHEN sg_store_items.expires_at IS NULL
                           OR sg_store_items.expires_at > ?4
                         THEN sg_store_items.created_at ELSE ?4 END,
                     updated_at = ?4,
                     ttl_ms = excluded.ttl_ms,
                     expires_at = excluded.expires_at
                 RETURNING id",
            )
            .and_then(|mut s| {
                s.query_row(params![ns, put.key, json, now, ttl_ms, expires_at], |r| {
                    r.get(0)
                })
            })
            .map_err(db("writing an item"))?;
        self.conn
            .prepare_cached("DELETE FROM sg_store_fts WHERE rowid = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(db("replacing an item's text"))?;
        self.conn
            .prepare_cached("INSERT INTO sg_store_fts (rowid, text) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![id, searchable_text(&value)]))
            .map_err(db("indexing an item's text"))?;
        self.write_vectors(id, &vectors)?;
        if let Some(mirror) = self.mirror.as_deref_mut() {
            mirror.vectors.set((ns, put.key), &vectors)?;
        }
        Ok(())
    }

    fn write_vectors(&mut self, id: i64, vectors: &[Vec<f32>]) -> Result<(), StoreError> {
        let removed = self.drop_vectors(id)?;
        if removed > 0 || !vectors.is_empty() {
            self.vectors_changed = true;
        }
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT INTO sg_store_vectors (item, field, vector) VALUES (?1, ?2, ?3)",
            )
            .map_err(db("writing an item's vectors"))?;
        for (field, v) in vectors.iter().enumerate() {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let field = i64::try_from(field).unwrap_or(i64::MAX);
            insert
                .execute(params![id, field, bytes])
                .map_err(db("writing an item's vectors"))?;
        }
        Ok(())
    }

    fn drop_vectors(&mut self, id: i64) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached("DELETE FROM sg_store_vectors WHERE item = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(db("deleting an item's vectors"))
    }

    /// Deletes an item's full-text and vector rows.
    fn drop_rows(&mut self, id: i64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM sg_store_fts WHERE rowid = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(db("deleting an item's text"))?;
        if self.drop_vectors(id)? > 0 {
            self.vectors_changed = true;
        }
        Ok(())
    }

    fn delete(&mut self, ns: &str, key: &str) -> Result<(), StoreError> {
        let id: Option<i64> = self
            .conn
            .prepare_cached("DELETE FROM sg_store_items WHERE ns = ?1 AND key = ?2 RETURNING id")
            .and_then(|mut s| s.query_row(params![ns, key], |r| r.get(0)).optional())
            .map_err(db("deleting an item"))?;
        if let Some(id) = id {
            self.drop_rows(id)?;
        }
        if let Some(mirror) = self.mirror.as_deref_mut() {
            mirror.vectors.remove(&(ns.to_owned(), key.to_owned()));
        }
        Ok(())
    }

    /// Deletes every expired item; how many.
    pub(super) fn sweep(&mut self) -> Result<u64, StoreError> {
        let gone: Vec<(i64, String, String)> = self
            .conn
            .prepare_cached(
                "DELETE FROM sg_store_items WHERE expires_at IS NOT NULL AND expires_at <= ?1
                 RETURNING id, ns, key",
            )
            .and_then(|mut s| {
                s.query_map([self.now.millis()], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect()
            })
            .map_err(db("deleting expired items"))?;
        for (id, ns, key) in &gone {
            self.drop_rows(*id)?;
            if let Some(mirror) = self.mirror.as_deref_mut() {
                mirror.vectors.remove(&(ns.clone(), key.clone()));
            }
        }
        Ok(gone.len() as u64)
    }
}
