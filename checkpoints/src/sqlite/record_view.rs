//! A checkpoint record read in place, for the inspector's whole-file check: the record's
//! bytes are decoded borrowing from the row (no string or byte copies), its field names are
//! interned once per scan, and only what a load's outcome depends on is kept: where each
//! field's value lives, whether each small value kept in the record is JSON, and whether each
//! pending send's argument is JSON. The versions and seen-versions are decoded (so a record a
//! load would refuse is refused here too) and dropped: no load outcome depends on them.
//!
//! The borrowed shape mirrors [`StoredRecord`](super::record::StoredRecord) field for field
//! (bincode's serde encoding has no field names: the order and the types are the format).

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

use super::record::{bincode_config, decode_record, DECODE_LIMIT};

/// Field names seen by one scan, each stored once and named by a small number.
#[derive(Debug, Default)]
pub(crate) struct Names {
    ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl Names {
    /// The number of `name`, given it at its first sight.
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    /// The name numbered `id` (empty for a number this table never gave).
    pub(crate) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |n| n)
    }
}

/// Where one field's value lives, as the check needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldRef {
    /// A small value in the record, which is JSON.
    Inline,
    /// A small value in the record that is not JSON: why.
    InlineNotJson(Arc<str>),
    /// A whole value in `sg_blobs`, by row id.
    Blob(i64),
    /// The first `parts` parts of log `log`.
    Log { log: i64, parts: i64 },
}

/// What one row's record says, as the check keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowFields {
    /// A whole record (else the change since the parent row's).
    pub(crate) full: bool,
    /// The fields it sets, by name number.
    pub(crate) fields: Vec<(u32, FieldRef)>,
    /// Why a pending send's argument is not JSON (the first such send), if one is not.
    pub(crate) bad_send: Option<String>,
}

/// A checkpoint's rebuilt field references, by name number (not in name order: a check
/// that needs the first field by name compares the names).
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields(Vec<(u32, FieldRef)>);

impl Fields {
    /// Apply a row's record on top of these (a whole record replaces them).
    pub(crate) fn apply(&mut self, row: RowFields) {
        if row.full {
            self.0.clear();
        }
        for (id, r) in row.fields {
            match self.0.binary_search_by_key(&id, |(k, _)| *k) {
                Ok(i) => self.0[i].1 = r,
                Err(i) => self.0.insert(i, (id, r)),
            }
        }
    }

    /// The fields, by name number.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(u32, FieldRef)> {
        self.0.iter()
    }
}

/// A value reference as stored (the variant order is the format's).
#[derive(Deserialize)]
enum BorrowedRef<'a> {
    Blob(i64),
    Log { log: i64, parts: i64 },
    Inline(#[serde(borrow)] &'a [u8]),
}

/// A stored record, borrowing from the row; the parts no outcome depends on are decoded and
/// dropped as they are read.
#[derive(Deserialize)]
struct BorrowedRecord<'a> {
    full: bool,
    _versions: Skip<(&'a str, u64)>,
    _seen: Skip<(&'a str, &'a str, u64)>,
    #[serde(borrow)]
    fields: Vec<(&'a str, BorrowedRef<'a>)>,
    _branches: Skip<&'a str>,
    _barriers: Skip<(&'a str, Skip<&'a str>)>,
    #[serde(borrow)]
    sends: Vec<(&'a str, &'a str)>,
    _interrupt_seen: Skip<(&'a str, u64)>,
    _anchor: Option<u128>,
}

/// A sequence whose elements are decoded (and so checked) one by one, and not kept.
struct Skip<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Skip<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Each<T> {
            type Value = Skip<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip<T>, A::Error> {
                while seq.next_element::<T>()?.is_some() {}
                Ok(Skip(PhantomData))
            }
        }
        d.deserialize_seq(Each(PhantomData))
    }
}

