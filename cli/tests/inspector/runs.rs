//! `runs`: a thread's runs, newest first, with status, reason, times and receipt.

use crate::support::*;

#[test]
fn runs_lists_a_threads_runs_newest_first_with_their_receipts() {
    let (_dir, db) = fixture_with_runs();
    let text = sg(&["runs", p(&db), "--thread", "main"]).ok().stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("RUN "), "{text}");
    assert!(lines[0].contains("RECEIPT"), "{text}");
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].starts_with("r-new ") && lines[2].starts_with("r-old "),
        "{text}"
    );
    assert!(
        lines[1].contains("error") && lines[1].contains(" no "),
        "{text}"
    );
    assert!(lines[1].contains("Artifact delivery"), "{text}");
    assert!(
        lines[2].contains("success") && lines[2].contains(" yes "),
        "{text}"
    );
    assert!(lines[2].contains("1970-01-01T00:00:01.000Z"), "{text}");
    assert!(!text.contains("r-paused"), "{text}");

    let list = sg(&["runs", p(&db), "-t", "main", "--json"]).ok().json();
    let list = list.as_array().expect("array");
    let ids: Vec<&str> = list.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["r-new", "r-old"]);
    assert_eq!(list[0]["status"], "error");
    assert_eq!(list[0]["stop_reason"], "loop_capped");
    assert_eq!(list[0]["receipt"], false);
    assert_eq!(list[1]["receipt"], true);
    assert_eq!(list[1]["created_at_ms"], 1_000);
}

#[test]
fn runs_of_a_thread_without_runs_is_an_empty_list() {
    let (_dir, db) = fixture();
    let text = sg(&["runs", p(&db), "-t", "main"]).ok().stdout;
    assert!(text.starts_with("no runs of thread main in"), "{text}");
    let list = sg(&["runs", p(&db), "-t", "main", "--json"]).ok().json();
    assert_eq!(list, serde_json::json!([]));
}

#[test]
fn runs_needs_a_valid_thread_and_an_existing_file() {
    let (dir, db) = fixture();
    sg(&["runs", p(&db), "-t", ""]).fails(2);
    sg(&["runs", p(&db)]).fails(2);
    let missing = dir.path().join("missing.db");
    let ran = sg(&["runs", p(&missing), "-t", "main"]).fails(1);
    assert!(ran.stderr.contains("no such file"), "{ran:#?}");
    assert!(!missing.exists(), "never created");
}
