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
        self.refresh(get.refresh_ttl, [&row])?;
        row.into_item().map(Some)
    }

    /// Restarts the TTL of the rows `ids` when the read asked and the store allows.
    ///
    /// In a read-only transaction it writes nothing: when a row has a TTL to restart, it
    /// marks the transaction as needing the write lock, and the batch runs again with it.
    pub(super) fn refresh<'r>(
        &self,
        asked: bool,
        rows: impl IntoIterator<Item = &'r RawRow>,
    ) -> Result<(), StoreError> {
        if !asked || !self.config.ttl.refresh_on_read {
            return Ok(());
        }
        let ids: Vec<i64> = rows
            .into_iter()
            .filter(|r| r.has_ttl)
            .map(|r| r.id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        if self.read_only {
            self.needs_write.set(true);
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
                .execute([self.now.millis(), id])
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
                let score = if scored { Some(r.get(7)?) } else { None };
                Ok((RawRow::read(r)?, score))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(db("searching items"))?;
        Ok(rows)
    }

    /// A search without a vector query: newest first, or by full-text rank.
    pub(super) fn search_rows(&self, op: &SearchOp) -> Result<Vec<SearchItem>, StoreError> {
        let Some((sql, pushed)) = self.search_sql(op)? else {
            return Ok(Vec::new());
        };
        let rows = self.rows(&sql, op.query.is_some())?;
        self.finish(op, &pushed, rows)
    }

    /// The statement of a search without a vector query, and what of its filter is left to
    /// check in Rust; `None` when nothing can match.
    fn search_sql<'o>(&self, op: &'o SearchOp) -> Result<Option<(Sql, Pushed<'o>)>, StoreError> {
        let ranked = op.query.is_some();
        let mut sql = match &op.query {
            Some(query) => {
                let words = text::words(query);
                if words.is_empty() || op.limit == 0 {
                    return Ok(None);
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
        sql.live(self.now);
        if !ranked && self.wide(&op.prefix)? {
            sql.under_unindexed(&op.prefix);
        } else {
            sql.under(&op.prefix);
        }
        let pushed = push_filter(&mut sql, &op.filter);
        // Without a query, the order is `sg_store_items_by_recency`'s, column for column.
        sql.push(if ranked {
            " ORDER BY 8 DESC, i.ns, i.key"
        } else {
            " ORDER BY i.updated_at DESC, i.ns, i.key"
        });
        if pushed.complete() {
            sql.page(op.limit, op.offset);
        }
        Ok(Some((sql, pushed)))
    }

    /// Whether `prefix` holds so many of the items that a search without a query should walk
    /// the recency index (reading items newest first until a page meets the filter) rather
    /// than read the prefix's range of the `(ns, key)` index and sort it: when it holds at
    /// least [`WIDE`] items and a 64th of them (so the walk passes at most about 64 items
    /// of other namespaces per item under the prefix). Counting stops at that many.
    fn wide(&self, prefix: &Namespace) -> Result<bool, StoreError> {
        if prefix.is_empty() {
            return Ok(true);
        }
        let total: i64 = self
            .conn
            .prepare_cached("SELECT IFNULL(max(id), 0) FROM sg_store_items")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(db("sizing a search"))?;
        let enough = (total / 64).max(WIDE);
        let mut sql = Sql::new("SELECT count(*) FROM (SELECT 1 FROM sg_store_items AS i WHERE 1");
        sql.under(prefix).push(" LIMIT ?)").bind(enough);
        let held: i64 = self
            .conn
            .prepare_cached(&sql.text)
            .and_then(|mut s| s.query_row(params_from_iter(&sql.params), |r| r.get(0)))
            .map_err(db("sizing a search"))?;
        Ok(held >= enough)
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
        self.refresh(op.refresh_ttl, kept.iter().map(|(row, _)| row))?;
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

/// The fewest items under a prefix for which a search without a query walks the recency
/// index (see `Tx::wide`).
const WIDE: i64 = 1000;

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rusqlite::{params, params_from_iter, Connection};

    use super::super::{schema, Tx};
    use crate::{Filter, Namespace, SearchOp, StoreConfig, Timestamp};

    /// The plan SQLite picks for the search `op` over `items` items in 10 namespaces.
    fn plan(items: usize, op: &SearchOp) -> String {
        let mut conn = Connection::open_in_memory().unwrap();
        schema::init(&mut conn).unwrap();
        for i in 0..items {
            conn.execute(
                "INSERT INTO sg_store_items (ns, key, value, created_at, updated_at)
                 VALUES (?1, ?2, jsonb(?3), ?4, ?4)",
                params![
                    format!("users.u{}", i % 10),
                    format!("k{i}"),
                    format!(r#"{{"kind": "fact", "score": {}}}"#, i % 100),
                    i64::try_from(i / 7).unwrap()
                ],
            )
            .unwrap();
        }
        let config = StoreConfig::default();
        let tx = Tx {
            conn: &conn,
            config: &config,
            now: Timestamp(1),
            mirror: None,
            vectors_changed: false,
            read_only: true,
            needs_write: std::cell::Cell::new(false),
        };
        let (sql, _) = tx.search_sql(op).unwrap().unwrap();
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", sql.text))
            .unwrap();
        let details: Vec<String> = stmt
            .query_map(params_from_iter(&sql.params), |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        details.join("; ")
    }

    fn filtered(prefix: &[&str]) -> SearchOp {
        let filter = serde_json::json!({"kind": "fact", "score": {"$gte": 50}});
        let filter = Filter::from_json(filter.as_object().unwrap()).unwrap();
        SearchOp::new(Namespace::new(prefix.iter().copied()).unwrap())
            .filter(filter)
            .page(10, 0)
    }

    #[test]
    fn a_filtered_search_of_a_wide_prefix_walks_the_recency_index_without_sorting() {
        for prefix in [&["users"][..], &[]] {
            let plan = plan(3000, &filtered(prefix));
            assert!(
                plan.contains("sg_store_items_by_recency"),
                "{prefix:?}: {plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{prefix:?}: {plan}");
        }
    }

    #[test]
    fn a_filtered_search_of_a_narrow_prefix_reads_its_range() {
        let plan = plan(3000, &filtered(&["users", "u1"]));
        assert!(plan.contains("(ns=?)"), "{plan}");
    }
}
