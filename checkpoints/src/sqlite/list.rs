//! Listing: a thread's history (newest first, with `before`, `limit` and metadata filters,
//! every value bound as a parameter) and the threads of a file.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rusqlite::types::Value;
use rusqlite::Connection;

use super::cache::RecordCache;
use super::read::{header_query, load_record, HeaderRow, Reader};
use super::record::StateRecord;
use super::sql::{id_bytes, id_from, SqlResult};
use crate::sync::Unpoisoned;
use crate::{
    validate_filter_key, Checkpoint, CheckpointError, ListOptions, Namespace, NamespaceInfo,
    ThreadId, ThreadInfo, ThreadStatus,
};

/// A history query: its SQL, whose every value is a numbered parameter, and the values.
#[derive(Debug, PartialEq)]
struct HistoryQuery {
    sql: String,
    values: Vec<Value>,
}

impl HistoryQuery {
    /// Bind `value` as the next parameter; its number.
    fn bind(&mut self, value: impl Into<Value>) -> usize {
        self.values.push(value.into());
        self.values.len()
    }

    /// The query for `options` over `thread` in `ns`. Filter keys are validated (they are
    /// bound too, inside a JSON path parameter).
    fn new(
        thread: &ThreadId,
        ns: &Namespace,
        options: &ListOptions,
    ) -> Result<HistoryQuery, CheckpointError> {
        let mut q = HistoryQuery {
            sql: header_query!("WHERE thread = ?1 AND ns = ?2").to_owned(),
            values: vec![
                thread.as_str().to_owned().into(),
                ns.as_str().to_owned().into(),
            ],
        };
        if let Some(before) = options.before {
            let n = q.bind(id_bytes(before).to_vec());
            q.sql.push_str(&format!(" AND id < ?{n}"));
        }
        for (key, value) in &options.filter {
            validate_filter_key(key)?;
            q.filter(key, value);
        }
        q.sql.push_str(" ORDER BY id DESC");
        if let Some(limit) = options.limit {
            let n = q.bind(i64::try_from(limit).unwrap_or(i64::MAX));
            q.sql.push_str(&format!(" LIMIT ?{n}"));
        }
        Ok(q)
    }

    /// Add the condition "metadata `key` is `value`" (`source` and `step` are columns).
    fn filter(&mut self, key: &str, value: &serde_json::Value) {
        match key {
            "source" => {
                let n = self.bind(value.as_str().unwrap_or_default().to_owned());
                self.sql.push_str(&format!(" AND source = ?{n}"));
            }
            "step" => {
                let n = self.bind(value.as_i64().unwrap_or(i64::MIN));
                self.sql.push_str(&format!(" AND step = ?{n}"));
            }
            _ => {
                let path = self.bind(format!("$.\"{key}\""));
                let val = self.bind(value.to_string());
                // Same type and same value: a missing key never matches (not even `null`),
                // `1` is not `1.0`, and `true` is not `1` (SQLite extracts it as 1).
                self.sql.push_str(&format!(
                    " AND json_type(metadata, ?{path}) IS json_type(?{val}, '$') \
                     AND json_extract(metadata, ?{path}) IS json_extract(?{val}, '$')"
                ));
            }
        }
    }
}

/// A thread's checkpoints, newest first, as `options` select them.
pub(crate) fn list(
    conn: &Connection,
    cache: &Mutex<RecordCache>,
    thread: &ThreadId,
    ns: &Namespace,
    options: &ListOptions,
) -> Result<Vec<Checkpoint>, CheckpointError> {
    let t = thread.as_str();
    let q = HistoryQuery::new(thread, ns, options)?;
    let mut stmt = conn
        .prepare_cached(&q.sql)
        .during("preparing the history query")?;
    let rows: Vec<HeaderRow> = stmt
        .query_map(rusqlite::params_from_iter(q.values), HeaderRow::from_row)
        .during("reading the history")?
        .collect::<Result<_, _>>()
        .during("reading the history")?;
    // Rebuild records oldest first, so each delta finds its parent's record in the memo.
    let mut memo: HashMap<i64, Arc<StateRecord>> = HashMap::new();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| rows[i].seq);
    for i in order {
        let known = |s: i64| {
            memo.get(&s)
                .cloned()
                .or_else(|| cache.lock().unpoisoned().get(s))
        };
        let record = load_record(conn, &known, rows[i].seq, t)?;
        memo.insert(rows[i].seq, record);
    }
    rows.iter()
        .map(|h| {
            let record = memo.get(&h.seq).cloned().unwrap_or_default();
            h.checkpoint(&record, t)
        })
        .collect()
}

