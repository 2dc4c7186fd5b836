//! A batch's operations, each run as statements in the batch's one transaction.

use std::collections::HashMap;

use serde_json::{Map, Value};

use tokio_postgres::types::Type;
use tokio_postgres::{Row, Transaction};

use super::mirror::Change;
use super::rows::{self, col, ITEM_COLUMNS};
use super::schema::named;
use super::sql::{big, db, Query};
use super::vectors;
use super::writes;
use crate::prepare::Prepared;
use crate::{
    text, GetOp, Item, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchItem, SearchOp,
    StoreConfig, StoreError, Timestamp,
};

/// A put with a value: its op, the value, and its vectors.
pub(super) struct Put<'a> {
    pub(super) op: &'a PutOp,
    pub(super) value: &'a Map<String, Value>,
    pub(super) vectors: &'a [Vec<f32>],
}

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
    /// The write locks not yet taken ([`super::locks::statements`]).
    pub(super) locks: Vec<Query>,
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
        let q = get_statement(self.schema, self.config, self.now, op);
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("reading an item"))?;
        rows.first().map(|row| rows::item(row, 0)).transpose()
    }

    /// Runs the batch's ops in order; each run of consecutive puts with values is sent at
    /// once.
    pub(super) async fn run(&mut self, prepared: &Prepared) -> Result<Vec<OpResult>, StoreError> {
        let mut out = Vec::with_capacity(prepared.ops.len());
        let mut puts = Vec::new();
        for (op, vecs) in prepared.ops.iter().zip(&prepared.vectors) {
            if let Op::Put(
                put @ PutOp {
                    value: Some(value), ..
                },
            ) = op
            {
                puts.push(Put {
                    op: put,
                    value,
                    vectors: vecs,
                });
                out.push(OpResult::Done);
                continue;
            }
            if !puts.is_empty() {
                self.put_all(&std::mem::take(&mut puts)).await?;
            }
            self.take_locks().await?;
            out.push(match op {
                Op::Get(get) => OpResult::Item(self.get(get).await?),
                Op::Put(put) => {
                    self.delete(put.namespace.to_string(), put.key.clone())
                        .await?;
                    OpResult::Done
                }
                Op::Search(search) => OpResult::Items(self.search(search, vecs.first()).await?),
                Op::ListNamespaces(list) => OpResult::Namespaces(self.list_namespaces(list).await?),
            });
        }
        if !puts.is_empty() {
            self.put_all(&puts).await?;
        }
        Ok(out)
    }

    /// Writes a run of puts, each with its value and vectors. Every statement of the run is
    /// sent before any answer is awaited, so the run costs one round trip; the server runs
    /// them in order, so a later put of the same key in the run wins.
    pub(super) async fn put_all(&mut self, puts: &[Put<'_>]) -> Result<(), StoreError> {
        // The batch's locks, when not yet taken, go first.
        let mut statements = std::mem::take(&mut self.locks);
        let locks = statements.len();
        for put in puts {
            statements.push(writes::item(
                self.schema,
                self.config,
                self.now,
                put.op,
                put.value,
            )?);
            for (field, v) in put.vectors.iter().enumerate() {
                statements.push(writes::vector(self.schema, put.op, field, v));
            }
        }
        let answers = self
            .send_all(&statements)
            .await
            .map_err(db("writing items and their vectors"))?;
        let mut answers = answers.iter().skip(locks);
        for put in puts {
            let dropped: i64 = match answers.next().and_then(|rows| rows.first()) {
                Some(row) => col(row, 0)?,
                None => 0,
            };
            // The vector statements answer no rows.
            answers.by_ref().take(put.vectors.len()).for_each(drop);
            if dropped > 0 || !put.vectors.is_empty() {
                let (ns, key) = (put.op.namespace.to_string(), put.op.key.clone());
                self.vectors_changed(ns, key, put.vectors.to_vec()).await?;
            }
        }
        Ok(())
    }

    /// Takes the batch's write locks, if not yet taken: before the first op that is not a
    /// put with a value (a put sends them with its statements).
    async fn take_locks(&mut self) -> Result<(), StoreError> {
        let statements = std::mem::take(&mut self.locks);
        self.send_all(&statements)
            .await
            .map_err(db("locking the batch's items"))?;
        Ok(())
    }

    /// Runs `statements` in order, sent together before any answer is awaited
    /// (tokio-postgres pipelines the futures polled together, in the order first polled);
    /// their rows, in order.
    async fn send_all(&self, statements: &[Query]) -> Result<Vec<Vec<Row>>, tokio_postgres::Error> {
        let params: Vec<_> = statements.iter().map(Query::params).collect();
        let sent = statements
            .iter()
            .zip(&params)
            .map(|(q, p)| self.tx.query_typed(q.text(), p));
        futures::future::try_join_all(sent).await
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

    /// A search without a query: its page read off a walk of the newest items when that
    /// finds it (for a page within the first `WALKED_PAGE` items), else off the prefix's
    /// key range, sorted.
    async fn search_recent(&self, op: &SearchOp) -> Result<Vec<Found>, StoreError> {
        if op.limit == 0 {
            return Ok(Vec::new());
        }
        if walks(op) {
            if let Some(found) = self.newest_walk(op).await? {
                return Ok(found);
            }
        }
        let q = range_statement(self.schema, self.now, op);
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("searching items"))?;
        found_rows(&rows)
    }

    /// The page of [`walk_statement`]; `None` when the walk holds too few matches.
    async fn newest_walk(&self, op: &SearchOp) -> Result<Option<Vec<Found>>, StoreError> {
        let q = walk_statement(self.schema, self.now, op);
        let rows = self
            .tx
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db("searching items"))?;
        walked_page(&rows, op)
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
        let q = refresh_statement(self.schema, self.now, items);
        self.tx
            .execute_typed(q.text(), &q.params())
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

/// A get's one statement: the live item, its TTL restarted in the same statement when the
/// get asks and the store refreshes on read.
pub(super) fn get_statement(
    schema: &str,
    config: &StoreConfig,
    now: Timestamp,
    op: &GetOp,
) -> Query {
    let mut q = Query::new("");
    let ns = q.bind(op.namespace.to_string(), Type::TEXT);
    let key = q.bind(op.key.clone(), Type::TEXT);
    let live = q.live(now);
    let select = format!(
        "SELECT {ITEM_COLUMNS} FROM {{s}}.sg_store_items \
         WHERE ns = {ns} AND key = {key} AND {live}"
    );
    let text = if op.refresh_ttl && config.ttl.refresh_on_read {
        let expiry = expiry(&q.bind(now.millis(), Type::INT8));
        // The update and the select read one snapshot: the select returns the row as it
        // was, which differs only in `expires_at`, not selected.
        format!(
            "WITH refreshed AS (UPDATE {{s}}.sg_store_items SET expires_at = {expiry} \
             WHERE ns = {ns} AND key = {key} AND ttl_ms IS NOT NULL AND {live}) {select}"
        )
    } else {
        select
    };
    q.push(&named(schema, &text));
    q
}

/// The statement that restarts the TTL of `items` at `now`.
pub(super) fn refresh_statement<'i>(
    schema: &str,
    now: Timestamp,
    items: impl Iterator<Item = &'i Item>,
) -> Query {
    let (ns, keys): (Vec<String>, Vec<String>) = items
        .map(|i| (i.namespace.to_string(), i.key.clone()))
        .unzip();
    let mut q = Query::new("");
    let (ns, keys) = (q.bind(ns, Type::TEXT_ARRAY), q.bind(keys, Type::TEXT_ARRAY));
    let now = q.bind(now.millis(), Type::INT8);
    q.push(&named(
        schema,
        &format!(
            "UPDATE {{s}}.sg_store_items SET expires_at = {} \
             WHERE ttl_ms IS NOT NULL \
             AND (ns, key) IN (SELECT * FROM unnest({ns}::text[], {keys}::text[]))",
            expiry(&now)
        ),
    ));
    q
}

