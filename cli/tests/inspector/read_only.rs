//! Read-only commands leave the file byte-identical.

use crate::support::*;

#[test]
fn read_only_commands_leave_the_file_byte_identical() {
    let (dir, db) = fixture();
    // A first open folds anything left in the WAL into the file.
    sg(&["threads", p(&db)]).ok();
    let before = std::fs::read(&db).unwrap();
    let list = history(&db, "main");
    let (a, b) = (
        list[3]["id"].as_str().unwrap().to_owned(),
        list[0]["id"].as_str().unwrap().to_owned(),
    );
    for args in [
        vec!["threads", p(&db)],
        vec!["history", p(&db), "-t", "main"],
        vec!["show", p(&db), "-t", "main", "-c", &a],
        vec!["diff", p(&db), "-t", "main", &a, &b],
        vec!["diff", p(&db), "-t", "main", "--since-parent", &b, "--json"],
        vec!["verify", p(&db)],
        vec!["runs", p(&db), "-t", "main"],
        vec!["runs", p(&db), "-t", "main", "--json"],
    ] {
        sg(&args).ok();
    }
    sg(&["show", p(&db), "-t", "ghost"]).fails(1);
    sg(&["run", p(&db), "ghost"]).fails(1);
    sg(&[
        "fork",
        p(&db),
        "-t",
        "main",
        "-c",
        &a,
        "--to",
        "x",
        "--set",
        "/count=oops",
    ])
    .fails(2);
    assert!(std::fs::read(&db).unwrap() == before, "the file changed");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("threads.db"))
        .collect();
    assert!(names.is_empty(), "no new files: {names:?}");
}
