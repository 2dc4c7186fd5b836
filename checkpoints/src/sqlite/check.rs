//! Proving every checkpoint of a file loadable in one pass, for the inspector's `verify`:
//! each record is decoded once and applied on its parent's rebuilt record (walking every
//! thread's checkpoints from their whole records down, parent before child), and each field
//! is checked against what the raw scans found of the values and log parts (each opened and
//! hashed once there). A load through the saver of every checkpoint would rebuild its list
//! fields from all their parts: quadratic in a thread's length.
//!
//! What a load would report is reported the same way: a damaged record fails its own load
//! and that of every delta built on it; a missing or damaged value or log part fails every
//! checkpoint whose fields reach it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rusqlite::Connection;

use super::pending::load_writes;
use super::record_view::{FieldRef, Fields, Names, RowFields};
use super::sql::{id_from, integrity};
use crate::envelope::hex;
use crate::{CheckpointError, CheckpointId, Namespace, ThreadId};

/// Longest chain of log bases a list check follows (as a load does).
const MAX_LOG_BASES: usize = 10_000;

/// What the raw scan found of one value row (`sg_blobs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BlobState {
    /// Its envelope opened and its payload is JSON (`array`: a JSON array).
    Json { array: bool },
    /// Its envelope does not open (hash mismatch, bad header): `hash` in hex, what is wrong.
    Damaged { hash: String, detail: String },
    /// Its payload is not JSON.
    NotJson(String),
}

/// Why a log part cannot be part of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PartFault {
    /// Its envelope (or that of the value it refers to) does not open.
    Damaged { hash: String, detail: String },
    /// Neither a readable value reference nor inline data.
    Unreadable,
    /// Its payload is not JSON, or inline items are not a JSON array.
    NotJson(String),
    /// Parts are missing from here on.
    Gap,
}

/// One log as the raw scan found it: its base, and how far its own parts are readable.
#[derive(Debug, Clone)]
pub(crate) struct LogState {
    base: Option<i64>,
    base_parts: i64,
    /// The first of its own parts that is not readable (or one past its last).
    next: i64,
    /// Why part `next` is not readable (`None`: the log ends there).
    stop: Option<PartFault>,
    /// Its readable parts that hold a whole value, and whether that value is a JSON array.
    wholes: Vec<(i64, bool)>,
    /// The value row its part 0 refers to, if it does.
    first_blob: Option<i64>,
}

impl LogState {
    pub(crate) fn new(base: Option<i64>, base_parts: i64) -> Self {
        let first = if base.is_some() { base_parts } else { 0 };
        LogState {
            base,
            base_parts,
            next: first,
            stop: None,
            wholes: Vec::new(),
            first_blob: None,
        }
    }

    /// The log it rests on, if any.
    pub(crate) fn base(&self) -> Option<i64> {
        self.base
    }

    /// The value row its part 0 refers to, if it does.
    pub(crate) fn first_blob(&self) -> Option<i64> {
        self.first_blob
    }

    /// Note that its part 0 refers to value row `blob`.
    pub(crate) fn set_first_blob(&mut self, blob: i64) {
        self.first_blob = Some(blob);
    }

    /// Whether the log is a root log (it rests on no base log).
    pub(crate) fn is_root(&self) -> bool {
        self.base.is_none()
    }

    /// Part `part` (parts come in ascending order): `Ok(Some(array))` a whole value,
    /// `Ok(None)` appended items.
    pub(crate) fn part(&mut self, part: i64, read: Result<Option<bool>, PartFault>) {
        if self.stop.is_some() || part < self.next {
            return;
        }
        if part > self.next {
            self.stop = Some(PartFault::Gap);
            return;
        }
        match read {
            Ok(whole) => {
                if let Some(array) = whole {
                    self.wholes.push((part, array));
                }
                self.next += 1;
            }
            Err(fault) => self.stop = Some(fault),
        }
    }
}

/// What the raw scans found of values and logs, by row id.
#[derive(Debug, Default)]
pub(crate) struct Values {
    pub(crate) blobs: HashMap<i64, BlobState>,
    pub(crate) logs: HashMap<i64, LogState>,
}

/// Bytes of a column that are almost always `N` long: kept without an allocation then.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Fixed<const N: usize> {
    Exact([u8; N]),
    Other(Box<[u8]>),
}

impl<const N: usize> Fixed<N> {
    pub(crate) fn new(bytes: &[u8]) -> Self {
        match <[u8; N]>::try_from(bytes) {
            Ok(a) => Fixed::Exact(a),
            Err(_) => Fixed::Other(bytes.into()),
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Fixed::Exact(a) => a,
            Fixed::Other(b) => b,
        }
    }
}