/// Whether a search without a query first walks the newest items: for a page within the
/// first `WALKED_PAGE` items.
pub(super) fn walks(op: &SearchOp) -> bool {
    op.offset.saturating_add(op.limit) <= WALKED_PAGE
}

/// The statement that reads `op`'s page off the newest `WALKED` × (offset + limit) items,
/// in the recency index's order.
///
/// The filter sits outside the limited walk, so the planner's lack of an estimate of a JSON
/// filter's selectivity (or, before autovacuum analyses a freshly loaded table, of a
/// prefix's size) cannot make it sort every item under the prefix instead (40 ms for
/// 100,000 items, where the walk reads a few hundred in 0.3 ms): `EXPLAIN ANALYZE` chose
/// the recency index with statistics taken at 10 rows and 100,000 loaded after, with none,
/// and for a walk of 64,000 rows.
pub(super) fn walk_statement(schema: &str, now: Timestamp, op: &SearchOp) -> Query {
    let walked = op.offset.saturating_add(op.limit).saturating_mul(WALKED);
    let mut q = Query::new("");
    let walked = q.bind(big(walked), Type::INT8);
    q.push(&named(
        schema,
        &format!(
            "SELECT {ITEM_COLUMNS} FROM (SELECT {WALKED_COLUMNS} FROM {{s}}.sg_store_items \
             ORDER BY updated_at DESC, ns, key LIMIT {walked}) AS newest WHERE true"
        ),
    ));
    q.push_search_conditions(now, &op.prefix, &op.filter);
    page_newest(&mut q, op);
    q
}

