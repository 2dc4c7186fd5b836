//! The `prune` workload: what deleting most of a long thread costs. For each of
//! `--verify-steps` (default 10,000 and 100,000) it builds the `verify` workload's thread, then
//! times `Saver::prune` keeping the newest `--prune-keep` checkpoints (default 100; the
//! commit, `synchronous` as given, included) and the saver's close after it (which folds the
//! WAL into the file), against SQLite's `PRAGMA integrity_check` on the same file before the
//! prune. The pruned file must pass `integrity_check` and `inspect::verify` and hold exactly the
//! kept checkpoints.

use std::path::Path;
use std::time::Instant;

use stategraph::checkpoints::{inspect, Retention, Saver, SqliteSaver, ThreadId};
use stategraph::BoxError;

use crate::report::{round, Record};
use crate::verify_scan::{build, integrity_check_s, THREAD};
use crate::{Args, ENGINE};

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

/// Open the file, prune its thread to `keep` checkpoints, close it.
async fn prune(args: &Args, path: &Path, keep: usize) -> Result<Pruned, BoxError> {
    let saver = SqliteSaver::open_with(path, args.sqlite_options())?;
    let thread = ThreadId::new(THREAD)?;
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
/// row each.
pub(crate) async fn run_prune(args: &Args) -> Result<(), BoxError> {
    for &steps in &args.verify_steps {
        let t0 = Instant::now();
        let db = build(args, steps).await?;
        let build_s = t0.elapsed().as_secs_f64();
        let path = db.path.clone();
        db.saver.close()?;
        let bytes_before = len(&path);
        // Warm the page cache, as for verify.
        integrity_check_s(&path)?;
        let check = integrity_check_s(&path)?;
        let before = inspect::verify(&path).await?.counts.checkpoints;
        let pruned = prune(args, &path, args.prune_keep).await?;
        integrity_check_s(&path)?;
        let report = inspect::verify(&path).await?;
        if !report.is_ok() || report.counts.checkpoints != args.prune_keep.min(before) {
            return Err(format!(
                "the pruned file holds {} checkpoints (kept {}), problems {:?}",
                report.counts.checkpoints, args.prune_keep, report.problems
            )
            .into());
        }
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "prune")
            .kv("supersteps", steps)
            .kv("checkpoints_before", before)
            .kv("kept", report.counts.checkpoints)
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
    }
    Ok(())
}
