//! The shape of a field's values as a graph wrote them: which JSON kinds it held (integers
//! split by sign, floats apart), and the same for array items and object members, a few
//! levels deep. The SQLite saver records it per thread and field from every value a graph
//! step or a typed update stores (never from a fork's edits), so a tool without the
//! program's Rust types can tell whether a new value would load: `stategraph fork --set`
//! refuses a value of a kind the field never held and warns on one it cannot be sure of
//! (decision 0044).
//!
//! ```
//! use stategraph_checkpoints::shape::{Fit, Shape};
//! let shape = Shape::of_json(b"[3, 7]").unwrap();
//! assert_eq!(shape.fit(&serde_json::json!([1, 2])), Fit::Fits);
//! assert!(matches!(shape.fit(&serde_json::json!([1.5])), Fit::Misfit(_)));
//! assert!(matches!(shape.fit(&serde_json::json!([-1])), Fit::Doubt(_)));
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Levels below the field whose shape is kept (deeper values are not looked at).
const MAX_DEPTH: usize = 4;
/// Members of an object kept by name; past this the object's members are not kept.
const MAX_MEMBERS: usize = 64;

/// A JSON kind, with numbers split the way Rust types read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// An integer ≥ 0 that fits 64 bits unsigned.
    Unsigned,
    /// A negative integer that fits 64 bits signed.
    Negative,
    /// A number written with a fraction or exponent, or past the 64-bit integer range.
    Float,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl Kind {
    /// The kind of `value`.
    pub fn of(value: &Value) -> Kind {
        match value {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(n) if n.is_u64() => Kind::Unsigned,
            Value::Number(n) if n.is_i64() => Kind::Negative,
            Value::Number(_) => Kind::Float,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "boolean",
            Kind::Unsigned => "integer ≥ 0",
            Kind::Negative => "negative integer",
            Kind::Float => "non-integer number",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Object => "object",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kinds a place held, and below it the shape of array items and object members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// The kinds seen, sorted, without repeats.
    #[serde(default)]
    pub kinds: Vec<Kind>,
    /// The items of the arrays seen (`None`: no item seen, or too deep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Shape>>,
    /// The members of the objects seen, by name (empty past 64 members or too deep).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub members: BTreeMap<String, Shape>,
    /// Whether members were left out (too many names, or too deep): an unknown member is
    /// then not a doubt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
}

/// Whether a value fits a [`Shape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// Every kind in it was held there before.
    Fits,
    /// It may not load: the reason (a negative integer where only integers ≥ 0 were held, a
    /// `null` or a member never held).
    Doubt(String),
    /// It cannot load into the type that wrote the field: the reason (a kind never held, a
    /// fraction where only integers were held).
    Misfit(String),
}

impl Shape {
    /// The shape of one JSON value's bytes; `None` if they are not JSON.
    pub fn of_json(bytes: &[u8]) -> Option<Shape> {
        let mut shape = Shape::default();
        shape.merge_json(bytes)?;
        Some(shape)
    }

    /// Add the shape of one JSON value's bytes to this shape, without building the value's
    /// shape apart (no allocation unless the shape grows): whether it grew, or `None` if the
    /// bytes are not JSON (what was read before the fault may have been added).
    ///
    /// ```
    /// use stategraph_checkpoints::shape::Shape;
    /// let mut shape = Shape::of_json(br#"{"n": 1}"#).unwrap();
    /// assert_eq!(shape.merge_json(br#"{"n": 2}"#), Some(false));
    /// assert_eq!(shape.merge_json(br#"{"n": 2.5}"#), Some(true));
    /// assert_eq!(shape.merge_json(b"{"), None);
    /// ```
    pub fn merge_json(&mut self, bytes: &[u8]) -> Option<bool> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let grew = MergeSeed(self, 0).deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(grew)
    }

    /// Add `kind`; whether it was new.
    fn add_kind(&mut self, kind: Kind) -> bool {
        match self.kinds.binary_search(&kind) {
            Ok(_) => false,
            Err(at) => {
                self.kinds.insert(at, kind);
                true
            }
        }
    }

    /// Mark members as left out; whether that is new.
    fn open_up(&mut self) -> bool {
        !std::mem::replace(&mut self.open, true)
    }

    /// Add `other`'s kinds, items and members to this shape (a list's appended tail is an
    /// array of the list's items, so it merges into the list's shape as it is); whether it
    /// grew.
    pub fn merge(&mut self, other: &Shape) -> bool {
        let mut grew = false;
        for k in &other.kinds {
            grew |= self.add_kind(*k);
        }
        if let Some(theirs) = &other.items {
            match &mut self.items {
                Some(mine) => grew |= mine.merge(theirs),
                None => {
                    self.items = Some(theirs.clone());
                    grew = true;
                }
            }
        }
        if other.open {
            grew |= self.open_up();
        }
        for (name, theirs) in &other.members {
            if let Some(mine) = self.members.get_mut(name) {
                grew |= mine.merge(theirs);
            } else if self.members.len() < MAX_MEMBERS {
                self.members.insert(name.clone(), theirs.clone());
                grew = true;
            } else {
                grew |= self.open_up();
            }
        }
        grew
    }

    /// Whether `value` fits the place this shape describes (a shape with no kinds — nothing
    /// recorded — fits anything).
    pub fn fit(&self, value: &Value) -> Fit {
        self.fit_at(value, "", 0)
    }

    fn fit_at(&self, value: &Value, at: &str, depth: usize) -> Fit {
        if self.kinds.is_empty() || depth > MAX_DEPTH {
            return Fit::Fits;
        }
        let here = || {
            if at.is_empty() {
                "the field".to_owned()
            } else {
                at.to_owned()
            }
        };
        let kind = Kind::of(value);
        if let Some(fit) = self.fit_kind(kind, value, &here()) {
            return fit;
        }
        let mut doubt = None;
        let mut note = |fit: Fit| match fit {
            Fit::Misfit(_) => Some(fit),
            Fit::Doubt(_) => {
                doubt.get_or_insert(fit);
                None
            }
            Fit::Fits => None,
        };
        match value {
            Value::Array(items) => {
                let Some(shape) = &self.items else {
                    return Fit::Fits;
                };
                for (i, item) in items.iter().enumerate() {
                    if let Some(bad) = note(shape.fit_at(item, &format!("{at}/{i}"), depth + 1)) {
                        return bad;
                    }
                }
            }
            Value::Object(members) => {
                for (name, member) in members {
                    let path = format!("{at}/{name}");
                    let fit = match self.members.get(name) {
                        Some(shape) => shape.fit_at(member, &path, depth + 1),
                        None if self.open || depth >= MAX_DEPTH => Fit::Fits,
                        None => Fit::Doubt(format!("{path} was never held")),
                    };
                    if let Some(bad) = note(fit) {
                        return bad;
                    }
                }
            }
            _ => {}
        }
        doubt.unwrap_or(Fit::Fits)
    }

    /// The verdict on `kind` alone: `None` when it was held here (look inside).
    fn fit_kind(&self, kind: Kind, value: &Value, here: &str) -> Option<Fit> {
        let held = |k: Kind| self.kinds.contains(&k);
        let list = self
            .kinds
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ");
        match kind {
            _ if held(kind) => None,
            Kind::Unsigned if held(Kind::Negative) || held(Kind::Float) => None,
            Kind::Negative if held(Kind::Float) => None,
            Kind::Negative if held(Kind::Unsigned) => Some(Fit::Doubt(format!(
                "{here} has only held integers ≥ 0; {value} fails to load if its type is unsigned"
            ))),
            Kind::Null => Some(Fit::Doubt(format!(
                "{here} has never held null (only {list}); it loads only if its type is optional"
            ))),
            Kind::Float if held(Kind::Unsigned) || held(Kind::Negative) => {
                Some(Fit::Misfit(format!(
                    "{here} has only held integers, and {value} is not one (a number past the \
                     64-bit range reads as one with a fraction)"
                )))
            }
            _ => Some(Fit::Misfit(format!(
                "{here} has only held {list}, and {value} is a {kind}",
                value = short(value)
            ))),
        }
    }
}