/// The page a walk's rows hold; `None` when they are too few (the prefix or the filter is
/// narrow), and the search must read the prefix's range instead ([`range_statement`]).
pub(super) fn walked_page(rows: &[Row], op: &SearchOp) -> Result<Option<Vec<Found>>, StoreError> {
    if rows.len() < op.limit {
        return Ok(None);
    }
    found_rows(rows).map(Some)
}

/// The statement that reads `op`'s page off the prefix's key range, sorted.
pub(super) fn range_statement(schema: &str, now: Timestamp, op: &SearchOp) -> Query {
    let mut q = Query::new(named(
        schema,
        &format!("SELECT {ITEM_COLUMNS} FROM {{s}}.sg_store_items WHERE true"),
    ));
    q.push_search_conditions(now, &op.prefix, &op.filter);
    page_newest(&mut q, op);
    q
}

/// Orders `q` newest first and pages it.
fn page_newest(q: &mut Query, op: &SearchOp) {
    let (limit, offset) = (
        q.bind(big(op.limit), Type::INT8),
        q.bind(big(op.offset), Type::INT8),
    );
    q.push(&format!(
        " ORDER BY updated_at DESC, ns, key LIMIT {limit} OFFSET {offset}"
    ));
}

/// How many of the newest items a search without a query walks per item of its page before
/// it reads the prefix's range instead: a prefix and filter that keep under one item in 64
/// read their range.
const WALKED: usize = 64;

/// The deepest page (offset + limit) a search without a query walks for: a deeper one reads
/// the prefix's range at once, so no walk reads more than 64,000 rows.
const WALKED_PAGE: usize = 1000;

/// The columns a walk reads: what [`ITEM_COLUMNS`] and the search's conditions name.
const WALKED_COLUMNS: &str = "ns, key, value, created_at, updated_at, ttl_ms, expires_at";

/// Found items from rows of [`ITEM_COLUMNS`], without scores.
pub(super) fn found_rows(rows: &[Row]) -> Result<Vec<Found>, StoreError> {
    rows.iter()
        .map(|row| {
            let item = rows::item(row, 0)?;
            Ok((SearchItem { item, score: None }, rows::lasts(row, 0)?))
        })
        .collect()
}