/// One checkpoint row to prove loadable, as the whole-file scan read it.
pub(crate) struct LoadRow {
    /// Its thread and namespace (names shared by every row of theirs).
    pub(crate) thread: Arc<str>,
    pub(crate) ns: Arc<str>,
    pub(crate) id: CheckpointId,
    pub(crate) seq: i64,
    pub(crate) parent_seq: Option<i64>,
    /// Why its thread name is not a valid thread id, if it is not.
    pub(crate) bad_thread: Option<Arc<str>>,
    /// Why its header would not make a checkpoint (see [`header_fault`]), if it would not.
    pub(crate) header: Option<Box<CheckpointError>>,
    /// The record's hash, for errors.
    pub(crate) hash: Fixed<32>,
    /// The record as the check keeps it, or what is wrong with its envelope or encoding.
    pub(crate) body: Result<RowFields, String>,
}

/// Whether one checkpoint loads.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Its record, header, fields and pending writes all load.
    Loaded,
    /// Its thread name is not a valid thread id.
    BadThread(String),
    /// It does not load: what a load would have said.
    Fails(CheckpointError),
    /// It loads, but a field's value is not JSON.
    NotJson(String),
}

/// Why a record cannot be rebuilt (the row named is the one at fault).
#[derive(Debug, Clone)]
struct ChainFault {
    checkpoint: String,
    blob: String,
    detail: String,
}

/// Why a list cannot be read.
#[derive(Debug, Clone)]
enum ListFault {
    Fails { blob: String, detail: String },
    NotJson(String),
}

/// The checkpoints that have pending writes, by id, then thread and namespace (ids repeat
/// only across threads that were copied), looked up without building a key.
#[derive(Debug, Default)]
pub(crate) struct WithWrites(HashMap<u128, Vec<(String, String)>>);

impl WithWrites {
    /// Note that checkpoint `id` of `(thread, ns)` has pending writes.
    pub(crate) fn insert(&mut self, thread: &str, ns: &str, id: u128) {
        let at = self.0.entry(id).or_default();
        if !at.iter().any(|(t, n)| t == thread && n == ns) {
            at.push((thread.to_owned(), ns.to_owned()));
        }
    }

    /// Whether checkpoint `id` of `(thread, ns)` has pending writes.
    pub(crate) fn contains(&self, thread: &str, ns: &str, id: u128) -> bool {
        self.0
            .get(&id)
            .is_some_and(|at| at.iter().any(|(t, n)| t == thread && n == ns))
    }
}

/// Prove each of `rows` loadable; the rows back, with the outcome of each that does not load
/// as `(row index, outcome)`, in row order (every other row loads). `with_writes` holds the checkpoints that have pending writes (read through the saver's own
/// code, as a load does); `names` the field names the scan met.
pub(crate) fn load_all(
    conn: &Connection,
    rows: Vec<LoadRow>,
    values: &Values,
    with_writes: &WithWrites,
    names: &Names,
) -> (Vec<LoadRow>, Vec<(usize, Outcome)>) {
    let mut walk = Walk::new(rows);
    let mut out: Vec<(usize, Outcome)> = Vec::new();
    let mut lists = HashMap::new();
    let mut check = |row: &mut LoadRow, record: &Fields| {
        let at = Checked {
            values,
            lists: &mut lists,
            names,
        };
        check_row(conn, row, record, at, with_writes)
    };
    walk.down_from_whole(|i, row, record| match check(row, record) {
        Outcome::Loaded => {}
        failed => out.push((i, failed)),
    });
    for (i, fault) in walk.unbuilt() {
        let row = &walk.rows[i];
        let e = integrity(&row.thread, &fault.checkpoint, fault.blob, fault.detail);
        let failed = match &row.bad_thread {
            None => Outcome::Fails(e),
            Some(t) => Outcome::BadThread(t.to_string()),
        };
        out.push((i, failed));
    }
    out.sort_by_key(|(i, _)| *i);
    (walk.rows, out)
}

/// The rows (their records taken as they are applied), how they link, and which rebuilt.
struct Walk {
    rows: Vec<LoadRow>,
    /// Delta rows by the row they apply on, as linked lists: the first such row of each row,
    /// and the next one after each (no list of its own per row); [`NONE`] ends a list.
    first_child: Vec<usize>,
    next_sibling: Vec<usize>,
    /// Per row: [`UNKNOWN`], [`BUILT`] or [`FAULT`] (why: in `faults`).
    built: Vec<u8>,
    faults: HashMap<usize, ChainFault>,
}

