//! End-to-end tests of the `stategraph` inspector binary against checkpoint files the engine
//! wrote: a graph with an appended field, last-value fields, a subgraph (own namespace) and an
//! interrupt inside it. Every command is run as a separate process: its text output, its
//! `--json` output, its exit code and messages; `verify` against bytes flipped in each kind
//! of stored envelope; `fork --set` against the engine reading and continuing the new branch.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::{Arc, OnceLock};

use rusqlite::Connection;
use serde_json::{json, Value};
use stategraph::checkpoints::SqliteSaver;
use stategraph::prelude::*;

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Doc {
    #[reduce(append)]
    log: Vec<String>,
    count: u64,
    topic: String,
    /// Long enough to be stored in `sg_blobs` (small values are kept in the records), so the
    /// fixture has value rows to damage.
    brief: String,
}

/// The `brief` of thread `main`.
const BRIEF: &str =
    "a brief of more than sixty-four bytes, so that it is stored as a value row of its own";

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Review {
    #[reduce(append)]
    notes: Vec<String>,
    topic: String,
}

fn review_graph() -> CompiledGraph<Review> {
    StateGraph::<Review>::new()
        .add_node("prep", |s: Arc<Review>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Review::update().notes(vec![format!("prep {}", s.topic)]))
        })
        .add_node("ask", |_s: Arc<Review>, c: NodeContext| async move {
            let answer: String = c.interrupt("approve?")?;
            Ok::<_, BoxError>(Review::update().notes(vec![answer]))
        })
        .add_edge(START, "prep")
        .add_edge("prep", "ask")
        .add_edge("ask", END)
        .compile()
        .expect("review graph compiles")
}

/// `write` three times (appending to `log`, counting in `count`), then the `review`
/// subgraph, which asks for approval.
fn doc_graph(db: &Path) -> CompiledGraph<Doc> {
    StateGraph::<Doc>::new()
        .add_node("write", |s: Arc<Doc>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Doc::update()
                    .log(vec![format!("w{}", s.count)])
                    .count(s.count + 1),
            )
        })
        .add_subgraph(
            "review",
            review_graph(),
            Checkpointing::Inherit,
            |d: &Doc| Review::update().topic(d.topic.clone()),
            |r: &Review| Doc::update().log(r.notes.clone()),
        )
        .add_edge(START, "write")
        .add_conditional_edges(
            "write",
            |s: &Doc| if s.count < 3 { "write" } else { "review" },
            ["write", "review"],
        )
        .add_edge("review", END)
        .compile()
        .expect("doc graph compiles")
        .with_checkpointer(Arc::new(
            SqliteSaver::open(db).expect("open checkpoint file"),
        ))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A checkpoint file with thread `main` (finished: interrupted in the subgraph, then resumed)
/// and thread `paused` (still waiting for approval).
fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("threads.db");
    runtime().block_on(async {
        let g = doc_graph(&db);
        let main = RunConfig::new().thread("main");
        let paused = g
            .invoke(
                Doc::update()
                    .topic("cats".to_string())
                    .brief(BRIEF.to_string()),
                &main,
            )
            .await
            .expect("first run");
        assert_eq!(paused.interrupts.len(), 1);
        let done = g
            .invoke(Command::resume(Resume::value("yes")), &main)
            .await
            .expect("resumed run");
        assert!(!done.is_interrupted());
        assert_eq!(done.state.log, ["w0", "w1", "w2", "prep cats", "yes"]);
        let other = RunConfig::new().thread("paused");
        let waiting = g
            .invoke(Doc::update().topic("dogs".to_string()), &other)
            .await
            .expect("paused run");
        assert!(waiting.is_interrupted());
    });
    (dir, db)
}

/// Build the inspector once (same profile as this test) and return its path.
fn binary() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        stategraph_tests::build_target("stategraph-checkpoints", "--bin", "stategraph")
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// What one run of the inspector did.
#[derive(Debug)]
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn ok(self) -> Self {
        assert_eq!(self.code, 0, "expected success: {self:#?}");
        self
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    /// A failure with `code` and a one-line message on stderr that starts `stategraph: `.
    fn fails(self, code: i32) -> Self {
        assert_eq!(self.code, code, "{self:#?}");
        assert!(
            self.stderr.starts_with("stategraph: ") || self.stderr.starts_with("error: "),
            "{self:#?}"
        );
        self
    }
}

