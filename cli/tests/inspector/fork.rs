//! `fork`: a new branch with changed values that the engine continues; bad edits write nothing.

use serde_json::{json, Value};
use stategraph::prelude::*;

use crate::support::*;

#[test]
fn fork_with_set_starts_a_new_branch_the_engine_continues_and_leaves_the_original_intact() {
    let (_dir, db) = fixture();
    let before_rows = rows_of(&db, "main");
    let before_history = sg(&["history", p(&db), "-t", "main", "--json"]).ok().stdout;
    let list = history(&db, "main");
    let after_first_write = list
        .iter()
        .find(|c| {
            c["next"] == json!(["write"])
                && c["writes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|w| w["value"] == 1)
        })
        .expect("checkpoint after the first write");
    let c = after_first_write["id"].as_str().unwrap().to_owned();

    let ran = sg(&[
        "fork",
        p(&db),
        "--thread",
        "main",
        "--checkpoint",
        &c[..16],
        "--to",
        "branch",
        "--set",
        "/count=2",
        "--set",
        "/log/0=\"edited\"",
        "--json",
    ])
    .ok();
    let forked = ran.json();
    assert_eq!(forked["thread"], "branch");
    assert_eq!(forked["parent"], c.as_str());
    let new_id = forked["checkpoint"].as_str().unwrap().to_owned();

    // The new thread's head is the fork, child of C, with the changed values.
    let head = sg(&["show", p(&db), "-t", "branch", "--json"]).ok().json();
    assert_eq!(head["checkpoint"]["id"], new_id.as_str());
    assert_eq!(head["checkpoint"]["source"], "fork");
    assert_eq!(head["checkpoint"]["parent"], c.as_str());
    assert_eq!(head["checkpoint"]["next"], json!(["write"]));
    assert_eq!(
        head["state"],
        json!({ "count": 2, "log": ["edited"], "topic": "cats", "brief": BRIEF })
    );
    let d = sg(&["diff", p(&db), "-t", "branch", "--since-parent", &new_id]).ok();
    let lines: Vec<&str> = d.stdout.lines().collect();
    assert_eq!(
        lines[2..],
        ["~ count: 1 -> 2", "~ log[0]: \"w0\" -> \"edited\""],
        "{}",
        d.stdout
    );

    // The original thread is byte-for-byte what it was.
    assert_eq!(rows_of(&db, "main"), before_rows);
    let after_history = sg(&["history", p(&db), "-t", "main", "--json"]).ok().stdout;
    assert_eq!(after_history, before_history);

    // The engine reads the branch with the program's types and continues it from the fork.
    runtime().block_on(async {
        let g = doc_graph(&db);
        let snap = g
            .get_state("branch", None)
            .await
            .expect("get_state")
            .expect("branch exists");
        assert_eq!(snap.values.count, 2);
        assert_eq!(snap.values.log, ["edited"]);
        assert_eq!(snap.next, ["write"]);
        let out = g
            .invoke(Input::Continue, &RunConfig::new().thread("branch"))
            .await
            .expect("continue the branch");
        assert!(out.is_interrupted(), "the review asks again");
        let out = g
            .invoke(
                Command::resume(Resume::value("ok")),
                &RunConfig::new().thread("branch"),
            )
            .await
            .expect("resume the branch");
        assert_eq!(out.state.log, ["edited", "w2", "prep cats", "ok"]);
        assert_eq!(out.state.count, 3);
        let main = g.get_state("main", None).await.unwrap().unwrap();
        assert_eq!(main.values.log, ["w0", "w1", "w2", "prep cats", "yes"]);
    });
    assert_eq!(rows_of(&db, "main"), before_rows);
    sg(&["verify", p(&db)]).ok();

    // A plain fork (no --set) is a branch point with the same state.
    let plain = sg(&["fork", p(&db), "-t", "main", "-c", &c, "--to", "plain"]).ok();
    assert!(plain.stdout.contains("new checkpoint"), "{}", plain.stdout);
    let state = sg(&["show", p(&db), "-t", "plain", "--json"]).ok().json()["state"].clone();
    assert_eq!(
        state,
        json!({ "count": 1, "log": ["w0"], "topic": "cats", "brief": BRIEF })
    );
}

#[test]
fn fork_rejects_bad_paths_values_and_targets_and_writes_nothing() {
    let (_dir, db) = fixture();
    let c = history(&db, "main")[2]["id"].as_str().unwrap().to_owned();
    let rows = count_rows(&db, "sg_checkpoints");
    let bad = |set: &str, code: i32, says: &str| {
        let ran = sg(&[
            "fork",
            p(&db),
            "-t",
            "main",
            "-c",
            &c,
            "--to",
            "t2",
            "--set",
            set,
        ])
        .fails(code);
        assert!(ran.stderr.contains(says), "{set}: {ran:#?}");
        assert_eq!(ran.stderr.lines().count(), 1, "one clear line: {ran:#?}");
    };
    bad("/count=notjson", 2, "not JSON");
    bad("/topic=dogs", 2, "a string needs quotes");
    bad("count=3", 2, "starting with '/'");
    bad("/count", 2, "PATH=JSON");
    bad("/nope=1", 2, "no field nope at");
    bad("/log/9=\"x\"", 2, "past the end");
    bad("/count/a=1", 2, "not an object or array");
    bad("/=1", 2, "names no field");
    assert_eq!(count_rows(&db, "sg_checkpoints"), rows, "nothing written");

    let taken = sg(&["fork", p(&db), "-t", "main", "-c", &c, "--to", "paused"]).fails(1);
    assert!(taken.stderr.contains("already exists"), "{taken:#?}");
    sg(&["fork", p(&db), "-t", "main", "-c", &c, "--to", "main"]).fails(2);
    let unknown = sg(&["fork", p(&db), "-t", "ghost", "-c", &c, "--to", "t3"]).fails(1);
    assert!(
        unknown.stderr.contains("no thread ghost in "),
        "{unknown:#?}"
    );
    assert_eq!(count_rows(&db, "sg_checkpoints"), rows, "nothing written");
}

#[test]
fn fork_refuses_a_value_the_field_never_held_and_warns_on_a_doubtful_one() {
    let (_dir, db) = fixture();
    let c = history(&db, "main")[2]["id"].as_str().unwrap().to_owned();
    let rows = count_rows(&db, "sg_checkpoints");
    let fork = |set: &str, extra: &[&str]| {
        let mut args = vec!["fork", p(&db), "-t", "main", "-c", &c, "--set", set];
        args.extend_from_slice(extra);
        sg(&args)
    };
    // `count` is a u64: the file recorded that it only ever held integers ≥ 0.
    for (set, says) in [
        ("/count=1.5", "only held integers, and 1.5 is not one"),
        ("/count=18446744073709551616", "only held integers"),
        (
            "/count=\"3\"",
            "only held integer ≥ 0, and \"3\" is a string",
        ),
        ("/log/0=7", "/0 has only held string"),
    ] {
        let ran = fork(set, &[]).fails(1);
        assert!(ran.stderr.contains(says), "{set}: {ran:#?}");
        assert!(ran.stderr.contains("--force"), "{set}: {ran:#?}");
    }
    assert_eq!(count_rows(&db, "sg_checkpoints"), rows, "nothing written");

    // A negative integer may fit a signed type: a warning, and the fork is made.
    let ran = fork("/count=-1", &[]).ok();
    assert!(
        ran.stderr.contains("warning") && ran.stderr.contains("only held integers ≥ 0"),
        "{ran:#?}"
    );
    // --force makes a refused fork, with the reason as a warning.
    let forced = fork("/count=1.5", &["--force"]).ok();
    assert!(forced.stderr.contains("warning"), "{forced:#?}");
    // A fork's own values are the user's, not the program's: they teach the shape nothing.
    fork("/count=2.5", &[]).fails(1);
    // A value of a kind the field held passes silently.
    let fine = fork("/count=40", &[]).ok();
    assert!(fine.stderr.is_empty(), "{fine:#?}");
    assert_eq!(count_rows(&db, "sg_checkpoints"), rows + 3);
}

#[test]
fn fork_without_to_branches_inside_the_thread_and_history_shows_the_branches() {
    let (_dir, db) = fixture();
    let before = history(&db, "main");
    assert!(before.iter().all(|c| c["branch"] == 0), "one branch");
    let c = before[3]["id"].as_str().unwrap().to_owned();
    let forked = sg(&[
        "fork",
        p(&db),
        "-t",
        "main",
        "-c",
        &c,
        "--set",
        "/count=9",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(forked["thread"], "main");
    let new_id = forked["checkpoint"].as_str().unwrap().to_owned();

    // Newest first: the fork heads the list, on a branch of its own, under C.
    let after = history(&db, "main");
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[0]["id"], new_id.as_str());
    assert_eq!(after[0]["parent"], c.as_str());
    assert_eq!(after[0]["branch"], 1);
    assert!(after[1..].iter().all(|r| r["branch"] == 0), "{after:#?}");
    let head = sg(&["show", p(&db), "-t", "main", "--json"]).ok().json();
    assert_eq!(head["state"]["count"], 9);

    // As a tree: oldest first, C's children split into the trunk and the fork's branch.
    let tree = sg(&["history", p(&db), "-t", "main", "--tree", "--json"])
        .ok()
        .json();
    let rows = tree.as_array().unwrap();
    assert_eq!(rows.len(), after.len());
    assert_eq!(rows[0]["source"], "input");
    let at = |id: &str| rows.iter().position(|r| r["id"] == id).unwrap();
    assert_eq!(
        at(&new_id),
        rows.len() - 1,
        "the fork's branch is drawn last"
    );
    assert_eq!(
        rows[at(&c) + 1]["parent"],
        c.as_str(),
        "the trunk goes on under C"
    );
    let ends: Vec<bool> = rows.iter().map(|r| r["branch_end"] == true).collect();
    assert_eq!(ends.iter().filter(|e| **e).count(), 2, "{tree:#}");
    let text = sg(&["history", p(&db), "-t", "main", "--tree"]).ok().stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), rows.len(), "{text}");
    assert!(lines[at(&c) + 1].starts_with("├─"), "{text}");
    assert!(lines.last().unwrap().starts_with("└─"), "{text}");
    assert!(lines.last().unwrap().contains("fork"), "{text}");
    assert!(
        lines.last().unwrap().contains("(end of branch 1)"),
        "{text}"
    );
    assert!(text.contains("(end of branch 0)"), "{text}");
    assert!(text.contains("answered ask: [\"yes\"]"), "{text}");
    sg(&["history", p(&db), "-t", "main", "--tree", "--limit", "2"]).fails(2);
}

#[test]
fn fork_into_a_new_thread_copies_the_forked_branch_only() {
    let (_dir, db) = fixture();
    let trunk = history(&db, "main");
    let c = trunk[3]["id"].as_str().unwrap().to_owned();
    // A second branch of main, then a copy of the first branch's end into a new thread.
    let side = sg(&["fork", p(&db), "-t", "main", "-c", &c, "--json"])
        .ok()
        .json();
    let end = trunk[0]["id"].as_str().unwrap().to_owned();
    sg(&["fork", p(&db), "-t", "main", "-c", &end, "--to", "copy"]).ok();
    let copy = history(&db, "copy");
    assert_eq!(
        copy.len(),
        trunk.len() + 1,
        "the branch and the fork checkpoint"
    );
    assert!(
        copy.iter().all(|r| r["id"] != side["checkpoint"]),
        "the other branch stays behind: {copy:#?}"
    );
    let ids: Vec<&Value> = copy[1..].iter().map(|r| &r["id"]).collect();
    let trunk_ids: Vec<&Value> = trunk.iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, trunk_ids);
    sg(&["verify", p(&db)]).ok();
}
