//! The `settlement` workload (ours only): what run settlement's outputs snapshots cost over a
//! folder of 1,000 files of a few KB each, in a temporary directory.
//!
//! Rows (`variant`): `first_capture` (no previous snapshot: every file is hashed),
//! `recapture_unchanged` (the previous snapshot given, nothing changed: no file is hashed),
//! `one_changed` (one file grew: exactly that one is hashed) and `settle`
//! (`produced_outputs` + `settle` over the last two snapshots, the changed file presented).
//! Each row reports the median and minimum µs per operation over `--repeats` runs and, for the
//! captures, `files_hashed` as [`Snapshot::hashed`] counts it (checked: a capture that hashes
//! another number fails the bench). The page cache is warm: the files were just written.

use std::path::Path;
use std::time::Instant;

use stategraph::BoxError;
use stategraph_nodes::delivery::{
    produced_outputs, settle, DeliveryFacts, DeliveryStage, Exclusions, Snapshot, PRESENT_FILES,
};

use crate::report::{median, min, round, Record};
use crate::{Args, ENGINE};

/// Files in the outputs folder.
const FILES: usize = 1_000;
/// Files per subdirectory.
const PER_DIR: usize = 100;
/// Bytes per file (a few KB).
const FILE_BYTES: usize = 4 * 1024;

/// The relative path of file `i`.
fn rel(i: usize) -> String {
    format!("d{:02}/f{i:04}.txt", i / PER_DIR)
}

/// Writes the [`FILES`] files under `root`, each with distinct content.
fn populate(root: &Path) -> Result<(), BoxError> {
    populate_n(root, FILES)
}

/// Writes `n` files of [`FILE_BYTES`] under `root`, each with distinct content.
pub(crate) fn populate_n(root: &Path, n: usize) -> Result<(), BoxError> {
    for i in 0..n {
        let path = root.join(rel(i));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let line = format!("file {i} of the settlement bench\n");
        let body: String = line.repeat(FILE_BYTES / line.len() + 1);
        std::fs::write(path, &body.as_bytes()[..FILE_BYTES])?;
    }
    Ok(())
}

/// One capture, timed; fails unless it hashed `expected` files.
fn timed_capture(
    root: &Path,
    previous: Option<&Snapshot>,
    expected: usize,
) -> Result<(Snapshot, f64), BoxError> {
    let t0 = Instant::now();
    let snapshot = Snapshot::capture(root, &Exclusions::default(), previous)?;
    let us = t0.elapsed().as_secs_f64() * 1e6;
    if snapshot.hashed() != expected {
        return Err(format!(
            "settlement: a capture hashed {} files, expected {expected}",
            snapshot.hashed()
        )
        .into());
    }
    if snapshot.entries().len() != FILES {
        return Err(format!("settlement: {} entries", snapshot.entries().len()).into());
    }
    Ok((snapshot, us))
}

fn row(variant: &str, samples: &[f64]) -> Record {
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "settlement")
        .kv("variant", variant)
        .kv("files", FILES)
        .kv("file_bytes", FILE_BYTES)
        .kv("repeats", samples.len())
        .kv("us_median", round(median(samples), 1))
        .kv("us_min", round(min(samples), 1))
}

/// Grows file `i` by one byte (a size change: seen whatever the mtime granularity).
fn touch(root: &Path, i: usize) -> Result<(), BoxError> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join(rel(i)))?;
    file.write_all(b"+")?;
    Ok(())
}

pub(crate) fn run_settlement(args: &Args) -> Result<(), BoxError> {
    let dir = tempfile::Builder::new()
        .prefix("settlement-")
        .tempdir_in(&args.workdir)?;
    let root = dir.path().join("outputs");
    populate(&root)?;
    let repeats = args.repeats.max(1);
    let (mut first, mut unchanged, mut changed, mut settled) = (vec![], vec![], vec![], vec![]);
    let mut produced_count = 0;
    // Files hashed by the last capture of each kind, as the snapshots count them.
    let mut hashed = [0usize; 3];
    for r in 0..repeats {
        let (before, us) = timed_capture(&root, None, FILES)?;
        first.push(us);
        hashed[0] = before.hashed();
        let (again, us) = timed_capture(&root, Some(&before), 0)?;
        unchanged.push(us);
        hashed[1] = again.hashed();
        if again != before {
            return Err("settlement: an unchanged folder gave a different snapshot".into());
        }
        let target = (r * 37) % FILES;
        touch(&root, target)?;
        let (after, us) = timed_capture(&root, Some(&again), 1)?;
        changed.push(us);
        hashed[2] = after.hashed();
        let t0 = Instant::now();
        let produced = produced_outputs(&before, &after);
        let mut facts = DeliveryFacts::default();
        facts.record(Some(PRESENT_FILES), produced.iter().cloned());
        let receipt = settle(facts, produced);
        settled.push(t0.elapsed().as_secs_f64() * 1e6);
        let verdict = receipt.verdict.as_ref().ok_or("settlement: no verdict")?;
        if verdict.stage != DeliveryStage::Presented || verdict.produced_paths.len() != 1 {
            return Err(format!("settlement: unexpected verdict {verdict:?}").into());
        }
        produced_count = verdict.produced_paths.len();
    }
    row("first_capture", &first)
        .kv("files_hashed", hashed[0])
        .emit();
    row("recapture_unchanged", &unchanged)
        .kv("files_hashed", hashed[1])
        .emit();
    row("one_changed", &changed)
        .kv("files_hashed", hashed[2])
        .emit();
    row("settle", &settled)
        .kv("produced", produced_count)
        .kv("stage", "presented")
        .emit();
    Ok(())
}
