//! Gets, searches without a query or by full text (FTS5, bm25), namespace listings, and the
//! TTL refresh a read makes.

use rusqlite::params_from_iter;

use super::filter::{push_filter, Pushed};
use super::sql::{db, RawRow, Sql, ITEM_COLUMNS};
use super::Tx;
use crate::{
    text, GetOp, Item, ListNamespacesOp, MatchSide, Namespace, SearchItem, SearchOp, StoreError,
};

impl Tx<'_> {
    /// One item, if live; its TTL restarted when asked and allowed.
    pub(super) fn get(&self, get: &GetOp) -> Result<Option<Item>, StoreError> {
        let mut sql = Sql::new(&format!(
            "SELECT {ITEM_COLUMNS} FROM sg_store_items AS i WHERE i.ns = ? AND i.key = ?"
        ));
        sql.bind(get.namespace.to_string()).bind(get.key.clone());
        sql.live(self.now);
        let Some((row, _)) = self.rows(&sql, false)?.into_iter().next() else {
            return Ok(None);
        };
        self.refresh(get.refresh_ttl, &[row.id])?;
        row.into_item().map(Some)
    }

    /// Restarts the TTL of the rows `ids` when the read asked and the store allows.
    pub(super) fn refresh(&self, asked: bool, ids: &[i64]) -> Result<(), StoreError> {
        if !asked || !self.config.ttl.refresh_on_read {
            return Ok(());
        }
        let mut update = self
            .conn
            .prepare_cached(
                "UPDATE sg_store_items SET expires_at = ?1 + ttl_ms
                 WHERE id = ?2 AND ttl_ms IS NOT NULL",
            )
            .map_err(db("refreshing a TTL"))?;
        for id in ids {
            update
                .execute([self.now.millis(), *id])
                .map_err(db("refreshing a TTL"))?;
        }
        Ok(())
    }

    /// Runs `sql`, whose columns are [`ITEM_COLUMNS`] and, with `scored`, a score.
    pub(super) fn rows(
        &self,
        sql: &Sql,
        scored: bool,
    ) -> Result<Vec<(RawRow, Option<f64>)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&sql.text)
            .map_err(db("preparing a search"))?;
        let rows = stmt
            .query_map(params_from_iter(&sql.params), |r| {
                let score = if scored { Some(r.get(6)?) } else { None };
                Ok((RawRow::read(r)?, score))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(db("searching items"))?;
        Ok(rows)
    }

    /// A search without a vector query: newest first, or by full-text rank.
    pub(super) fn search_rows(&self, op: &SearchOp) -> Result<Vec<SearchItem>, StoreError> {
        let ranked = op.query.is_some();
        let mut sql = match &op.query {
            Some(query) => {
                let words = text::words(query);
                if words.is_empty() || op.limit == 0 {
                    return Ok(Vec::new());
                }
                let mut sql = Sql::new(&format!(
                    "SELECT {ITEM_COLUMNS}, -bm25(sg_store_fts) FROM sg_store_fts
                     JOIN sg_store_items AS i ON i.id = sg_store_fts.rowid
                     WHERE sg_store_fts MATCH ?"
                ));
                sql.bind(match_expression(&words));
                sql
            }
            None => Sql::new(&format!(
                "SELECT {ITEM_COLUMNS} FROM sg_store_items AS i WHERE 1"
            )),
        };
        sql.live(self.now).under(&op.prefix);
        let pushed = push_filter(&mut sql, &op.filter);
        sql.push(if ranked {
            " ORDER BY 7 DESC, i.ns, i.key"
        } else {
            " ORDER BY i.updated_at DESC, i.ns, i.key"
        });
        if pushed.complete() {
            sql.page(op.limit, op.offset);
        }
        let rows = self.rows(&sql, ranked)?;
        self.finish(op, &pushed, rows)
    }

    /// Checks the residual filter, pages (when SQL could not), refreshes, and builds items.
    pub(super) fn finish(
        &self,
        op: &SearchOp,
        pushed: &Pushed<'_>,
        rows: Vec<(RawRow, Option<f64>)>,
    ) -> Result<Vec<SearchItem>, StoreError> {
        let mut kept = Vec::new();
        if pushed.complete() {
            kept = rows;
        } else {
            for (row, score) in rows {
                if pushed.matches(&row.value()?) {
                    kept.push((row, score));
                }
            }
            kept = kept.into_iter().skip(op.offset).take(op.limit).collect();
        }
        let ids: Vec<i64> = kept.iter().map(|(row, _)| row.id).collect();
        self.refresh(op.refresh_ttl, &ids)?;
        kept.into_iter()
            .map(|(row, score)| {
                Ok(SearchItem {
                    item: row.into_item()?,
                    score,
                })
            })
            .collect()
    }

    /// The namespaces of live items that meet `op`'s conditions, cut and paged.
    pub(super) fn list_namespaces(
        &self,
        op: &ListNamespacesOp,
    ) -> Result<Vec<Namespace>, StoreError> {
        let mut sql = Sql::new("SELECT DISTINCT i.ns FROM sg_store_items AS i WHERE 1");
        sql.live(self.now);
        if let Some(prefix) = literal_prefix(op) {
            sql.under(&prefix);
        }
        let mut stmt = self
            .conn
            .prepare_cached(&sql.text)
            .map_err(db("listing namespaces"))?;
        let joined: Vec<String> = stmt
            .query_map(params_from_iter(&sql.params), |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(db("listing namespaces"))?;
        let namespaces = joined
            .iter()
            .map(|ns| Namespace::from_stored(ns))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(op.select(namespaces))
    }
}

/// FTS5's query for "any of these words": each quoted (so no word is syntax), joined by OR.
fn match_expression(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The labels of the first prefix condition before its first `*`, as a namespace, so SQL
/// reads only that range.
fn literal_prefix(op: &ListNamespacesOp) -> Option<Namespace> {
    let condition = op.conditions.iter().find(|c| c.side == MatchSide::Prefix)?;
    let labels: Vec<&String> = condition
        .labels
        .iter()
        .take_while(|l| l.as_str() != "*")
        .collect();
    if labels.is_empty() {
        return None;
    }
    // A label no namespace can hold (empty, with a `.`) matches nothing; the Rust check
    // after the query says so, so here it just reads everything.
    Namespace::new(labels.into_iter().cloned()).ok()
}
