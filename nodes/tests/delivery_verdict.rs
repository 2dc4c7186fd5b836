//! Run settlement's verdict over real outputs folders: what counts as produced, which
//! presented paths cover it, the receipt's JSON, and the snapshot's cheap re-run.

use std::fs::{self, File};
use std::path::Path;

use serde_json::json;
use stategraph_nodes::delivery::{
    normalize_presented, produced_outputs, settle, DeliveryFacts, DeliveryIncomplete,
    DeliveryReceipt, DeliveryStage, Exclusions, Snapshot, SnapshotEntry, PRESENT_ERROR_PREFIX,
    PRESENT_FILES,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// An outputs folder, snapshotted before the "run"; `finish` snapshots it after and settles.
struct Run {
    tmp: tempfile::TempDir,
    before: Snapshot,
    facts: DeliveryFacts,
}

impl Run {
    fn start(setup: &[(&str, &str)]) -> Result<Self, Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        fs::create_dir_all(tmp.path().join("outputs"))?;
        let run = Run {
            tmp,
            before: Snapshot::default(),
            facts: DeliveryFacts::default(),
        };
        for (path, text) in setup {
            run.write(path, text)?;
        }
        let before = Snapshot::capture(&run.outputs(), &Exclusions::default(), None)?;
        Ok(Run { before, ..run })
    }

    fn outputs(&self) -> std::path::PathBuf {
        self.tmp.path().join("outputs")
    }

    fn write(&self, path: &str, text: &str) -> std::io::Result<()> {
        let file = self.outputs().join(path);
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(file, text)
    }

    fn present(&mut self, paths: &[&str]) -> TestResult {
        let normalised = normalize_presented(paths, &self.outputs())?;
        self.facts.record(Some(PRESENT_FILES), normalised);
        Ok(())
    }

    fn finish(self) -> Result<DeliveryReceipt, Box<dyn std::error::Error>> {
        let after = Snapshot::capture(&self.outputs(), &Exclusions::default(), Some(&self.before))?;
        Ok(settle(self.facts, produced_outputs(&self.before, &after)))
    }
}

fn stage(receipt: &DeliveryReceipt) -> Option<DeliveryStage> {
    receipt.verdict.as_ref().map(|v| v.stage)
}

#[test]
fn a_file_written_but_not_presented_is_not_started_and_unsatisfied() -> TestResult {
    let run = Run::start(&[])?;
    run.write("report.md", "# report")?;
    let receipt = run.finish()?;
    assert_eq!(stage(&receipt), Some(DeliveryStage::NotStarted));
    let verdict = receipt.verdict.as_ref().ok_or("no verdict")?;
    assert!(!verdict.satisfied);
    assert_eq!(verdict.produced_paths, ["/mnt/user-data/outputs/report.md"]);
    assert_eq!(receipt.check(), Err(DeliveryIncomplete));
    assert_eq!(
        DeliveryIncomplete.to_string(),
        "Artifact delivery incomplete: no produced output artifact was presented"
    );
    Ok(())
}

#[test]
fn presenting_only_an_unrelated_unchanged_file_is_mismatched() -> TestResult {
    let mut run = Run::start(&[("old.md", "from an earlier run")])?;
    run.write("new.md", "this run")?;
    run.present(&["/mnt/user-data/outputs/old.md"])?;
    let receipt = run.finish()?;
    assert_eq!(stage(&receipt), Some(DeliveryStage::Mismatched));
    let verdict = receipt.verdict.as_ref().ok_or("no verdict")?;
    assert_eq!(verdict.produced_paths, ["/mnt/user-data/outputs/new.md"]);
    assert!(verdict.matched_paths.is_empty() && !verdict.satisfied);
    assert_eq!(receipt.check(), Err(DeliveryIncomplete));
    Ok(())
}

#[test]
fn a_presented_directory_covers_both_files_under_it() -> TestResult {
    let mut run = Run::start(&[])?;
    run.write("charts/a.png", "a")?;
    run.write("charts/b.png", "b")?;
    run.write("chartsX/c.png", "c")?;
    run.present(&["/mnt/user-data/outputs/charts/"])?;
    let receipt = run.finish()?;
    let verdict = receipt.verdict.as_ref().ok_or("no verdict")?;
    assert_eq!(
        verdict.matched_paths,
        [
            "/mnt/user-data/outputs/charts/a.png",
            "/mnt/user-data/outputs/charts/b.png"
        ]
    );
    assert_eq!(verdict.stage, DeliveryStage::Presented);
    receipt.check()?;
    Ok(())
}

