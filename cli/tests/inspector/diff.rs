//! `diff`: what changed between two checkpoints, and since a parent.

use serde_json::{json, Value};

use crate::support::*;

#[test]
fn diff_prints_what_changed_between_two_checkpoints_and_since_a_parent() {
    let (_dir, db) = fixture();
    let list = history(&db, "main");
    let by_count = |n: u64| {
        list.iter()
            .find(|c| {
                c["writes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|w| w["field"] == "count" && w["value"] == n)
            })
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .expect("write step")
    };
    let (a, b) = (by_count(1), by_count(3));
    let ran = sg(&["diff", p(&db), "--thread", "main", &a, &b]).ok();
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(
        lines[2..],
        ["~ count: 1 -> 3", "+ log[1]: \"w1\"", "+ log[2]: \"w2\""],
        "{}",
        ran.stdout
    );
    assert!(lines[0].starts_with(&format!("--- {a}")), "{}", ran.stdout);
    assert!(lines[1].starts_with(&format!("+++ {b}")), "{}", ran.stdout);

    let doc = sg(&["diff", p(&db), "-t", "main", &a, &b, "--json"])
        .ok()
        .json();
    assert_eq!(doc["from"], a.as_str());
    assert_eq!(doc["to"], b.as_str());
    assert_eq!(doc["diff"]["fields"].as_array().unwrap().len(), 2);
    assert_eq!(
        doc["diff"]["fields"][0],
        json!({ "field": "count", "change": { "kind": "set", "from": 1, "to": 3 } })
    );
    assert_eq!(
        doc["diff"]["fields"][1],
        json!({ "field": "log", "change": { "kind": "list", "edits": [
            { "op": "appended", "index": 1, "items": ["w1", "w2"] }
        ] } })
    );
    let patch = doc["patch"].as_array().unwrap();
    assert_eq!(patch.len(), 3, "{patch:?}");
    assert!(patch.contains(&json!({ "op": "add", "path": "/log/-", "value": "w1" })));
    assert!(patch.contains(&json!({ "op": "replace", "path": "/count", "value": 3 })));
    assert!(patch.contains(&json!({ "op": "add", "path": "/log/-", "value": "w2" })));

    // Since the parent: what one step changed (pure append + replace).
    let step = sg(&["diff", p(&db), "-t", "main", "--since-parent", &b]).ok();
    let lines: Vec<&str> = step.stdout.lines().collect();
    assert_eq!(
        lines[2..],
        ["~ count: 2 -> 3", "+ log[2]: \"w2\""],
        "{}",
        step.stdout
    );
    let step = sg(&["diff", p(&db), "-t", "main", "--since-parent", &b, "--json"])
        .ok()
        .json();
    assert_eq!(step["from"], by_count(2).as_str());

    // The root checkpoint diffs against an empty state.
    let root = list.last().unwrap()["id"].as_str().unwrap().to_owned();
    let first = sg(&[
        "diff",
        p(&db),
        "-t",
        "main",
        "--since-parent",
        &root,
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(first["from"], Value::Null);

    // Identical checkpoints: no changes.
    let same = sg(&["diff", p(&db), "-t", "main", &a, &a]).ok();
    assert!(same.stdout.contains("(no changes)"), "{}", same.stdout);

    // Colour only when asked (the output here is a pipe).
    let plain = sg(&["diff", p(&db), "-t", "main", &a, &b]).ok();
    assert!(!plain.stdout.contains('\x1b'));
    let coloured = sg(&["diff", p(&db), "-t", "main", &a, &b, "--color", "always"]).ok();
    assert!(
        coloured.stdout.contains("\x1b[32m+ log[1]: \"w1\"\x1b[0m"),
        "{:?}",
        coloured.stdout
    );
    assert!(
        coloured.stdout.contains("\x1b[33m~ count"),
        "{:?}",
        coloured.stdout
    );

    sg(&["diff", p(&db), "-t", "main", &a]).fails(2);
    sg(&["diff", p(&db), "-t", "main", &a, &b, "--since-parent", &a]).fails(2);
}