/// Decode a record's payload in place, interning its field names in `names`. An error says
/// what [`decode_record`] says of the same bytes (the two accept the same records).
pub(crate) fn decode_fields(payload: &[u8], names: &mut Names) -> Result<RowFields, String> {
    let config = bincode_config().with_limit::<DECODE_LIMIT>();
    let decoded: Result<(BorrowedRecord<'_>, usize), _> =
        bincode::serde::borrow_decode_from_slice(payload, config);
    let record = match decoded {
        Ok((record, used)) if used == payload.len() => record,
        // The owned decoder's words for what is wrong (this path runs on damage only).
        _ => {
            return Err(match decode_record(payload) {
                Err(e) => e,
                Ok(_) => "the record does not decode".to_owned(),
            })
        }
    };
    let fields = record
        .fields
        .into_iter()
        .map(|(name, r)| {
            let r = match r {
                BorrowedRef::Blob(id) => FieldRef::Blob(id),
                BorrowedRef::Log { log, parts } => FieldRef::Log { log, parts },
                BorrowedRef::Inline(bytes) => match serde_json::from_slice::<IgnoredAny>(bytes) {
                    Ok(_) => FieldRef::Inline,
                    Err(e) => FieldRef::InlineNotJson(e.to_string().into()),
                },
            };
            (names.intern(name), r)
        })
        .collect();
    let bad_send = record
        .sends
        .iter()
        .find_map(|(_, arg)| serde_json::from_str::<IgnoredAny>(arg).err())
        .map(|e| e.to_string());
    Ok(RowFields {
        full: record.full,
        fields,
        bad_send,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::record::{encode_record, StateRecord, ValueRef};

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn record() -> StateRecord {
        let mut r = StateRecord::default();
        let c = Arc::make_mut(&mut r.control);
        c.versions.insert("a".into(), 1);
        c.seen
            .entry("n".into())
            .or_default()
            .insert("branch:to:n".into(), 1);
        c.branches = vec!["branch:to:n".into()];
        c.barriers
            .insert("join".into(), vec!["x".into(), "y".into()]);
        c.sends = vec![("w".into(), "{\"i\":1}".into())];
        c.interrupt_seen.insert("k".into(), 2);
        c.anchor = Some(7);
        r.set_field("zeta", ValueRef::Blob(3));
        r.set_field("alpha", ValueRef::Log { log: 1, parts: 2 });
        r.set_field("mid", ValueRef::Inline(Arc::from(&b"{\"n\":42}"[..])));
        r.set_field("bad", ValueRef::Inline(Arc::from(&b"{nope"[..])));
        r
    }

    #[test]
    fn a_record_read_in_place_names_the_fields_the_owned_decoder_does() -> TestResult {
        let bytes = encode_record(&record().to_whole_record())?;
        let mut names = Names::default();
        let row = decode_fields(&bytes, &mut names)?;
        assert!(row.full);
        assert_eq!(row.bad_send, None);
        let mut fields = Fields::default();
        fields.apply(row);
        let mut got: Vec<(&str, &FieldRef)> =
            fields.iter().map(|(k, r)| (names.name(*k), r)).collect();
        got.sort_by_key(|(n, _)| *n);
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].0, "alpha");
        assert_eq!(got[0].1, &FieldRef::Log { log: 1, parts: 2 });
        assert!(matches!(got[1], ("bad", FieldRef::InlineNotJson(_))));
        assert_eq!(got[2], ("mid", &FieldRef::Inline));
        assert_eq!(got[3], ("zeta", &FieldRef::Blob(3)));
        Ok(())
    }

    #[test]
    fn a_delta_read_in_place_replaces_and_adds_fields() -> TestResult {
        let parent = record();
        let mut child = parent.clone();
        child.set_field("zeta", ValueRef::Blob(9));
        child.set_field("beta", ValueRef::Blob(4));
        Arc::make_mut(&mut child.control).sends = vec![("w".into(), "{oops".into())];
        let delta = child.delta_from(&parent).ok_or("no delta")?;
        let mut names = Names::default();
        let mut fields = Fields::default();
        fields.apply(decode_fields(
            &encode_record(&parent.to_whole_record())?,
            &mut names,
        )?);
        let row = decode_fields(&encode_record(&delta)?, &mut names)?;
        assert!(!row.full);
        assert!(row.bad_send.is_some());
        fields.apply(row);
        let mut got: Vec<(&str, &FieldRef)> =
            fields.iter().map(|(k, r)| (names.name(*k), r)).collect();
        got.sort_by_key(|(n, _)| *n);
        let order: Vec<&str> = got.iter().map(|(n, _)| *n).collect();
        assert_eq!(order, ["alpha", "bad", "beta", "mid", "zeta"]);
        assert_eq!(got[4].1, &FieldRef::Blob(9));
        Ok(())
    }

    #[test]
    fn damaged_bytes_fail_with_the_owned_decoders_words() -> TestResult {
        let mut bytes = encode_record(&record().to_whole_record())?;
        bytes.push(0);
        let mut names = Names::default();
        assert_eq!(
            decode_fields(&bytes, &mut names).err(),
            decode_record(&bytes).err()
        );
        for cut in 1..bytes.len() {
            let short = &bytes[..bytes.len() - 1 - cut];
            let (view, owned) = (decode_fields(short, &mut names), decode_record(short));
            assert_eq!(view.is_ok(), owned.is_ok(), "cut {cut}");
            assert_eq!(view.err(), owned.err(), "cut {cut}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// The in-place decoder accepts exactly the bytes the owned decoder accepts, and
        /// refuses the others with the same words (a verify must not pass a record a load
        /// refuses, nor the reverse).
        #[test]
        fn arbitrary_bytes_decode_in_place_exactly_when_they_decode(
            bytes in prop::collection::vec(any::<u8>(), 0..256),
        ) {
            let mut names = Names::default();
            let view = decode_fields(&bytes, &mut names);
            let owned = decode_record(&bytes);
            prop_assert_eq!(view.is_ok(), owned.is_ok());
            if let (Ok(view), Ok(owned)) = (&view, &owned) {
                prop_assert_eq!(view.full, owned.full);
                prop_assert_eq!(view.fields.len(), owned.fields.len());
            }
            prop_assert_eq!(view.err(), owned.err());
        }
    }
}
