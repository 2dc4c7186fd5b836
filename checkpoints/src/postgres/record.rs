//! A checkpoint's record of its field values: references to content-addressed values, as
//! what its put wrote (`wrote`, a delta against the parent) and, on some checkpoints, the
//! whole state (`base`). Both are JSON text in the checkpoint row.

use std::collections::{BTreeMap, BTreeSet};

use crate::envelope::{push_hex, seal, CODEC_JSON};
use crate::{CheckpointError, CheckpointId, FieldPart, FieldWrite};

use super::sql::bad_record;

/// One stored part of a field: a whole value or appended items, by the blake3 hash of its
/// bytes. Text form: `w:<64 hex digits>` or `t:<64 hex digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartRef {
    pub(crate) whole: bool,
    pub(crate) hash: [u8; 32],
}

impl PartRef {
    /// Append the text form, quoted as a JSON string (it holds nothing to escape).
    fn push_json(&self, out: &mut String) {
        out.push('"');
        out.push(if self.whole { 'w' } else { 't' });
        out.push(':');
        push_hex(out, &self.hash);
        out.push('"');
    }

    fn parse(text: &str) -> Option<PartRef> {
        let (kind, digits) = text.split_once(':')?;
        let whole = match kind {
            "w" => true,
            "t" => false,
            _ => return None,
        };
        if digits.len() != 64 {
            return None;
        }
        let mut hash = [0u8; 32];
        for (i, byte) in hash.iter_mut().enumerate() {
            *byte = u8::from_str_radix(digits.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(PartRef { whole, hash })
    }
}

/// What one put wrote, in the order given: (field, part).
pub(crate) type Wrote = Vec<(String, PartRef)>;

/// A whole state: each field's parts, oldest first.
pub(crate) type Base = BTreeMap<String, Vec<PartRef>>;

/// Sealed values to store: (blake3 of the payload, envelope).
pub(crate) type Sealed = Vec<([u8; 32], Vec<u8>)>;

/// The writes of a put as references, and the sealed values to store (hash, envelope),
/// each once.
pub(crate) fn seal_writes(
    writes: &[FieldWrite],
    max_value_bytes: usize,
) -> Result<(Wrote, Sealed), CheckpointError> {
    let mut wrote = Vec::with_capacity(writes.len());
    let mut values = Vec::with_capacity(writes.len());
    let mut seen = BTreeSet::new();
    for w in writes {
        let (whole, bytes) = match &w.part {
            FieldPart::Whole(b) => (true, b),
            FieldPart::Tail(b) => (false, b),
        };
        if bytes.len() > max_value_bytes {
            return Err(CheckpointError::BlobTooLarge {
                size: bytes.len(),
                limit: max_value_bytes,
            });
        }
        let (envelope, hash) = seal(CODEC_JSON, bytes);
        if seen.insert(hash) {
            values.push((hash, envelope));
        }
        wrote.push((w.field.clone(), PartRef { whole, hash }));
    }
    Ok((wrote, values))
}

/// How many parts of a state one row of a load's walk may stand for: a branch's next base
/// record is due `full_every` checkpoints after its last one, or later for a big state, one
/// checkpoint per this many of its parts (decision 0059).
const PARTS_PER_WALKED_ROW: usize = 16;

/// Whether a checkpoint `since` records after its branch's last base record, with the whole
/// state `state`, gets a base record: writing one costs a reference per part, so for a big
/// state they are spaced out in proportion, and a load walks no more rows than the state
/// has parts divided by [`PARTS_PER_WALKED_ROW`] (or `full_every`, if more).
pub(crate) fn base_due(since: i32, state: &Base, full_every: u32) -> bool {
    let parts: usize = state.values().map(Vec::len).sum();
    let every =
        (parts / PARTS_PER_WALKED_ROW).max(usize::try_from(full_every).unwrap_or(usize::MAX));
    usize::try_from(since).is_ok_and(|s| s >= every)
}

/// `base` moved forward by one put's writes: a whole part replaces a field, a tail appends.
pub(crate) fn apply(base: &mut Base, wrote: &Wrote) {
    for (field, part) in wrote {
        let parts = base.entry(field.clone()).or_default();
        if part.whole {
            parts.clear();
        }
        parts.push(*part);
    }
}

/// Every hash a record refers to, each once (the row's `refs`, which garbage collection
/// reads).
pub(crate) fn refs(wrote: &Wrote, base: Option<&Base>) -> Vec<Vec<u8>> {
    let mut all: BTreeSet<[u8; 32]> = wrote.iter().map(|(_, p)| p.hash).collect();
    if let Some(base) = base {
        all.extend(base.values().flatten().map(|p| p.hash));
    }
    all.into_iter().map(|h| h.to_vec()).collect()
}

pub(crate) fn wrote_text(wrote: &Wrote) -> String {
    let mut out = String::with_capacity(2 + wrote.len() * 80);
    out.push('[');
    for (i, (field, part)) in wrote.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        push_json_string(&mut out, field);
        out.push(',');
        part.push_json(&mut out);
        out.push(']');
    }
    out.push(']');
    out
}

pub(crate) fn base_text(base: &Base) -> String {
    let parts: usize = base.values().map(Vec::len).sum();
    let mut out = String::with_capacity(2 + base.len() * 16 + parts * 70);
    out.push('{');
    for (i, (field, refs)) in base.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, field);
        out.push_str(":[");
        for (j, part) in refs.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            part.push_json(&mut out);
        }
        out.push(']');
    }
    out.push('}');
    out
}

