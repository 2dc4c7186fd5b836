//! The `prune` workload: what deleting most of a long thread costs. For each of
//! `--verify-steps` (default 10,000 and 100,000) it builds the `verify` workload's thread, then
//! times `Saver::prune` keeping the newest `--prune-keep` checkpoints (default 100; the
//! commit, `synchronous` as given, included) and the saver's close after it (which folds the
//! WAL into the file), against SQLite's `PRAGMA integrity_check` on the same file before the
//! prune. The pruned file must pass `integrity_check` and `inspect::verify` and hold exactly the
//! kept checkpoints. A second row per length (`case` `short_beside_long`) prunes a short
//! thread of [`SHORT_STEPS`] supersteps written beside the long one, to the same number of
//! checkpoints: what that costs should follow the short thread, not the file.

use std::path::Path;
use std::time::Instant;

use stategraph::checkpoints::{inspect, Retention, Saver, SqliteSaver, ThreadId};
use stategraph::BoxError;

use crate::report::{round, Record};
use crate::verify_scan::{add_thread, build, integrity_check_s, THREAD};
use crate::{Args, ENGINE};

/// Supersteps of the short thread pruned beside the long one.
pub(crate) const SHORT_STEPS: usize = 1_000;

/// The short thread.
const SHORT: &str = "short-1";

/// The length of the file at `path` (0 when it is missing).
fn len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// What pruning one file took.
struct Pruned {
    deleted: usize,
    prune_s: f64,
    close_s: f64,
}

/// Open the file, prune `thread` to `keep` checkpoints, close it.
async fn prune(args: &Args, path: &Path, thread: &str, keep: usize) -> Result<Pruned, BoxError> {
    let saver = SqliteSaver::open_with(path, args.sqlite_options())?;
    let thread = ThreadId::new(thread)?;
    let t0 = Instant::now();
    let deleted = saver.prune(&thread, Retention::KeepLast(keep)).await?;
    let prune_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    saver.close()?;
    let close_s = t0.elapsed().as_secs_f64();
    Ok(Pruned {
        deleted,
        prune_s,
        close_s,
    })
}

/// Build each thread, time integrity_check and the prune on it, check the result, print one
/// row each; then the same for a short thread beside it.
pub(crate) async fn run_prune(args: &Args) -> Result<(), BoxError> {
    for &steps in &args.verify_steps {
        for case in ["long", "short_beside_long"] {
            prune_case(args, steps, case).await?;
        }
    }
    Ok(())
}

/// One row: the long thread pruned (`long`), or a short thread beside it.
async fn prune_case(args: &Args, steps: usize, case: &str) -> Result<(), BoxError> {
    let t0 = Instant::now();
    let db = build(args, steps).await?;
    let thread = match case {
        "long" => THREAD,
        _ => {
            add_thread(&db, SHORT, SHORT_STEPS).await?;
            SHORT
        }
    };
    let build_s = t0.elapsed().as_secs_f64();
    let path = db.path.clone();
    db.saver.close()?;
    let bytes_before = len(&path);
    // Warm the page cache, as for verify.
    integrity_check_s(&path)?;
    let check = integrity_check_s(&path)?;
    let before = inspect::verify(&path).await?.counts.checkpoints;
    let pruned = prune(args, &path, thread, args.prune_keep).await?;
    integrity_check_s(&path)?;
    let report = inspect::verify(&path).await?;
    let expected = before - pruned.deleted;
    if !report.is_ok() || report.counts.checkpoints != expected {
        return Err(format!(
            "the pruned file holds {} checkpoints (expected {expected}), problems {:?}",
            report.counts.checkpoints, report.problems
        )
        .into());
    }
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "prune")
        .kv("case", case)
        .kv("supersteps", steps)
        .kv(
            "pruned_thread_supersteps",
            if case == "long" { steps } else { SHORT_STEPS },
        )
        .kv("checkpoints_before", before)
        .kv("kept", before - pruned.deleted)
        .kv("deleted", pruned.deleted)
        .kv("db_file_bytes_before", bytes_before)
        .kv("db_file_bytes_after", len(&path))
        .kv("build_s", round(build_s, 3))
        .kv("prune_s", round(pruned.prune_s, 4))
        .kv("close_s", round(pruned.close_s, 4))
        .kv("integrity_check_s", round(check, 4))
        .kv(
            "prune_vs_integrity_check",
            round(pruned.prune_s / check.max(1e-9), 2),
        )
        .emit();
    if !args.keep_db {
        crate::sqlite_db::remove_files(&path);
    }
    Ok(())
}