#[test]
fn two_produced_one_presented_is_satisfied() -> TestResult {
    let mut run = Run::start(&[])?;
    run.write("b.md", "b")?;
    run.write("a.md", "a")?;
    let host_path = run.outputs().join("a.md");
    run.present(&[host_path.to_str().ok_or("not utf-8")?])?;
    let receipt = run.finish()?;
    let verdict = receipt.verdict.as_ref().ok_or("no verdict")?;
    assert_eq!(
        verdict.produced_paths,
        ["/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"]
    );
    assert_eq!(verdict.presented_paths, ["/mnt/user-data/outputs/a.md"]);
    assert_eq!(verdict.matched_paths, ["/mnt/user-data/outputs/a.md"]);
    assert!(verdict.satisfied);
    receipt.check()?;
    Ok(())
}

#[test]
fn only_excluded_folders_changed_means_no_verification() -> TestResult {
    let run = Run::start(&[])?;
    run.write(".tool-results/call-1.json", "{}")?;
    run.write("node_modules/pkg/index.js", "x")?;
    run.write("deep/__pycache__/m.pyc", "x")?;
    let receipt = run.finish()?;
    assert_eq!(receipt.verdict, None);
    receipt.check()?;
    assert_eq!(
        serde_json::to_value(&receipt)?,
        json!({"presented": 0, "paths": [], "by_tool": {}})
    );
    Ok(())
}

#[test]
fn deletions_symlinks_and_unchanged_files_are_not_produced() -> TestResult {
    let run = Run::start(&[("keep.md", "same"), ("gone.md", "bye"), ("edit.md", "v1")])?;
    fs::remove_file(run.outputs().join("gone.md"))?;
    fs::write(run.outputs().join("keep.md"), "same")?;
    fs::write(run.outputs().join("edit.md"), "v2, longer")?;
    std::os::unix::fs::symlink("keep.md", run.outputs().join("link.md"))?;
    let receipt = run.finish()?;
    let verdict = receipt.verdict.as_ref().ok_or("no verdict")?;
    assert_eq!(verdict.produced_paths, ["/mnt/user-data/outputs/edit.md"]);
    Ok(())
}

#[test]
fn the_receipt_is_stored_as_the_value_is_shaped_with_the_verdict_nested() -> TestResult {
    let mut run = Run::start(&[])?;
    run.write("r.md", "r")?;
    run.present(&["/mnt/user-data/outputs/r.md"])?;
    let receipt = run.finish()?;
    let value = serde_json::to_value(&receipt)?;
    let verdict = json!({
        "verification": {
            "source": "outputs_changed",
            "requirement": "present_files_matches_produced_output"
        },
        "produced_paths": ["/mnt/user-data/outputs/r.md"],
        "presented_paths": ["/mnt/user-data/outputs/r.md"],
        "matched_paths": ["/mnt/user-data/outputs/r.md"],
        "satisfied": true,
        "stage": "presented"
    });
    assert_eq!(
        value,
        json!({
            "presented": 1,
            "paths": ["/mnt/user-data/outputs/r.md"],
            "by_tool": {"present_files": ["/mnt/user-data/outputs/r.md"]},
            "verdict": verdict,
        })
    );
    assert_eq!(receipt.to_json(), value);
    let back: DeliveryReceipt = serde_json::from_value(value)?;
    assert_eq!(back, receipt);
    // A receipt stored before the verdict was nested (its fields beside the facts') reads
    // back as the same value.
    let mut flat = json!({
        "presented": 1,
        "paths": ["/mnt/user-data/outputs/r.md"],
        "by_tool": {"present_files": ["/mnt/user-data/outputs/r.md"]},
    });
    if let (Some(flat), Some(verdict)) = (flat.as_object_mut(), verdict.as_object()) {
        flat.extend(verdict.clone());
    }
    let old: DeliveryReceipt = serde_json::from_value(flat)?;
    assert_eq!(old, receipt);
    let facts_only: DeliveryReceipt =
        serde_json::from_value(json!({"presented": 0, "paths": [], "by_tool": {}}))?;
    assert_eq!(facts_only, DeliveryReceipt::default());
    Ok(())
}