fn sg(args: &[&str]) -> Ran {
    let out = Process::new(binary())
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("run stategraph");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The thread's checkpoints as `history --json` lists them (newest first).
fn history(db: &Path, thread: &str) -> Vec<Value> {
    let ran = sg(&["history", p(db), "--thread", thread, "--json"]).ok();
    ran.json().as_array().cloned().expect("an array")
}

/// Every stored column of a thread's checkpoint rows and pending writes, in order.
fn rows_of(db: &Path, thread: &str) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut out = Vec::new();
    for sql in [
        "SELECT * FROM sg_checkpoints WHERE thread = ?1 ORDER BY seq",
        "SELECT * FROM sg_writes WHERE thread = ?1 ORDER BY ns, checkpoint, ord, idx",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let n = stmt.column_count();
        let rows = stmt
            .query_map([thread], |r| {
                (0..n)
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .expect("query");
        for row in rows {
            out.push(row.expect("row").join("|"));
        }
    }
    out
}

fn count_rows(db: &Path, table: &str) -> i64 {
    let conn = Connection::open(db).expect("open");
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .expect("count")
}

#[test]
fn help_lists_every_command_and_the_exit_codes() {
    let help = sg(&["--help"]).ok().stdout;
    for cmd in [
        "threads", "history", "show", "diff", "fork", "verify", "prune", "--json",
    ] {
        assert!(help.contains(cmd), "{cmd} missing from:\n{help}");
    }
    assert!(help.contains("Exit status"), "{help}");
    let fork = sg(&["fork", "--help"]).ok().stdout;
    assert!(fork.contains("--set <PATH=JSON>"), "{fork}");
    assert!(fork.contains("--to <TO>"), "{fork}");
    sg(&["frobnicate"]).fails(2);
    sg(&["history"]).fails(2);
}

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
    assert!(ids[0].starts_with(short) && short.len() >= 8, "{text}");

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
        .to_string();
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

#[test]
fn show_prints_the_state_with_its_header_or_one_value() {
    let (_dir, db) = fixture();
    let text = sg(&["show", p(&db), "--thread", "main"]).ok().stdout;
    let list = history(&db, "main");
    let head = list[0]["id"].as_str().unwrap();
    assert!(text.starts_with(&format!("checkpoint  {head}\n")), "{text}");
    for key in ["parent", "step", "source", "created", "next"] {
        assert!(
            text.lines().any(|l| l.starts_with(key)),
            "{key} missing:\n{text}"
        );
    }
    let created = text.lines().find(|l| l.starts_with("created")).unwrap();
    assert!(
        created.trim_end().ends_with('Z') && created.contains('T'),
        "{created}"
    );
    let body = &text[text.find("\n{").expect("state JSON")..];
    let state: Value = serde_json::from_str(body).expect("state is JSON");
    assert_eq!(
        state,
        json!({ "count": 3, "log": ["w0", "w1", "w2", "prep cats", "yes"], "topic": "cats", "brief": BRIEF })
    );

    let doc = sg(&["show", p(&db), "-t", "main", "--json"]).ok().json();
    assert_eq!(doc["state"], state);
    assert_eq!(doc["checkpoint"]["id"], head);
    assert_eq!(doc["checkpoint"]["next"], json!([]));

    let count = sg(&["show", p(&db), "-t", "main", "--field", "count"]).ok();
    assert_eq!(count.stdout.trim(), "3");
    let first = sg(&["show", p(&db), "-t", "main", "--path", "/log/3"]).ok();
    assert_eq!(first.stdout.trim(), "\"prep cats\"");

    // An older checkpoint by unique prefix: after the first write step.
    let older = list
        .iter()
        .find(|c| {
            c["writes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["field"] == "count" && w["value"] == 1)
        })
        .expect("first write");
    let id = older["id"].as_str().unwrap();
    let prefix = &id[..20];
    let at = sg(&["show", p(&db), "-t", "main", "-c", prefix, "--json"])
        .ok()
        .json();
    assert_eq!(at["checkpoint"]["id"], id);
    assert_eq!(at["state"]["log"], json!(["w0"]));
    assert_eq!(at["checkpoint"]["next"], json!(["write"]));

    // The paused thread shows its pending interrupt in the header.
    let paused = sg(&["show", p(&db), "-t", "paused"]).ok().stdout;
    let line = paused
        .lines()
        .find(|l| l.starts_with("interrupt"))
        .unwrap_or_else(|| panic!("no interrupt line:\n{paused}"));
    assert!(line.contains("\"approve?\""), "{line}");

    // Asking for what is not there.
    let missing = sg(&["show", p(&db), "-t", "main", "--field", "nope"]).fails(1);
    assert!(missing.stderr.contains("\"nope\""), "{missing:#?}");
    sg(&["show", p(&db), "-t", "main", "--path", "/log/99"]).fails(1);
    sg(&["show", p(&db), "-t", "main", "--path", "log"]).fails(2);
    sg(&["show", p(&db), "-t", "main", "--field", "a", "--path", "/b"]).fails(2);
}

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
            .map(|c| c["id"].as_str().unwrap().to_string())
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
    let root = list.last().unwrap()["id"].as_str().unwrap().to_string();
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
    let c = after_first_write["id"].as_str().unwrap().to_string();

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
    let new_id = forked["checkpoint"].as_str().unwrap().to_string();

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
    let c = history(&db, "main")[2]["id"].as_str().unwrap().to_string();
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
    bad("/nope=1", 2, "no field \"nope\"");
    bad("/log/9=\"x\"", 2, "past the end");
    bad("/count/a=1", 2, "not an object or array");
    bad("/=1", 2, "names no field");
    assert_eq!(count_rows(&db, "sg_checkpoints"), rows, "nothing written");

    let taken = sg(&["fork", p(&db), "-t", "main", "-c", &c, "--to", "paused"]).fails(1);
    assert!(taken.stderr.contains("already exists"), "{taken:#?}");
    sg(&["fork", p(&db), "-t", "main", "-c", &c, "--to", "main"]).fails(2);
    let unknown = sg(&["fork", p(&db), "-t", "ghost", "-c", &c, "--to", "t3"]).fails(1);
    assert!(
        unknown.stderr.contains("no thread \"ghost\""),
        "{unknown:#?}"
    );
    assert_eq!(count_rows(&db, "sg_checkpoints"), rows, "nothing written");
}

/// Flip the last byte of one stored envelope; returns text the report must name.
fn flip(db: &Path, what: &str) -> String {
    let conn = Connection::open(db).expect("open");
    let flip_last = |mut data: Vec<u8>| {
        let last = data.len() - 1;
        data[last] ^= 0x01;
        data
    };
    match what {
        "blob" => {
            let (id, hash, data): (i64, Vec<u8>, Vec<u8>) = conn
                .query_row(
                    "SELECT id, hash, data FROM sg_blobs ORDER BY id LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .expect("a blob");
            conn.execute(
                "UPDATE sg_blobs SET data = ?2 WHERE id = ?1",
                rusqlite::params![id, flip_last(data)],
            )
            .expect("update");
            hex(&hash)
        }
        "log part" => {
            let (log, part, hash, data): (i64, i64, Vec<u8>, Vec<u8>) = conn
                .query_row(
                    "SELECT log, part, hash, data FROM sg_log_parts WHERE data IS NOT NULL ORDER BY log, part LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .expect("a log part");
            conn.execute(
                "UPDATE sg_log_parts SET data = ?3 WHERE log = ?1 AND part = ?2",
                rusqlite::params![log, part, flip_last(data)],
            )
            .expect("update");
            hex(&hash)
        }
        "body" => {
            let (seq, id, body): (i64, Vec<u8>, Vec<u8>) = conn
                .query_row(
                    "SELECT seq, id, body FROM sg_checkpoints WHERE thread = 'main' AND ns = '' ORDER BY seq LIMIT 1 OFFSET 2",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .expect("a checkpoint");
            conn.execute(
                "UPDATE sg_checkpoints SET body = ?2 WHERE seq = ?1",
                rusqlite::params![seq, flip_last(body)],
            )
            .expect("update");
            hex(&id)
        }
        "write" => {
            type Key = (String, String, Vec<u8>, Vec<u8>, i64, Vec<u8>, Vec<u8>);
            let (thread, ns, cp, task, idx, hash, data): Key = conn
                .query_row(
                    "SELECT thread, ns, checkpoint, task, idx, hash, data FROM sg_writes LIMIT 1",
                    [],
                    |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                        ))
                    },
                )
                .expect("a pending write");
            conn.execute(
                "UPDATE sg_writes SET data = ?6 WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3 AND task = ?4 AND idx = ?5",
                rusqlite::params![thread, ns, cp, task, idx, flip_last(data)],
            )
            .expect("update");
            hex(&hash)
        }
        other => panic!("unknown target {other}"),
    }
}

#[test]
fn verify_passes_a_clean_file_and_names_every_flipped_envelope() {
    let (_dir, db) = fixture();
    let ran = sg(&["verify", p(&db)]).ok();
    assert!(
        ran.stdout.contains("ok: no problems found"),
        "{}",
        ran.stdout
    );
    let report = sg(&["verify", p(&db), "--json"]).ok().json();
    assert_eq!(report["ok"], true);
    assert_eq!(report["problems"], json!([]));
    let counts = &report["counts"];
    assert_eq!(counts["sqlite_ok"], true);
    assert!(counts["blobs"].as_u64().unwrap() > 0, "{counts}");
    assert!(counts["log_parts"].as_u64().unwrap() > 0, "{counts}");
    assert!(counts["writes"].as_u64().unwrap() > 0, "{counts}");
    assert_eq!(counts["checkpoints"], counts["loaded"]);
    assert_eq!(
        counts["checkpoints"].as_i64(),
        Some(count_rows(&db, "sg_checkpoints"))
    );

    for (what, table) in [
        ("blob", "sg_blobs"),
        ("log part", "sg_log_parts"),
        ("body", "sg_checkpoints"),
        ("write", "sg_writes"),
    ] {
        let (_dir, db) = fixture();
        let key = flip(&db, what);
        let ran = sg(&["verify", p(&db)]).fails(1);
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.contains(table) && l.contains(&key)),
            "{what}: the report names {key} in {table}:\n{}",
            ran.stdout
        );
        assert!(ran.stderr.contains("problem(s) found"), "{ran:#?}");
        let report = sg(&["verify", p(&db), "--json"]).fails(1).json();
        assert_eq!(report["ok"], false);
        let problems = report["problems"].as_array().unwrap();
        assert!(
            problems.iter().any(|p| p["table"] == table
                && p["key"].as_str().unwrap().contains(&key)
                && p["detail"].as_str().unwrap().contains("hash")),
            "{what}: {problems:#?}"
        );
    }
}

