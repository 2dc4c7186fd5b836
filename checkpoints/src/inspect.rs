//! Inspecting a SQLite checkpoint file from outside the program that wrote it: what the
//! `stategraph` inspector binary is built on, usable from tests and tools.
//!
//! - [`open_existing`] opens a file as a [`SqliteSaver`] only if it exists and is a stategraph
//!   file (a missing file is never created, another program's database never gets tables);
//! - [`verify`] checks every stored envelope against its hash, every parent link, SQLite's own
//!   `integrity_check`, and that every checkpoint loads;
//! - [`resolve_prefix`] finds a checkpoint by a unique prefix of its id;
//! - [`format_utc_ms`] shows a time stamp as ISO-8601 UTC.
//!
//! ```
//! use stategraph_checkpoints::inspect::format_utc_ms;
//! assert_eq!(format_utc_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
//! ```

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::envelope::{hex, open, CODEC_BINCODE, CODEC_JSON};
use crate::{CheckpointError, CheckpointId, Namespace, Saver, SqliteSaver, ThreadId};

/// Shortest checkpoint-id prefix [`resolve_prefix`] accepts, in hex digits.
pub const MIN_PREFIX_LEN: usize = 6;

/// A problem [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Where: a table name (`sg_blobs`, `sg_log_parts`, `sg_checkpoints`, `sg_writes`,
    /// `sg_logs`, `sg_meta`) or `sqlite` for the database's own check.
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
    /// Checkpoints that loaded whole through the saver (record rebuilt, every field read).
    pub loaded: usize,
    /// Rows of `sg_writes` (pending writes) whose envelope was checked.
    pub writes: usize,
    /// Distinct `(thread, namespace)` pairs.
    pub namespaces: usize,
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

    fn problem(&mut self, table: &str, key: impl Into<String>, detail: impl Into<String>) {
        self.problems.push(Problem {
            table: table.to_string(),
            key: key.into(),
            detail: detail.into(),
        });
    }
}

/// Why a checkpoint-id prefix did not name exactly one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Not hex, longer than 32 digits, or shorter than [`MIN_PREFIX_LEN`].
    #[error(
        "invalid checkpoint id {0:?}: expected 32 hex digits or a unique prefix of at least 6"
    )]
    Invalid(String),
    /// No checkpoint id starts with it.
    #[error("no checkpoint {0}")]
    NotFound(String),
    /// Several ids start with it (some of them listed).
    #[error("checkpoint prefix {prefix} is ambiguous: {} match ({})", .count, .examples.join(", "))]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// How many ids match.
        count: usize,
        /// Up to five of them (then `...` if there are more).
        examples: Vec<String>,
    },
}

/// Find the checkpoint among `ids` named by `text`: its full 32-digit id, or a prefix of at
/// least [`MIN_PREFIX_LEN`] hex digits that only one of them has (case-insensitive).
///
/// # Errors
/// [`PrefixError`]: malformed text, no match, or several matches.
pub fn resolve_prefix(
    ids: impl IntoIterator<Item = CheckpointId>,
    text: &str,
) -> Result<CheckpointId, PrefixError> {
    let prefix = text.trim().to_ascii_lowercase();
    if prefix.len() < MIN_PREFIX_LEN
        || prefix.len() > 32
        || !prefix.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Err(PrefixError::Invalid(text.chars().take(64).collect()));
    }
    let matches: Vec<CheckpointId> = ids
        .into_iter()
        .filter(|id| id.to_string().starts_with(&prefix))
        .collect();
    match matches.as_slice() {
        [] => Err(PrefixError::NotFound(prefix)),
        [one] => Ok(*one),
        many => {
            let mut unique: Vec<CheckpointId> = many.to_vec();
            unique.sort();
            unique.dedup();
            if let [one] = unique.as_slice() {
                return Ok(*one);
            }
            Err(PrefixError::Ambiguous {
                prefix,
                count: unique.len(),
                examples: unique
                    .iter()
                    .take(5)
                    .map(ToString::to_string)
                    .chain((unique.len() > 5).then(|| "...".to_string()))
                    .collect(),
            })
        }
    }
}

/// The shortest prefix length (at least 8, at most 32) that tells every id of `ids` apart:
/// ids are time-ordered, so ids made in the same second share their first digits.
pub fn short_id_len(ids: &[CheckpointId]) -> usize {
    let mut texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
    texts.sort();
    texts.dedup();
    let mut len = 8;
    for pair in texts.windows(2) {
        let common = pair[0]
            .bytes()
            .zip(pair[1].bytes())
            .take_while(|(a, b)| a == b)
            .count();
        len = len.max(common + 1);
    }
    len.min(32)
}

