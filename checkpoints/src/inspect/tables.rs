//! The raw table scans of [`verify`](super::verify()): one check per table of the file, each
//! adding what it counted and every problem it found to the report.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension};

use super::checkpoint_rows::{bytes, opt_bytes};
use super::verify::{cp_key, VerifyReport};
use crate::envelope::{hex, open, CODEC_JSON};
use crate::sqlite::{BlobState, LoadRow, LogState, PartFault, WithWrites};

pub(super) fn sqlite_check(conn: &Connection, report: &mut VerifyReport) -> rusqlite::Result<()> {
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

/// The file's format version, if its record reads as a number.
pub(super) fn format_version(conn: &Connection) -> rusqlite::Result<Option<u32>> {
    let v: Option<String> = conn
        .query_row(
            "SELECT value FROM sg_meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok(v.and_then(|v| v.parse().ok()))
}

pub(super) fn meta_check(conn: &Connection, report: &mut VerifyReport) -> rusqlite::Result<()> {
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

/// Why a JSON envelope is not a value.
enum JsonFault {
    /// The envelope does not open (its hash, its header).
    Envelope(String),
    /// The payload is not JSON (or not the JSON array it must be).
    NotJson(String),
}

impl JsonFault {
    fn detail(self) -> String {
        match self {
            JsonFault::Envelope(d) | JsonFault::NotJson(d) => d,
        }
    }
}

/// Open a JSON envelope and parse its payload (as an array if `array`); `Ok` says whether
/// the payload is a JSON array.
fn json_value(data: &[u8], hash: &[u8], array: bool) -> Result<bool, JsonFault> {
    let payload = open(data, CODEC_JSON, hash).map_err(JsonFault::Envelope)?;
    if array {
        serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(payload)
            .map_err(|e| JsonFault::NotJson(format!("payload is not a JSON array: {e}")))?;
        return Ok(true);
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(payload)
        .map_err(|e| JsonFault::NotJson(format!("payload is not JSON: {e}")))?;
    let first = payload.iter().find(|b| !b.is_ascii_whitespace());
    Ok(first == Some(&b'['))
}

/// Check a JSON envelope; `Some(problem)` when it does not open or parse.
fn json_envelope(data: &[u8], hash: &[u8], array: bool) -> Option<String> {
    json_value(data, hash, array).err().map(JsonFault::detail)
}

pub(super) fn blob_check(
    conn: &Connection,
    report: &mut VerifyReport,
) -> rusqlite::Result<HashMap<i64, BlobState>> {
    let mut ids = HashMap::new();
    let mut stmt = conn.prepare("SELECT id, hash, data FROM sg_blobs ORDER BY id")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (id, hash, data): (i64, &[u8], &[u8]) = (r.get(0)?, bytes(r, 1)?, bytes(r, 2)?);
        report.counts.blobs += 1;
        let state = match json_value(data, hash, false) {
            Ok(array) => BlobState::Json { array },
            Err(fault) => {
                let state = match &fault {
                    JsonFault::Envelope(d) => BlobState::Damaged {
                        hash: hex(hash),
                        detail: d.clone(),
                    },
                    JsonFault::NotJson(d) => BlobState::NotJson(d.clone()),
                };
                report.problem(
                    "sg_blobs",
                    format!("blob {id} (hash {})", hex(hash)),
                    fault.detail(),
                );
                state
            }
        };
        ids.insert(id, state);
    }
    Ok(ids)
}

pub(super) fn log_check(
    conn: &Connection,
    report: &mut VerifyReport,
) -> rusqlite::Result<HashMap<i64, LogState>> {
    let rows: Vec<(i64, Option<i64>, i64)> = conn
        .prepare("SELECT id, base_log, base_parts FROM sg_logs ORDER BY id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let ids: HashMap<i64, LogState> = rows
        .iter()
        .map(|&(id, base, parts)| (id, LogState::new(base, parts)))
        .collect();
    for (id, base, _) in rows {
        report.counts.logs += 1;
        if let Some(base) = base.filter(|b| !ids.contains_key(b)) {
            report.problem(
                "sg_logs",
                format!("log {id}"),
                format!("its base log {base} is missing"),
            );
        }
    }
    Ok(ids)
}

/// Check every log part; `format3`: also that only part 0 of a root log refers to a value
/// row (a format-3 file's rule).
pub(super) fn part_check(
    conn: &Connection,
    report: &mut VerifyReport,
    blobs: &HashMap<i64, BlobState>,
    logs: &mut HashMap<i64, LogState>,
    format3: bool,
) -> rusqlite::Result<()> {
    let mut stmt =
        conn.prepare("SELECT log, part, blob, hash, data FROM sg_log_parts ORDER BY log, part")?;
    let mut rows = stmt.query([])?;
    // Each row read in place: a long list has a great many parts.
    while let Some(r) = rows.next()? {
        let (log, part, blob): (i64, i64, Option<i64>) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let (hash, data) = (opt_bytes(r, 3)?, opt_bytes(r, 4)?);
        report.counts.log_parts += 1;
        // Named only when a problem is reported: a clean file has a great many parts.
        let key = || match &hash {
            Some(h) => format!("log {log} part {part} (hash {})", hex(h)),
            None => format!("log {log} part {part}"),
        };
        if !logs.contains_key(&log) {
            report.problem("sg_log_parts", key(), format!("its log {log} is missing"));
        }
        if format3
            && blob.is_some()
            && (part != 0 || !logs.get(&log).is_some_and(LogState::is_root))
        {
            report.problem(
                "sg_log_parts",
                key(),
                "refers to a value row, which in a format-3 file only part 0 of a root log \
                 does (deleting a thread could drop that value)",
            );
        }
        let read = part_read(report, &key, blob, hash, data, blobs);
        if let Some(state) = logs.get_mut(&log) {
            if let (0, Some(b)) = (part, blob) {
                state.set_first_blob(b);
            }
            state.part(part, read);
        }
    }
    Ok(())
}

/// One part as a list read would find it (`Ok(Some(array))`: a whole value), reporting
/// what is wrong with the row itself.
fn part_read(
    report: &mut VerifyReport,
    key: &dyn Fn() -> String,
    blob: Option<i64>,
    hash: Option<&[u8]>,
    data: Option<&[u8]>,
    blobs: &HashMap<i64, BlobState>,
) -> Result<Option<bool>, PartFault> {
    match (blob, hash, data) {
        (Some(b), _, _) => match blobs.get(&b) {
            None => {
                report.problem(
                    "sg_log_parts",
                    key(),
                    format!("refers to blob {b}, which is missing"),
                );
                Err(PartFault::Unreadable)
            }
            Some(BlobState::Json { array }) => Ok(Some(*array)),
            Some(BlobState::Damaged { hash, detail }) => Err(PartFault::Damaged {
                hash: hash.clone(),
                detail: detail.clone(),
            }),
            Some(BlobState::NotJson(e)) => Err(PartFault::NotJson(e.clone())),
        },
        (None, Some(hash), Some(data)) => match json_value(data, hash, true) {
            Ok(_) => Ok(None),
            Err(fault) => {
                let read = match &fault {
                    JsonFault::Envelope(d) => PartFault::Damaged {
                        hash: hex(hash),
                        detail: d.clone(),
                    },
                    JsonFault::NotJson(d) => PartFault::NotJson(d.clone()),
                };
                report.problem("sg_log_parts", key(), fault.detail());
                Err(read)
            }
        },
        (None, _, _) => {
            report.problem("sg_log_parts", key(), "neither a blob nor inline data");
            Err(PartFault::Unreadable)
        }
    }
}

/// One `sg_writes` row: a pending write of a task against a checkpoint.
struct WriteRow {
    thread: String,
    ns: String,
    checkpoint: Vec<u8>,
    task: Vec<u8>,
    idx: i64,
    kind: String,
    hash: Vec<u8>,
    data: Vec<u8>,
}

pub(super) fn writes_check(
    conn: &Connection,
    report: &mut VerifyReport,
    checkpoints: &[LoadRow],
) -> rusqlite::Result<WithWrites> {
    let mut with_writes = WithWrites::default();
    // Built at the first write (most files have few pending writes, many have none).
    let mut known: Option<HashSet<(&str, &str, u128)>> = None;
    let mut stmt = conn.prepare(
        "SELECT thread, ns, checkpoint, task, idx, kind, hash, data FROM sg_writes
         ORDER BY thread, ns, checkpoint, ord, idx",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(WriteRow {
            thread: r.get(0)?,
            ns: r.get(1)?,
            checkpoint: r.get(2)?,
            task: r.get(3)?,
            idx: r.get(4)?,
            kind: r.get(5)?,
            hash: r.get(6)?,
            data: r.get(7)?,
        })
    })?;
    for row in rows {
        let w = row?;
        report.counts.writes += 1;
        let key = format!(
            "pending write {} of task {} at {} (hash {})",
            w.idx,
            hex(&w.task),
            cp_key(&w.thread, &w.ns, &w.checkpoint),
            hex(&w.hash)
        );
        let known = known.get_or_insert_with(|| {
            checkpoints
                .iter()
                .map(|c| (&*c.thread, &*c.ns, c.id.as_u128()))
                .collect()
        });
        let id = <[u8; 16]>::try_from(w.checkpoint.as_slice())
            .ok()
            .map(u128::from_be_bytes)
            .filter(|id| known.contains(&(w.thread.as_str(), w.ns.as_str(), *id)));
        if let Some(id) = id {
            with_writes.insert(&w.thread, &w.ns, id);
        } else {
            report.problem("sg_writes", key.clone(), "its checkpoint is missing");
        }
        if !matches!(w.kind.as_str(), "output" | "error" | "interrupt" | "resume") {
            report.problem(
                "sg_writes",
                key.clone(),
                format!("unknown kind {:?}", w.kind),
            );
        }
        if let Some(detail) = json_envelope(&w.data, &w.hash, false) {
            report.problem("sg_writes", key, detail);
        }
    }
    Ok(with_writes)
}