#[test]
fn present_files_is_all_or_nothing_and_reads_no_file() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let outputs = tmp.path().join("never-created/outputs");
    let ok = normalize_presented(&["/mnt/user-data/outputs/missing.md"], &outputs)?;
    assert_eq!(ok, ["/mnt/user-data/outputs/missing.md"]);
    let err = normalize_presented(
        &[
            "/mnt/user-data/outputs/a.md",
            "/mnt/user-data/workspace/b.md",
        ],
        &outputs,
    )
    .err()
    .ok_or("one bad path must fail the call")?;
    assert_eq!(err.path, "/mnt/user-data/workspace/b.md");
    assert!(err.to_string().starts_with(PRESENT_ERROR_PREFIX));
    assert!(PRESENT_ERROR_PREFIX
        .starts_with("Error: Only files in /mnt/user-data/outputs can be presented"));
    assert!(!outputs.exists());
    Ok(())
}

/// The cheap re-run, proved without timing: a file rewritten with the same size and its old
/// mtime restored keeps its previous hash, because it is not read again. That is the chosen
/// trade-off (size+mtime first; hash only when they differ or the file is new).
#[test]
fn the_snapshot_does_not_reread_files_whose_size_and_mtime_are_unchanged() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path();
    for i in 0..20 {
        fs::write(root.join(format!("f{i:02}.txt")), format!("file {i:02}"))?;
    }
    let first = Snapshot::capture(root, &Exclusions::default(), None)?;
    assert_eq!(first.hashed(), 20);
    let second = Snapshot::capture(root, &Exclusions::default(), Some(&first))?;
    assert_eq!(second.hashed(), 0, "no unchanged file is read again");
    assert_eq!(second, first);

    let path = root.join("f00.txt");
    let mtime = fs::metadata(&path)?.modified()?;
    fs::write(&path, "FILE 00")?; // same size, new contents
    File::options()
        .write(true)
        .open(&path)?
        .set_modified(mtime)?;
    let third = Snapshot::capture(root, &Exclusions::default(), Some(&second))?;
    assert_eq!(third.hashed(), 0);
    assert_eq!(
        third.get("f00.txt"),
        first.get("f00.txt"),
        "the old hash is kept"
    );

    // Without a previous snapshot (or with a changed mtime) the file is read and the change
    // is seen.
    let fresh = Snapshot::capture(root, &Exclusions::default(), None)?;
    assert_ne!(fresh.get("f00.txt"), first.get("f00.txt"));
    fs::write(root.join("f01.txt"), "file 01 grew")?;
    let fourth = Snapshot::capture(root, &Exclusions::default(), Some(&third))?;
    assert_eq!(fourth.hashed(), 1);
    Ok(())
}

#[test]
fn the_snapshot_records_symlinks_and_skips_excluded_directories() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("outputs");
    fs::create_dir_all(root.join("sub/.git"))?;
    fs::create_dir_all(root.join(".store"))?;
    fs::write(root.join("sub/.git/HEAD"), "ref")?;
    fs::write(root.join(".store/x"), "x")?;
    fs::write(root.join("sub/a.md"), "a")?;
    fs::write(tmp.path().join("outside.txt"), "outside")?;
    std::os::unix::fs::symlink(tmp.path().join("outside.txt"), root.join("out.txt"))?;
    let snap = Snapshot::capture(&root, &Exclusions::default().with(".store"), None)?;
    let paths: Vec<&str> = snap.entries().keys().map(String::as_str).collect();
    assert_eq!(paths, ["out.txt", "sub/a.md"]);
    assert_eq!(snap.get("out.txt"), Some(&SnapshotEntry::Symlink));
    let missing = Snapshot::capture(&tmp.path().join("nope"), &Exclusions::default(), None)?;
    assert!(missing.entries().is_empty());
    assert!(Path::new(&root).is_dir());
    Ok(())
}

#[test]
fn delivery_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Snapshot>();
    send_sync::<DeliveryReceipt>();
    send_sync::<stategraph_nodes::delivery::SnapshotError>();
    send_sync::<stategraph_nodes::delivery::PresentError>();
}
