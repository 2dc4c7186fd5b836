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

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[test]
fn threads_names_each_namespace_and_ns_takes_the_name_as_shown() -> TestResult {
    let (_dir, db) = fixture();
    let text = sg(&["threads", p(&db)]).ok().stdout;
    assert!(!text.contains("namespace(s)"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("main "))
        .ok_or("main listed")?;
    // Under the thread's row: its namespaces, the root first as `(root)`.
    let root = lines.get(at + 1).ok_or("a namespace line")?.trim();
    assert!(root.starts_with("(root)  "), "{text}");
    let sub = lines.get(at + 2).ok_or("a subgraph line")?.trim();
    let name = sub.split_whitespace().next().ok_or("a name")?;
    assert!(name.starts_with("review:"), "{text}");
    assert!(sub.ends_with("checkpoint(s)"), "{text}");

    // `--ns` takes the name exactly as shown, for the subgraph and for the root.
    let inner = sg(&["history", p(&db), "-t", "main", "--ns", name, "--json"])
        .ok()
        .json();
    let count: usize = sub.split_whitespace().nth(1).ok_or("a count")?.parse()?;
    assert_eq!(inner.as_array().ok_or("array")?.len(), count, "{inner}");
    let by_root = sg(&["history", p(&db), "-t", "main", "--ns", "(root)", "--json"])
        .ok()
        .json();
    assert_eq!(
        by_root,
        sg(&["history", p(&db), "-t", "main", "--json"]).ok().json()
    );
    let state = sg(&["show", p(&db), "-t", "main", "--ns", name, "--json"])
        .ok()
        .json();
    assert_eq!(state["ns"], name);

    let list = sg(&["threads", p(&db), "--json"]).ok().json();
    let main = list
        .as_array()
        .ok_or("array")?
        .iter()
        .find(|t| t["thread"] == "main")
        .ok_or("main")?;
    assert_eq!(main["namespaces"][0]["name"], name);
    Ok(())
}

#[test]
fn a_forked_thread_without_an_interrupt_is_ready_not_interrupted() -> TestResult {
    let (_dir, db) = fixture();
    let list = history(&db, "main");
    let early = list
        .iter()
        .find(|c| c["next"] == serde_json::json!(["write"]))
        .ok_or("a checkpoint before a write")?;
    let c = early["id"].as_str().ok_or("id")?;
    sg(&["fork", p(&db), "-t", "main", "-c", c, "--to", "branch"]).ok();
    let rows = sg(&["threads", p(&db), "--json"]).ok().json();
    let status = |t: &str| -> Result<String, Box<dyn std::error::Error>> {
        let row = rows
            .as_array()
            .ok_or("array")?
            .iter()
            .find(|r| r["thread"] == t)
            .ok_or("listed")?;
        Ok(row["status"].as_str().ok_or("status")?.to_owned())
    };
    assert_eq!(status("branch")?, "ready");
    assert_eq!(status("paused")?, "interrupted");
    assert_eq!(status("main")?, "done");
    let text = sg(&["threads", p(&db)]).ok().stdout;
    let line = text
        .lines()
        .find(|l| l.starts_with("branch "))
        .ok_or("branch listed")?;
    assert!(
        line.contains("ready") && !line.contains("interrupted"),
        "{text}"
    );
    Ok(())
}

#[test]
fn a_thread_named_with_an_escape_character_is_listed_escaped() {
    let (_dir, db) = fixture();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "UPDATE sg_checkpoints SET thread = 'pa\x1b[31mused' WHERE thread = 'paused'",
            [],
        )
        .unwrap();
    }
    let text = sg(&["threads", p(&db)]).ok().stdout;
    assert!(
        !text.contains('\x1b'),
        "the escape reached the terminal: {text:?}"
    );
    assert!(text.lines().any(|l| l.starts_with("main ")), "{text}");
    let bad = text
        .lines()
        .find(|l| l.starts_with("pa\\u{1b}[31mused "))
        .unwrap_or_else(|| panic!("the thread is listed escaped: {text}"));
    assert!(bad.contains("invalid-id"), "{bad}");
    let list = sg(&["threads", p(&db), "--json"]).ok().json();
    let list = list.as_array().expect("array");
    assert_eq!(list.len(), 2, "{list:?}");
    let bad = list
        .iter()
        .find(|t| t["thread"] == "pa\x1b[31mused")
        .expect("listed in JSON as stored");
    assert_eq!(bad["status"], "invalid-id", "{bad}");
    assert!(bad["checkpoints"].as_u64().unwrap() > 0, "{bad}");
}
