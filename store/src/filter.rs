//! Filters on an item's value: `{"kind": "fact", "score": {"$gte": 3}}`.
//!
//! The rules every backend keeps (the memory backend's [`Filter::matches`] is the reference):
//! - a key is a path of object keys joined with `.` (`"user.plan"`);
//! - `$eq` (a plain value means `$eq`): the field exists and equals the value; numbers compare
//!   by value (`1` equals `1.0`), objects and arrays by their whole JSON;
//! - a plain object (no `$` key) is a condition per field it holds, as LangGraph reads it:
//!   `{"user": {"plan": "pro"}}` is `{"user.plan": "pro"}`, so other fields of `user` may be
//!   there too;
//! - `$ne`: not `$eq`, so an item without the field matches;
//! - `$gt`, `$gte`, `$lt`, `$lte`: the field and the value are both numbers (compared by
//!   value) or both strings (compared by bytes); anything else does not match. Their value
//!   must be a number or a string;
//! - all conditions must hold.

use std::cmp::Ordering;

use serde_json::{Map, Value};

/// A comparison a condition makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `$eq`.
    Eq,
    /// `$ne`.
    Ne,
    /// `$gt`.
    Gt,
    /// `$gte`.
    Gte,
    /// `$lt`.
    Lt,
    /// `$lte`.
    Lte,
}

impl Cmp {
    fn parse(op: &str) -> Option<Self> {
        Some(match op {
            "$eq" => Self::Eq,
            "$ne" => Self::Ne,
            "$gt" => Self::Gt,
            "$gte" => Self::Gte,
            "$lt" => Self::Lt,
            "$lte" => Self::Lte,
            _ => return None,
        })
    }

    /// The operator as written in a filter (`$gte`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Eq => "$eq",
            Self::Ne => "$ne",
            Self::Gt => "$gt",
            Self::Gte => "$gte",
            Self::Lt => "$lt",
            Self::Lte => "$lte",
        }
    }

    /// Whether it orders (`$gt`, `$gte`, `$lt`, `$lte`).
    pub fn orders(self) -> bool {
        !matches!(self, Self::Eq | Self::Ne)
    }
}

/// One condition: the field at `path` compared with `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The object keys from the value's root to the field.
    pub path: Vec<String>,
    /// The comparison.
    pub cmp: Cmp,
    /// What the field is compared with.
    pub value: Value,
}

/// A filter that cannot be used, naming the part that was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// A key was empty or had an empty segment (`"a..b"`).
    #[error("filter key {key:?} has an empty segment")]
    BadPath {
        /// The key.
        key: String,
    },
    /// An operator the store does not know.
    #[error("filter key {key:?} uses unknown operator {op:?} (known: $eq $ne $gt $gte $lt $lte)")]
    UnknownOperator {
        /// The key.
        key: String,
        /// The operator.
        op: String,
    },
    /// An ordering operator with a value that is neither a number nor a string.
    #[error("filter key {key:?}: {op} needs a number or a string, got {value}")]
    Unordered {
        /// The key.
        key: String,
        /// The operator.
        op: &'static str,
        /// The value given.
        value: Value,
    },
}

/// All conditions must hold. The empty filter matches every item.
///
/// ```
/// use serde_json::json;
/// use stategraph_store::Filter;
/// let filter = Filter::from_json(json!({"kind": "fact", "n": {"$gte": 2}}).as_object().unwrap())?;
/// assert!(filter.matches(json!({"kind": "fact", "n": 3}).as_object().unwrap()));
/// assert!(!filter.matches(json!({"kind": "fact", "n": 1}).as_object().unwrap()));
/// # Ok::<(), stategraph_store::FilterError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    conditions: Vec<Condition>,
}

impl Filter {
    /// Reads a filter in LangGraph's JSON form.
    pub fn from_json(filter: &Map<String, Value>) -> Result<Self, FilterError> {
        let mut out = Self::default();
        out.read(&[], filter)?;
        Ok(out)
    }

    fn read(&mut self, under: &[String], filter: &Map<String, Value>) -> Result<(), FilterError> {
        for (key, want) in filter {
            let mut path = under.to_vec();
            path.extend(parse_path(key)?);
            let shown = path.join(".");
            match want.as_object() {
                Some(ops) if !ops.is_empty() && ops.keys().any(|k| k.starts_with('$')) => {
                    for (op, value) in ops {
                        let cmp = Cmp::parse(op).ok_or_else(|| FilterError::UnknownOperator {
                            key: shown.clone(),
                            op: op.clone(),
                        })?;
                        self.push(&shown, path.clone(), cmp, value.clone())?;
                    }
                }
                Some(fields) if !fields.is_empty() => self.read(&path, fields)?,
                _ => self.push(&shown, path, Cmp::Eq, want.clone())?,
            }
        }
        Ok(())
    }

