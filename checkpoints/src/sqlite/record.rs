//! The per-checkpoint state record: control state plus a reference per field, stored as a
//! delta against the parent (a whole record every few checkpoints).
//!
//! Three shapes, one per use: a [`StateRecord`] is a checkpoint's whole record in memory
//! (what a load rebuilds and the caches keep); a [`StoredRecord`] is what one
//! `sg_checkpoints.body` holds (the whole record or the change since the parent's), encoded
//! with bincode; a [`ValueRef`] says where one field's value lives. [`StoredControl`] is the
//! control state as records keep it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Control, PendingSend};

/// Where a field's value lives: a row of `sg_blobs`, a range of a log, or the record itself.
///
/// Encoded by variant index (bincode): the order of the variants is part of the file format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ValueRef {
    /// A whole value in `sg_blobs` (by row id).
    Blob(i64),
    /// A list kept as log parts: the first `parts` parts of log `log` (and of its bases).
    Log {
        /// The log's id in `sg_logs`.
        log: i64,
        /// How many parts (counted from the root log's first) make up the value.
        parts: i64,
    },
    /// A small whole value (its JSON) kept in the record itself (format 2; see
    /// [`INLINE_MAX`]). Shared, so copying a record's references copies no bytes.
    Inline(Arc<[u8]>),
}

/// The largest whole value (JSON bytes) a format-2 file keeps in the record instead of
/// `sg_blobs`: below this, a blob's row, its 32-byte key and its entry in the key index cost
/// more than the value, and a step that changes a counter would touch two more pages.
pub(crate) const INLINE_MAX: usize = 64;

/// The control state as a state record keeps it: everything but the field references, with
/// each pending send's argument as JSON text.
///
/// A put moves its checkpoint's [`Control`] in here once (on the caller's side, before the
/// writer sees it); the record of that checkpoint and every retry of its put share it, so the
/// writer never copies a control map.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StoredControl {
    pub(crate) versions: BTreeMap<Arc<str>, u64>,
    pub(crate) seen: BTreeMap<Arc<str>, BTreeMap<Arc<str>, u64>>,
    pub(crate) branches: Vec<String>,
    pub(crate) barriers: BTreeMap<String, Vec<String>>,
    /// Pending sends: node and JSON text of the argument.
    pub(crate) sends: Vec<(String, String)>,
    pub(crate) interrupt_seen: BTreeMap<String, u64>,
    pub(crate) anchor: Option<u128>,
}

impl StoredControl {
    /// Take a checkpoint's control state (its send arguments become JSON text).
    pub(crate) fn from_control(c: Control) -> Result<Self, serde_json::Error> {
        Ok(StoredControl {
            versions: c.versions,
            seen: c.versions_seen,
            branches: c.branches,
            barriers: c.barriers,
            sends: c
                .sends
                .into_iter()
                .map(|s| Ok((s.node, serde_json::to_string(&s.arg)?)))
                .collect::<Result<_, serde_json::Error>>()?,
            interrupt_seen: c.interrupt_seen,
            anchor: c.anchor.map(crate::CheckpointId::as_u128),
        })
    }

    /// The control state.
    pub(crate) fn to_control(&self) -> Result<Control, serde_json::Error> {
        Ok(Control {
            versions: self.versions.clone(),
            versions_seen: self.seen.clone(),
            branches: self.branches.clone(),
            barriers: self.barriers.clone(),
            sends: self
                .sends
                .iter()
                .map(|(node, arg)| {
                    Ok(PendingSend {
                        node: node.clone(),
                        arg: serde_json::from_str(arg)?,
                    })
                })
                .collect::<Result<_, serde_json::Error>>()?,
            interrupt_seen: self.interrupt_seen.clone(),
            anchor: self.anchor.map(crate::CheckpointId::from_u128),
        })
    }
}

/// A checkpoint's whole state record in memory: its control state and where each field's
/// value lives, rebuilt from the nearest whole [`StoredRecord`] and the deltas after it.
///
/// Both parts are cheap to copy: the control part is shared, and field names are shared
/// strings (a child record copies its parent's map of references, not its names).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StateRecord {
    pub(crate) control: Arc<StoredControl>,
    pub(crate) fields: BTreeMap<Arc<str>, ValueRef>,
}