/// Milliseconds since the Unix epoch as ISO-8601 UTC with milliseconds
/// (`2024-05-01T12:00:00.000Z`), computed without a date library.
pub fn format_utc_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Days to a civil date (proleptic Gregorian), after Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

fn storage(e: rusqlite::Error) -> CheckpointError {
    CheckpointError::Storage(Box::new(e))
}

fn not_stategraph(detail: &str) -> CheckpointError {
    CheckpointError::Integrity {
        thread: "-".to_string(),
        checkpoint: "-".to_string(),
        blob: "sg_meta".to_string(),
        detail: format!("not a stategraph checkpoint file: {detail}"),
    }
}

/// Open `path` read-only with SQLite, without creating it.
fn read_only(path: &Path) -> Result<Connection, CheckpointError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(storage)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(storage)?;
    Ok(conn)
}

/// Whether an error is SQLite's "a hot journal needs a writer to roll it back".
fn needs_rollback(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK)
}

/// Check, without writing, that `path` exists and holds stategraph's tables.
fn check_existing(path: &Path) -> Result<(), CheckpointError> {
    if !path.is_file() {
        return Err(CheckpointError::Storage(Box::new(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: no such file", path.display()),
        ))));
    }
    let conn = read_only(path)?;
    let found = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sg_meta'",
        [],
        |r| r.get::<_, i64>(0),
    );
    match found {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err(not_stategraph("it has no sg_meta table")),
        // A file whose creation was cut short: only a writer may roll its journal back, and
        // opening it as a saver does just that.
        Err(e) if needs_rollback(&e) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::NotADatabase =>
        {
            Err(not_stategraph("it is not an SQLite database"))
        }
        Err(e) => Err(storage(e)),
    }
}

/// Open an existing checkpoint file as a saver. Unlike [`SqliteSaver::open`] it never creates
/// a file and never adds tables to a database that is not a stategraph file.
///
/// # Errors
/// A storage error (`NotFound`) for a missing file; [`CheckpointError::Integrity`] naming
/// `sg_meta` for a file that is not a stategraph checkpoint file; the errors of
/// [`SqliteSaver::open`].
pub fn open_existing(path: &Path) -> Result<SqliteSaver, CheckpointError> {
    check_existing(path)?;
    SqliteSaver::open(path)
}

/// Every `(thread, namespace)` pair of the file with its number of checkpoints, ordered by
/// thread then namespace (the root namespace `""` first).
///
/// # Errors
/// Storage errors; a missing file is a `NotFound` storage error.
pub fn namespaces(path: &Path) -> Result<Vec<(String, String, usize)>, CheckpointError> {
    check_existing(path)?;
    let conn = read_only(path)?;
    list_namespaces(&conn).map_err(storage)
}

fn list_namespaces(conn: &Connection) -> rusqlite::Result<Vec<(String, String, usize)>> {
    conn.prepare(
        "SELECT thread, ns, count(*) FROM sg_checkpoints GROUP BY thread, ns ORDER BY thread, ns",
    )?
    .query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            usize::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
        ))
    })?
    .collect()
}