    /// Adds a condition on the field at the dotted `key`.
    pub fn and(mut self, key: &str, cmp: Cmp, value: Value) -> Result<Self, FilterError> {
        let path = parse_path(key)?;
        self.push(key, path, cmp, value)?;
        Ok(self)
    }

    fn push(
        &mut self,
        key: &str,
        path: Vec<String>,
        cmp: Cmp,
        value: Value,
    ) -> Result<(), FilterError> {
        if cmp.orders() && !(value.is_number() || value.is_string()) {
            return Err(FilterError::Unordered {
                key: key.to_owned(),
                op: cmp.as_str(),
                value,
            });
        }
        self.conditions.push(Condition { path, cmp, value });
        Ok(())
    }

    /// The conditions, for a backend that translates them.
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// Whether there is no condition.
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether `value` meets every condition.
    pub fn matches(&self, value: &Map<String, Value>) -> bool {
        self.conditions.iter().all(|c| c.matches(value))
    }
}

impl Condition {
    /// Whether `value`'s field meets this condition.
    pub fn matches(&self, value: &Map<String, Value>) -> bool {
        let field = field_at(value, &self.path);
        match self.cmp {
            Cmp::Eq => field.is_some_and(|f| json_eq(f, &self.value)),
            Cmp::Ne => !field.is_some_and(|f| json_eq(f, &self.value)),
            cmp => field
                .and_then(|f| order(f, &self.value))
                .is_some_and(|o| match cmp {
                    Cmp::Gt => o == Ordering::Greater,
                    Cmp::Gte => o != Ordering::Less,
                    Cmp::Lt => o == Ordering::Less,
                    _ => o != Ordering::Greater,
                }),
        }
    }
}

/// The field at `path` under `value`.
pub fn field_at<'a>(value: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(value.get(first)?, |v, key| v.as_object()?.get(key))
}

/// JSON equality with numbers compared by value.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, a)| y.get(k).is_some_and(|b| json_eq(a, b)))
        }
        _ => a == b,
    }
}

fn order(field: &Value, want: &Value) -> Option<Ordering> {
    match (field, want) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

fn parse_path(key: &str) -> Result<Vec<String>, FilterError> {
    let path: Vec<String> = key.split('.').map(str::to_owned).collect();
    if path.iter().any(String::is_empty) {
        return Err(FilterError::BadPath {
            key: key.to_owned(),
        });
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn ne_matches_an_item_without_the_field() -> Result<(), FilterError> {
        let f = Filter::from_json(&obj(json!({"a": {"$ne": 1}})))?;
        assert!(f.matches(&obj(json!({}))));
        assert!(!f.matches(&obj(json!({"a": 1.0}))));
        Ok(())
    }

    #[test]
    fn ordering_across_types_never_matches() -> Result<(), FilterError> {
        let f = Filter::from_json(&obj(json!({"a": {"$gt": 1}})))?;
        assert!(!f.matches(&obj(json!({"a": "2"}))));
        assert!(f.matches(&obj(json!({"a": 2}))));
        Ok(())
    }

    #[test]
    fn a_plain_object_matches_the_fields_it_names() -> Result<(), FilterError> {
        let f = Filter::from_json(&obj(json!({"u": {"plan": "pro"}})))?;
        assert!(f.matches(&obj(json!({"u": {"plan": "pro", "seats": 3}}))));
        assert!(!f.matches(&obj(json!({"u": {"plan": "free"}}))));
        assert!(!f.matches(&obj(json!({"u": "pro"}))));
        Ok(())
    }

    #[test]
    fn nested_paths_and_unknown_operators() {
        let f = Filter::from_json(&obj(json!({"u.plan": "pro"})));
        assert!(f.is_ok_and(|f| f.matches(&obj(json!({"u": {"plan": "pro"}})))));
        let bad = Filter::from_json(&obj(json!({"a": {"$in": [1]}})));
        assert!(matches!(bad, Err(FilterError::UnknownOperator { .. })));
        let bad = Filter::from_json(&obj(json!({"a": {"$lt": [1]}})));
        assert!(matches!(bad, Err(FilterError::Unordered { .. })));
    }
}
