//! The physical floor: a bare rusqlite loop committing one WAL transaction per step
//! (`BEGIN IMMEDIATE; INSERT` one row holding the bytes a chain step changes, about 190 B;
//! `COMMIT`) at the same `synchronous` setting as the saver.

use std::path::Path;
use std::time::Instant;

use rusqlite::{params, Connection};
use stategraph::checkpoints::Synchronous;
use stategraph::BoxError;

use crate::report::{median, round, Record};

/// One floor sample: ms per commit of `steps` one-row transactions on a fresh file.
fn sample(path: &Path, sync: Synchronous, steps: usize, row: &[u8]) -> Result<f64, BoxError> {
    let mut conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", sync.as_str())?;
    conn.execute_batch("CREATE TABLE steps (seq INTEGER PRIMARY KEY, data BLOB NOT NULL)")?;
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

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// A short floor sample taken next to a workload's timed run (the disk's fsync latency
/// drifts on a shared machine): ms per one-row commit over `steps` commits.
pub(crate) fn adjacent(
    workdir: &Path,
    sync: Synchronous,
    steps: usize,
    row: &[u8],
) -> Result<f64, BoxError> {
    let path = workdir.join(format!("floor-adjacent-{}.sqlite", std::process::id()));
    remove_db(&path);
    let r = sample(&path, sync, steps, row);
    remove_db(&path);
    r.map(|x| round(x, 6))
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
        per_step.push(sample(&path, sync, steps, row)?);
        file_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        if !keep {
            remove_db(&path);
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