fn cp_key(thread: &str, ns: &str, id: &[u8]) -> String {
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
///   same thread and namespace) and `parent_seq`, a pending write's checkpoint;
/// - every checkpoint of every thread and namespace loads through the saver (its record
///   rebuilt from the deltas, every field's blob and log parts read).
///
/// A problem does not stop the check: each is reported with where it is. The file is not
/// changed (it is opened as a saver to load checkpoints, which writes nothing to an existing
/// stategraph file).
///
/// # Errors
/// Only when the file cannot be checked at all: missing, not an SQLite database, not a
/// stategraph file, or a newer format.
pub async fn verify(path: &Path) -> Result<VerifyReport, CheckpointError> {
    check_existing(path)?;
    // Open as a saver first: a journal left by a crash during creation is rolled back.
    let saver = SqliteSaver::open(path)?;
    let mut report = VerifyReport::default();
    let ids = {
        let conn = read_only(path)?;
        scan_tables(&conn, &mut report)
    };
    for (thread, ns, id) in ids {
        let key = cp_key(&thread, &ns, &id.as_u128().to_be_bytes());
        let thread_id = match ThreadId::new(thread.clone()) {
            Ok(t) => t,
            Err(e) => {
                report.problem("sg_checkpoints", key, e.to_string());
                continue;
            }
        };
        match saver
            .get(&thread_id, &Namespace::parse(&ns), Some(id))
            .await
        {
            Ok(Some(loaded)) => match crate::diff::fields_to_json(&loaded.fields) {
                Ok(_) => report.counts.loaded += 1,
                Err(e) => {
                    report.problem("sg_checkpoints", key, format!("a field is not JSON: {e}"))
                }
            },
            Ok(None) => report.problem("sg_checkpoints", key, "the checkpoint does not load"),
            Err(e) => report.problem("sg_checkpoints", key, format!("does not load: {e}")),
        }
    }
    saver.close();
    Ok(report)
}

/// The raw table scans; returns the checkpoints to load through the saver.
fn scan_tables(
    conn: &Connection,
    report: &mut VerifyReport,
) -> Vec<(String, String, CheckpointId)> {
    if let Err(e) = sqlite_check(conn, report) {
        report.problem("sqlite", "integrity_check", e.to_string());
    }
    if let Err(e) = meta_check(conn, report) {
        report.problem("sg_meta", "format_version", e.to_string());
    }
    let blobs = match blob_check(conn, report) {
        Ok(b) => b,
        Err(e) => {
            report.problem("sg_blobs", "-", format!("cannot read the table: {e}"));
            HashSet::new()
        }
    };
    let logs = match log_check(conn, report) {
        Ok(l) => l,
        Err(e) => {
            report.problem("sg_logs", "-", format!("cannot read the table: {e}"));
            HashSet::new()
        }
    };
    if let Err(e) = part_check(conn, report, &blobs, &logs) {
        report.problem("sg_log_parts", "-", format!("cannot read the table: {e}"));
    }
    let ids = match checkpoint_check(conn, report) {
        Ok(ids) => ids,
        Err(e) => {
            report.problem("sg_checkpoints", "-", format!("cannot read the table: {e}"));
            Vec::new()
        }
    };
    let known: HashSet<(String, String, u128)> = ids
        .iter()
        .map(|(t, n, id)| (t.clone(), n.clone(), id.as_u128()))
        .collect();
    if let Err(e) = writes_check(conn, report, &known) {
        report.problem("sg_writes", "-", format!("cannot read the table: {e}"));
    }
    report.counts.namespaces = known
        .iter()
        .map(|(t, n, _)| (t, n))
        .collect::<HashSet<_>>()
        .len();
    ids
}

fn sqlite_check(conn: &Connection, report: &mut VerifyReport) -> rusqlite::Result<()> {
    let rows: Vec<String> = conn
        .prepare("PRAGMA integrity_check")?
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    if rows == ["ok"] {
        report.counts.sqlite_ok = true;
    } else {
        for row in rows {
            report.problem("sqlite", "integrity_check", row);
        }
    }
    Ok(())
}

fn meta_check(conn: &Connection, report: &mut VerifyReport) -> rusqlite::Result<()> {
    let v: Option<String> = conn
        .query_row(
            "SELECT value FROM sg_meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    match v.as_deref().map(str::parse::<u32>) {
        None => report.problem("sg_meta", "format_version", "missing"),
        Some(Err(_)) => report.problem(
            "sg_meta",
            "format_version",
            format!("unreadable value {:?}", v.unwrap_or_default()),
        ),
        Some(Ok(n)) if n > crate::FORMAT_VERSION => report.problem(
            "sg_meta",
            "format_version",
            format!(
                "format {n} is newer than the supported {}",
                crate::FORMAT_VERSION
            ),
        ),
        Some(Ok(_)) => {}
    }
    Ok(())
}

/// Check a JSON envelope; `Some(problem)` when it does not open or parse.
fn json_envelope(data: &[u8], hash: &[u8], array: bool) -> Option<String> {
    match open(data, CODEC_JSON, hash) {
        Err(e) => Some(e),
        Ok(payload) => {
            if array {
                serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(payload)
                    .err()
                    .map(|e| format!("payload is not a JSON array: {e}"))
            } else {
                serde_json::from_slice::<serde::de::IgnoredAny>(payload)
                    .err()
                    .map(|e| format!("payload is not JSON: {e}"))
            }
        }
    }
}

fn blob_check(conn: &Connection, report: &mut VerifyReport) -> rusqlite::Result<HashSet<i64>> {
    let mut ids = HashSet::new();
    let mut stmt = conn.prepare("SELECT id, hash, data FROM sg_blobs ORDER BY id")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, Vec<u8>>(1)?,
            r.get::<_, Vec<u8>>(2)?,
        ))
    })?;
    for row in rows {
        let (id, hash, data) = row?;
        ids.insert(id);
        report.counts.blobs += 1;
        if let Some(detail) = json_envelope(&data, &hash, false) {
            report.problem(
                "sg_blobs",
                format!("blob {id} (hash {})", hex(&hash)),
                detail,
            );
        }
    }
    Ok(ids)
}

