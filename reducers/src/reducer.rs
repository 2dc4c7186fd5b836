//! The [`Reducer`] trait: how the writes of one step merge into a field.

use serde::{de::DeserializeOwned, Serialize};

use crate::{ListValue, ReduceError};

/// What a reducer did to a field's value in one step.
///
/// The engine uses it to bump the field's version and to decide what a checkpoint stores: an
/// [`Change::Appended`] field stores only the items from `from` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    /// The value is the same as before the step.
    Unchanged,
    /// The value changed in some way other than appending.
    Replaced,
    /// Items were only appended; the items before index `from` are untouched.
    Appended {
        /// Length of the list before the step.
        from: usize,
    },
}

impl Change {
    /// Whether the value changed at all.
    pub fn is_changed(self) -> bool {
        !matches!(self, Change::Unchanged)
    }

    /// Combine two successive changes of the same field into the change of both.
    pub fn then(self, next: Change) -> Change {
        match (self, next) {
            (Change::Unchanged, c) | (c, Change::Unchanged) => c,
            (Change::Appended { from: a }, Change::Appended { from: b }) => {
                Change::Appended { from: a.min(b) }
            }
            _ => Change::Replaced,
        }
    }
}

/// Context of one reduction: lets reducers mint deterministic ids.
#[derive(Debug, Clone)]
pub struct ReduceCtx {
    step: i64,
    next_id: u64,
    input: bool,
}

impl ReduceCtx {
    /// A context for the writes of superstep `step`.
    pub fn new(step: i64) -> Self {
        ReduceCtx {
            step,
            next_id: 0,
            input: false,
        }
    }

    /// A context for writes given as run input before superstep `step` (a command's
    /// update): its ids never collide with those the step itself mints.
    pub fn for_input(step: i64) -> Self {
        ReduceCtx {
            step,
            next_id: 0,
            input: true,
        }
    }

    /// The superstep whose writes are being reduced.
    pub fn step(&self) -> i64 {
        self.step
    }

    /// A new id, unique within one branch of a thread's history and the same on every replay
    /// of the same step (`s<step>-<n>`, or `s<step>-in<n>` for run input).
    pub fn new_id(&mut self) -> String {
        let id = if self.input {
            format!("s{}-in{}", self.step, self.next_id)
        } else {
            format!("s{}-{}", self.step, self.next_id)
        };
        self.next_id += 1;
        id
    }
}

/// How a state field merges the writes of one superstep.
///
/// A reducer is a type, not a value: the engine calls [`Reducer::reduce`] once per step with
/// every write made to the field in that step, in the step's deterministic task order. A field
/// no task wrote is not passed to its reducer at all.
///
/// The storage hooks [`Reducer::encode`] and [`Reducer::decode`] define the field's stored
/// form. Their defaults store the whole value as JSON; an append-shaped reducer overrides them
/// so that a checkpoint holds only the appended items and a loaded value is the concatenation
/// of its stored parts.
pub trait Reducer {
    /// The field's value type.
    type Value: Serialize + DeserializeOwned + Clone + Default + Send + Sync + 'static;
    /// What one write to the field carries.
    type Update: Serialize + DeserializeOwned + Clone + Send + Sync + 'static;

