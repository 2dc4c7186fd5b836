//! The fallback's mirror: this process's copy of the vectors table, tagged with the
//! generation it holds. A search first reads the generation: when another process changed
//! the vectors since, the mirror reads the items the vector log names (all vectors when it
//! holds none or the log no longer reaches back); this process's own batches are applied to
//! it after they commit.

use std::sync::RwLock;

use super::batch::{Batch, Found};
use super::vectors::{changed_since, generation, load_all};
use crate::mirror::VectorMirror;
use crate::namespace::joined_under;
use crate::{SearchOp, StoreError};

/// An item: its namespace (`.`-joined) and key.
type Owner = (String, String);

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
pub(super) struct Mirror {
    state: RwLock<State>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.read().ok();
        f.debug_struct("Mirror")
            .field("generation", &state.as_ref().and_then(|s| s.generation))
            .field("vectors", &state.as_ref().map(|s| s.vectors.len()))
            .finish()
    }
}

struct State {
    generation: Option<i64>,
    vectors: VectorMirror<Owner>,
}

impl Mirror {
    /// An empty mirror of `dims`-long vectors, to load at the first search.
    pub(super) fn new(dims: usize) -> Self {
        Self {
            state: RwLock::new(State {
                generation: None,
                vectors: VectorMirror::new(dims),
            }),
        }
    }

    /// The vector search of `op` for `query`, exactly ranked over the mirror, the
    /// candidates checked against the filter and expiry by the database in rank order.
    pub(super) async fn search(
        &self,
        batch: &Batch<'_>,
        op: &SearchOp,
        query: &[f32],
    ) -> Result<Vec<Found>, StoreError> {
        self.catch_up(batch).await?;
        let prefix = op.prefix.to_string();
        let need = op.offset.saturating_add(op.limit);
        let mut k = need.saturating_mul(2).max(64);
        let mut checked: std::collections::HashSet<Owner> = std::collections::HashSet::new();
        let mut kept: Vec<Found> = Vec::new();
        // Ranked best first; the database returns the live ones that meet the filter. Too
        // few: rank again for more, checking only items not checked yet (by item, not by
        // position: another search of this handle may have moved the mirror meanwhile).
        loop {
            let ranked = self.rank(&prefix, query, k)?;
            let fresh: Vec<(f32, Owner)> = ranked
                .iter()
                .filter(|(_, owner)| checked.insert(owner.clone()))
                .cloned()
                .collect();
            kept.extend(batch.items_at(fresh, Some(op)).await?);
            if kept.len() >= need || ranked.len() < k {
                break;
            }
            k = k.saturating_mul(4);
        }
        kept.sort_by(|a, b| {
            let score = |f: &Found| f.0.score.unwrap_or(f64::MIN);
            score(b).total_cmp(&score(a)).then_with(|| {
                let at = |f: &Found| (f.0.item.namespace.to_string(), f.0.item.key.clone());
                at(a).cmp(&at(b))
            })
        });
        Ok(kept.into_iter().skip(op.offset).take(op.limit).collect())
    }

    /// Brings the mirror to the vectors' generation now: the items the log names since the
    /// one it holds, or every vector when it holds none or the log no longer reaches back.
    async fn catch_up(&self, batch: &Batch<'_>) -> Result<(), StoreError> {
        let (tx, schema) = (batch.tx, batch.schema);
        let now = generation(tx, schema).await?;
        let held = self.generation();
        if held == Some(now) {
            return Ok(());
        }
        if let Some(held) = held.filter(|held| *held < now) {
            if let Some(changed) = changed_since(tx, schema, held, now).await? {
                return self.apply_changed(held, now, changed);
            }
        }
        let (loaded, vectors) = load_all(tx, schema).await?;
        self.replace(loaded, vectors)
    }

    /// Sets the changed items' vectors, read at `now` or later, on a mirror still at `held`.
    fn apply_changed(
        &self,
        held: i64,
        now: i64,
        changed: Vec<(Owner, Option<Vec<f32>>)>,
    ) -> Result<(), StoreError> {
        let mut owners: std::collections::BTreeMap<Owner, Vec<Vec<f32>>> = Default::default();
        for (owner, v) in changed {
            let vectors = owners.entry(owner).or_default();
            vectors.extend(v);
        }
        let mut state = self.write()?;
        if state.generation != Some(held) {
            // Another search of this handle moved it meanwhile.
            return Ok(());
        }
        for (owner, vectors) in owners {
            state.vectors.set(owner, &vectors)?;
        }
        state.generation = Some(now);
        Ok(())
    }

    /// Applies a batch this process committed, which raised the generation from `from`
    /// to `from + 1`: only when the mirror holds `from` (otherwise its next search catches up).
    pub(super) fn apply(&self, from: i64, changes: Vec<Change>) -> Result<(), StoreError> {
        let mut state = self.write()?;
        if state.generation != Some(from) {
            return Ok(());
        }
        for change in changes {
            state
                .vectors
                .set((change.ns, change.key), &change.vectors)?;
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

    fn replace(&self, generation: i64, rows: Vec<(Owner, Vec<f32>)>) -> Result<(), StoreError> {
        let mut state = self.write()?;
        let dims = state.vectors.dims();
        let mut owners: std::collections::BTreeMap<Owner, Vec<Vec<f32>>> = Default::default();
        for (owner, v) in rows {
            owners.entry(owner).or_default().push(v);
        }
        let mut vectors = VectorMirror::new(dims);
        for (owner, vs) in owners {
            vectors.set(owner, &vs)?;
        }
        *state = State {
            generation: Some(generation),
            vectors,
        };
        Ok(())
    }

    /// The `k` best items under `prefix` (`.`-joined; empty: all), best first.
    fn rank(&self, prefix: &str, query: &[f32], k: usize) -> Result<Vec<(f32, Owner)>, StoreError> {
        let state = self.state.read().map_err(|_| {
            StoreError::Database("the vector mirror's lock was poisoned".to_owned())
        })?;
        let under = |(ns, _): &Owner| joined_under(ns, prefix);
        Ok(state.vectors.rank(query, under, k))
    }
}