/// No row (the end of a list of children).
const NONE: usize = usize::MAX;
/// A row's rebuild state: not yet known, rebuilt, cannot be.
const UNKNOWN: u8 = 0;
const BUILT: u8 = 1;
const FAULT: u8 = 2;

/// Row `seq`'s index in `rows`, in `seq` order.
fn index_of(rows: &[LoadRow], seq: i64) -> Option<usize> {
    rows.binary_search_by_key(&seq, |r| r.seq).ok()
}

impl Walk {
    fn new(mut rows: Vec<LoadRow>) -> Self {
        // The scan reads rows in `seq` order; sort in case a caller did not.
        if !rows.is_sorted_by_key(|r| r.seq) {
            rows.sort_by_key(|r| r.seq);
        }
        let n = rows.len();
        let mut first_child = vec![NONE; n];
        let mut next_sibling = vec![NONE; n];
        let mut built = vec![UNKNOWN; n];
        let mut faults = HashMap::new();
        for i in (0..n).rev() {
            let parent = rows[i].parent_seq;
            match &mut rows[i].body {
                Ok(stored) if stored.full => {}
                Ok(_) => {
                    if let Some(p) = parent.and_then(|ps| index_of(&rows, ps)) {
                        next_sibling[i] = std::mem::replace(&mut first_child[p], i);
                    }
                }
                Err(detail) => {
                    let detail = std::mem::take(detail);
                    let row = &rows[i];
                    built[i] = FAULT;
                    let fault = ChainFault {
                        checkpoint: hex(&row.id.as_u128().to_be_bytes()),
                        blob: hex(row.hash.as_slice()),
                        detail,
                    };
                    faults.insert(i, fault);
                }
            }
        }
        Walk {
            rows,
            first_child,
            next_sibling,
            built,
            faults,
        }
    }

    /// The delta rows that apply on row `i`, oldest first.
    fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let first = Some(self.first_child[i]).filter(|&c| c != NONE);
        std::iter::successors(first, |&c| {
            Some(self.next_sibling[c]).filter(|&n| n != NONE)
        })
    }

    /// Rebuild every record that rests on a whole one, parent before child, and hand each
    /// to `visit`; a record is kept only until its children are rebuilt (moved to its only
    /// child, copied for each of several).
    fn down_from_whole(&mut self, mut visit: impl FnMut(usize, &mut LoadRow, &Fields)) {
        let roots: Vec<usize> = (0..self.rows.len())
            .filter(|&i| self.rows[i].body.as_ref().is_ok_and(|b| b.full))
            .collect();
        let mut stack: Vec<(usize, Fields)> = Vec::new();
        for root in roots {
            stack.push((root, Fields::default()));
            while let Some((i, mut record)) = stack.pop() {
                let taken = std::mem::replace(&mut self.rows[i].body, Err(String::new()));
                let Ok(stored) = taken else {
                    continue;
                };
                record.apply(stored);
                self.built[i] = BUILT;
                visit(i, &mut self.rows[i], &record);
                let mut children = self.children(i).peekable();
                while let Some(c) = children.next() {
                    if children.peek().is_some() {
                        stack.push((c, record.clone()));
                    } else {
                        stack.push((c, record));
                        break;
                    }
                }
            }
        }
    }

    /// Every row not rebuilt, with why: its own record, or the first fault up its chain.
    fn unbuilt(&mut self) -> Vec<(usize, ChainFault)> {
        let mut out = Vec::new();
        for start in 0..self.rows.len() {
            if self.built[start] == BUILT {
                continue;
            }
            let fault = self.fault_of(start);
            out.push((start, fault));
        }
        out
    }

    /// Why row `start`'s record cannot be rebuilt; records the answer for its whole path.
    fn fault_of(&mut self, start: usize) -> ChainFault {
        let mut path = Vec::new();
        let mut on_path = HashSet::new();
        let mut cur = start;
        let fault = loop {
            if let Some(f) = self.faults.get(&cur).filter(|_| self.built[cur] == FAULT) {
                break f.clone();
            }
            let row = &self.rows[cur];
            let here = |detail: &str| ChainFault {
                checkpoint: hex(&row.id.as_u128().to_be_bytes()),
                blob: hex(row.hash.as_slice()),
                detail: detail.to_owned(),
            };
            if !on_path.insert(cur) {
                break here("delta chain does not end");
            }
            path.push(cur);
            let Some(ps) = row.parent_seq else {
                break here("a delta record without parent");
            };
            let Some(p) = index_of(&self.rows, ps) else {
                break ChainFault {
                    checkpoint: "-".to_owned(),
                    blob: format!("sg_checkpoints row {ps}"),
                    detail: "a delta record's parent row is missing".to_owned(),
                };
            };
            cur = p;
        };
        for i in path {
            self.built[i] = FAULT;
            self.faults.insert(i, fault.clone());
        }
        fault
    }
}