/// A value as an error message shows it: at most 60 characters of its JSON.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Reads a JSON value's shape into a shape it may grow (`Shape::merge_json`); its value:
/// whether the shape grew.
struct MergeSeed<'a>(&'a mut Shape, usize);

impl<'de> DeserializeSeed<'de> for MergeSeed<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl MergeSeed<'_> {
    fn kind(self, kind: Kind) -> bool {
        self.0.add_kind(kind)
    }
}

impl<'de> Visitor<'de> for MergeSeed<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(self.kind(Kind::Null))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(self.kind(Kind::Bool))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(self.kind(Kind::Unsigned))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        Ok(self.kind(if v < 0 {
            Kind::Negative
        } else {
            Kind::Unsigned
        }))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(self.kind(Kind::Float))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
        Ok(self.kind(Kind::String))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let MergeSeed(shape, depth) = self;
        let mut grew = shape.add_kind(Kind::Array);
        if depth >= MAX_DEPTH {
            while seq.next_element::<de::IgnoredAny>()?.is_some() {}
            return Ok(grew);
        }
        let had_items = shape.items.is_some();
        let items = shape.items.get_or_insert_with(Box::default);
        let mut seen = false;
        while let Some(g) = seq.next_element_seed(MergeSeed(items, depth + 1))? {
            grew |= g;
            seen = true;
        }
        if !had_items && !seen {
            shape.items = None;
        }
        Ok(grew)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let MergeSeed(shape, depth) = self;
        let mut grew = shape.add_kind(Kind::Object);
        while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if depth < MAX_DEPTH {
                if let Some(member) = shape.members.get_mut(name.as_ref()) {
                    grew |= map.next_value_seed(MergeSeed(member, depth + 1))?;
                    continue;
                }
                if shape.members.len() < MAX_MEMBERS {
                    let member = shape.members.entry(name.into_owned()).or_default();
                    map.next_value_seed(MergeSeed(member, depth + 1))?;
                    grew = true;
                    continue;
                }
            }
            map.next_value::<de::IgnoredAny>()?;
            grew |= shape.open_up();
        }
        Ok(grew)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape(v: &Value) -> Shape {
        Shape::of_json(v.to_string().as_bytes()).unwrap_or_default()
    }

    #[test]
    fn integers_refuse_fractions_and_doubt_signs() {
        let s = shape(&json!(5));
        assert_eq!(s.fit(&json!(7)), Fit::Fits);
        assert!(matches!(s.fit(&json!(1.5)), Fit::Misfit(_)));
        assert!(matches!(s.fit(&json!(-1)), Fit::Doubt(_)));
        let big: Value = serde_json::from_str("18446744073709551616").unwrap_or_default();
        assert!(matches!(s.fit(&big), Fit::Misfit(_)), "{big}");
        assert!(matches!(s.fit(&json!("5")), Fit::Misfit(_)));
        assert!(matches!(s.fit(&Value::Null), Fit::Doubt(_)));
    }

    #[test]
    fn floats_take_integers_and_signed_take_unsigned() {
        assert_eq!(shape(&json!(0.5)).fit(&json!(-3)), Fit::Fits);
        assert_eq!(shape(&json!(-2)).fit(&json!(3)), Fit::Fits);
    }

    #[test]
    fn items_and_members_are_checked_below_the_field() {
        let mut s = shape(&json!({"name": "a", "tags": ["x"], "n": 1}));
        assert!(!s.merge(&shape(&json!({"name": "b"}))));
        assert!(s.merge(&shape(&json!({"extra": null}))));
        assert_eq!(s.fit(&json!({"name": "c", "tags": ["y", "z"]})), Fit::Fits);
        let Fit::Misfit(why) = s.fit(&json!({"tags": [1]})) else {
            panic!("an integer item in a list of strings fit");
        };
        assert!(why.contains("/tags/0"), "{why}");
        assert!(matches!(s.fit(&json!({"other": 1})), Fit::Doubt(_)));
    }

    /// JSON values of few members (under the member limit), nested past the depth limit.
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-c]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(7, 48, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn merging_bytes_in_place_equals_merging_their_shape(
            values in proptest::collection::vec(json_value(), 1..6)
        ) {
            let mut built = Shape::default();
            let mut in_place = Shape::default();
            for v in &values {
                let bytes = v.to_string();
                let grew_built = built.merge(&shape(v));
                let grew_in_place = in_place.merge_json(bytes.as_bytes());
                proptest::prop_assert_eq!(Some(grew_built), grew_in_place);
                proptest::prop_assert_eq!(&built, &in_place);
            }
        }
    }

    #[test]
    fn a_shape_round_trips_through_json() -> Result<(), serde_json::Error> {
        let s = shape(&json!([{"a": [1, -1, 2.5]}, null]));
        let back: Shape = serde_json::from_str(&serde_json::to_string(&s)?)?;
        assert_eq!(back, s);
        Ok(())
    }
}