fn log_check(conn: &Connection, report: &mut VerifyReport) -> rusqlite::Result<HashSet<i64>> {
    let rows: Vec<(i64, Option<i64>)> = conn
        .prepare("SELECT id, base_log FROM sg_logs ORDER BY id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let ids: HashSet<i64> = rows.iter().map(|r| r.0).collect();
    for (id, base) in rows {
        report.counts.logs += 1;
        if let Some(base) = base.filter(|b| !ids.contains(b)) {
            report.problem(
                "sg_logs",
                format!("log {id}"),
                format!("its base log {base} is missing"),
            );
        }
    }
    Ok(ids)
}

type PartRow = (i64, i64, Option<i64>, Option<Vec<u8>>, Option<Vec<u8>>);

fn part_check(
    conn: &Connection,
    report: &mut VerifyReport,
    blobs: &HashSet<i64>,
    logs: &HashSet<i64>,
) -> rusqlite::Result<()> {
    let mut stmt =
        conn.prepare("SELECT log, part, blob, hash, data FROM sg_log_parts ORDER BY log, part")?;
    let rows = stmt.query_map([], |r| -> rusqlite::Result<PartRow> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })?;
    for row in rows {
        let (log, part, blob, hash, data) = row?;
        report.counts.log_parts += 1;
        let mut key = format!("log {log} part {part}");
        if let Some(h) = &hash {
            key.push_str(&format!(" (hash {})", hex(h)));
        }
        if !logs.contains(&log) {
            report.problem(
                "sg_log_parts",
                key.clone(),
                format!("its log {log} is missing"),
            );
        }
        match (blob, hash, data) {
            (Some(b), _, _) => {
                if !blobs.contains(&b) {
                    report.problem(
                        "sg_log_parts",
                        key,
                        format!("refers to blob {b}, which is missing"),
                    );
                }
            }
            (None, Some(hash), Some(data)) => {
                if let Some(detail) = json_envelope(&data, &hash, true) {
                    report.problem("sg_log_parts", key, detail);
                }
            }
            (None, _, _) => report.problem("sg_log_parts", key, "neither a blob nor inline data"),
        }
    }
    Ok(())
}

/// One `sg_checkpoints` row, as the scan reads it.
struct CpRow {
    seq: i64,
    thread: String,
    ns: String,
    id: Vec<u8>,
    parent: Option<Vec<u8>>,
    parent_seq: Option<i64>,
    source: String,
    metadata: String,
    body_hash: Vec<u8>,
    body: Vec<u8>,
}

