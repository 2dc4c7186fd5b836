//! Vector search: the handle's [`VectorMirror`], kept in step with the file through the
//! `vectors_generation` row, ranks; SQL filters and reads the winners.

use std::collections::HashSet;

use rusqlite::params;

use super::filter::push_filter;
use super::sql::{db, RawRow, Sql, ITEM_COLUMNS};
use super::Tx;
use crate::mirror::VectorMirror;
use crate::namespace::joined_under;
use crate::{SearchItem, SearchOp, StoreError};

/// An item's key in the mirror: its `.`-joined namespace and its key (ordered as SQL orders
/// `ns, key`, so ties break the same way everywhere).
pub(super) type ItemKey = (String, String);

/// A handle's copy of the file's vectors, and the generation it reflects (`None`: unknown,
/// reload before use).
#[derive(Debug)]
pub(super) struct Mirror {
    pub(super) vectors: VectorMirror<ItemKey>,
    pub(super) generation: Option<i64>,
}

impl Mirror {
    pub(super) fn new(dims: usize) -> Self {
        Self {
            vectors: VectorMirror::new(dims),
            generation: None,
        }
    }
}

impl Tx<'_> {
    /// The file's vectors generation.
    fn generation(&self) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT CAST(value AS INTEGER) FROM sg_store_meta WHERE key = 'vectors_generation'",
            )
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(db("reading the vectors generation"))
    }

    /// Counts one more change to the vector rows; the new generation.
    pub(super) fn bump_generation(&self) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE sg_store_meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)
                 WHERE key = 'vectors_generation' RETURNING CAST(value AS INTEGER)",
            )
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(db("counting a change to the vectors"))
    }

    /// Reloads the mirror if another connection changed the vectors since it was filled.
    pub(super) fn sync_mirror(&mut self) -> Result<(), StoreError> {
        if self.mirror.is_none() {
            return Ok(());
        }
        let generation = self.generation()?;
        let Some(mirror) = self.mirror.as_deref_mut() else {
            return Ok(());
        };
        if mirror.generation == Some(generation) {
            return Ok(());
        }
        mirror.generation = None;
        mirror.vectors.clear();
        let dims = mirror.vectors.dims();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT i.ns, i.key, v.vector FROM sg_store_vectors AS v
                 JOIN sg_store_items AS i ON i.id = v.item ORDER BY v.item, v.field",
            )
            .map_err(db("loading the vectors"))?;
        let mut rows = stmt.query([]).map_err(db("loading the vectors"))?;
        let mut current: Option<(ItemKey, Vec<Vec<f32>>)> = None;
        while let Some(row) = rows.next().map_err(db("loading the vectors"))? {
            let key: ItemKey = (
                row.get(0).map_err(db("loading the vectors"))?,
                row.get(1).map_err(db("loading the vectors"))?,
            );
            let blob: Vec<u8> = row.get(2).map_err(db("loading the vectors"))?;
            let vector = decode(&blob, dims, &key)?;
            match &mut current {
                Some((k, vs)) if *k == key => vs.push(vector),
                _ => {
                    if let Some((k, vs)) = current.replace((key, vec![vector])) {
                        mirror.vectors.set(k, &vs)?;
                    }
                }
            }
        }
        if let Some((k, vs)) = current {
            mirror.vectors.set(k, &vs)?;
        }
        mirror.generation = Some(generation);
        Ok(())
    }

    /// Ranks the live items under `op.prefix` that meet `op.filter` by their best vector's
    /// dot product with `query`.
    pub(super) fn search_vectors(
        &self,
        op: &SearchOp,
        query: &[f32],
    ) -> Result<Vec<SearchItem>, StoreError> {
        let Some(mirror) = self.mirror.as_deref() else {
            return self.search_rows(op);
        };
        let want = op.offset.saturating_add(op.limit);
        if op.limit == 0 {
            return Ok(Vec::new());
        }
        let allowed = if op.filter.is_empty() {
            None
        } else {
            Some(self.candidates(op)?)
        };
        let prefix = op.prefix.to_string();
        // Ranked rows may have expired: read more until enough are live or none are left.
        let mut k = want;
        let found = loop {
            let ranked = match &allowed {
                Some(keys) => mirror.vectors.rank_among(query, keys, k),
                None => mirror
                    .vectors
                    .rank(query, |key| joined_under(&key.0, &prefix), k),
            };
            let exhausted = ranked.len() < k;
            let found = self.live_rows(ranked)?;
            if found.len() >= want || exhausted {
                break found;
            }
            k = k.saturating_mul(2);
        };
        let page: Vec<_> = found.into_iter().skip(op.offset).take(op.limit).collect();
        self.refresh(op.refresh_ttl, page.iter().map(|(row, _)| row))?;
        page.into_iter()
            .map(|(row, score)| {
                Ok(SearchItem {
                    item: row.into_item()?,
                    score: Some(f64::from(score)),
                })
            })
            .collect()
    }

    /// The keys of the live items under the prefix that meet the filter.
    fn candidates(&self, op: &SearchOp) -> Result<HashSet<ItemKey>, StoreError> {
        let mut sql = Sql::new(&format!(
            "SELECT {ITEM_COLUMNS} FROM sg_store_items AS i WHERE 1"
        ));
        sql.live(self.now).under(&op.prefix);
        let pushed = push_filter(&mut sql, &op.filter);
        let mut out = HashSet::new();
        for (row, _) in self.rows(&sql, false)? {
            if pushed.complete() || pushed.matches(&row.value()?) {
                let item = row.into_item()?;
                out.insert((item.namespace.to_string(), item.key));
            }
        }
        Ok(out)
    }

    /// The rows of `ranked` that are live, in its order, with their scores.
    fn live_rows(&self, ranked: Vec<(f32, ItemKey)>) -> Result<Vec<(RawRow, f32)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {ITEM_COLUMNS} FROM sg_store_items AS i
                 WHERE i.ns = ?1 AND i.key = ?2 AND (i.expires_at IS NULL OR i.expires_at > ?3)"
            ))
            .map_err(db("reading ranked items"))?;
        let mut out = Vec::with_capacity(ranked.len());
        for (score, (ns, key)) in ranked {
            let mut rows = stmt
                .query(params![ns, key, self.now.millis()])
                .map_err(db("reading ranked items"))?;
            if let Some(row) = rows.next().map_err(db("reading ranked items"))? {
                out.push((
                    RawRow::read(row).map_err(db("reading ranked items"))?,
                    score,
                ));
            }
        }
        Ok(out)
    }
}

/// A vector blob (f32, little-endian) of `dims` numbers.
fn decode(blob: &[u8], dims: usize, key: &ItemKey) -> Result<Vec<f32>, StoreError> {
    if blob.len() != dims * 4 {
        return Err(StoreError::Corrupt {
            namespace: key.0.clone(),
            key: key.1.clone(),
            why: format!(
                "a stored vector of {} bytes; the index has {dims} dimensions ({} bytes)",
                blob.len(),
                dims * 4
            ),
        });
    }
    Ok(blob
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}