#[test]
fn reading_a_damaged_value_fails_with_an_integrity_message() {
    let (_dir, db) = fixture();
    let conn = Connection::open(&db).expect("open");
    let rows: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT id, data FROM sg_blobs")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (id, mut data) in rows {
        let last = data.len() - 1;
        data[last] ^= 0x80;
        conn.execute(
            "UPDATE sg_blobs SET data = ?2 WHERE id = ?1",
            rusqlite::params![id, data],
        )
        .unwrap();
    }
    drop(conn);
    let ran = sg(&["show", p(&db), "-t", "main"]).fails(1);
    assert!(
        ran.stderr.contains("integrity error") && ran.stderr.contains("does not match its hash"),
        "{ran:#?}"
    );
    assert!(ran.stdout.is_empty(), "{ran:#?}");
}

#[test]
fn missing_files_unknown_threads_and_checkpoints_are_clear_errors() {
    let (dir, db) = fixture();
    let missing = dir.path().join("nope.db");
    for args in [
        vec!["threads", p(&missing)],
        vec!["history", p(&missing), "-t", "main"],
        vec!["show", p(&missing), "-t", "main"],
        vec!["verify", p(&missing)],
        vec!["prune", p(&missing), "-t", "main", "--keep", "1"],
        vec![
            "fork",
            p(&missing),
            "-t",
            "main",
            "-c",
            "0123456789",
            "--to",
            "x",
        ],
    ] {
        let ran = sg(&args).fails(1);
        assert!(ran.stderr.contains("no such file"), "{args:?}: {ran:#?}");
        assert!(!missing.exists(), "{args:?} created the file");
    }

    let not_ours = dir.path().join("notes.txt");
    std::fs::write(&not_ours, "just text\n").unwrap();
    let ran = sg(&["threads", p(&not_ours)]).fails(1);
    assert!(
        ran.stderr.contains("not a stategraph checkpoint file"),
        "{ran:#?}"
    );
    assert_eq!(std::fs::read(&not_ours).unwrap(), b"just text\n");
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let ran = sg(&["verify", p(&empty)]).fails(1);
    assert!(
        ran.stderr.contains("not a stategraph checkpoint file"),
        "{ran:#?}"
    );
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);

    let ran = sg(&["history", p(&db), "-t", "ghost"]).fails(1);
    assert!(ran.stderr.contains("no thread \"ghost\""), "{ran:#?}");
    let ran = sg(&[
        "show",
        p(&db),
        "-t",
        "main",
        "-c",
        "ffffffffffffffffffffffffffffffff",
    ])
    .fails(1);
    assert!(ran.stderr.contains("no checkpoint ffffffff"), "{ran:#?}");
    let ran = sg(&["show", p(&db), "-t", "main", "-c", "ffffff"]).fails(1);
    assert!(ran.stderr.contains("no checkpoint"), "{ran:#?}");
    let ran = sg(&["show", p(&db), "-t", "main", "-c", "xyz"]).fails(2);
    assert!(ran.stderr.contains("invalid checkpoint id"), "{ran:#?}");
    // A checkpoint of another thread is not found in this one.
    let other = history(&db, "paused")[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    sg(&["show", p(&db), "-t", "main", "-c", &other]).fails(1);
    let ran = sg(&["diff", p(&db), "-t", "main", &other, &other]).fails(1);
    assert!(ran.stderr.contains("no checkpoint"), "{ran:#?}");

    // Ids made in the same run share their leading digits: a 6-digit prefix is ambiguous.
    let list = history(&db, "main");
    let (a, b) = (
        list[0]["id"].as_str().unwrap(),
        list[1]["id"].as_str().unwrap(),
    );
    if a[..6] == b[..6] {
        let ran = sg(&["show", p(&db), "-t", "main", "-c", &a[..6]]).fails(2);
        assert!(ran.stderr.contains("ambiguous"), "{ran:#?}");
    }
}