    /// Merge `writes` (non-empty, in task order) into `value`.
    ///
    /// # Errors
    /// A [`ReduceError`] names what was wrong (a conflict, an unknown id, …). On error the
    /// value may be partly updated: the engine discards the whole step's state.
    fn reduce(
        value: &mut Self::Value,
        writes: Vec<Self::Update>,
        ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError>;

    /// Replace `value` with `new`, bypassing [`Reducer::reduce`]: what an overwrite (a
    /// write that replaces a field's value whatever its reducer) does. The default assigns
    /// `new`; a reducer whose values carry invariants its `reduce` keeps (ids, for
    /// [`AddMessages`](crate::AddMessages)) overrides it to keep them. The engine stores the
    /// field whole after an overwrite ([`Change::Replaced`]).
    ///
    /// ```
    /// use stategraph_reducers::{Append, ReduceCtx, Reducer};
    ///
    /// let mut log = vec![1, 2, 3];
    /// Append::<Vec<i32>>::overwrite(&mut log, vec![9], &mut ReduceCtx::new(4))?;
    /// assert_eq!(log, [9]);
    /// # Ok::<(), stategraph_reducers::ReduceError>(())
    /// ```
    ///
    /// # Errors
    /// The default never fails; an override may refuse a value it cannot hold.
    fn overwrite(
        value: &mut Self::Value,
        new: Self::Value,
        ctx: &mut ReduceCtx,
    ) -> Result<(), ReduceError> {
        let _ = ctx;
        *value = new;
        Ok(())
    }

    /// The bytes a checkpoint stores for `value` after `change`.
    ///
    /// # Errors
    /// Fails if the value cannot be serialized as JSON.
    fn encode(value: &Self::Value, change: Change) -> Result<Stored, serde_json::Error> {
        let _ = change;
        Ok(Stored::Whole(serde_json::to_vec(value)?))
    }

    /// Rebuild a value from the parts a saver returns: one [`Stored::Whole`] part, optionally
    /// followed by [`Stored::Tail`] parts for append-shaped reducers.
    ///
    /// # Errors
    /// Fails if a part is not valid JSON for the value type, or if the parts do not fit the
    /// reducer's stored form.
    fn decode(parts: &[StoredRef<'_>]) -> Result<Self::Value, serde_json::Error> {
        match parts {
            [StoredRef::Whole(bytes)] => serde_json::from_slice(bytes),
            _ => Err(serde::de::Error::custom(
                "expected exactly one whole value for a non-append field",
            )),
        }
    }

    /// Append stored tail parts to `value` (the items a later step appended), without
    /// decoding the items already in it. Only append-shaped reducers have tails.
    ///
    /// # Errors
    /// Fails if a part is not a tail of the value's item type, or if the reducer stores
    /// whole values only.
    fn extend(value: &mut Self::Value, tails: &[StoredRef<'_>]) -> Result<(), serde_json::Error> {
        let _ = (value, tails);
        Err(serde::de::Error::custom(
            "this field stores whole values only",
        ))
    }
}

/// The stored form of a field value after a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// The whole value, as JSON.
    Whole(Vec<u8>),
    /// Only the items appended in this step, as a JSON array; they follow the earlier parts.
    Tail(Vec<u8>),
}

/// A borrowed stored part, as handed to [`Reducer::decode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredRef<'a> {
    /// A whole value.
    Whole(&'a [u8]),
    /// Appended items.
    Tail(&'a [u8]),
}

impl Stored {
    /// Borrow this part.
    pub fn as_ref(&self) -> StoredRef<'_> {
        match self {
            Stored::Whole(b) => StoredRef::Whole(b),
            Stored::Tail(b) => StoredRef::Tail(b),
        }
    }
}

/// The items of `value` from `from` on, serialized as a sequence.
struct TailOf<'a, V>(&'a V, usize);

impl<V: ListValue> Serialize for TailOf<'_, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.items().skip(self.1))
    }
}

/// The stored form of a list after `change`: only the items from index `from` on for an
/// append (helper for append-shaped reducers; `Vec<T>` or [`List<T>`](crate::List)).
///
/// # Errors
/// Fails if an item cannot be serialized.
pub fn encode_list<V: ListValue>(value: &V, change: Change) -> Result<Stored, serde_json::Error> {
    match change {
        Change::Appended { from } if from <= value.len() => {
            Ok(Stored::Tail(serde_json::to_vec(&TailOf(value, from))?))
        }
        _ => Ok(Stored::Whole(serde_json::to_vec(value)?)),
    }
}

/// Append tail parts to a list (helper for append-shaped reducers).
///
/// # Errors
/// Fails if a part is a whole value or not a JSON array of the item type.
pub fn extend_list<V: ListValue>(
    value: &mut V,
    tails: &[StoredRef<'_>],
) -> Result<(), serde_json::Error> {
    for part in tails {
        match part {
            StoredRef::Tail(bytes) => value.append_items(serde_json::from_slice(bytes)?),
            StoredRef::Whole(_) => {
                return Err(serde::de::Error::custom(
                    "a whole part cannot extend a list",
                ))
            }
        }
    }
    Ok(())
}

/// Decode a list from a whole part followed by tail parts (helper for append-shaped reducers).
///
/// A list may also start with a tail part (an empty prefix).
///
/// # Errors
/// Fails if a part is not a JSON array of the item type.
pub fn decode_list<V: ListValue>(parts: &[StoredRef<'_>]) -> Result<V, serde_json::Error> {
    let mut out: Vec<V::Item> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        match part {
            StoredRef::Whole(bytes) => {
                if i != 0 {
                    return Err(serde::de::Error::custom("a whole part may only come first"));
                }
                out = serde_json::from_slice(bytes)?;
            }
            StoredRef::Tail(bytes) => {
                let more: Vec<V::Item> = serde_json::from_slice(bytes)?;
                out.extend(more);
            }
        }
    }
    Ok(V::from_items(out))
}
