//! A batch of one read, or of one put into a store without an index, run without a
//! transaction of its own making: a get as its one statement; a search without a query as
//! its walk of the newest items, one statement, then, only when needed, the prefix's range
//! and the found items' TTL, each one statement; a put as its one statement, in one round trip, where
//! its batch took three (`BEGIN`; the item's lock with the write; `COMMIT`).
//!
//! Under PostgreSQL's default isolation (read committed) every statement reads its own
//! snapshot, in a transaction or not, so these answer what the batch's transaction would.
//! A put's one statement is its own transaction, so it applies whole or not at all: a call
//! of the schema's put function, which takes the item's lock and writes only an item that
//! has no vectors ([`writes::item_alone`]), and otherwise leaves the put to a batch of its
//! own.

use deadpool_postgres::Object;
use serde_json::{Map, Value};
use tokio_postgres::Row;

use super::batch::{self, found_rows, Found};
use super::rows;
use super::sql::{db, Query};
use super::writes;
use crate::{GetOp, Item, PutOp, SearchItem, SearchOp, StoreConfig, StoreError, Timestamp};

/// What one read needs: its connection, schema, settings and time.
pub(super) struct Alone<'a> {
    pub(super) client: &'a Object,
    pub(super) schema: &'a str,
    pub(super) config: &'a StoreConfig,
    pub(super) now: Timestamp,
    /// Whether to send a get or a put as a named statement the connection prepares once
    /// ([`stategraph_checkpoints::PostgresSaver::prepared_statements`]).
    pub(super) prepared: bool,
}

impl Alone<'_> {
    /// A get as its one statement. As a named statement the connection prepared once, the
    /// server neither parses nor plans it again; unnamed, a transaction-mode pooler
    /// carries it.
    pub(super) async fn get(&self, op: &GetOp) -> Result<Option<Item>, StoreError> {
        let statement = batch::get_statement(self.schema, self.config, self.now, op);
        let rows = self.fixed(
            &statement,
            "preparing the statement of a get",
            "reading an item",
        );
        let rows = rows.await?;
        rows.first().map(|row| rows::item(row, 0)).transpose()
    }

    /// A put of `value` in a store without an index, as its one statement; whether it
    /// wrote the item (`false`: the item has vectors, and the put must run as a batch).
    /// Prepared as a get is.
    pub(super) async fn put(
        &self,
        op: &PutOp,
        value: &Map<String, Value>,
    ) -> Result<bool, StoreError> {
        let statement = writes::item_alone(self.schema, self.config, self.now, op, value)?;
        let rows = self.fixed(
            &statement,
            "preparing the statement of a put",
            "writing an item",
        );
        match rows.await?.first() {
            Some(row) => rows::col(row, 0),
            None => Ok(false),
        }
    }

    /// A search without a query (the newest items first), its found items' TTL restarted
    /// when asked.
    pub(super) async fn search_recent(&self, op: &SearchOp) -> Result<Vec<SearchItem>, StoreError> {
        if op.limit == 0 {
            return Ok(Vec::new());
        }
        let walked = match batch::walks(op) {
            true => self.walk(op).await?,
            false => None,
        };
        let found = match walked {
            Some(found) => found,
            None => {
                let q = batch::range_statement(self.schema, self.now, op);
                found_rows(&self.query(&q, "searching items").await?)?
            }
        };
        let lasting: Vec<&Item> = found.iter().filter(|f| f.1).map(|f| &f.0.item).collect();
        if op.refresh_ttl && self.config.ttl.refresh_on_read && !lasting.is_empty() {
            let q = batch::refresh_statement(self.schema, self.now, lasting.into_iter());
            self.query(&q, "restarting found items' TTL").await?;
        }
        Ok(found.into_iter().map(|f| f.0).collect())
    }

    /// The walk, as its one statement: one round trip. Unnamed, since a filter's shape
    /// changes the text.
    async fn walk(&self, op: &SearchOp) -> Result<Option<Vec<Found>>, StoreError> {
        let q = batch::walk_statement(self.schema, self.now, op);
        batch::walked_page(&self.query(&q, "searching items").await?, op)
    }

    /// Runs a statement of a fixed text, saying what it does (`what`; `preparing` when
    /// preparing it fails): named when the saver prepares its statements, else unnamed.
    async fn fixed(
        &self,
        statement: &Query,
        preparing: &'static str,
        what: &'static str,
    ) -> Result<Vec<Row>, StoreError> {
        if !self.prepared {
            return self.query(statement, what).await;
        }
        let prepared = self
            .client
            .prepare_typed_cached(statement.text(), &statement.types())
            .await
            .map_err(db(preparing))?;
        self.client
            .query(&prepared, &statement.values())
            .await
            .map_err(db(what))
    }

    async fn query(&self, q: &Query, what: &'static str) -> Result<Vec<Row>, StoreError> {
        self.client
            .query_typed(q.text(), &q.params())
            .await
            .map_err(db(what))
    }
}