/// Every thread with checkpoints in the root namespace, by name; a stored name that is not a
/// valid thread id is left out.
pub(crate) fn list_threads(
    conn: &Connection,
    cache: &Mutex<RecordCache>,
) -> Result<Vec<ThreadInfo>, CheckpointError> {
    let mut stmt = conn
        .prepare_cached("SELECT thread, count(*) FROM sg_checkpoints WHERE ns = '' GROUP BY thread ORDER BY thread")
        .during("preparing the threads query")?;
    let threads: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .during("reading the threads")?
        .collect::<Result<_, _>>()
        .during("reading the threads")?;
    let mut out = Vec::new();
    let root = Namespace::root();
    for (thread, count) in threads {
        // A stored name that is not a valid id (only an edit of the file makes one) cannot be
        // named through the saver: it is left out here rather than failing the whole list;
        // `inspect::namespaces` lists it and `verify` reports it.
        let Ok(id) = ThreadId::new(thread) else {
            continue;
        };
        if let Some(head) = Reader::new(conn, cache, &id, &root).get(None)? {
            out.push(ThreadInfo {
                thread: id,
                checkpoints: usize::try_from(count).unwrap_or(0),
                last_step: head.checkpoint.step,
                status: ThreadStatus::of(&head),
                updated_at_ms: head.checkpoint.created_at_ms,
            });
        }
    }
    Ok(out)
}

/// Every namespace of `thread` with its count and its oldest and newest checkpoint ids (16
/// big-endian bytes, so byte order is id order), by namespace text.
pub(crate) fn list_namespaces(
    conn: &Connection,
    thread: &ThreadId,
) -> Result<Vec<NamespaceInfo>, CheckpointError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT ns, count(*), min(id), max(id) FROM sg_checkpoints WHERE thread = ?1 \
             GROUP BY ns ORDER BY ns",
        )
        .during("preparing the namespaces query")?;
    let rows: Vec<(String, i64, Vec<u8>, Vec<u8>)> = stmt
        .query_map([thread.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .during("reading the namespaces")?
        .collect::<Result<_, _>>()
        .during("reading the namespaces")?;
    rows.into_iter()
        .map(|(ns, count, first, last)| {
            Ok(NamespaceInfo::new(
                Namespace::parse(&ns),
                usize::try_from(count).unwrap_or(0),
                id_from(&first, thread.as_str())?,
                id_from(&last, thread.as_str())?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CheckpointId;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn every_filter_value_is_a_parameter() -> TestResult {
        let thread = ThreadId::new("t")?;
        let mut options = ListOptions {
            before: Some(CheckpointId::from_u128(7)),
            limit: Some(3),
            ..ListOptions::default()
        };
        options
            .filter
            .insert("source".into(), serde_json::json!("loop"));
        options
            .filter
            .insert("who".into(), serde_json::json!("x' OR 1=1 --"));
        let q = HistoryQuery::new(&thread, &Namespace::root(), &options)?;
        assert!(!q.sql.contains("OR 1=1"), "{}", q.sql);
        assert!(!q.sql.contains("who"), "{}", q.sql);
        assert_eq!(q.values.len(), 7);
        assert_eq!(q.values[4], Value::Text("$.\"who\"".into()));
        assert_eq!(q.values[5], Value::Text("\"x' OR 1=1 --\"".into()));
        assert!(q.sql.ends_with(" ORDER BY id DESC LIMIT ?7"), "{}", q.sql);
        Ok(())
    }

    #[test]
    fn a_key_outside_the_grammar_is_refused() -> TestResult {
        let thread = ThreadId::new("t")?;
        let mut options = ListOptions::default();
        options
            .filter
            .insert("a\" OR 1=1".into(), serde_json::json!(1));
        assert!(matches!(
            HistoryQuery::new(&thread, &Namespace::root(), &options),
            Err(CheckpointError::InvalidFilterKey { .. })
        ));
        Ok(())
    }
}
