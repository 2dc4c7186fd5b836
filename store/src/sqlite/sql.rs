//! Building statements with bound values, and reading item rows back.

use rusqlite::types::Value as SqlValue;
use serde_json::{Map, Value};

use crate::{Item, Namespace, StoreError, Timestamp};

/// Maps a rusqlite error to a [`StoreError::Database`] naming what was being done.
pub(super) fn db(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Database(format!("{what}: {e}"))
}

/// A statement's text and the values bound to its `?`s, in order. User text only ever
/// goes into `params`.
#[derive(Debug, Default)]
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) params: Vec<SqlValue>,
}

impl Sql {
    pub(super) fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            params: Vec::new(),
        }
    }

    /// Appends SQL text (never user text).
    pub(super) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Binds the next `?`.
    pub(super) fn bind(&mut self, value: impl Into<SqlValue>) -> &mut Self {
        self.params.push(value.into());
        self
    }

    /// `AND` the item (aliased `i`) is live at `now`.
    pub(super) fn live(&mut self, now: Timestamp) -> &mut Self {
        self.push(" AND (i.expires_at IS NULL OR i.expires_at > ?)")
            .bind(now.millis())
    }

    /// `AND` the item lives under `prefix`: its key, or the range of keys that start with
    /// it and a `.` (`'.'` and `'/'` are neighbours, so `[p., p/)` is exactly that range).
    pub(super) fn under(&mut self, prefix: &Namespace) -> &mut Self {
        self.under_as(prefix, "i.ns")
    }

    /// As [`Sql::under`], with the namespace read as `+i.ns`: the same test, which SQLite's
    /// planner cannot serve from the `(ns, key)` index, so it walks the recency index in
    /// the `ORDER BY`'s order instead and stops after the page.
    pub(super) fn under_unindexed(&mut self, prefix: &Namespace) -> &mut Self {
        self.under_as(prefix, "+i.ns")
    }

    fn under_as(&mut self, prefix: &Namespace, ns: &str) -> &mut Self {
        if prefix.is_empty() {
            return self;
        }
        let joined = prefix.to_string();
        self.push(&format!(" AND ({ns} = ? OR ({ns} >= ? AND {ns} < ?))"))
            .bind(joined.clone())
            .bind(format!("{joined}."))
            .bind(format!("{joined}/"))
    }

    /// `LIMIT ? OFFSET ?`.
    pub(super) fn page(&mut self, limit: usize, offset: usize) -> &mut Self {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.push(" LIMIT ? OFFSET ?")
            .bind(n(limit))
            .bind(n(offset))
    }
}

/// The columns [`RawRow::read`] reads, from `sg_store_items AS i`.
pub(super) const ITEM_COLUMNS: &str =
    "i.id, i.ns, i.key, json(i.value), i.created_at, i.updated_at, i.ttl_ms IS NOT NULL";

/// An item row as stored.
#[derive(Debug)]
pub(super) struct RawRow {
    pub(super) id: i64,
    ns: String,
    key: String,
    value: String,
    created_at: i64,
    updated_at: i64,
    /// Whether it has a TTL (a refreshing read writes to it).
    pub(super) has_ttl: bool,
}

impl RawRow {
    /// Reads [`ITEM_COLUMNS`] starting at column 0.
    pub(super) fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            ns: row.get(1)?,
            key: row.get(2)?,
            value: row.get(3)?,
            created_at: row.get(4)?,
            updated_at: row.get(5)?,
            has_ttl: row.get(6)?,
        })
    }

    /// The value, parsed.
    pub(super) fn value(&self) -> Result<Map<String, Value>, StoreError> {
        serde_json::from_str(&self.value).map_err(|e| self.corrupt(e.to_string()))
    }

    /// The item, checked.
    pub(super) fn into_item(self) -> Result<Item, StoreError> {
        let value = self.value()?;
        let namespace =
            Namespace::from_joined(&self.ns).map_err(|e| self.corrupt(e.to_string()))?;
        Ok(Item {
            namespace,
            key: self.key,
            value,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        })
    }

    fn corrupt(&self, why: String) -> StoreError {
        StoreError::Corrupt {
            namespace: self.ns.clone(),
            key: self.key.clone(),
            why,
        }
    }
}
