//! The memory backend's tables: entries in slots, found by namespace and key, listed newest
//! first, and their vectors in one contiguous mirror.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::mirror::VectorMirror;
use crate::{Item, Namespace, StoreError, Timestamp};

/// An item's identity: its slot, its `.`-joined namespace and its key. Cheap to clone;
/// ordered by the joined namespace, then the key (the order ties go in), hashed by slot.
#[derive(Debug, Clone)]
pub(super) struct Owner(Arc<OwnerKey>);

#[derive(Debug)]
struct OwnerKey {
    joined: String,
    key: String,
    slot: usize,
}

impl Owner {
    pub(super) fn slot(&self) -> usize {
        self.0.slot
    }

    /// Whether the item lives under the namespace whose joined form is `prefix`.
    pub(super) fn under(&self, prefix: &str) -> bool {
        crate::namespace::joined_under(&self.0.joined, prefix)
    }
}

impl Ord for Owner {
    fn cmp(&self, other: &Self) -> Ordering {
        (&self.0.joined, &self.0.key, self.0.slot).cmp(&(
            &other.0.joined,
            &other.0.key,
            other.0.slot,
        ))
    }
}

impl PartialOrd for Owner {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Owner {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Owner {}

impl Hash for Owner {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.slot.hash(state);
    }
}

/// One stored item.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) owner: Owner,
    pub(super) namespace: Namespace,
    pub(super) value: Arc<Map<String, Value>>,
    pub(super) created_at: Timestamp,
    pub(super) updated_at: Timestamp,
    pub(super) ttl: Option<Duration>,
    pub(super) expires_at: Option<Timestamp>,
}

impl Entry {
    pub(super) fn live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    pub(super) fn item(&self) -> Item {
        Item {
            namespace: self.namespace.clone(),
            key: self.owner.0.key.clone(),
            value: (*self.value).clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// Every item of a memory store.
#[derive(Debug, Default)]
pub(super) struct Items {
    /// Slot per namespace and key, in order (for prefixes and listings).
    pub(super) tree: BTreeMap<Namespace, BTreeMap<String, usize>>,
    /// The same slots hashed, for reading one item: a lookup in a tree of thousands of
    /// keys costs a few hundred nanoseconds of comparisons, a hashed one a fraction.
    hashed: HashMap<Namespace, HashMap<String, usize>>,
    slots: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// Newest-updated first; ties by joined namespace, then key.
    pub(super) newest: BTreeSet<(Reverse<Timestamp>, Owner)>,
    /// The items' vectors, when the store has an index.
    pub(super) mirror: Option<VectorMirror<Owner>>,
    /// How many entries have a TTL (a read that refreshes needs the write lock only then).
    pub(super) with_ttl: usize,
}

/// What a put writes.
pub(super) struct NewValue<'a> {
    pub(super) value: Map<String, Value>,
    pub(super) vectors: &'a [Vec<f32>],
    pub(super) ttl: Option<Duration>,
}

impl Items {
    /// Empty, with a mirror of `dims`-long vectors when there is an index.
    pub(super) fn new(dims: Option<usize>) -> Self {
        Self {
            mirror: dims.map(VectorMirror::new),
            ..Self::default()
        }
    }

    /// How many entries, expired ones not yet swept included.
    pub(super) fn len(&self) -> usize {
        self.newest.len()
    }

    pub(super) fn find(&self, namespace: &Namespace, key: &str) -> Option<usize> {
        self.hashed.get(namespace)?.get(key).copied()
    }

    pub(super) fn entry(&self, slot: usize) -> Option<&Entry> {
        self.slots.get(slot)?.as_ref()
    }

    /// The live entry at `namespace`/`key`.
    pub(super) fn live(&self, namespace: &Namespace, key: &str, now: Timestamp) -> Option<&Entry> {
        self.find(namespace, key)
            .and_then(|slot| self.entry(slot))
            .filter(|e| e.live(now))
    }

    /// Restarts the TTL of the entry in `slot`, if it has one.
    pub(super) fn refresh(&mut self, slot: usize, now: Timestamp) {
        if let Some(e) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            if let Some(ttl) = e.ttl {
                e.expires_at = Some(now.plus(ttl));
            }
        }
    }

    /// Writes `new` at `namespace`/`key`.
    pub(super) fn put(
        &mut self,
        namespace: Namespace,
        key: String,
        new: NewValue<'_>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let existing = self.find(&namespace, &key);
        let owner = match existing.and_then(|slot| self.entry(slot)) {
            Some(e) => e.owner.clone(),
            None => Owner(Arc::new(OwnerKey {
                joined: namespace.to_string(),
                key,
                slot: self.free.last().copied().unwrap_or(self.slots.len()),
            })),
        };
        if let Some(mirror) = &mut self.mirror {
            mirror.set(owner.clone(), new.vectors)?;
        }
        let slot = owner.slot();
        let created_at = match self.slots.get_mut(slot).and_then(Option::take) {
            Some(old) => {
                let created_at = if old.live(now) { old.created_at } else { now };
                self.with_ttl -= usize::from(old.ttl.is_some());
                self.newest.remove(&(Reverse(old.updated_at), old.owner));
                created_at
            }
            None => {
                if self.free.last() == Some(&slot) {
                    self.free.pop();
                } else {
                    self.slots.push(None);
                }
                let keys = match self.tree.get_mut(&namespace) {
                    Some(keys) => keys,
                    None => self.tree.entry(namespace.clone()).or_default(),
                };
                keys.insert(owner.0.key.clone(), slot);
                let hashed = match self.hashed.get_mut(&namespace) {
                    Some(keys) => keys,
                    None => self.hashed.entry(namespace.clone()).or_default(),
                };
                hashed.insert(owner.0.key.clone(), slot);
                now
            }
        };
        self.with_ttl += usize::from(new.ttl.is_some());
        self.newest.insert((Reverse(now), owner.clone()));
        self.slots[slot] = Some(Entry {
            owner,
            namespace,
            value: Arc::new(new.value),
            created_at,
            updated_at: now,
            ttl: new.ttl,
            expires_at: new.ttl.map(|d| now.plus(d)),
        });
        Ok(())
    }

    /// Deletes the entry at `namespace`/`key`, if any.
    pub(super) fn delete(&mut self, namespace: &Namespace, key: &str) {
        if let Some(slot) = self.find(namespace, key) {
            self.remove(slot);
        }
    }

    fn remove(&mut self, slot: usize) {
        let Some(e) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        if let Some(mirror) = &mut self.mirror {
            mirror.remove(&e.owner);
        }
        if let Some(keys) = self.tree.get_mut(&e.namespace) {
            keys.remove(&e.owner.0.key);
            if keys.is_empty() {
                self.tree.remove(&e.namespace);
            }
        }
        if let Some(keys) = self.hashed.get_mut(&e.namespace) {
            keys.remove(&e.owner.0.key);
            if keys.is_empty() {
                self.hashed.remove(&e.namespace);
            }
        }
        self.with_ttl -= usize::from(e.ttl.is_some());
        self.newest.remove(&(Reverse(e.updated_at), e.owner));
        self.free.push(slot);
    }

    /// Deletes every expired entry; returns how many.
    pub(super) fn sweep(&mut self, now: Timestamp) -> u64 {
        let expired: Vec<usize> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, e)| e.as_ref().is_some_and(|e| !e.live(now)))
            .map(|(slot, _)| slot)
            .collect();
        for &slot in &expired {
            self.remove(slot);
        }
        expired.len() as u64
    }
}
