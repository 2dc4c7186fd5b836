//! State diffs: what changed between two states, field by field, readable without the user's
//! Rust types (every field is compared as JSON).
//!
//! A [`StateDiff`] is a value a test can match on, an RFC 6902 JSON Patch
//! ([`StateDiff::to_json_patch`]) and readable text (its `Display`). The law, held by a
//! property test: `diff(a, b).apply(a) == b`.
//!
//! ```
//! use serde_json::json;
//! use stategraph_checkpoints::diff::{diff_values, FieldChange, ListEdit};
//!
//! let a = json!({ "log": ["a"], "n": 1 });
//! let b = json!({ "log": ["a", "b"], "n": 2 });
//! let d = diff_values(&a, &b);
//! assert_eq!(d.fields[0].change, FieldChange::List { edits: vec![ListEdit::Appended { index: 1, items: vec![json!("b")] }] });
//! assert_eq!(d.apply(&a), b);
//! assert_eq!(d.to_string(), "+ log[1]: \"b\"\n~ n: 1 -> 2\n");
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// What changed in one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FieldChange {
    /// The field had no value and now has one.
    Added {
        /// The new value.
        value: Value,
    },
    /// The field had a value and now has none.
    Removed {
        /// The old value.
        value: Value,
    },
    /// The value was replaced.
    Set {
        /// The old value.
        from: Value,
        /// The new value.
        to: Value,
    },
    /// A list changed.
    List {
        /// The edits in order, each at an index of the list as the edits before it left it.
        edits: Vec<ListEdit>,
    },
}

/// One edit of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ListEdit {
    /// Items appended at `index` (the old length).
    Appended {
        /// Where the first new item went.
        index: usize,
        /// The new items.
        items: Vec<Value>,
    },
    /// The item at `index` was removed (for messages: the one with this `id`).
    Removed {
        /// Its index.
        index: usize,
        /// The item's `id`, if it has one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        id: Option<String>,
        /// The removed item.
        item: Value,
    },
    /// The item at `index` was replaced (for messages: same `id`, new content).
    Replaced {
        /// Its index.
        index: usize,
        /// The item's `id`, if it has one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        id: Option<String>,
        /// The old item.
        from: Value,
        /// The new item.
        to: Value,
    },
    /// An item inserted at `index`.
    Inserted {
        /// Its index.
        index: usize,
        /// The item.
        item: Value,
    },
}

/// What changed in one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldDiff {
    /// The field's name.
    pub field: String,
    /// How it changed.
    pub change: FieldChange,
}

/// The difference between two states, field by field, in field-name order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StateDiff {
    /// Changed fields only.
    pub fields: Vec<FieldDiff>,
}

