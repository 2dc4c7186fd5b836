//! Statements built with every value bound: a query's text and its typed parameters, the
//! namespace prefix as a key range, filters as jsonb conditions, and errors as store errors.

use serde_json::Value;
use tokio_postgres::types::{ToSql, Type};

use crate::{Cmp, Condition, Filter, Namespace, StoreError, Timestamp};

/// A tokio-postgres error as a [`StoreError::Database`] naming what was being done, with
/// the server's message and SQLSTATE rather than only "db error".
pub(super) fn db(what: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |e| {
        let why = match e.as_db_error() {
            Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
            None => e.to_string(),
        };
        StoreError::Database(format!("{what}: {why}"))
    }
}

/// A statement's text and its parameters, each with its type (one unnamed statement, so a
/// transaction-mode pooler can carry it, as the saver's statements).
#[derive(Default)]
pub(super) struct Query {
    text: String,
    params: Vec<(Box<dyn ToSql + Sync + Send>, Type)>,
}

impl Query {
    /// A statement starting with `text`.
    pub(super) fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            params: Vec::new(),
        }
    }

    /// Binds `value` as the next parameter and returns its placeholder (`$3`).
    pub(super) fn bind<T: ToSql + Sync + Send + 'static>(&mut self, value: T, ty: Type) -> String {
        self.params.push((Box::new(value), ty));
        format!("${}", self.params.len())
    }

    /// Appends text.
    pub(super) fn push(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// The text.
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// The parameters' types, as a statement is prepared with them.
    pub(super) fn types(&self) -> Vec<Type> {
        self.params.iter().map(|(_, t)| t.clone()).collect()
    }

    /// The parameters' values, as a prepared statement takes them.
    pub(super) fn values(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|(v, _)| &**v as &(dyn ToSql + Sync))
            .collect()
    }

    /// The parameters as `query_typed` takes them.
    pub(super) fn params(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.params
            .iter()
            .map(|(v, t)| (&**v as &(dyn ToSql + Sync), t.clone()))
            .collect()
    }

    /// `AND` the conditions that keep a search's items: live at `now`, under `prefix`, and
    /// meeting `filter`.
    pub(super) fn push_search_conditions(
        &mut self,
        now: Timestamp,
        prefix: &Namespace,
        filter: &Filter,
    ) {
        let live = self.live(now);
        self.push(&format!(" AND {live}"));
        if !prefix.is_empty() {
            let range = self.prefix_range(prefix);
            self.push(&format!(" AND {range}"));
        }
        for condition in filter.conditions() {
            let sql = self.condition(condition);
            self.push(&format!(" AND {sql}"));
        }
    }

    /// Whether an item is live at `now`.
    pub(super) fn live(&mut self, now: Timestamp) -> String {
        let now = self.bind(now.millis(), Type::INT8);
        format!("(expires_at IS NULL OR expires_at > {now})")
    }

    /// Namespaces that start with `prefix`: the prefix itself, or a key between
    /// `prefix.` and `prefix/` (`/` follows `.`), compared by bytes (the column is
    /// `COLLATE "C"`), so the primary key's index serves it.
    fn prefix_range(&mut self, prefix: &Namespace) -> String {
        let joined = prefix.to_string();
        let lo = self.bind(format!("{joined}."), Type::TEXT);
        let hi = self.bind(format!("{joined}/"), Type::TEXT);
        let exact = self.bind(joined, Type::TEXT);
        format!("(ns = {exact} OR (ns >= {lo} AND ns < {hi}))")
    }

    /// One filter condition on the `value` column, as [`Condition::matches`] reads it.
    fn condition(&mut self, condition: &Condition) -> String {
        // `->` with a text key reads an object's field and gives NULL on an array, as
        // `field_at` walks objects only (`#>` would read `"0"` as an array index).
        let mut field = String::from("(value");
        for key in &condition.path {
            let key = self.bind(key.clone(), Type::TEXT);
            field.push_str(&format!(" -> {key}"));
        }
        field.push(')');
        let op = match condition.cmp {
            Cmp::Eq | Cmp::Ne => {
                let want = self.bind(condition.value.to_string(), Type::TEXT);
                // jsonb equality compares numbers by value and objects whole; a missing
                // field is NULL, which `$eq` does not match and `$ne` does.
                let eq = format!("COALESCE({field} = {want}::jsonb, false)");
                return match condition.cmp {
                    Cmp::Eq => eq,
                    _ => format!("NOT {eq}"),
                };
            }
            Cmp::Gt => ">",
            Cmp::Gte => ">=",
            Cmp::Lt => "<",
            Cmp::Lte => "<=",
        };
        // `CASE`, not `AND`: PostgreSQL may evaluate an `AND`'s sides in any order, and
        // the cast of a field of another type would fail.
        match &condition.value {
            Value::Number(n) => {
                let want = self.bind(n.to_string(), Type::TEXT);
                format!(
                    "(CASE WHEN jsonb_typeof({field}) = 'number' \
                     THEN {field}::numeric {op} {want}::numeric ELSE false END)"
                )
            }
            Value::String(s) => {
                let want = self.bind(s.clone(), Type::TEXT);
                format!(
                    "(CASE WHEN jsonb_typeof({field}) = 'string' \
                     THEN ({field} #>> '{{}}') COLLATE \"C\" {op} {want} COLLATE \"C\" \
                     ELSE false END)"
                )
            }
            // `Filter` refuses an ordering against anything else.
            _ => "false".to_owned(),
        }
    }
}

/// A count or a page bound as PostgreSQL's `bigint`.
pub(super) fn big(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