/// Why a checkpoint row's header would not make a checkpoint, checked in the order
/// [`HeaderRow::checkpoint`](super::read::HeaderRow::checkpoint) checks it: its source, its metadata (`metadata`: why it is not a
/// JSON object), a pending send's argument (`bad_send`: why it is not JSON), its parent's id.
pub(crate) fn header_fault(
    thread: &str,
    id: CheckpointId,
    source: &str,
    metadata: Option<&str>,
    bad_send: Option<&str>,
    parent: Option<&[u8]>,
) -> Option<CheckpointError> {
    let fail = |blob: &str, detail: String| integrity(thread, &id.to_string(), blob, detail);
    if !matches!(source, "input" | "loop" | "update" | "fork") {
        let detail = format!("unknown source {source:?}");
        return Some(fail("sg_checkpoints.source", detail));
    }
    if let Some(e) = metadata {
        return Some(fail("sg_checkpoints.metadata", e.to_owned()));
    }
    if let Some(e) = bad_send {
        return Some(fail("control", e.to_owned()));
    }
    parent.and_then(|p| id_from(p, thread).err())
}

/// What the field checks read and remember.
struct Checked<'a> {
    values: &'a Values,
    lists: &'a mut HashMap<(i64, i64), Result<(), ListFault>>,
    names: &'a Names,
}

/// Whether one rebuilt checkpoint loads: its header, its fields, its pending writes.
fn check_row(
    conn: &Connection,
    row: &mut LoadRow,
    record: &Fields,
    at: Checked<'_>,
    with_writes: &WithWrites,
) -> Outcome {
    if let Some(e) = &row.bad_thread {
        return Outcome::BadThread(e.to_string());
    }
    if let Some(e) = row.header.take() {
        return Outcome::Fails(*e);
    }
    let t = &*row.thread;
    // A load reads the fields in name order and stops at the first that fails: the failure
    // (and the value that is not JSON) reported is that of the first such field by name.
    let mut fails: Option<(&str, String, String)> = None;
    let mut not_json: Option<(&str, String)> = None;
    for (name, r) in record.iter() {
        let name = at.names.name(*name);
        let fault = match *r {
            FieldRef::Inline => None,
            FieldRef::InlineNotJson(ref e) => Some(ListFault::NotJson(e.to_string())),
            FieldRef::Blob(id) => blob_fault(at.values, id, name),
            FieldRef::Log { log, parts } => match at.values.logs.get(&log) {
                // A root log: checked in a few steps, no need to remember the answer.
                Some(state) if state.base.is_none() => list_check(at.values, log, parts).err(),
                _ => at
                    .lists
                    .entry((log, parts))
                    .or_insert_with(|| list_check(at.values, log, parts))
                    .clone()
                    .err(),
            },
        };
        match fault {
            None => {}
            Some(ListFault::NotJson(e)) if not_json.as_ref().is_none_or(|(n, _)| name < *n) => {
                not_json = Some((name, e));
            }
            Some(ListFault::Fails { blob, detail })
                if fails.as_ref().is_none_or(|(n, _, _)| name < *n) =>
            {
                fails = Some((name, blob, detail));
            }
            Some(_) => {}
        }
    }
    if let Some((name, blob, detail)) = fails {
        let detail = detail.replace("{field}", &format!("{name:?}"));
        return Outcome::Fails(integrity(t, &row.id.to_string(), blob, detail));
    }
    if with_writes.contains(t, &row.ns, row.id.as_u128()) {
        let thread = match ThreadId::new(t.to_owned()) {
            Ok(t) => t,
            Err(e) => return Outcome::BadThread(e.to_string()),
        };
        if let Err(e) = load_writes(conn, &thread, &Namespace::parse(&row.ns), row.id) {
            return Outcome::Fails(e);
        }
    }
    not_json.map_or(Outcome::Loaded, |(name, e)| {
        Outcome::NotJson(format!("field {name:?}: {e}"))
    })
}