fn checkpoint_check(
    conn: &Connection,
    report: &mut VerifyReport,
) -> rusqlite::Result<Vec<(String, String, CheckpointId)>> {
    let rows: Vec<CpRow> = conn
        .prepare(
            "SELECT seq, thread, ns, id, parent, parent_seq, source, metadata, body_hash, body
             FROM sg_checkpoints ORDER BY seq",
        )?
        .query_map([], |r| {
            Ok(CpRow {
                seq: r.get(0)?,
                thread: r.get(1)?,
                ns: r.get(2)?,
                id: r.get(3)?,
                parent: r.get(4)?,
                parent_seq: r.get(5)?,
                source: r.get(6)?,
                metadata: r.get(7)?,
                body_hash: r.get(8)?,
                body: r.get(9)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let by_seq: HashMap<i64, (&str, &str, &[u8])> = rows
        .iter()
        .map(|r| (r.seq, (r.thread.as_str(), r.ns.as_str(), r.id.as_slice())))
        .collect();
    let by_key: HashSet<(&str, &str, &[u8])> = by_seq.values().copied().collect();
    let mut out = Vec::new();
    for r in &rows {
        report.counts.checkpoints += 1;
        let key = cp_key(&r.thread, &r.ns, &r.id);
        let id = match <[u8; 16]>::try_from(r.id.as_slice()) {
            Ok(bytes) => Some(CheckpointId::from_u128(u128::from_be_bytes(bytes))),
            Err(_) => {
                report.problem(
                    "sg_checkpoints",
                    key.clone(),
                    format!("id of {} bytes", r.id.len()),
                );
                None
            }
        };
        if let Err(detail) = open(&r.body, CODEC_BINCODE, &r.body_hash) {
            report.problem(
                "sg_checkpoints",
                key.clone(),
                format!("record body (hash {}): {detail}", hex(&r.body_hash)),
            );
        }
        if !matches!(r.source.as_str(), "input" | "loop" | "update" | "fork") {
            report.problem(
                "sg_checkpoints",
                key.clone(),
                format!("unknown source {:?}", r.source),
            );
        }
        if let Err(e) =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&r.metadata)
        {
            report.problem(
                "sg_checkpoints",
                key.clone(),
                format!("metadata is not a JSON object: {e}"),
            );
        }
        match (&r.parent, r.parent_seq) {
            (None, None) => {}
            (Some(p), _) if !by_key.contains(&(r.thread.as_str(), r.ns.as_str(), p.as_slice())) => {
                report.problem(
                    "sg_checkpoints",
                    key.clone(),
                    format!(
                        "its parent {} is not in the same thread and namespace",
                        hex(p)
                    ),
                );
            }
            (Some(p), Some(ps)) => match by_seq.get(&ps) {
                Some(&(t, n, pid)) if t == r.thread && n == r.ns && pid == p.as_slice() => {}
                Some(_) => report.problem(
                    "sg_checkpoints",
                    key.clone(),
                    format!("parent_seq {ps} is not the row of its parent {}", hex(p)),
                ),
                None => report.problem(
                    "sg_checkpoints",
                    key.clone(),
                    format!("parent_seq {ps} is missing"),
                ),
            },
            (Some(p), None) => report.problem(
                "sg_checkpoints",
                key.clone(),
                format!("has parent {} but no parent_seq", hex(p)),
            ),
            (None, Some(ps)) => report.problem(
                "sg_checkpoints",
                key.clone(),
                format!("has parent_seq {ps} but no parent"),
            ),
        }
        if let Some(id) = id {
            out.push((r.thread.clone(), r.ns.clone(), id));
        }
    }
    Ok(out)
}

type WriteRow = (
    String,
    String,
    Vec<u8>,
    Vec<u8>,
    i64,
    String,
    Vec<u8>,
    Vec<u8>,
);

fn writes_check(
    conn: &Connection,
    report: &mut VerifyReport,
    known: &HashSet<(String, String, u128)>,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(
        "SELECT thread, ns, checkpoint, task, idx, kind, hash, data FROM sg_writes
         ORDER BY thread, ns, checkpoint, ord, idx",
    )?;
    let rows = stmt.query_map([], |r| -> rusqlite::Result<WriteRow> {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ))
    })?;
    for row in rows {
        let (thread, ns, checkpoint, task, idx, kind, hash, data) = row?;
        report.counts.writes += 1;
        let key = format!(
            "pending write {idx} of task {} at {} (hash {})",
            hex(&task),
            cp_key(&thread, &ns, &checkpoint),
            hex(&hash)
        );
        let exists = <[u8; 16]>::try_from(checkpoint.as_slice())
            .map(|b| known.contains(&(thread.clone(), ns.clone(), u128::from_be_bytes(b))))
            .unwrap_or(false);
        if !exists {
            report.problem("sg_writes", key.clone(), "its checkpoint is missing");
        }
        if !matches!(kind.as_str(), "output" | "error" | "interrupt" | "resume") {
            report.problem("sg_writes", key.clone(), format!("unknown kind {kind:?}"));
        }
        if let Some(detail) = json_envelope(&data, &hash, false) {
            report.problem("sg_writes", key, detail);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_iso_8601_utc() {
        assert_eq!(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_utc_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(format_utc_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(
            format_utc_ms(253_402_300_799_999),
            "9999-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn prefixes_resolve_only_when_unique() {
        let a = CheckpointId::from_u128(0x0123_4567_89ab_cdef_0000_0000_0000_0001);
        let b = CheckpointId::from_u128(0x0123_4567_89ab_cdef_0000_0000_0000_0002);
        let c = CheckpointId::from_u128(0x0123_4500_0000_0000_0000_0000_0000_0000);
        let ids = [a, b, c];
        assert_eq!(resolve_prefix(ids, &a.to_string()), Ok(a));
        assert_eq!(resolve_prefix(ids, "01234500"), Ok(c));
        assert_eq!(
            resolve_prefix(ids, "0123456789AB"),
            Err(PrefixError::Ambiguous {
                prefix: "0123456789ab".into(),
                count: 2,
                examples: vec![a.to_string(), b.to_string()],
            })
        );
        assert!(matches!(
            resolve_prefix(ids, "fffffff"),
            Err(PrefixError::NotFound(_))
        ));
        assert!(matches!(
            resolve_prefix(ids, "01234"),
            Err(PrefixError::Invalid(_))
        ));
        assert!(matches!(
            resolve_prefix(ids, "0123xz"),
            Err(PrefixError::Invalid(_))
        ));
        assert_eq!(short_id_len(&ids), 32);
        assert_eq!(short_id_len(&[a, c]), 8);
        assert_eq!(short_id_len(&[a]), 8);
    }
}
