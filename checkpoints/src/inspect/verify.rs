//! Checking a whole checkpoint file: what [`verify`] looked at and found, and the proof that
//! every checkpoint loads (by its delta on its parent's record) after the raw table scans.

use std::path::Path;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use super::existing::check_existing;
use super::scan;
use crate::envelope::hex;
use crate::sqlite::high_water;
use crate::sqlite::read_only::read_unchanged;
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

    /// Add what `other` counted and found after what this report holds (each count is kept
    /// by one scan: they add up).
    pub(super) fn append(&mut self, other: VerifyReport) {
        let (c, o) = (&mut self.counts, other.counts);
        c.sqlite_ok |= o.sqlite_ok;
        c.blobs += o.blobs;
        c.logs += o.logs;
        c.log_parts += o.log_parts;
        c.checkpoints += o.checkpoints;
        c.loaded += o.loaded;
        c.writes += o.writes;
        c.namespaces += o.namespaces;
        c.runs += o.runs;
        c.receipts += o.receipts;
        self.problems.extend(other.problems);
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
        let mut report = scan::scan_file(conn, path);
        high_water_check(conn, path, &mut report);
        report
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