/// Append `text` as a JSON string, escaped as serde_json escapes it.
fn push_json_string(out: &mut String, text: &str) {
    match serde_json::to_string(text) {
        Ok(quoted) => out.push_str(&quoted),
        // Serializing a `str` cannot fail; keep the text valid JSON regardless.
        Err(_) => out.push_str("\"\""),
    }
}

/// Decode a `wrote` column.
pub(crate) fn parse_wrote(
    text: &str,
    thread: &str,
    id: CheckpointId,
) -> Result<Wrote, CheckpointError> {
    let bad = |d: &str| bad_record(thread, id, "sg_checkpoints.wrote", d);
    let items: Vec<(String, String)> =
        serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    items
        .into_iter()
        .map(|(f, p)| match PartRef::parse(&p) {
            Some(p) => Ok((f, p)),
            None => Err(bad(&format!("bad part reference {p:?}"))),
        })
        .collect()
}

/// Decode a `base` column.
pub(crate) fn parse_base(
    text: &str,
    thread: &str,
    id: CheckpointId,
) -> Result<Base, CheckpointError> {
    let bad = |d: &str| bad_record(thread, id, "sg_checkpoints.base", d);
    let items: BTreeMap<String, Vec<String>> =
        serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    items
        .into_iter()
        .map(|(f, parts)| {
            let parts = parts
                .iter()
                .map(|p| PartRef::parse(p).ok_or_else(|| bad(&format!("bad part reference {p:?}"))))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((f, parts))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_their_text() -> Result<(), CheckpointError> {
        let writes = vec![
            FieldWrite {
                field: "log".to_owned(),
                part: FieldPart::Tail(b"[1]".to_vec()),
            },
            FieldWrite {
                field: "n".to_owned(),
                part: FieldPart::Whole(b"1".to_vec()),
            },
        ];
        let (wrote, values) = seal_writes(&writes, 1 << 20)?;
        assert_eq!(values.len(), 2);
        let id = CheckpointId::from_u128(1);
        assert_eq!(parse_wrote(&wrote_text(&wrote), "t", id)?, wrote);
        let mut base = Base::new();
        apply(&mut base, &wrote);
        apply(&mut base, &wrote);
        assert_eq!(base["log"].len(), 2, "a tail appends");
        assert_eq!(base["n"].len(), 1, "a whole value replaces");
        assert_eq!(parse_base(&base_text(&base), "t", id)?, base);
        assert_eq!(refs(&wrote, Some(&base)).len(), 2);
        Ok(())
    }

    #[test]
    fn record_text_is_the_json_serde_writes() -> Result<(), CheckpointError> {
        let writes: Vec<FieldWrite> = ["log", "quote\"and\\slash", "ünï\n"]
            .iter()
            .map(|f| FieldWrite {
                field: (*f).to_owned(),
                part: FieldPart::Tail(f.as_bytes().to_vec()),
            })
            .collect();
        let (wrote, _) = seal_writes(&writes, 1 << 20)?;
        let text = |p: &PartRef| {
            let kind = if p.whole { "w" } else { "t" };
            format!("{kind}:{}", crate::envelope::hex(&p.hash))
        };
        let pairs: Vec<serde_json::Value> = wrote
            .iter()
            .map(|(f, p)| serde_json::json!([f, text(p)]))
            .collect();
        assert_eq!(
            wrote_text(&wrote),
            serde_json::Value::from(pairs).to_string()
        );
        let mut base = Base::new();
        apply(&mut base, &wrote);
        apply(&mut base, &wrote);
        let map: serde_json::Map<String, serde_json::Value> = base
            .iter()
            .map(|(f, ps)| (f.clone(), ps.iter().map(text).collect::<Vec<_>>().into()))
            .collect();
        assert_eq!(base_text(&base), serde_json::Value::Object(map).to_string());
        assert_eq!(base_text(&Base::new()), "{}");
        assert_eq!(wrote_text(&Wrote::new()), "[]");
        Ok(())
    }

    #[test]
    fn a_base_is_due_every_full_every_records_or_one_per_sixteen_parts_of_a_big_state() {
        let part = PartRef {
            whole: false,
            hash: [0; 32],
        };
        let state = |parts: usize| Base::from([("log".to_owned(), vec![part; parts])]);
        assert!(!base_due(15, &state(10), 16));
        assert!(base_due(16, &state(10), 16));
        assert!(!base_due(16, &state(1000), 16), "1,000 parts: every 62");
        assert!(!base_due(61, &state(1000), 16));
        assert!(base_due(62, &state(1000), 16));
        assert!(base_due(16, &Base::new(), 16));
        assert!(!base_due(-1, &Base::new(), 16));
    }

    #[test]
    fn a_damaged_record_is_an_integrity_error() {
        let id = CheckpointId::from_u128(1);
        for text in ["", "[[\"f\",\"x:00\"]]", "{}"] {
            assert!(matches!(
                parse_wrote(text, "t", id),
                Err(CheckpointError::Integrity { .. })
            ));
        }
    }

    #[test]
    fn a_value_over_the_cap_is_refused() {
        let writes = vec![FieldWrite {
            field: "big".to_owned(),
            part: FieldPart::Whole(vec![b'1'; 10]),
        }];
        assert!(matches!(
            seal_writes(&writes, 9),
            Err(CheckpointError::BlobTooLarge { size: 10, limit: 9 })
        ));
    }
}
