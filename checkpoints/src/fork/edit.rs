//! Edits of a state in its stored JSON form: a [`FieldPath`] (a JSON pointer whose first
//! token names a field), setting a value there, and why an edit cannot be made.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::channel::ChannelName;
use crate::{CheckpointId, LoadedCheckpoint};

/// A place in a state: a JSON pointer (RFC 6901) whose first token names a field, the rest
/// pointing inside that field's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath {
    pointer: String,
    field: String,
    inner: String,
}

/// Why a text is not a [`FieldPath`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldPathError {
    /// It does not start with `/`.
    #[error("the path must be a JSON pointer to a field, starting with '/' (e.g. /count)")]
    NotAPointer,
    /// Its first token is empty.
    #[error("the path names no field")]
    NoField,
}

impl FieldPath {
    /// Parse a JSON pointer such as `/count` or `/log/0` (`~1` and `~0` escape `/` and `~`).
    ///
    /// # Errors
    /// [`FieldPathError`]: not a pointer, or no field named.
    pub fn parse(pointer: &str) -> Result<Self, FieldPathError> {
        let rest = pointer
            .strip_prefix('/')
            .ok_or(FieldPathError::NotAPointer)?;
        let (token, inner) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let field = unescape(token);
        if field.is_empty() {
            return Err(FieldPathError::NoField);
        }
        Ok(FieldPath {
            pointer: pointer.to_owned(),
            field,
            inner: inner.to_owned(),
        })
    }

    /// The pointer as given.
    pub fn as_str(&self) -> &str {
        &self.pointer
    }

    /// The field it names (unescaped).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The pointer inside the field's value (`""` for the whole field).
    pub fn inner(&self) -> &str {
        &self.inner
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pointer)
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// One change to make in the new branch: `value` at `path`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldEdit {
    /// Where.
    pub path: FieldPath,
    /// The new value.
    pub value: Value,
}

/// The type of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonType {
    /// The type of `value`.
    pub fn of(value: &Value) -> Self {
        match value {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Boolean,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }

    /// The type's name as JSON calls it (`null`, `boolean`, `number`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Number => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }
}

impl fmt::Display for JsonType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An edit that changed a field's JSON type: the program reading the branch must accept it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retyped {
    /// The edit's path.
    pub path: FieldPath,
    /// The type the field had at the forked checkpoint.
    pub was: JsonType,
    /// The type it has in the new branch.
    pub now: JsonType,
}

/// Why a pointer inside a field does not lead to a place a value can be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PointerError {
    /// The container the last token is in does not exist.
    #[error("nothing at {0} inside the field")]
    Missing(String),
    /// The last token is not an index of the array it is in.
    #[error("`{}` is not an array index", .0.escape_debug())]
    NotAnIndex(String),
    /// The index is more than one past the array's end.
    #[error("index {index} is past the end of an array of {len}")]
    PastTheEnd {
        /// The index given.
        index: usize,
        /// The array's length.
        len: usize,
    },
    /// The container is a scalar.
    #[error("{} is a {found}, not an object or array", container_name(.at))]
    NotAContainer {
        /// The pointer to it inside the field (`""` for the field itself).
        at: String,
        /// What it is.
        found: JsonType,
    },
}

fn container_name(at: &str) -> &str {
    if at.is_empty() {
        "the field"
    } else {
        at
    }
}

/// Why one [`FieldEdit`] cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The checkpoint has no such field (or the name is a trigger channel's).
    #[error(
        "no field {field} at checkpoint {checkpoint} (stored fields: {})",
        stored_list(.stored)
    )]
    UnknownField {
        /// The field named.
        field: String,
        /// The forked checkpoint.
        checkpoint: CheckpointId,
        /// The fields with a stored value there.
        stored: Vec<String>,
    },
    /// The edit points inside a field that has no stored value.
    #[error("field {field} has no stored value to change inside")]
    NothingInside {
        /// The field named.
        field: String,
    },
    /// The pointer inside the field leads nowhere a value can be set.
    #[error(transparent)]
    Pointer(#[from] PointerError),
}

