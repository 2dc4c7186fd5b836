//! Operations a batch holds, and what each returns.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::{Filter, IndexFields, Item, MatchCondition, Namespace, SearchItem, Ttl};

/// Reads one item.
#[derive(Debug, Clone, PartialEq)]
pub struct GetOp {
    /// Its namespace.
    pub namespace: Namespace,
    /// Its key.
    pub key: String,
    /// Restart its TTL (when the store's `refresh_on_read` allows).
    pub refresh_ttl: bool,
}

/// Writes one item, or deletes it (`value: None`).
#[derive(Debug, Clone, PartialEq)]
pub struct PutOp {
    /// Its namespace (at least one label).
    pub namespace: Namespace,
    /// Its key.
    pub key: String,
    /// The new value; `None` deletes the item.
    pub value: Option<Map<String, Value>>,
    /// Which fields to embed.
    pub index: IndexFields,
    /// How long it lasts.
    pub ttl: Ttl,
}

/// Finds items under a namespace prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOp {
    /// Items whose namespace starts with this (the root: every item).
    pub prefix: Namespace,
    /// Rank by this text: by vector similarity when the store has an index, by full-text
    /// rank otherwise. Without it, the newest-updated come first.
    pub query: Option<String>,
    /// Conditions on the value.
    pub filter: Filter,
    /// At most this many.
    pub limit: usize,
    /// After skipping this many.
    pub offset: usize,
    /// Restart the found items' TTL (when the store's `refresh_on_read` allows).
    pub refresh_ttl: bool,
}

/// Lists the namespaces items live under.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListNamespacesOp {
    /// Conditions every listed namespace meets.
    pub conditions: Vec<MatchCondition>,
    /// Cut each namespace to this many labels (then list each once).
    pub max_depth: Option<usize>,
    /// At most this many.
    pub limit: usize,
    /// After skipping this many.
    pub offset: usize,
}

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// See [`GetOp`].
    Get(GetOp),
    /// See [`PutOp`].
    Put(PutOp),
    /// See [`SearchOp`].
    Search(SearchOp),
    /// See [`ListNamespacesOp`].
    ListNamespaces(ListNamespacesOp),
}

/// What one operation returned, in the batch's order.
#[derive(Debug, Clone, PartialEq)]
pub enum OpResult {
    /// A get's item, if it exists and has not expired.
    Item(Option<Item>),
    /// A put or delete was applied.
    Done,
    /// A search's items, best first.
    Items(Vec<SearchItem>),
    /// A listing's namespaces, sorted.
    Namespaces(Vec<Namespace>),
}

impl GetOp {
    /// A get that refreshes the item's TTL.
    pub fn new(namespace: Namespace, key: impl Into<String>) -> Self {
        Self {
            namespace,
            key: key.into(),
            refresh_ttl: true,
        }
    }
}

impl PutOp {
    /// A put of `value`, indexed by default, with the default TTL.
    pub fn new(namespace: Namespace, key: impl Into<String>, value: Map<String, Value>) -> Self {
        Self {
            namespace,
            key: key.into(),
            value: Some(value),
            index: IndexFields::Default,
            ttl: Ttl::Default,
        }
    }

    /// A delete.
    pub fn delete(namespace: Namespace, key: impl Into<String>) -> Self {
        Self {
            namespace,
            key: key.into(),
            value: None,
            index: IndexFields::Default,
            ttl: Ttl::Default,
        }
    }

    /// With this TTL.
    pub fn ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = ttl;
        self
    }

    /// Indexing these fields.
    pub fn index(mut self, index: IndexFields) -> Self {
        self.index = index;
        self
    }
}

impl SearchOp {
    /// The first ten items under `prefix`.
    pub fn new(prefix: Namespace) -> Self {
        Self {
            prefix,
            query: None,
            filter: Filter::default(),
            limit: 10,
            offset: 0,
            refresh_ttl: true,
        }
    }

    /// Ranked by `query`.
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }

    /// Only items `filter` matches.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = filter;
        self
    }

    /// At most `limit`, after `offset`.
    pub fn page(mut self, limit: usize, offset: usize) -> Self {
        self.limit = limit;
        self.offset = offset;
        self
    }
}

impl ListNamespacesOp {
    /// The first hundred namespaces.
    pub fn new() -> Self {
        Self {
            limit: 100,
            ..Self::default()
        }
    }

    /// Only those meeting `condition` too.
    pub fn condition(mut self, condition: MatchCondition) -> Self {
        self.conditions.push(condition);
        self
    }

    /// Cut to `depth` labels.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// What the listing returns of the namespaces of the live items (any order, repeats
    /// allowed): those meeting every condition, cut to the depth, sorted, each once, paged.
    /// Every backend lists through this, so they agree.
    pub(crate) fn select(&self, namespaces: impl IntoIterator<Item = Namespace>) -> Vec<Namespace> {
        let kept: BTreeSet<Namespace> = namespaces
            .into_iter()
            .filter(|ns| self.conditions.iter().all(|c| c.matches(ns)))
            .map(|ns| match self.max_depth {
                Some(depth) => ns.truncated(depth),
                None => ns,
            })
            .collect();
        kept.into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect()
    }
}
