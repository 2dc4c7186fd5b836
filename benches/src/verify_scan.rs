//! The `verify` workload: how the inspector's whole-file check scales with a thread's length.
//! For each of `--verify-steps` (default 10,000 and 100,000) it builds one thread of that
//! many chain supersteps (each appends a ~190-byte message to a list and bumps a counter;
//! `async` durability, built once), then times `inspect::verify` on the file and SQLite's
//! own `PRAGMA integrity_check` on the same file, and prints their ratio (target: verify
//! within 3× of integrity_check; verify runs integrity_check itself, so the ratio is at
//! least 1).

use std::sync::Arc;
use std::time::Instant;

use stategraph::checkpoints::inspect;
use stategraph::{BoxError, Durability, RunConfig};

use crate::chain::{build_chain, fresh_chain_input, ChainState, CHAIN_NODES};
use crate::report::{round, Record};
use crate::sqlite_db::SqliteDb;
use crate::{Args, ENGINE};

/// The ratio verify should stay within, against `integrity_check`.
const TARGET_RATIO: f64 = 3.0;

/// The thread [`build`] writes.
pub(crate) const THREAD: &str = "verify-1";

/// Build a thread of `steps` supersteps in a fresh file; returns the open file.
pub(crate) async fn build(args: &Args, steps: usize) -> Result<SqliteDb, BoxError> {
    let db = SqliteDb::open(
        &args.workdir,
        &format!("verify-{steps}"),
        args.sqlite_options(),
    )?;
    add_thread(&db, THREAD, steps).await?;
    Ok(db)
}

/// Add thread `thread` of `steps` chain supersteps to the file.
pub(crate) async fn add_thread(db: &SqliteDb, thread: &str, steps: usize) -> Result<(), BoxError> {
    let graph = build_chain(CHAIN_NODES)?;
    let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
    let cfg = RunConfig::new()
        .thread(thread)
        .durability(Durability::Async);
    for k in 0..(steps / CHAIN_NODES).max(1) {
        let input = if k == 0 {
            fresh_chain_input()
        } else {
            ChainState::update().messages(Vec::new())
        };
        g.invoke(input, &cfg).await?;
    }
    Ok(())
}

/// Seconds `PRAGMA integrity_check` takes on the file at `path` (read-only connection).
pub(crate) fn integrity_check_s(path: &std::path::Path) -> Result<f64, BoxError> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let t0 = Instant::now();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    let s = t0.elapsed().as_secs_f64();
    if ok != "ok" {
        return Err(format!("integrity_check: {ok}").into());
    }
    Ok(s)
}

/// Build each thread, time verify and integrity_check on it, print one row each.
pub(crate) async fn run_verify(args: &Args) -> Result<(), BoxError> {
    for &steps in &args.verify_steps {
        let t0 = Instant::now();
        let db = build(args, steps).await?;
        let build_s = t0.elapsed().as_secs_f64();
        let stats = db.stats()?;
        let path = db.path.clone();
        db.saver.close()?;
        // Warm the page cache the same way for both: integrity_check reads every page.
        integrity_check_s(&path)?;
        let check = integrity_check_s(&path)?;
        let t0 = Instant::now();
        let report = inspect::verify(&path).await?;
        let verify = t0.elapsed().as_secs_f64();
        if !report.is_ok() {
            return Err(format!("verify found problems: {:?}", report.problems).into());
        }
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "verify")
            .kv("supersteps", steps)
            .kv("checkpoints", report.counts.checkpoints)
            .kv("log_parts", report.counts.log_parts)
            .kv("db_logical_bytes", stats.db_logical_bytes)
            .kv("build_s", round(build_s, 3))
            .kv("verify_s", round(verify, 4))
            .kv("integrity_check_s", round(check, 4))
            .kv(
                "verify_vs_integrity_check",
                round(verify / check.max(1e-9), 2),
            )
            .kv("target_ratio", TARGET_RATIO)
            .kv("under_target", verify / check.max(1e-9) <= TARGET_RATIO)
            .emit();
        if !args.keep_db {
            crate::sqlite_db::remove_files(&path);
        }
    }
    Ok(())
}
