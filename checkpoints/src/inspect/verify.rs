//! Checking a whole checkpoint file: what [`verify`] looked at and found, and the proof that
//! every checkpoint loads (by its delta on its parent's record) after the raw table scans.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use super::existing::check_existing;
use super::run_tables;
use super::tables;
use crate::envelope::hex;
use crate::sqlite::high_water;
use crate::sqlite::read_only::read_unchanged;
use crate::sqlite::{load_all, LoadRow, Outcome, Values, WithWrites};
use crate::{CheckpointError, SqliteSaver};

/// A problem [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Where: a table name (`sg_blobs`, `sg_log_parts`, `sg_checkpoints`, `sg_writes`,
    /// `sg_logs`, `sg_meta`, `sg_runs`, `sg_receipts`) or `sqlite` for the database's own check.
    pub table: String,
    /// Which row: a blob's id and hash, a log part, a checkpoint with its thread and
    /// namespace.
    pub key: String,
    /// What is wrong.
    pub detail: String,
}

/// How much [`verify`] looked at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyCounts {
    /// Whether SQLite's `PRAGMA integrity_check` said `ok`.
    pub sqlite_ok: bool,
    /// Rows of `sg_blobs` whose envelope was checked.
    pub blobs: usize,
    /// Rows of `sg_logs`.
    pub logs: usize,
    /// Rows of `sg_log_parts` (inline envelopes checked, blob references resolved).
    pub log_parts: usize,
    /// Rows of `sg_checkpoints` (record envelope and parent link checked).
    pub checkpoints: usize,
    /// Checkpoints proven to load whole (record rebuilt from its parent's by its delta,
    /// every field's value and log parts found readable, pending writes read).
    pub loaded: usize,
    /// Rows of `sg_writes` (pending writes) whose envelope was checked.
    pub writes: usize,
    /// Distinct `(thread, namespace)` pairs.
    pub namespaces: usize,
    /// Rows of `sg_runs` (ids, status and metadata checked).
    #[serde(default)]
    pub runs: usize,
    /// Rows of `sg_receipts` (JSON checked, and that their run is stored).
    #[serde(default)]
    pub receipts: usize,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// What was checked.
    pub counts: VerifyCounts,
    /// Every problem found, in the order found (raw table scans first, then loads).
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    pub(super) fn problem(
        &mut self,
        table: &str,
        key: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.problems.push(Problem {
            table: table.to_owned(),
            key: key.into(),
            detail: detail.into(),
        });
    }
}

pub(super) fn cp_key(thread: &str, ns: &str, id: &[u8]) -> String {
    if ns.is_empty() {
        format!("checkpoint {} (thread {thread:?})", hex(id))
    } else {
        format!(
            "checkpoint {} (thread {thread:?}, namespace {ns:?})",
            hex(id)
        )
    }
}

/// Check a whole checkpoint file:
///
/// - SQLite's `PRAGMA integrity_check` and the format version in `sg_meta`;
/// - every envelope against its stored hash: `sg_blobs.data`, inline `sg_log_parts.data`,
///   `sg_checkpoints.body`, `sg_writes.data` (and that JSON payloads parse);
/// - every reference: a log part's blob, a log's base log, a checkpoint's `parent` (in the
///   same thread and namespace) and `parent_seq`, a pending write's checkpoint, a delivery
///   receipt's run;
/// - every run's id, thread, status and metadata, every receipt's JSON;
/// - that no committed checkpoint is missing: the file's newest checkpoint row is not below
///   the one its high-water record (`<file>-highwater`) names;
/// - every checkpoint of every thread and namespace loads: its record is rebuilt by applying
///   its delta to its parent's rebuilt record (parent before child, from each whole record
///   down), its header and control state read, every field's value, and every log part of
///   its lists, found readable by the scans above, its pending writes read.
///
/// Each row is read and each envelope hashed once, so the check is linear in the file, not
/// in the sum of the threads' histories (a load of every checkpoint would read each list
/// whole again). A problem does not stop the check: each is reported with where it is. The
/// file is not changed: it is opened read-only ([`SqliteSaver::open_read_only`]).
///
/// # Errors
/// Only when the file cannot be checked at all: missing, not an SQLite database, not a
/// stategraph file, a missing or unreadable format record
/// ([`CheckpointError::FormatRecord`]), or a newer format.
pub async fn verify(path: &Path) -> Result<VerifyReport, CheckpointError> {
    check_existing(path)?;
    // Read-only: a verify writes nothing, and reports a damaged format record instead of
    // repairing it.
    let saver = SqliteSaver::open_read_only(path)?;
    // The scans read the file read-only too, again if a writer changed it meanwhile.
    let (mut report, unchanged) = read_unchanged(path, |conn| {
        // SQLite's own check reads every page again: on a connection of its own, beside ours.
        std::thread::scope(|scope| {
            let sqlite = scope.spawn(|| sqlite_report(path));
            let mut report = VerifyReport::default();
            let scanned = scan_tables(conn, &mut report);
            load_check(conn, scanned, &mut report);
            high_water_check(conn, path, &mut report);
            let mut first = sqlite.join().unwrap_or_else(|_| {
                let mut r = VerifyReport::default();
                r.problem("sqlite", "integrity_check", "the check's thread failed");
                r
            });
            report.counts.sqlite_ok = first.counts.sqlite_ok;
            first.problems.append(&mut report.problems);
            report.problems = first.problems;
            report
        })
    })?;
    if !unchanged {
        report.problem(
            "sqlite",
            "-",
            "a writer kept changing the file during the check; run verify again",
        );
    }
    saver.close()?;
    Ok(report)
}

