//! The physical floor: a bare rusqlite loop committing one WAL transaction per step
//! (`BEGIN IMMEDIATE; INSERT` one row holding the bytes a chain step changes, about 190 B;
//! `COMMIT`) at the same `synchronous` setting as the saver.
//!
//! Next to each timed run the bench also samples the same loop on a file whose WAL was first
//! given the room the saver gives its own (zeros up to the size between two automatic
//! checkpoints, decision 0017): at `synchronous=FULL` that loop's commits overwrite instead of
//! growing the WAL, which is what a long-lived file costs once SQLite restarts its log.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Instant;

use rusqlite::{params, Connection};
use stategraph::checkpoints::Synchronous;
use stategraph::BoxError;

use crate::report::{median, round, Record};

/// One floor sample: ms per commit of `steps` one-row transactions on a fresh file, its WAL
/// first given room if `preallocate`.
fn sample(
    path: &Path,
    sync: Synchronous,
    steps: usize,
    row: &[u8],
    preallocate: bool,
) -> Result<f64, BoxError> {
    let mut conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", sync.as_str())?;
    conn.execute_batch("CREATE TABLE steps (seq INTEGER PRIMARY KEY, data BLOB NOT NULL)")?;
    if preallocate {
        give_wal_room(&conn, path)?;
    }
    let t0 = Instant::now();
    for i in 0..steps {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.prepare_cached("INSERT INTO steps (seq, data) VALUES (?1, ?2)")?
            .execute(params![i as i64, row])?;
        tx.commit()?;
    }
    let per_step = t0.elapsed().as_secs_f64() * 1000.0 / steps.max(1) as f64;
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")?;
    Ok(per_step)
}

/// Extend the WAL with zeros to `(wal_autocheckpoint + 64)` frames, as the saver does.
fn give_wal_room(conn: &Connection, path: &Path) -> Result<(), BoxError> {
    let page: i64 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
    let frames: i64 = conn.pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))?;
    let bytes = 32 + u64::try_from(frames + 64)? * u64::try_from(page + 24)?;
    let mut wal_path = path.as_os_str().to_owned();
    wal_path.push("-wal");
    let mut wal = std::fs::OpenOptions::new().write(true).open(wal_path)?;
    let len = wal.metadata()?.len();
    if len < bytes {
        wal.seek(SeekFrom::Start(len))?;
        wal.write_all(&vec![0u8; usize::try_from(bytes - len)?])?;
        wal.sync_data()?;
    }
    Ok(())
}

/// Floor samples taken next to a workload's timed run (the disk's fsync latency drifts on a
/// shared machine): ms per one-row commit over `steps` commits, on a plain WAL and on one
/// given room first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Adjacent {
    pub(crate) plain: f64,
    pub(crate) preallocated: f64,
}

impl Adjacent {
    /// Add `floor_adjacent_ms` and `floor_preallocated_adjacent_ms` (samples before and
    /// after the run) to `rec`.
    pub(crate) fn keys(rec: Record, before: Adjacent, after: Adjacent) -> Record {
        rec.kv("floor_adjacent_ms", vec![before.plain, after.plain])
            .kv(
                "floor_preallocated_adjacent_ms",
                vec![before.preallocated, after.preallocated],
            )
    }

    /// The mean of two samples.
    pub(crate) fn mean(a: Adjacent, b: Adjacent) -> Adjacent {
        Adjacent {
            plain: (a.plain + b.plain) / 2.0,
            preallocated: (a.preallocated + b.preallocated) / 2.0,
        }
    }
}

/// Take both adjacent samples.
pub(crate) fn adjacent(
    workdir: &Path,
    sync: Synchronous,
    steps: usize,
    row: &[u8],
) -> Result<Adjacent, BoxError> {
    let path = workdir.join(format!("floor-adjacent-{}.sqlite", std::process::id()));
    let one = |preallocate| -> Result<f64, BoxError> {
        crate::sqlite_db::remove_files(&path);
        let r = sample(&path, sync, steps, row, preallocate);
        crate::sqlite_db::remove_files(&path);
        r.map(|x| round(x, 6))
    };
    Ok(Adjacent {
        plain: one(false)?,
        preallocated: one(true)?,
    })
}

/// Per-commit cost of `steps` one-row transactions, `repeats` times on fresh files.
pub(crate) fn run_floor(
    workdir: &Path,
    sync: Synchronous,
    steps: usize,
    repeats: usize,
    keep: bool,
    row: &[u8],
) -> Result<(), BoxError> {
    let mut per_step = Vec::new();
    let mut file_bytes = 0;
    for r in 0..repeats {
        let path = workdir.join(format!("floor-{}-{r}.sqlite", std::process::id()));
        per_step.push(sample(&path, sync, steps, row, false)?);
        file_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        if !keep {
            crate::sqlite_db::remove_files(&path);
        }
    }
    Record::new()
        .kv("engine", "stategraph")
        .kv("workload", "floor")
        .kv("sqlite_synchronous", sync.as_str())
        .kv("per_step_ms", round(median(&per_step), 6))
        .kv("steps", steps)
        .kv("row_bytes", row.len())
        .kv("repeats", repeats)
        .kv(
            "repeats_per_step_ms",
            per_step.iter().map(|&x| round(x, 6)).collect::<Vec<_>>(),
        )
        .kv("db_file_bytes", file_bytes)
        .emit();
    Ok(())
}