/// What is wrong with a field's value row, if anything.
fn blob_fault(values: &Values, id: i64, name: &str) -> Option<ListFault> {
    match values.blobs.get(&id) {
        None => Some(ListFault::Fails {
            blob: format!("blob {id}"),
            detail: format!("field {name:?}: blob is missing"),
        }),
        Some(BlobState::Damaged { hash, detail }) => Some(ListFault::Fails {
            blob: hash.clone(),
            detail: format!("field {name:?}: {detail}"),
        }),
        Some(BlobState::NotJson(e)) => Some(ListFault::NotJson(e.clone())),
        Some(BlobState::Json { .. }) => None,
    }
}

/// Whether the list of the first `parts` parts of log `log` reads (`{field}` in a detail
/// stands for the field's name, filled in per checkpoint).
fn list_check(values: &Values, log: i64, parts: i64) -> Result<(), ListFault> {
    let fails = |blob: String, detail: &str| ListFault::Fails {
        blob,
        detail: detail.to_owned(),
    };
    let mut segments = Vec::new();
    let (mut cur, mut upto) = (log, parts);
    loop {
        let Some(state) = values.logs.get(&cur) else {
            return Err(fails(format!("log {cur}"), "field {field}: log is missing"));
        };
        segments.push((cur, state, upto));
        match state.base {
            None => break,
            Some(_) if segments.len() >= MAX_LOG_BASES => {
                return Err(fails(format!("log {log}"), "log bases do not end"));
            }
            Some(b) => (cur, upto) = (b, state.base_parts),
        }
    }
    let mut last_whole: Option<(i64, bool)> = None;
    for (id, state, upto) in segments.into_iter().rev() {
        if state.next < upto {
            return Err(part_fault(id, state));
        }
        if let Some(&w) = state.wholes.iter().rev().find(|(p, _)| *p < upto) {
            last_whole = Some(w);
        }
    }
    match last_whole {
        Some((p, false)) if p + 1 < parts => Err(ListFault::NotJson(
            "appended items after a value that is not a list".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// Why log `log`'s part `state.next` cannot be read.
fn part_fault(log: i64, state: &LogState) -> ListFault {
    let at = format!("log {log} part {}", state.next);
    let fails = |blob: String, detail: &str| ListFault::Fails {
        blob,
        detail: detail.to_owned(),
    };
    match &state.stop {
        None => fails(at, "field {field}: log is truncated"),
        Some(PartFault::Gap) => fails(at, "field {field}: log part is missing"),
        Some(PartFault::Unreadable) => fails(at, "field {field}: unreadable log part"),
        Some(PartFault::Damaged { hash, detail }) => fails(hash.clone(), detail),
        Some(PartFault::NotJson(e)) => ListFault::NotJson(e.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::read::HeaderRow;
    use crate::sqlite::record::StateRecord;
    use crate::sqlite::sql::id_bytes;
    use std::collections::BTreeMap;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_header_check_fails_exactly_where_building_the_checkpoint_does() -> TestResult {
        let id = id_bytes(CheckpointId::from_u128(7)).to_vec();
        let header = |source: &str, metadata: &str, parent: Option<Vec<u8>>| HeaderRow {
            seq: 1,
            id: id.clone(),
            parent,
            step: 0,
            source: source.into(),
            created_at: 0,
            metadata: metadata.into(),
        };
        let mut sends = StateRecord::default();
        Arc::make_mut(&mut sends.control).sends = vec![("n".into(), "{not json".into())];
        let clean = StateRecord::default();
        let cases = [
            (header("loop", "{}", None), &clean, true),
            (
                header("fork", r#"{"a":[1]}"#, Some(id.clone())),
                &clean,
                true,
            ),
            (header("sideways", "{}", None), &clean, false),
            (header("loop", "[1]", None), &clean, false),
            (header("loop", "{}", Some(vec![1, 2])), &clean, false),
            (header("loop", "{}", None), &sends, false),
        ];
        for (i, (h, record, ok)) in cases.iter().enumerate() {
            assert_eq!(h.checkpoint(record, "t").is_ok(), *ok, "case {i}");
            let bad_send = record
                .control
                .sends
                .iter()
                .find_map(|(_, a)| serde_json::from_str::<serde::de::IgnoredAny>(a).err())
                .map(|e| e.to_string());
            let metadata =
                serde_json::from_str::<BTreeMap<String, serde::de::IgnoredAny>>(&h.metadata)
                    .err()
                    .map(|e| e.to_string());
            let fault = header_fault(
                "t",
                CheckpointId::from_u128(7),
                &h.source,
                metadata.as_deref(),
                bad_send.as_deref(),
                h.parent.as_deref(),
            );
            assert_eq!(fault.is_none(), *ok, "case {i}");
        }
        Ok(())
    }
}