fn stored_list(stored: &[String]) -> String {
    if stored.is_empty() {
        "none".to_owned()
    } else {
        stored.join(", ")
    }
}

/// The value `edit`'s field has after it: the earlier edits' value (or the stored one) with
/// `edit.value` set at its inner pointer.
pub(super) fn edited_value(
    loaded: &LoadedCheckpoint,
    state: &Value,
    changed: &BTreeMap<String, Value>,
    edit: &FieldEdit,
) -> Result<Value, EditError> {
    let field = edit.path.field();
    let known =
        loaded.fields.contains_key(field) || loaded.checkpoint.control.versions.contains_key(field);
    if !known || !ChannelName::parse(field).is_field() {
        return Err(EditError::UnknownField {
            field: field.to_owned(),
            checkpoint: loaded.checkpoint.id,
            stored: loaded.fields.keys().cloned().collect(),
        });
    }
    let mut value = if edit.path.inner().is_empty() {
        Value::Null
    } else {
        changed
            .get(field)
            .or_else(|| state.get(field))
            .cloned()
            .ok_or_else(|| EditError::NothingInside {
                field: field.to_owned(),
            })?
    };
    set_in(&mut value, edit.path.inner(), edit.value.clone())?;
    Ok(value)
}

/// Set `value` at pointer `inner` inside `target` (an existing object key or array index, a
/// new object key, or the end of an array: index = length or `-`).
fn set_in(target: &mut Value, inner: &str, value: Value) -> Result<(), PointerError> {
    let Some((parent, last)) = inner.rsplit_once('/') else {
        *target = value;
        return Ok(());
    };
    let last = unescape(last);
    let container = target
        .pointer_mut(parent)
        .ok_or_else(|| PointerError::Missing(parent.to_owned()))?;
    match container {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) => set_in_array(items, &last, value),
        other => Err(PointerError::NotAContainer {
            at: parent.to_owned(),
            found: JsonType::of(other),
        }),
    }
}

fn set_in_array(items: &mut Vec<Value>, token: &str, value: Value) -> Result<(), PointerError> {
    if token == "-" {
        items.push(value);
        return Ok(());
    }
    let index: usize = token
        .parse()
        .map_err(|_| PointerError::NotAnIndex(token.to_owned()))?;
    match index.cmp(&items.len()) {
        std::cmp::Ordering::Less => items[index] = value,
        std::cmp::Ordering::Equal => items.push(value),
        std::cmp::Ordering::Greater => {
            return Err(PointerError::PastTheEnd {
                index,
                len: items.len(),
            })
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn paths_split_into_a_field_and_a_pointer_inside_it() -> TestResult {
        let p = FieldPath::parse("/a~1b/0/x~0y")?;
        assert_eq!(
            (p.field(), p.inner(), p.as_str()),
            ("a/b", "/0/x~0y", "/a~1b/0/x~0y")
        );
        assert_eq!(FieldPath::parse("count"), Err(FieldPathError::NotAPointer));
        assert_eq!(FieldPath::parse("/"), Err(FieldPathError::NoField));
        assert_eq!(FieldPath::parse("//x"), Err(FieldPathError::NoField));
        Ok(())
    }

    #[test]
    fn values_are_set_at_keys_indexes_and_the_end_of_arrays() -> TestResult {
        let mut v = serde_json::json!({ "a": [1, 2] });
        set_in(&mut v, "/a/0", Value::from(9))?;
        set_in(&mut v, "/a/2", Value::from(3))?;
        set_in(&mut v, "/a/-", Value::from(4))?;
        set_in(&mut v, "/b", Value::from(true))?;
        assert_eq!(v, serde_json::json!({ "a": [9, 2, 3, 4], "b": true }));
        set_in(&mut v, "", Value::Null)?;
        assert_eq!(v, Value::Null);
        Ok(())
    }
}
