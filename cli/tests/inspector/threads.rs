//! `threads`: each thread with its status and subgraph namespaces.

use crate::support::*;

#[test]
fn threads_lists_each_thread_with_its_status_and_subgraph_namespaces() {
    let (_dir, db) = fixture();
    let text = sg(&["threads", p(&db)]).ok().stdout;
    let main = text
        .lines()
        .find(|l| l.starts_with("main "))
        .expect("main listed");
    assert!(main.contains("done"), "{text}");
    let paused = text
        .lines()
        .find(|l| l.starts_with("paused "))
        .expect("paused listed");
    assert!(paused.contains("interrupted"), "{text}");
    assert!(!text.contains('\x1b'), "no colour into a pipe: {text:?}");

    let list = sg(&["threads", p(&db), "--json"]).ok().json();
    assert_eq!(sg(&["--json", "threads", p(&db)]).ok().json(), list);
    let list = list.as_array().expect("array");
    assert_eq!(list.len(), 2);
    let main = list.iter().find(|t| t["thread"] == "main").expect("main");
    assert_eq!(main["status"], "done");
    assert_eq!(
        main["checkpoints"].as_u64(),
        Some(history(&db, "main").len() as u64)
    );
    let namespaces = main["namespaces"].as_array().expect("namespaces");
    assert_eq!(namespaces.len(), 1, "{main}");
    assert!(
        namespaces[0]["ns"].as_str().unwrap().starts_with("review:"),
        "{main}"
    );
    let updated = main["updated_at"].as_str().unwrap();
    assert!(
        updated.len() == 24 && updated.ends_with('Z') && &updated[10..11] == "T",
        "{updated}"
    );
}
