//! The fallback's mirror: this process's copy of the vectors table, tagged with the
//! generation it holds. A search first reads the generation: when another process changed
//! the vectors since, the mirror reloads them all; this process's own batches are applied
//! to it after they commit, without a reload.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use super::batch::Batch;
use super::vectors::{admitted, generation, load_all};
use crate::{vector, SearchItem, SearchOp, StoreError};

/// An item's vectors by namespace (`.`-joined) then key.
type Items = BTreeMap<Arc<str>, BTreeMap<Arc<str>, Vec<Vec<f32>>>>;

/// A change a committed batch made to the vectors.
#[derive(Debug, Clone)]
pub(super) struct Change {
    /// The item's namespace, `.`-joined.
    pub(super) ns: String,
    /// Its key.
    pub(super) key: String,
    /// Its vectors now (none: it has none, or is gone).
    pub(super) vectors: Vec<Vec<f32>>,
}

/// The vectors, and the generation of the table they copy (`None`: never loaded).
#[derive(Default)]
pub(super) struct Mirror {
    state: RwLock<State>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.read().ok();
        f.debug_struct("Mirror")
            .field("generation", &state.as_ref().and_then(|s| s.generation))
            .field("namespaces", &state.as_ref().map(|s| s.items.len()))
            .finish()
    }
}

#[derive(Default)]
struct State {
    generation: Option<i64>,
    items: Items,
}

/// A candidate: its score, namespace and key.
type Scored = (f32, (Arc<str>, Arc<str>));

impl Mirror {
    /// The vector search of `op` for `query`, exactly ranked over the mirror, the
    /// candidates checked against the filter and expiry by the database in rank order.
    pub(super) async fn search(
        &self,
        batch: &Batch<'_>,
        op: &SearchOp,
        query: &[f32],
    ) -> Result<Vec<SearchItem>, StoreError> {
        let now = generation(batch.tx, batch.schema).await?;
        if self.generation() != Some(now) {
            let (loaded, vectors) = load_all(batch.tx, batch.schema).await?;
            self.replace(loaded, vectors)?;
        }
        let mut rest = self.score(&op.prefix.to_string(), query)?;
        let need = op.offset.saturating_add(op.limit);
        let mut chunk = need.saturating_mul(2).max(64);
        let mut kept = Vec::new();
        while kept.len() < need && !rest.is_empty() {
            let head = take_best(&mut rest, chunk);
            let candidates: Vec<(f32, (String, String))> = head
                .into_iter()
                .map(|(s, (ns, key))| (s, (ns.to_string(), key.to_string())))
                .collect();
            let passed = admitted(batch, op, &candidates).await?;
            kept.extend(candidates.into_iter().filter(|(_, at)| passed.contains(at)));
            chunk = chunk.saturating_mul(4);
        }
        let page = kept.into_iter().skip(op.offset).take(op.limit).collect();
        batch.items_at(page).await
    }

    /// Applies a batch this process committed, which raised the generation from `from`
    /// to `from + 1`: only when the mirror holds `from` (otherwise it reloads anyway).
    pub(super) fn apply(&self, from: i64, changes: Vec<Change>) -> Result<(), StoreError> {
        let mut state = self.write()?;
        if state.generation != Some(from) {
            return Ok(());
        }
        for change in changes {
            let (ns, key): (Arc<str>, Arc<str>) = (change.ns.into(), change.key.into());
            if change.vectors.is_empty() {
                if let Some(keys) = state.items.get_mut(&ns) {
                    keys.remove(&key);
                    if keys.is_empty() {
                        state.items.remove(&ns);
                    }
                }
            } else {
                state
                    .items
                    .entry(ns)
                    .or_default()
                    .insert(key, change.vectors);
            }
        }
        state.generation = Some(from + 1);
        Ok(())
    }

    fn generation(&self) -> Option<i64> {
        self.state.read().ok().and_then(|s| s.generation)
    }

    fn write(&self) -> Result<std::sync::RwLockWriteGuard<'_, State>, StoreError> {
        self.state
            .write()
            .map_err(|_| StoreError::Database("the vector mirror's lock was poisoned".to_owned()))
    }

    fn replace(
        &self,
        generation: i64,
        vectors: Vec<((String, String), Vec<f32>)>,
    ) -> Result<(), StoreError> {
        let mut items = Items::new();
        for ((ns, key), v) in vectors {
            items
                .entry(Arc::from(ns))
                .or_default()
                .entry(Arc::from(key))
                .or_default()
                .push(v);
        }
        let mut state = self.write()?;
        *state = State {
            generation: Some(generation),
            items,
        };
        Ok(())
    }

    /// Every item under `prefix` (`.`-joined; empty: all) with its best score.
    fn score(&self, prefix: &str, query: &[f32]) -> Result<Vec<Scored>, StoreError> {
        let state = self.state.read().map_err(|_| {
            StoreError::Database("the vector mirror's lock was poisoned".to_owned())
        })?;
        let under = |ns: &str| {
            prefix.is_empty()
                || ns == prefix
                || (ns.starts_with(prefix) && ns.as_bytes().get(prefix.len()) == Some(&b'.'))
        };
        let mut out = Vec::new();
        for (ns, keys) in state
            .items
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
        {
            if !ns.starts_with(prefix) {
                break;
            }
            if !under(ns) {
                continue;
            }
            for (key, vectors) in keys {
                if let Some(score) = vector::best_score(query, vectors) {
                    out.push((score, (ns.clone(), key.clone())));
                }
            }
        }
        Ok(out)
    }
}

/// Removes and returns the `n` best of `scored`, best first (ties by namespace and key).
fn take_best(scored: &mut Vec<Scored>, n: usize) -> Vec<Scored> {
    let order = |a: &Scored, b: &Scored| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
    };
    if n < scored.len() {
        scored.select_nth_unstable_by(n, order);
    }
    let rest = scored.split_off(n.min(scored.len()));
    let mut head = std::mem::replace(scored, rest);
    head.sort_by(order);
    head
}
