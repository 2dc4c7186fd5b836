//! `history`: checkpoints newest first with what each step wrote.

use serde_json::json;

use crate::support::*;

#[test]
fn history_lists_checkpoints_newest_first_with_what_each_step_wrote() {
    let (_dir, db) = fixture();
    let list = history(&db, "main");
    // input, start, write x3, review (interrupted inside, then finished): at least 6.
    assert!(list.len() >= 6, "{list:#?}");
    let ids: Vec<&str> = list.iter().map(|c| c["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(ids, sorted, "newest first");
    for pair in list.windows(2) {
        assert_eq!(pair[0]["parent"], pair[1]["id"], "one chain");
    }
    let oldest = list.last().unwrap();
    assert_eq!(oldest["source"], "input");
    assert_eq!(oldest["step"], -1);
    assert_eq!(oldest["next"], json!(["__start__"]));
    // A `write` step appended one item to `log` and replaced `count`.
    let write = list
        .iter()
        .find(|c| {
            c["writes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["field"] == "count" && w["value"] == 2)
        })
        .expect("the second write step");
    let writes = write["writes"].as_array().unwrap();
    assert!(
        writes.iter().any(|w| w["field"] == "log"
            && w["kind"] == "appended"
            && w["values"] == json!(["w1"])),
        "{write:#}"
    );

    let text = sg(&["history", p(&db), "--thread", "main"]).ok().stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), list.len(), "{text}");
    assert!(text.contains("count=2, log +1"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("[interrupt ask: \"approve?\"")),
        "{text}"
    );
    assert!(lines.last().unwrap().contains("input"), "{text}");
    let short = lines[0].split_whitespace().next().unwrap();
    assert!(ids[0].ends_with(short) && short.len() >= 6, "{text}");

    let two = sg(&["history", p(&db), "-t", "main", "--limit", "2", "--json"])
        .ok()
        .json();
    assert_eq!(two.as_array().unwrap().len(), 2);
    assert_eq!(two[0]["id"], list[0]["id"]);

    // The paused thread's newest checkpoint carries the pending interrupt of the subgraph.
    let paused = history(&db, "paused");
    let pending = paused[0]["pending"].as_array().unwrap();
    assert!(
        pending
            .iter()
            .any(|w| w["kind"] == "interrupt" && w["value"] == "approve?"),
        "{paused:#?}"
    );

    // The subgraph's own namespace has a history too.
    let threads = sg(&["threads", p(&db), "--json"]).ok().json();
    let ns = threads[0]["namespaces"][0]["ns"]
        .as_str()
        .unwrap()
        .to_owned();
    let sub = sg(&["history", p(&db), "-t", "main", "--ns", &ns, "--json"])
        .ok()
        .json();
    assert!(
        sub.as_array().unwrap().iter().any(|c| c["writes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["field"] == "notes")),
        "{sub:#}"
    );
}