/// What one checkpoint row stores (`sg_checkpoints.body`, bincode): the whole record
/// (`full`), or what changed since the parent row's. The field order is the file format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredRecord {
    pub(crate) full: bool,
    pub(crate) versions: Vec<(Arc<str>, u64)>,
    pub(crate) seen: Vec<(Arc<str>, Arc<str>, u64)>,
    pub(crate) fields: Vec<(Arc<str>, ValueRef)>,
    pub(crate) branches: Vec<String>,
    pub(crate) barriers: Vec<(String, Vec<String>)>,
    pub(crate) sends: Vec<(String, String)>,
    pub(crate) interrupt_seen: Vec<(String, u64)>,
    pub(crate) anchor: Option<u128>,
}

impl StateRecord {
    /// Set field `name` to `r`, sharing the name with the parent's entry when there is one.
    pub(crate) fn set_field(&mut self, name: &str, r: ValueRef) {
        match self.fields.get_mut(name) {
            Some(slot) => *slot = r,
            None => {
                self.fields.insert(Arc::from(name), r);
            }
        }
    }

    /// A stored record holding the parts every row stores whole (branches, barriers, sends,
    /// interrupt acknowledgements, anchor), with the given delta-able parts.
    fn stored_with(
        &self,
        full: bool,
        versions: Vec<(Arc<str>, u64)>,
        seen: Vec<(Arc<str>, Arc<str>, u64)>,
        fields: Vec<(Arc<str>, ValueRef)>,
    ) -> StoredRecord {
        let c = &self.control;
        StoredRecord {
            full,
            versions,
            seen,
            fields,
            branches: c.branches.clone(),
            barriers: c
                .barriers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            sends: c.sends.clone(),
            interrupt_seen: c
                .interrupt_seen
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            anchor: c.anchor,
        }
    }

    /// The whole record, as a row stores it.
    pub(crate) fn to_whole_record(&self) -> StoredRecord {
        let c = &self.control;
        self.stored_with(
            true,
            c.versions.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            c.seen
                .iter()
                .flat_map(|(n, m)| m.iter().map(move |(c, v)| (n.clone(), c.clone(), *v)))
                .collect(),
            self.fields
                .iter()
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect(),
        )
    }

    /// What changed from `parent` to `self`, or `None` if an entry disappeared (then only a
    /// whole record describes `self`). Versions and fields are compared in one ordered pass each;
    /// each node's seen-channels map likewise, after finding the parent's by node.
    pub(crate) fn delta_from(&self, parent: &StateRecord) -> Option<StoredRecord> {
        let (c, pc) = (&self.control, &parent.control);
        let fields = changed(&self.fields, &parent.fields)?;
        let versions = changed(&c.versions, &pc.versions)?;
        let empty = BTreeMap::new();
        let mut seen = Vec::new();
        // A node that disappeared from `seen` is a removal too.
        if pc.seen.keys().any(|n| !c.seen.contains_key(n)) {
            return None;
        }
        for (node, chans) in &c.seen {
            let before = pc.seen.get(node).unwrap_or(&empty);
            for (chan, v) in changed(chans, before)? {
                seen.push((Arc::clone(node), chan, v));
            }
        }
        Some(self.stored_with(false, versions, seen, fields))
    }

    /// Apply a stored record on top of this one (a whole record replaces it).
    pub(crate) fn apply(&mut self, body: StoredRecord) {
        if body.full {
            *self = StateRecord::default();
        }
        let c = Arc::make_mut(&mut self.control);
        c.versions.extend(body.versions);
        for (n, ch, v) in body.seen {
            c.seen.entry(n).or_default().insert(ch, v);
        }
        c.branches = body.branches;
        c.barriers = body.barriers.into_iter().collect();
        c.sends = body.sends;
        c.interrupt_seen = body.interrupt_seen.into_iter().collect();
        c.anchor = body.anchor;
        self.fields.extend(body.fields);
    }
}

