//! The scans of [`verify`](super::verify()), on two threads: SQLite's own check and then the
//! value tables (blobs, logs, log parts) on a read-only connection of their own, beside the
//! checkpoint, pending-write and run scans; then the proof that every checkpoint loads, which
//! needs both. The report lists problems in one order whatever thread found them: SQLite's
//! check, the format record, the values, the checkpoints and the rest, then the loads.

use std::collections::HashSet;
use std::path::Path;

use rusqlite::Connection;

use super::verify::{cp_key, VerifyReport};
use super::{checkpoint_rows, holder_check, run_tables, tables};
use crate::sqlite::read_only::connect;
use crate::sqlite::{load_all, LoadRow, Names, Outcome, Values, WithWrites};
use crate::SqliteOptions;

/// Check the whole file on `conn` (and a second connection to `path`); the report without
/// the high-water check.
pub(super) fn scan_file(conn: &Connection, path: &Path) -> VerifyReport {
    std::thread::scope(|scope| {
        let side = scope.spawn(|| side_scans(path));
        let mut meta = VerifyReport::default();
        if let Err(e) = tables::meta_check(conn, &mut meta) {
            meta.problem("sg_meta", "format_version", e.to_string());
        }
        let mut rest = VerifyReport::default();
        let mut names = Names::default();
        let (rows, with_writes) = checkpoint_scans(conn, &mut rest, &mut names);
        let (mut report, values) = match side.join() {
            Ok(Ok((sqlite, values_report, values))) => {
                let mut report = sqlite;
                report.append(meta);
                report.append(values_report);
                (report, values)
            }
            // The second connection did not open (or its thread failed): the values are
            // scanned here, and SQLite's check is reported as not run.
            failed => {
                let mut report = VerifyReport::default();
                let why = match failed {
                    Ok(Err(e)) => e,
                    _ => "its thread failed".to_owned(),
                };
                report.problem("sqlite", "integrity_check", format!("not run: {why}"));
                report.append(meta);
                let mut values_report = VerifyReport::default();
                let values = value_scans(conn, &mut values_report);
                report.append(values_report);
                (report, values)
            }
        };
        report.append(rest);
        // A format-3 file's holder index must name every hold (value collection trusts it).
        if tables::format_version(conn).is_ok_and(|v| v >= Some(3)) {
            if let Err(e) = holder_check::holder_check(conn, &rows, &values, &mut report) {
                report.problem("sg_holders", "-", format!("cannot read the table: {e}"));
            }
        }
        let scanned = Scanned {
            rows,
            values,
            with_writes,
            names,
        };
        load_check(conn, scanned, &mut report);
        report
    })
}

/// SQLite's `PRAGMA integrity_check`, then the value scans, on a connection of their own:
/// the two reports and the values found.
fn side_scans(path: &Path) -> Result<(VerifyReport, VerifyReport, Values), String> {
    let side = connect(path, &SqliteOptions::default()).map_err(|e| e.to_string())?;
    let mut sqlite = VerifyReport::default();
    if let Err(e) = tables::sqlite_check(&side.conn, &mut sqlite) {
        sqlite.problem("sqlite", "integrity_check", e.to_string());
    }
    let mut report = VerifyReport::default();
    let values = value_scans(&side.conn, &mut report);
    Ok((sqlite, report, values))
}

/// What the raw scans hand to the load check.
struct Scanned {
    rows: Vec<LoadRow>,
    values: Values,
    with_writes: WithWrites,
    names: Names,
}

/// The value rows: blobs, logs and log parts.
fn value_scans(conn: &Connection, report: &mut VerifyReport) -> Values {
    let blobs = tables::blob_check(conn, report).unwrap_or_else(|e| {
        report.problem("sg_blobs", "-", format!("cannot read the table: {e}"));
        Default::default()
    });
    let mut logs = tables::log_check(conn, report).unwrap_or_else(|e| {
        report.problem("sg_logs", "-", format!("cannot read the table: {e}"));
        Default::default()
    });
    // In a format-3 file only part 0 of a root log refers to a value row (value collection
    // counts on it).
    let format3 = tables::format_version(conn).is_ok_and(|v| v >= Some(3));
    if let Err(e) = tables::part_check(conn, report, &blobs, &mut logs, format3) {
        report.problem("sg_log_parts", "-", format!("cannot read the table: {e}"));
    }
    Values { blobs, logs }
}

/// The checkpoint rows, pending writes, runs and receipts: the checkpoints to prove
/// loadable and which of them have pending writes.
fn checkpoint_scans(
    conn: &Connection,
    report: &mut VerifyReport,
    names: &mut Names,
) -> (Vec<LoadRow>, WithWrites) {
    let ids = checkpoint_rows::checkpoint_check(conn, report, names).unwrap_or_else(|e| {
        report.problem("sg_checkpoints", "-", format!("cannot read the table: {e}"));
        Vec::new()
    });
    let with_writes = tables::writes_check(conn, report, &ids).unwrap_or_else(|e| {
        report.problem("sg_writes", "-", format!("cannot read the table: {e}"));
        WithWrites::default()
    });
    match run_tables::runs_check(conn, report) {
        Ok(runs) => {
            if let Err(e) = run_tables::receipts_check(conn, report, &runs) {
                report.problem("sg_receipts", "-", format!("cannot read the table: {e}"));
            }
        }
        Err(e) => report.problem("sg_runs", "-", format!("cannot read the table: {e}")),
    }
    report.counts.namespaces = namespaces(&ids);
    (ids, with_writes)
}

/// Distinct `(thread, namespace)` pairs of `rows` (runs of rows of one pair counted once).
fn namespaces(rows: &[LoadRow]) -> usize {
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut last: Option<(&str, &str)> = None;
    for r in rows {
        let pair = (&*r.thread, &*r.ns);
        if last != Some(pair) {
            seen.insert(pair);
            last = Some(pair);
        }
    }
    seen.len()
}

/// Prove every scanned checkpoint loadable; a problem for each that is not.
fn load_check(conn: &Connection, scanned: Scanned, report: &mut VerifyReport) {
    let (rows, outcomes) = load_all(
        conn,
        scanned.rows,
        &scanned.values,
        &scanned.with_writes,
        &scanned.names,
    );
    let failed = outcomes
        .iter()
        .filter(|(_, o)| !matches!(o, Outcome::Loaded))
        .count();
    report.counts.loaded += rows.len() - failed;
    for (i, outcome) in outcomes {
        let Some(r) = rows.get(i) else { continue };
        let key = || cp_key(&r.thread, &r.ns, &r.id.as_u128().to_be_bytes());
        match outcome {
            Outcome::Loaded => {}
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
