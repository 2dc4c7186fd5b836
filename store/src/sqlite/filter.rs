//! Filters pushed down to SQL, with exactly the rules of [`Filter::matches`]: a condition
//! becomes a test of `json_type` (so a type mismatch never matches) and `json_extract` (so
//! numbers compare by value and strings by bytes, SQLite's BINARY collation); the JSON path
//! and the value are bound parameters. What SQL cannot say the same way (equality with an
//! object or an array, a key SQLite's path syntax cannot quote) stays a residual that the
//! caller checks in Rust on the rows SQL returned.

use serde_json::Value;

use super::sql::Sql;
use crate::{Cmp, Condition, Filter};

/// A filter split into what SQL checks and what the caller checks.
#[derive(Debug)]
pub(super) struct Pushed<'a> {
    /// Conditions to check on each row's value with [`Condition::matches`].
    pub(super) residual: Vec<&'a Condition>,
}

impl Pushed<'_> {
    /// Whether every condition went to SQL (so SQL may page).
    pub(super) fn complete(&self) -> bool {
        self.residual.is_empty()
    }

    /// Whether `value` meets the residual conditions.
    pub(super) fn matches(&self, value: &serde_json::Map<String, Value>) -> bool {
        self.residual.iter().all(|c| c.matches(value))
    }
}

/// Appends `AND …` for each condition SQL can check exactly to `sql` (the item aliased `i`).
pub(super) fn push_filter<'a>(sql: &mut Sql, filter: &'a Filter) -> Pushed<'a> {
    let mut residual = Vec::new();
    for condition in filter.conditions() {
        if !push_condition(sql, condition) {
            residual.push(condition);
        }
    }
    Pushed { residual }
}

/// The JSON path of `keys` in SQLite's syntax (`$."a"."b"`), or `None` for a key its quoting
/// cannot hold.
fn json_path(keys: &[String]) -> Option<String> {
    let mut path = String::from("$");
    for key in keys {
        if key.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
            return None;
        }
        path.push_str(".\"");
        path.push_str(key);
        path.push('"');
    }
    Some(path)
}

/// Appends one condition; `false` when it must stay a residual.
fn push_condition(sql: &mut Sql, c: &Condition) -> bool {
    let Some(path) = json_path(&c.path) else {
        return false;
    };
    match c.cmp {
        Cmp::Eq | Cmp::Ne => {
            let mut eq = Sql::default();
            if !equals(&mut eq, &path, &c.value) {
                return false;
            }
            let wrap = if c.cmp == Cmp::Eq {
                " AND IFNULL("
            } else {
                " AND NOT IFNULL("
            };
            sql.push(wrap).push(&eq.text).push(", 0)");
            sql.params.extend(eq.params);
            true
        }
        cmp => order(sql, &path, cmp, &c.value),
    }
}

/// The field at `path` equals `value` (NULL or false otherwise).
fn equals(sql: &mut Sql, path: &str, value: &Value) -> bool {
    match value {
        Value::String(s) => {
            typed(sql, path, "= 'text'");
            sql.push(" AND json_extract(i.value, ?) = ?)")
                .bind(path.to_owned())
                .bind(s.clone());
        }
        Value::Number(n) => {
            typed(sql, path, "IN ('integer', 'real')");
            sql.push(" AND json_extract(i.value, ?) = ?)")
                .bind(path.to_owned());
            bind_number(sql, n);
        }
        Value::Bool(true) => typed(sql, path, "= 'true')"),
        Value::Bool(false) => typed(sql, path, "= 'false')"),
        Value::Null => typed(sql, path, "= 'null')"),
        Value::Array(_) | Value::Object(_) => return false,
    }
    true
}

/// Opens `(json_type(i.value, path) <test>`.
fn typed(sql: &mut Sql, path: &str, test: &str) {
    sql.push("(json_type(i.value, ?) ")
        .bind(path.to_owned())
        .push(test);
}

fn bind_number(sql: &mut Sql, n: &serde_json::Number) {
    match n.as_i64() {
        Some(i) => sql.bind(i),
        None => sql.bind(n.as_f64().unwrap_or(f64::NAN)),
    };
}

/// `$gt`, `$gte`, `$lt`, `$lte`: both numbers or both strings.
fn order(sql: &mut Sql, path: &str, cmp: Cmp, value: &Value) -> bool {
    let op = match cmp {
        Cmp::Gt => ">",
        Cmp::Gte => ">=",
        Cmp::Lt => "<",
        _ => "<=",
    };
    sql.push(" AND ");
    match value {
        Value::Number(n) => {
            typed(sql, path, "IN ('integer', 'real')");
            sql.push(" AND json_extract(i.value, ?) ")
                .bind(path.to_owned())
                .push(op)
                .push(" ?)");
            bind_number(sql, n);
        }
        Value::String(s) => {
            typed(sql, path, "= 'text'");
            sql.push(" AND json_extract(i.value, ?) ")
                .bind(path.to_owned())
                .push(op)
                .push(" ?)")
                .bind(s.clone());
        }
        // `Filter` refuses an ordering condition on anything else.
        _ => {
            sql.push("0");
        }
    }
    true
}