/// The entries of `new` that are not in `old` with the same value, in key order; `None` if
/// `old` has a key `new` lacks. Both maps are walked once, side by side.
fn changed<K: Ord + Clone, V: PartialEq + Clone>(
    new: &BTreeMap<K, V>,
    old: &BTreeMap<K, V>,
) -> Option<Vec<(K, V)>> {
    let mut out = Vec::new();
    let mut old_it = old.iter().peekable();
    for (k, v) in new {
        match old_it.peek() {
            // An old key before this one was not matched: `new` lacks it.
            Some((ok, _)) if *ok < k => return None,
            Some((ok, ov)) if *ok == k => {
                if *ov != v {
                    out.push((k.clone(), v.clone()));
                }
                old_it.next();
            }
            _ => out.push((k.clone(), v.clone())),
        }
    }
    if old_it.next().is_some() {
        return None;
    }
    Some(out)
}

/// bincode configuration for engine records.
pub(crate) fn bincode_config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encode a stored record with bincode.
pub(crate) fn encode_record(body: &StoredRecord) -> Result<Vec<u8>, bincode::error::EncodeError> {
    bincode::serde::encode_to_vec(body, bincode_config())
}

/// Most bytes a record's decoding may claim for its strings and lists: a damaged length
/// prefix (the hash only proves the bytes are the ones written, and anyone can write a file)
/// is an error, not an allocation of that many bytes, which would abort the process. Far
/// above any real record (a few kilobytes per hundred fields).
pub(crate) const DECODE_LIMIT: usize = 256 << 20;