/// Compare the file with its high-water record: a problem if it lost committed checkpoints.
fn high_water_check(conn: &Connection, path: &Path, report: &mut VerifyReport) {
    match high_water::check(conn, path) {
        Ok(None) => {}
        Ok(Some(lost)) => report.problem(
            "sg_checkpoints",
            format!("checkpoint {} (thread {:?})", lost.checkpoint, lost.thread),
            format!(
                "committed but missing: the high-water record names row {} as the newest \
                 committed checkpoint, and the file ends at row {} (its -wal was damaged or \
                 lost; every commit after that row is gone)",
                lost.recorded, lost.found
            ),
        ),
        Err(e) => report.problem("sg_meta", "file_id", e.to_string()),
    }
}

/// SQLite's `PRAGMA integrity_check` on a read-only connection of its own.
fn sqlite_report(path: &Path) -> VerifyReport {
    let mut report = VerifyReport::default();
    let checked = crate::sqlite::read_only::connect(path, &crate::SqliteOptions::default())
        .map_err(|e| e.to_string())
        .and_then(|c| tables::sqlite_check(&c.conn, &mut report).map_err(|e| e.to_string()));
    if let Err(e) = checked {
        report.problem("sqlite", "integrity_check", e);
    }
    report
}

/// What the raw scans hand to the load check.
struct Scanned {
    rows: Vec<LoadRow>,
    values: Values,
    with_writes: WithWrites,
}

/// Distinct `(thread, namespace)` pairs of `rows` (runs of rows of one pair counted once).
fn namespaces(rows: &[LoadRow]) -> usize {
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut last: Option<(&str, &str)> = None;
    for r in rows {
        let pair = (r.thread.as_str(), r.ns.as_str());
        if last != Some(pair) {
            seen.insert(pair);
            last = Some(pair);
        }
    }
    seen.len()
}

/// Prove every scanned checkpoint loadable; a problem for each that is not.
fn load_check(conn: &Connection, scanned: Scanned, report: &mut VerifyReport) {
    let (rows, outcomes) = load_all(conn, scanned.rows, &scanned.values, &scanned.with_writes);
    for (r, outcome) in rows.iter().zip(outcomes) {
        let key = || cp_key(&r.thread, &r.ns, &r.id.as_u128().to_be_bytes());
        match outcome {
            Outcome::Loaded => report.counts.loaded += 1,
            Outcome::BadThread(e) => report.problem("sg_checkpoints", key(), e),
            Outcome::NotJson(e) => {
                report.problem("sg_checkpoints", key(), format!("a field is not JSON: {e}"));
            }
            Outcome::Fails(e) => {
                report.problem("sg_checkpoints", key(), format!("does not load: {e}"));
            }
        }
    }
}

/// The raw table scans; returns the checkpoints to prove loadable and what the scans found
/// of values, logs and pending writes.
fn scan_tables(conn: &Connection, report: &mut VerifyReport) -> Scanned {
    if let Err(e) = tables::meta_check(conn, report) {
        report.problem("sg_meta", "format_version", e.to_string());
    }
    let blobs = match tables::blob_check(conn, report) {
        Ok(b) => b,
        Err(e) => {
            report.problem("sg_blobs", "-", format!("cannot read the table: {e}"));
            HashMap::new()
        }
    };
    let mut logs = match tables::log_check(conn, report) {
        Ok(l) => l,
        Err(e) => {
            report.problem("sg_logs", "-", format!("cannot read the table: {e}"));
            HashMap::new()
        }
    };
    if let Err(e) = tables::part_check(conn, report, &blobs, &mut logs) {
        report.problem("sg_log_parts", "-", format!("cannot read the table: {e}"));
    }
    let ids = match tables::checkpoint_check(conn, report) {
        Ok(ids) => ids,
        Err(e) => {
            report.problem("sg_checkpoints", "-", format!("cannot read the table: {e}"));
            Vec::new()
        }
    };
    let with_writes = match tables::writes_check(conn, report, &ids) {
        Ok(w) => w,
        Err(e) => {
            report.problem("sg_writes", "-", format!("cannot read the table: {e}"));
            WithWrites::default()
        }
    };
    match run_tables::runs_check(conn, report) {
        Ok(runs) => {
            if let Err(e) = run_tables::receipts_check(conn, report, &runs) {
                report.problem("sg_receipts", "-", format!("cannot read the table: {e}"));
            }
        }
        Err(e) => report.problem("sg_runs", "-", format!("cannot read the table: {e}")),
    }
    report.counts.namespaces = namespaces(&ids);
    Scanned {
        rows: ids,
        values: Values { blobs, logs },
        with_writes,
    }
}
