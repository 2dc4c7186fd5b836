//! The `sales_review` workload: the README's first command, timed whole. It runs the example's
//! release binary (built next to this one by `cargo build --release --example sales_review`)
//! on a fresh folder each time, as a user's first run does — both of its runs: the review and
//! the follow-up — and reports the wall time with the process start, and the size of the
//! checkpoint file it leaves (targets: under 5 s, under 1 MB).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use stategraph::BoxError;

use crate::report::{median, min, round, Record};
use crate::{Args, ENGINE};

/// Wall time the whole example should stay under, in seconds.
const TARGET_S: f64 = 5.0;
/// Size its checkpoint file should stay under, in bytes.
const TARGET_FILE_BYTES: u64 = 1 << 20;

/// The example's release binary, next to this binary's own folder.
fn example_binary() -> Result<PathBuf, BoxError> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or("the bench binary has no folder")?;
    let path = dir.join("examples").join("sales_review");
    if !path.is_file() {
        return Err(format!(
            "{} not found: build it first with `cargo build --release --example sales_review`",
            path.display()
        )
        .into());
    }
    Ok(path)
}

/// One run of the example on the empty folder `folder`: its wall time in seconds.
fn run_once(binary: &Path, folder: &Path) -> Result<f64, BoxError> {
    let t0 = Instant::now();
    let out = Command::new(binary).arg(folder).output()?;
    let wall = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("sales_review failed ({}): {stderr}", out.status).into());
    }
    Ok(wall)
}

/// Time the example `args.repeats` times and print its row.
pub(crate) fn run_sales_review(args: &Args) -> Result<(), BoxError> {
    let binary = example_binary()?;
    let mut walls = Vec::new();
    let mut file_bytes = 0;
    for i in 0..args.repeats.max(1) {
        let folder = args.workdir.join(format!("sales-review-{i}"));
        if folder.exists() {
            std::fs::remove_dir_all(&folder)?;
        }
        walls.push(run_once(&binary, &folder)?);
        file_bytes = std::fs::metadata(folder.join("threads.db"))?.len();
        if !args.keep_db {
            std::fs::remove_dir_all(&folder)?;
        }
    }
    let wall = median(&walls);
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "sales_review")
        .kv("runs", walls.len())
        .kv("wall_s_median", round(wall, 4))
        .kv("wall_s_min", round(min(&walls), 4))
        .kv("wall_target_s", TARGET_S)
        .kv("wall_under_target", wall < TARGET_S)
        .kv("db_file_bytes", file_bytes)
        .kv("db_file_target_bytes", TARGET_FILE_BYTES)
        .kv("db_file_under_target", file_bytes < TARGET_FILE_BYTES)
        .emit();
    Ok(())
}