#[test]
fn prune_keeps_the_newest_n_checkpoints_and_the_file_stays_valid() {
    let (_dir, db) = fixture();
    let before = history(&db, "main");
    let head_state = sg(&["show", p(&db), "-t", "main", "--json"]).ok().json()["state"].clone();
    let ran = sg(&["prune", p(&db), "--thread", "main", "--keep", "3", "--json"])
        .ok()
        .json();
    assert_eq!(ran["kept"], 3);
    assert_eq!(ran["before"].as_u64(), Some(before.len() as u64));
    assert!(ran["deleted"].as_u64().unwrap() >= before.len() as u64 - 3);
    let after = history(&db, "main");
    assert_eq!(after.len(), 3);
    let ids = |l: &[Value]| l.iter().map(|c| c["id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&before[..3]));
    assert_eq!(after[2]["parent"], Value::Null, "the oldest kept is a root");
    let state = sg(&["show", p(&db), "-t", "main", "--json"]).ok().json()["state"].clone();
    assert_eq!(state, head_state);
    assert_eq!(history(&db, "paused").len(), {
        let t = sg(&["threads", p(&db), "--json"]).ok().json();
        t.as_array()
            .unwrap()
            .iter()
            .find(|t| t["thread"] == "paused")
            .unwrap()["checkpoints"]
            .as_u64()
            .unwrap() as usize
    });
    sg(&["verify", p(&db)]).ok();
    let text = sg(&["prune", p(&db), "-t", "main", "--keep", "1"])
        .ok()
        .stdout;
    assert!(text.contains("1 of 3 left"), "{text}");
    assert_eq!(history(&db, "main").len(), 1);
    sg(&["prune", p(&db), "-t", "main", "--keep", "0"]).fails(2);
    sg(&["prune", p(&db), "-t", "ghost", "--keep", "1"]).fails(1);
}

#[test]
fn read_only_commands_leave_the_file_byte_identical() {
    let (dir, db) = fixture();
    // A first open folds anything left in the WAL into the file.
    sg(&["threads", p(&db)]).ok();
    let before = std::fs::read(&db).unwrap();
    let list = history(&db, "main");
    let (a, b) = (
        list[3]["id"].as_str().unwrap().to_string(),
        list[0]["id"].as_str().unwrap().to_string(),
    );
    for args in [
        vec!["threads", p(&db)],
        vec!["history", p(&db), "-t", "main"],
        vec!["show", p(&db), "-t", "main", "-c", &a],
        vec!["diff", p(&db), "-t", "main", &a, &b],
        vec!["diff", p(&db), "-t", "main", "--since-parent", &b, "--json"],
        vec!["verify", p(&db)],
    ] {
        sg(&args).ok();
    }
    sg(&["show", p(&db), "-t", "ghost"]).fails(1);
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
