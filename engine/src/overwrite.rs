//! [`Overwrite`]: a write that replaces a field's value instead of going through its reducer.
//!
//! Every field of a `#[derive(State)]` update has, beside its setter, an `overwrite_<field>`
//! setter taking the field's whole value. In the step it is applied:
//!
//! - the field becomes that value, whatever its reducer (an append list, a messages list, a
//!   `with` function, a last-value field); the reducer's [`overwrite`] hook may normalize it
//!   (messages without ids get ids), and the field is stored whole ([`Change::Replaced`]), so a
//!   field stored as appended tails reads back right;
//! - the plain writes of the same field in the same step are dropped, in any task order;
//! - two overwrites of one field in one step are a [`ReduceError::ConcurrentOverwrite`] (the
//!   run fails with [`RunError::Reduce`](crate::RunError::Reduce), naming the field and the
//!   step; the committed checkpoint is untouched).
//!
//! Later steps reduce as usual, starting from the overwritten value.
//!
//! In JSON (a stored pending write, a server run's input or command update), an overwrite of a
//! field is written `{"field": {"__overwrite__": value}}`, LangGraph's wire form; the form
//! `{"type": "__overwrite__", "value": value}` (LangGraph's serialized `Overwrite` object) is
//! read too.
//!
//! ```
//! use stategraph::reducers::{Change, ReduceCtx};
//! use stategraph::State;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Log {
//!     #[reduce(append)]
//!     lines: Vec<String>,
//! }
//!
//! let mut log = Log { lines: vec!["old".into()] };
//! let writes = vec![
//!     Log::update().lines(vec!["dropped".into()]),
//!     Log::update().overwrite_lines(vec!["fresh".into()]),
//! ];
//! let changes = log.apply(writes, &mut ReduceCtx::new(1)).map_err(|(f, e)| format!("{f:?}: {e}"))?;
//! assert_eq!(log.lines, ["fresh"]);
//! assert_eq!(changes, [(LogField::Lines, Change::Replaced)]);
//!
//! let json = stategraph::serde_json::to_string(&Log::update().overwrite_lines(vec!["x".into()]))?;
//! assert_eq!(json, r#"{"lines":{"__overwrite__":["x"]}}"#);
//! let back: LogUpdate = stategraph::serde_json::from_str(&json)?;
//! assert_eq!(stategraph::serde_json::to_string(&back)?, json);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`overwrite`]: crate::reducers::Reducer::overwrite
//! [`Change::Replaced`]: crate::reducers::Change::Replaced
//! [`ReduceError::ConcurrentOverwrite`]: crate::reducers::ReduceError::ConcurrentOverwrite

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The key of an overwrite's JSON form, `{"__overwrite__": value}`.
pub const OVERWRITE_KEY: &str = "__overwrite__";

/// A field's whole new value, in its JSON form `{"__overwrite__": value}`.
///
/// The generated update types write an overwritten field through it; build an overwrite with
/// the update's `overwrite_<field>` setter (see the [module docs](self)). Reading accepts
/// LangGraph's serialized form `{"type": "__overwrite__", "value": value}` as well.
///
/// ```
/// use stategraph::Overwrite;
///
/// let json = stategraph::serde_json::to_string(&Overwrite(vec![1, 2]))?;
/// assert_eq!(json, r#"{"__overwrite__":[1,2]}"#);
/// let back: Overwrite<Vec<i32>> = stategraph::serde_json::from_str(r#"{"type":"__overwrite__","value":[3]}"#)?;
/// assert_eq!(back, Overwrite(vec![3]));
/// # Ok::<(), stategraph::serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Overwrite<T>(pub T);

impl<T: Serialize> Serialize for Overwrite<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(OVERWRITE_KEY, &self.0)?;
        map.end()
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Overwrite<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match overwritten(Value::deserialize(deserializer)?) {
            Ok(inner) => T::deserialize(inner)
                .map(Overwrite)
                .map_err(D::Error::custom),
            Err(other) => Err(D::Error::custom(format!(
                "expected {{\"{OVERWRITE_KEY}\": value}}, found {other}"
            ))),
        }
    }
}

/// The value inside an overwrite's JSON form, or the JSON back if it is not one.
fn overwritten(value: Value) -> Result<Value, Value> {
    let Value::Object(mut map) = value else {
        return Err(value);
    };
    if map.len() == 1 {
        if let Some(inner) = map.remove(OVERWRITE_KEY) {
            return Ok(inner);
        }
    } else if map.get("type").and_then(Value::as_str) == Some(OVERWRITE_KEY) {
        if let Some(inner) = map.remove("value") {
            return Ok(inner);
        }
    }
    Err(Value::Object(map))
}

/// Support for the code `#[derive(State)]` generates; not a public API.
#[doc(hidden)]
pub mod __private {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{DeserializeOwned, Error as _, Visitor};
    use serde::{Deserialize, Deserializer, Serialize};
    use serde_json::Value;

    use crate::state::Field;

    /// A key of an update's JSON object: a field, or `None` for a key to skip.
    #[derive(Debug)]
    pub struct FieldKey<F>(pub Option<F>);

    impl<'de, F: Field> Deserialize<'de> for FieldKey<F> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_identifier(KeyVisitor(PhantomData))
        }
    }

    struct KeyVisitor<F>(PhantomData<fn() -> F>);

    impl<F: Field> Visitor<'_> for KeyVisitor<F> {
        type Value = FieldKey<F>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a field name")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(FieldKey(F::from_name(v)))
        }

        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
            Ok(FieldKey(std::str::from_utf8(v).ok().and_then(F::from_name)))
        }
    }

    /// One field's write as read from JSON: for its reducer, or an overwrite.
    #[derive(Debug)]
    pub enum FieldWrite<U, V> {
        /// A write the field's reducer merges.
        Reduce(U),
        /// The field's whole new value.
        Overwrite(V),
    }

    impl<'de, U: DeserializeOwned, V: DeserializeOwned> Deserialize<'de> for FieldWrite<U, V> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            match super::overwritten(Value::deserialize(deserializer)?) {
                Ok(inner) => V::deserialize(inner).map(FieldWrite::Overwrite),
                Err(plain) => U::deserialize(plain).map(FieldWrite::Reduce),
            }
            .map_err(D::Error::custom)
        }
    }

    /// Shows a value as its JSON (an overwrite's value need not implement `Debug`).
    pub struct JsonDebug<'a, T>(pub &'a T);

    impl<T: Serialize> fmt::Debug for JsonDebug<'_, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match serde_json::to_string(self.0) {
                Ok(json) => f.write_str(&json),
                Err(e) => write!(f, "<unserializable: {e}>"),
            }
        }
    }
}
