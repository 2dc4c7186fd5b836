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
    /// Shared by every item of the namespace.
    joined: Arc<str>,
    /// Shared with the namespace's key table.
    key: Arc<str>,
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
    /// The owner's key, here too so that a get reads it without a hop through the owner.
    key: Arc<str>,
    pub(super) value: Map<String, Value>,
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
            key: self.key.to_string(),
            value: self.value.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// The items of one namespace: its joined form (shared by their owners) and their slots by
/// key. Unordered: every page is sorted by score, time or owner, never by this table.
#[derive(Debug)]
pub(super) struct Space {
    /// The namespace its entries share (the caller's copy of a put is dropped).
    namespace: Namespace,
    joined: Arc<str>,
    keys: HashMap<Arc<str>, usize>,
}

impl Space {
    /// The slots of the namespace's entries, expired ones not yet swept included.
    pub(super) fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.keys.values().copied()
    }

    /// How many entries.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Every item of a memory store.
#[derive(Debug, Default)]
pub(super) struct Items {
    /// Each namespace holding an entry, in order (for prefixes and listings), with its
    /// place in `spaces`.
    pub(super) tree: BTreeMap<Namespace, usize>,
    /// The same places hashed, for reaching one item: a lookup in a tree costs a few
    /// hundred nanoseconds of comparisons, a hashed one a fraction.
    hashed: HashMap<Namespace, usize>,
    /// The namespaces' tables; a place freed by a namespace's last delete is reused.
    spaces: Vec<Option<Space>>,
    free_spaces: Vec<usize>,
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
        self.space(*self.hashed.get(namespace)?)?
            .keys
            .get(key)
            .copied()
    }

    /// The namespace table in place `at` (from `tree`).
    pub(super) fn space(&self, at: usize) -> Option<&Space> {
        self.spaces.get(at)?.as_ref()
    }

    /// The place of `namespace`'s table, made empty first if it has none.
    fn space_of(&mut self, namespace: &Namespace) -> usize {
        if let Some(&at) = self.hashed.get(namespace) {
            return at;
        }
        let space = Space {
            namespace: namespace.clone(),
            joined: Arc::from(namespace.to_string()),
            keys: HashMap::new(),
        };
        let at = match self.free_spaces.pop() {
            Some(at) => {
                self.spaces[at] = Some(space);
                at
            }
            None => {
                self.spaces.push(Some(space));
                self.spaces.len() - 1
            }
        };
        self.hashed.insert(namespace.clone(), at);
        self.tree.insert(namespace.clone(), at);
        at
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
        if let Some(mirror) = &self.mirror {
            // Checked before anything changes, so a failed put leaves no trace.
            if let Some(v) = new.vectors.iter().find(|v| v.len() != mirror.dims()) {
                let (dims, got) = (mirror.dims(), v.len());
                return Err(crate::EmbedError::Dims { dims, got }.into());
            }
        }
        let existing = self.find(&namespace, &key);
        let (owner, space) = match existing.and_then(|slot| self.entry(slot)) {
            Some(e) => (e.owner.clone(), None),
            None => {
                let at = self.space_of(&namespace);
                (self.new_owner(at, &namespace, key), Some(at))
            }
        };
        if let Some(mirror) = &mut self.mirror {
            mirror.set(owner.clone(), new.vectors)?;
        }
        let slot = owner.slot();
        let (namespace, created_at) = match self.slots.get_mut(slot).and_then(Option::take) {
            Some(old) => {
                let created_at = if old.live(now) { old.created_at } else { now };
                self.with_ttl -= usize::from(old.ttl.is_some());
                self.newest.remove(&(Reverse(old.updated_at), old.owner));
                (old.namespace, created_at)
            }
            None => {
                if self.free.last() == Some(&slot) {
                    self.free.pop();
                } else {
                    self.slots.push(None);
                }
                match space.and_then(|at| self.spaces.get_mut(at)?.as_mut()) {
                    Some(space) => {
                        space.keys.insert(owner.0.key.clone(), slot);
                        (space.namespace.clone(), now)
                    }
                    None => (namespace, now),
                }
            }
        };
        self.with_ttl += usize::from(new.ttl.is_some());
        self.newest.insert((Reverse(now), owner.clone()));
        self.slots[slot] = Some(Entry {
            key: owner.0.key.clone(),
            owner,
            namespace,
            value: new.value,
            created_at,
            updated_at: now,
            ttl: new.ttl,
            expires_at: new.ttl.map(|d| now.plus(d)),
        });
        Ok(())
    }

    /// The owner of a new entry at `namespace`/`key`, in the next free slot; `at` is the
    /// place of the namespace's table.
    fn new_owner(&self, at: usize, namespace: &Namespace, key: String) -> Owner {
        let joined = match self.space(at) {
            Some(space) => space.joined.clone(),
            None => Arc::from(namespace.to_string()),
        };
        Owner(Arc::new(OwnerKey {
            joined,
            key: Arc::from(key),
            slot: self.free.last().copied().unwrap_or(self.slots.len()),
        }))
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
        if let Some(&at) = self.hashed.get(&e.namespace) {
            let emptied = self
                .spaces
                .get_mut(at)
                .and_then(Option::as_mut)
                .is_some_and(|space| {
                    space.keys.remove(&*e.owner.0.key);
                    space.keys.is_empty()
                });
            if emptied {
                self.spaces[at] = None;
                self.free_spaces.push(at);
                self.hashed.remove(&e.namespace);
                self.tree.remove(&e.namespace);
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
