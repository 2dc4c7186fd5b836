//! `accept-loss`: a file that lost committed checkpoints (here: an older copy restored over
//! it, its high-water record left from the newer file) is refused by write commands and
//! reported by `verify`, both naming `accept-loss`; after it, every command works on what is
//! left, and a second call has nothing to accept.

use std::path::Path;

use stategraph::prelude::*;

use crate::support::*;

fn copy_file(from: &Path, to: &Path) {
    std::fs::copy(from, to).expect("copy the checkpoint file");
}

#[test]
fn accept_loss_lets_commands_go_on_from_what_a_restored_copy_holds() {
    let (dir, db) = fixture();
    let older = dir.path().join("older.db");
    copy_file(&db, &older);
    // The newer file goes on: the paused thread is answered (new commits, a higher record).
    runtime().block_on(async {
        let g = doc_graph(&db);
        g.invoke(
            Command::resume(Resume::value("yes")),
            &RunConfig::new().thread("paused"),
        )
        .await
        .expect("resume the paused thread");
    });
    let newer_history = history(&db, "paused").len();
    copy_file(&older, &db);
    assert!(history(&db, "paused").len() < newer_history);

    let refused = sg(&["prune", p(&db), "-t", "main", "--keep", "1"]).fails(1);
    assert!(
        refused.stderr.contains("committed checkpoints are missing")
            && refused.stderr.contains("stategraph accept-loss"),
        "{}",
        refused.stderr
    );
    let report = sg(&["verify", p(&db)]).fails(1);
    assert!(
        report.stdout.contains("committed but missing"),
        "{}",
        report.stdout
    );

    let accepted = sg(&["accept-loss", p(&db), "--json"]).ok().json();
    assert_eq!(accepted["lost"], true);
    assert!(accepted["recorded_row"].as_i64() > accepted["file_row"].as_i64());

    sg(&["verify", p(&db)]).ok();
    sg(&["prune", p(&db), "-t", "main", "--keep", "1"]).ok();
    let again = sg(&["accept-loss", p(&db)]).ok().stdout;
    assert!(again.contains("nothing to accept"), "{again}");
}

#[test]
fn accept_loss_on_a_missing_file_fails_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("none.db");
    let ran = sg(&["accept-loss", p(&db)]).fails(1);
    assert!(ran.stderr.contains("no such file"), "{}", ran.stderr);
    assert!(!db.exists());
}