fn item_id(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

/// Diff two lists: appended items when `a` is a prefix of `b`; by `id` when every item of
/// both has a unique string `id` (messages); otherwise index by index.
pub fn diff_lists(a: &[Value], b: &[Value]) -> Vec<ListEdit> {
    if b.len() >= a.len() && b[..a.len()] == *a {
        return if b.len() == a.len() {
            Vec::new()
        } else {
            vec![ListEdit::Appended {
                index: a.len(),
                items: b[a.len()..].to_vec(),
            }]
        };
    }
    let ids = |l: &[Value]| -> Option<Vec<String>> {
        let ids: Option<Vec<String>> = l.iter().map(|v| item_id(v).map(str::to_owned)).collect();
        ids.filter(|ids| ids.iter().collect::<BTreeSet<_>>().len() == ids.len())
    };
    if let (Some(ia), Some(ib)) = (ids(a), ids(b)) {
        return diff_by_id(a, b, &ia, &ib);
    }
    let mut edits = Vec::new();
    let common = a.len().min(b.len());
    for i in 0..common {
        if a[i] != b[i] {
            edits.push(ListEdit::Replaced {
                index: i,
                id: None,
                from: a[i].clone(),
                to: b[i].clone(),
            });
        }
    }
    if b.len() > common {
        edits.push(ListEdit::Appended {
            index: common,
            items: b[common..].to_vec(),
        });
    }
    for i in (common..a.len()).rev() {
        edits.push(ListEdit::Removed {
            index: i,
            id: None,
            item: a[i].clone(),
        });
    }
    edits
}

fn diff_by_id(a: &[Value], b: &[Value], ia: &[String], ib: &[String]) -> Vec<ListEdit> {
    let in_b: BTreeSet<&String> = ib.iter().collect();
    let mut edits = Vec::new();
    // Removals first, from the end, so earlier indices stay valid.
    let mut current: Vec<(String, Value)> = ia.iter().cloned().zip(a.iter().cloned()).collect();
    for i in (0..current.len()).rev() {
        if !in_b.contains(&current[i].0) {
            let (id, item) = current.remove(i);
            edits.push(ListEdit::Removed {
                index: i,
                id: Some(id),
                item,
            });
        }
    }
    // Then walk `b`: keep, replace in place, or insert.
    for (j, (id, item)) in ib.iter().zip(b).enumerate() {
        match current.iter().position(|(cid, _)| cid == id) {
            Some(pos) if pos == j => {
                if current[pos].1 != *item {
                    edits.push(ListEdit::Replaced {
                        index: j,
                        id: Some(id.clone()),
                        from: current[pos].1.clone(),
                        to: item.clone(),
                    });
                    current[pos].1 = item.clone();
                }
            }
            Some(pos) => {
                // Moved: remove from its old place and insert here.
                let (_, old) = current.remove(pos);
                edits.push(ListEdit::Removed {
                    index: pos,
                    id: Some(id.clone()),
                    item: old,
                });
                edits.push(ListEdit::Inserted {
                    index: j,
                    item: item.clone(),
                });
                current.insert(j, (id.clone(), item.clone()));
            }
            None => {
                if j == current.len()
                    && ib[j..].iter().all(|x| !current.iter().any(|(c, _)| c == x))
                {
                    edits.push(ListEdit::Appended {
                        index: j,
                        items: b[j..].to_vec(),
                    });
                    return edits;
                }
                edits.push(ListEdit::Inserted {
                    index: j,
                    item: item.clone(),
                });
                current.insert(j, (id.clone(), item.clone()));
            }
        }
    }
    edits
}

/// Diff two states given as JSON objects of field name → value (a missing field has no
/// value). Values that are not objects are compared as one field named `""`.
pub fn diff_values(a: &Value, b: &Value) -> StateDiff {
    let (Value::Object(ma), Value::Object(mb)) = (a, b) else {
        if a == b {
            return StateDiff::default();
        }
        return StateDiff {
            fields: vec![FieldDiff {
                field: String::new(),
                change: FieldChange::Set {
                    from: a.clone(),
                    to: b.clone(),
                },
            }],
        };
    };
    let names: BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
    let mut fields = Vec::new();
    for name in names {
        let change = match (ma.get(name), mb.get(name)) {
            (None, Some(v)) => FieldChange::Added { value: v.clone() },
            (Some(v), None) => FieldChange::Removed { value: v.clone() },
            (Some(x), Some(y)) if x == y => continue,
            (Some(Value::Array(x)), Some(Value::Array(y))) => FieldChange::List {
                edits: diff_lists(x, y),
            },
            (Some(x), Some(y)) => FieldChange::Set {
                from: x.clone(),
                to: y.clone(),
            },
            (None, None) => continue,
        };
        fields.push(FieldDiff {
            field: name.clone(),
            change,
        });
    }
    StateDiff { fields }
}

fn apply_list(list: &mut Vec<Value>, edits: &[ListEdit]) {
    for e in edits {
        match e {
            ListEdit::Appended { items, .. } => list.extend(items.iter().cloned()),
            ListEdit::Removed { index, .. } => {
                if *index < list.len() {
                    list.remove(*index);
                }
            }
            ListEdit::Replaced { index, to, .. } => {
                if let Some(slot) = list.get_mut(*index) {
                    *slot = to.clone();
                }
            }
            ListEdit::Inserted { index, item } => {
                let at = (*index).min(list.len());
                list.insert(at, item.clone());
            }
        }
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

impl StateDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The change of one field, if it changed.
    pub fn field(&self, name: &str) -> Option<&FieldChange> {
        self.fields
            .iter()
            .find(|f| f.field == name)
            .map(|f| &f.change)
    }

    /// Apply the diff to the state it was computed from (a JSON object of fields).
    pub fn apply(&self, state: &Value) -> Value {
        let mut out = match state {
            Value::Object(m) => m.clone(),
            other if self.fields.iter().all(|f| !f.field.is_empty()) => {
                let _ = other;
                Map::new()
            }
            _ => Map::new(),
        };
        for f in &self.fields {
            if f.field.is_empty() {
                if let FieldChange::Set { to, .. } = &f.change {
                    return to.clone();
                }
            }
            match &f.change {
                FieldChange::Added { value } => {
                    out.insert(f.field.clone(), value.clone());
                }
                FieldChange::Removed { .. } => {
                    out.remove(&f.field);
                }
                FieldChange::Set { to, .. } => {
                    out.insert(f.field.clone(), to.clone());
                }
                FieldChange::List { edits } => {
                    let mut list = match out.get(&f.field) {
                        Some(Value::Array(l)) => l.clone(),
                        _ => Vec::new(),
                    };
                    apply_list(&mut list, edits);
                    out.insert(f.field.clone(), Value::Array(list));
                }
            }
        }
        Value::Object(out)
    }

    /// The diff as an RFC 6902 JSON Patch against the state as a JSON object.
    pub fn to_json_patch(&self) -> Value {
        let mut ops = Vec::new();
        for f in &self.fields {
            let path = format!("/{}", escape(&f.field));
            match &f.change {
                FieldChange::Added { value } => {
                    ops.push(json!({ "op": "add", "path": path, "value": value }));
                }
                FieldChange::Removed { .. } => ops.push(json!({ "op": "remove", "path": path })),
                FieldChange::Set { to, .. } => {
                    ops.push(json!({ "op": "replace", "path": path, "value": to }));
                }
                FieldChange::List { edits } => {
                    for e in edits {
                        match e {
                            ListEdit::Appended { items, .. } => {
                                for item in items {
                                    ops.push(json!({ "op": "add", "path": format!("{path}/-"), "value": item }));
                                }
                            }
                            ListEdit::Removed { index, .. } => ops
                                .push(json!({ "op": "remove", "path": format!("{path}/{index}") })),
                            ListEdit::Replaced { index, to, .. } => {
                                ops.push(json!({ "op": "replace", "path": format!("{path}/{index}"), "value": to }));
                            }
                            ListEdit::Inserted { index, item } => {
                                ops.push(json!({ "op": "add", "path": format!("{path}/{index}"), "value": item }));
                            }
                        }
                    }
                }
            }
        }
        Value::Array(ops)
    }
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 120 {
        let cut: String = text.chars().take(117).collect();
        format!("{cut}...")
    } else {
        text
    }
}

impl fmt::Display for StateDiff {
    /// One line per change: `+` added or appended, `-` removed, `~` replaced.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.fields {
            let name = &d.field;
            match &d.change {
                FieldChange::Added { value } => writeln!(f, "+ {name}: {}", short(value))?,
                FieldChange::Removed { value } => writeln!(f, "- {name}: {}", short(value))?,
                FieldChange::Set { from, to } => {
                    writeln!(f, "~ {name}: {} -> {}", short(from), short(to))?;
                }
                FieldChange::List { edits } => {
                    for e in edits {
                        match e {
                            ListEdit::Appended { index, items } => {
                                for (k, item) in items.iter().enumerate() {
                                    writeln!(f, "+ {name}[{}]: {}", index + k, short(item))?;
                                }
                            }
                            ListEdit::Removed { index, id, item } => match id {
                                Some(id) => {
                                    writeln!(f, "- {name}[{index}] (id {id}): {}", short(item))?;
                                }
                                None => writeln!(f, "- {name}[{index}]: {}", short(item))?,
                            },
                            ListEdit::Replaced {
                                index,
                                id,
                                from,
                                to,
                            } => match id {
                                Some(id) => writeln!(
                                    f,
                                    "~ {name}[{index}] (id {id}): {} -> {}",
                                    short(from),
                                    short(to)
                                )?,
                                None => writeln!(
                                    f,
                                    "~ {name}[{index}]: {} -> {}",
                                    short(from),
                                    short(to)
                                )?,
                            },
                            ListEdit::Inserted { index, item } => {
                                writeln!(f, "+ {name}[{index}] (inserted): {}", short(item))?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Build a JSON object of a checkpoint's fields from the parts a saver returned (a whole part,
/// then appended arrays).
///
/// # Errors
/// A description of a part that is not valid JSON, or a tail that is not an array.
pub fn fields_to_json(fields: &BTreeMap<String, Vec<crate::FieldPart>>) -> Result<Value, String> {
    let mut out = Map::new();
    for (name, parts) in fields {
        out.insert(
            name.clone(),
            parts_to_json(parts).map_err(|e| format!("field {name:?}: {e}"))?,
        );
    }
    Ok(Value::Object(out))
}

/// One field's value from its parts.
///
/// # Errors
/// A description of a part that is not valid JSON, or a tail that is not an array.
pub fn parts_to_json(parts: &[crate::FieldPart]) -> Result<Value, String> {
    let mut value: Option<Value> = None;
    for part in parts {
        match part {
            crate::FieldPart::Whole(b) => {
                value = Some(serde_json::from_slice(b).map_err(|e| e.to_string())?);
            }
            crate::FieldPart::Tail(b) => {
                let items: Vec<Value> = serde_json::from_slice(b).map_err(|e| e.to_string())?;
                match value.get_or_insert_with(|| Value::Array(Vec::new())) {
                    Value::Array(list) => list.extend(items),
                    _ => return Err("appended items after a value that is not a list".to_owned()),
                }
            }
        }
    }
    Ok(value.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_diffed_by_id() {
        let a = json!({ "messages": [{"id": "1", "t": "hi"}, {"id": "2", "t": "yo"}, {"id": "3", "t": "x"}] });
        let b = json!({ "messages": [{"id": "1", "t": "hi"}, {"id": "3", "t": "x!"}, {"id": "4", "t": "new"}] });
        let d = diff_values(&a, &b);
        let text = d.to_string();
        assert!(text.contains("- messages[1] (id 2)"), "{text}");
        assert!(text.contains("~ messages[1] (id 3)"), "{text}");
        assert!(text.contains("+ messages[2]"), "{text}");
        assert_eq!(d.apply(&a), b);
    }

    #[test]
    fn a_json_patch_applies_like_the_diff() {
        let a = json!({ "log": [1, 2, 3], "n": 1, "gone": true });
        let b = json!({ "log": [1, 5], "n": 2, "new": "x" });
        let d = diff_values(&a, &b);
        assert_eq!(d.apply(&a), b);
        let patch = d.to_json_patch();
        let ops = patch.as_array().map(Vec::len).unwrap_or(0);
        assert!(ops >= 4, "{patch}");
    }

    #[test]
    fn a_diff_serializes_with_its_list_edits() {
        let d = diff_values(&json!({ "log": [1] }), &json!({ "log": [1, 2] }));
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(
            v["fields"][0]["change"],
            json!({ "kind": "list", "edits": [{ "op": "appended", "index": 1, "items": [2] }] })
        );
        let back: StateDiff = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn equal_states_have_an_empty_diff() {
        let a = json!({ "a": [1], "b": {"c": 2} });
        assert!(diff_values(&a, &a).is_empty());
        assert_eq!(diff_values(&a, &a).to_string(), "");
    }
}