/// Decode a stored record, rejecting trailing bytes.
pub(crate) fn decode_record(bytes: &[u8]) -> Result<StoredRecord, String> {
    let config = bincode_config().with_limit::<DECODE_LIMIT>();
    let (body, used): (StoredRecord, usize) =
        bincode::serde::decode_from_slice(bytes, config).map_err(|e| e.to_string())?;
    if used != bytes.len() {
        return Err(format!(
            "{} trailing bytes after the record",
            bytes.len() - used
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn sample_record() -> StateRecord {
        sample()
    }

    fn sample() -> StateRecord {
        let mut f = StateRecord::default();
        let c = Arc::make_mut(&mut f.control);
        c.versions.insert("a".into(), 1);
        c.versions.insert("b".into(), 2);
        c.seen
            .entry("n".into())
            .or_default()
            .insert("branch:to:n".into(), 1);
        c.branches = vec!["branch:to:n".into()];
        c.sends = vec![("w".into(), "{\"i\":1}".into())];
        f.fields.insert("a".into(), ValueRef::Blob(3));
        f.fields
            .insert("b".into(), ValueRef::Log { log: 1, parts: 2 });
        f.fields
            .insert("c".into(), ValueRef::Inline(Arc::from(&b"{\"n\":42}"[..])));
        f
    }

    #[test]
    fn a_record_with_every_kind_of_reference_round_trips() {
        let full = sample();
        let bytes = encode_record(&full.to_whole_record()).unwrap();
        let mut back = StateRecord::default();
        back.apply(decode_record(&bytes).unwrap());
        assert_eq!(back, full);
    }

    #[test]
    fn a_changed_inline_value_is_in_the_delta_and_an_unchanged_one_is_not() {
        let parent = sample();
        let mut child = parent.clone();
        assert!(child.delta_from(&parent).unwrap().fields.is_empty());
        child.set_field("c", ValueRef::Inline(Arc::from(&b"{\"n\":43}"[..])));
        let delta = child.delta_from(&parent).unwrap();
        assert_eq!(
            delta.fields,
            [(
                Arc::from("c"),
                ValueRef::Inline(Arc::from(&b"{\"n\":43}"[..]))
            )]
        );
    }

    #[test]
    fn a_delta_applied_to_the_parent_gives_the_child() {
        let parent = sample();
        let mut child = parent.clone();
        let c = Arc::make_mut(&mut child.control);
        c.versions.insert("b".into(), 5);
        c.seen
            .entry("m".into())
            .or_default()
            .insert("branch:to:m".into(), 4);
        c.branches.clear();
        child.set_field("b", ValueRef::Log { log: 1, parts: 3 });
        let delta = child.delta_from(&parent).ok_or("no delta").unwrap();
        assert_eq!(delta.versions, [(Arc::from("b"), 5)]);
        assert_eq!(delta.fields.len(), 1);
        let mut rebuilt = parent.clone();
        rebuilt.apply(delta);
        assert_eq!(rebuilt, child);
    }

    #[test]
    fn a_removed_entry_forces_a_full_record() {
        let parent = sample();
        let mut child = parent.clone();
        child.fields.remove("a");
        assert!(child.delta_from(&parent).is_none());
        let mut child = parent.clone();
        Arc::make_mut(&mut child.control).versions.remove("a");
        assert!(child.delta_from(&parent).is_none());
        let mut child = parent.clone();
        Arc::make_mut(&mut child.control).seen.clear();
        assert!(child.delta_from(&parent).is_none());
        let mut child = parent.clone();
        if let Some(m) = Arc::make_mut(&mut child.control).seen.get_mut("n") {
            m.clear();
        }
        assert!(child.delta_from(&parent).is_none());
    }

    #[test]
    fn changed_lists_new_and_changed_entries_in_key_order() {
        let old: BTreeMap<&str, u64> = [("b", 1), ("d", 2), ("f", 3)].into();
        let new: BTreeMap<&str, u64> =
            [("a", 9), ("b", 1), ("c", 4), ("d", 5), ("f", 3), ("g", 6)].into();
        assert_eq!(
            changed(&new, &old),
            Some(vec![("a", 9), ("c", 4), ("d", 5), ("g", 6)])
        );
        let missing: BTreeMap<&str, u64> = [("b", 1), ("f", 3)].into();
        assert_eq!(changed(&missing, &old), None);
        let tail_missing: BTreeMap<&str, u64> = [("b", 1), ("d", 2)].into();
        assert_eq!(changed(&tail_missing, &old), None);
        assert_eq!(changed(&old, &old), Some(vec![]));
    }

    #[test]
    fn stored_records_round_trip_and_reject_trailing_bytes() {
        let stored = sample().to_whole_record();
        let mut bytes = encode_record(&stored).unwrap();
        assert_eq!(decode_record(&bytes).unwrap(), stored);
        bytes.push(0);
        assert!(decode_record(&bytes).is_err());
    }
}

#[cfg(test)]
mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Any bytes decode to a record or a typed error, never a panic (reliability R-10's
        /// decoder property, run as a property test; the bytes reached here already passed the
        /// envelope's hash check, which any writer of a file can compute).
        #[test]
        fn arbitrary_bytes_never_panic_the_record_decoder(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_record(&bytes);
        }

        /// A valid record with bytes flipped or cut decodes to an error or to some record, never
        /// a panic.
        #[test]
        fn damaged_records_never_panic(cut in 0usize..8, flip in any::<(usize, u8)>()) {
            let mut bytes = encode_record(&super::tests::sample_record().to_whole_record()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let i = flip.0 % bytes.len().max(1);
            if let Some(b) = bytes.get_mut(i) {
                *b ^= flip.1 | 1;
            }
            bytes.truncate(bytes.len().saturating_sub(cut));
            let _ = decode_record(&bytes);
        }
    }

    #[test]
    fn a_huge_string_length_is_an_error_not_an_allocation() {
        // full = false, one version, whose name claims 2^40 bytes: without a decoding limit
        // that is a 1 TiB allocation, which aborts the process.
        let mut bytes = vec![0u8, 1, 253];
        bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(decode_record(&bytes).is_err());
    }

    #[test]
    fn a_huge_length_prefix_is_an_error() {
        // full = false, then a varint length of u64::MAX for `versions`: an error, not a
        // capacity overflow or an attempt to allocate it.
        let mut bytes = vec![0u8, 253];
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_record(&bytes).is_err());
    }
}
