//! The in-memory backend: the reference for every rule the store keeps.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{Map, Value};

use crate::prepare::{prepare, Prepared};
use crate::{
    text, vector, GetOp, Item, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchItem,
    SearchOp, Store, StoreConfig, StoreError, Timestamp,
};

/// Items in a map behind a lock; gone when the process ends.
///
/// ```
/// use serde_json::json;
/// use stategraph_store::{MemoryStore, Namespace, SearchOp, Store};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = MemoryStore::default();
/// let ns = Namespace::new(["users", "u-1"])?;
/// store.put(&ns, "tea", json!({"text": "likes green tea"}).as_object().unwrap().clone()).await?;
/// let found = store.search(SearchOp::new(Namespace::new(["users"])?).query("tea")).await?;
/// assert_eq!(found[0].item.key, "tea");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    config: StoreConfig,
    items: RwLock<Items>,
}

type Items = BTreeMap<Namespace, BTreeMap<String, Entry>>;

#[derive(Debug, Clone)]
struct Entry {
    value: Arc<Map<String, Value>>,
    created_at: Timestamp,
    updated_at: Timestamp,
    ttl: Option<Duration>,
    expires_at: Option<Timestamp>,
    vectors: Vec<Vec<f32>>,
}

impl Entry {
    fn live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    fn item(&self, namespace: &Namespace, key: &str) -> Item {
        Item {
            namespace: namespace.clone(),
            key: key.to_owned(),
            value: (*self.value).clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

impl MemoryStore {
    /// An empty store with these settings.
    pub fn new(config: StoreConfig) -> Self {
        Self {
            config,
            items: RwLock::default(),
        }
    }

    fn apply(&self, prepared: Prepared) -> Result<Vec<OpResult>, StoreError> {
        let now = self.config.clock.now();
        let mut items = self
            .items
            .write()
            .map_err(|_| StoreError::Database("the store's lock was poisoned".to_owned()))?;
        let ops = prepared.ops.into_iter().zip(prepared.vectors);
        Ok(ops
            .map(|(op, vectors)| match op {
                Op::Get(get) => OpResult::Item(self.get_one(&mut items, &get, now)),
                Op::Put(put) => {
                    self.put_one(&mut items, put, vectors, now);
                    OpResult::Done
                }
                Op::Search(search) => {
                    OpResult::Items(self.search(&mut items, &search, &vectors, now))
                }
                Op::ListNamespaces(list) => {
                    OpResult::Namespaces(list_namespaces(&items, &list, now))
                }
            })
            .collect())
    }

    fn refresh(&self, entry: &mut Entry, asked: bool, now: Timestamp) {
        if asked && self.config.ttl.refresh_on_read {
            if let Some(ttl) = entry.ttl {
                entry.expires_at = Some(now.plus(ttl));
            }
        }
    }

    fn get_one(&self, items: &mut Items, get: &GetOp, now: Timestamp) -> Option<Item> {
        let entry = items.get_mut(&get.namespace)?.get_mut(&get.key)?;
        if !entry.live(now) {
            return None;
        }
        self.refresh(entry, get.refresh_ttl, now);
        Some(entry.item(&get.namespace, &get.key))
    }

    fn put_one(&self, items: &mut Items, put: PutOp, vectors: Vec<Vec<f32>>, now: Timestamp) {
        let Some(value) = put.value else {
            if let Some(keys) = items.get_mut(&put.namespace) {
                keys.remove(&put.key);
                if keys.is_empty() {
                    items.remove(&put.namespace);
                }
            }
            return;
        };
        let keys = items.entry(put.namespace).or_default();
        let created_at = keys
            .get(&put.key)
            .filter(|e| e.live(now))
            .map_or(now, |e| e.created_at);
        let ttl = self.config.ttl.resolve(put.ttl);
        let entry = Entry {
            value: Arc::new(value),
            created_at,
            updated_at: now,
            ttl,
            expires_at: ttl.map(|d| now.plus(d)),
            vectors,
        };
        keys.insert(put.key, entry);
    }

    fn search(
        &self,
        items: &mut Items,
        op: &SearchOp,
        query_vector: &[Vec<f32>],
        now: Timestamp,
    ) -> Vec<SearchItem> {
        let query_words = op.query.as_deref().map(text::words);
        // Ties go in the order of the `.`-joined namespace, then the key: the order a SQL
        // backend's `ORDER BY ns, key` gives.
        let mut scored: Vec<(f32, (String, String, Namespace, Timestamp))> = Vec::new();
        for (ns, keys) in items.range(op.prefix.clone()..) {
            if !ns.starts_with(&op.prefix) {
                break;
            }
            for (key, entry) in keys {
                if !entry.live(now) || !op.filter.matches(&entry.value) {
                    continue;
                }
                let score = match (query_vector.first(), &query_words) {
                    (Some(q), _) => match vector::best_score(q, &entry.vectors) {
                        Some(s) => s,
                        None => continue,
                    },
                    (None, Some(words)) => match text::score(words, &text_of(&entry.value)) {
                        Some(s) => s as f32,
                        None => continue,
                    },
                    (None, None) => 0.0,
                };
                let tie = (ns.to_string(), key.clone(), ns.clone(), entry.updated_at);
                scored.push((score, tie));
            }
        }
        let ranked = op.query.is_some();
        if !ranked {
            scored.sort_by(|a, b| {
                b.1 .3
                    .cmp(&a.1 .3)
                    .then_with(|| (&a.1 .0, &a.1 .1).cmp(&(&b.1 .0, &b.1 .1)))
            });
        }
        let keep = op.offset.saturating_add(op.limit);
        let page = if ranked {
            vector::top_k(scored, keep)
        } else {
            scored
        };
        page.into_iter()
            .skip(op.offset)
            .take(op.limit)
            .filter_map(|(score, (_, key, ns, _))| {
                let entry = items.get_mut(&ns)?.get_mut(&key)?;
                self.refresh(entry, op.refresh_ttl, now);
                Some(SearchItem {
                    item: entry.item(&ns, &key),
                    score: ranked.then_some(f64::from(score)),
                })
            })
            .collect()
    }

    fn sweep_now(&self) -> Result<u64, StoreError> {
        let now = self.config.clock.now();
        let mut items = self
            .items
            .write()
            .map_err(|_| StoreError::Database("the store's lock was poisoned".to_owned()))?;
        let mut removed = 0u64;
        items.retain(|_, keys| {
            let before = keys.len();
            keys.retain(|_, e| e.live(now));
            removed += (before - keys.len()) as u64;
            !keys.is_empty()
        });
        Ok(removed)
    }
}

fn text_of(value: &Map<String, Value>) -> String {
    crate::index::searchable_text(value)
}

fn list_namespaces(items: &Items, op: &ListNamespacesOp, now: Timestamp) -> Vec<Namespace> {
    let live = items
        .iter()
        .filter(|(_, keys)| keys.values().any(|e| e.live(now)))
        .map(|(ns, _)| ns.clone());
    op.select(live)
}

impl Store for MemoryStore {
    fn batch(&self, ops: Vec<Op>) -> BoxFuture<'_, Result<Vec<OpResult>, StoreError>> {
        async move {
            let prepared = prepare(&self.config, ops).await?;
            self.apply(prepared)
        }
        .boxed()
    }

    fn sweep(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        let swept = self.sweep_now();
        async move { swept }.boxed()
    }
}
