//! The inspector against damaged files (issue 18's property battery). A real checkpoint file
//! (threads with a subgraph namespace, interrupts and their pending writes, a fork in a new
//! thread and one in the same thread, runs with a receipt) is damaged at random, at the byte
//! level (main file, `-wal`, high-water record) or through SQL (see [`crate::damage`]); then
//! every read command runs as a process on it and must:
//!
//! - exit 0, 1 or 2, never a panic's 101 or a signal, with no panic text on stderr, and print
//!   something when it fails;
//! - write nothing: the main file, its `-wal` and its high-water record keep their bytes and
//!   modification times, and nothing new is left beside them — except the `-shm` SQLite makes beside an existing
//!   `-wal` to read it (its shared-memory index of the log, rebuilt from the log by any
//!   reader; decision 0035), which is allowed only there;
//! - not be fooled: when `verify` passes, every thread `threads` lists reads back whole
//!   (`history` and `show` exit 0).
//!
//! After the reads, the write commands (`prune`, `fork`) run on the damaged file too: they may
//! change it, but must exit 0, 1 or 2 without a panic.
//!
//! `STATEGRAPH_DAMAGE_CASES=N` sets the cases per test (default 32).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use proptest::strategy::{Just, Strategy};
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use stategraph::prelude::*;

use crate::damage::{self, beside, Bytes, Sql};
use crate::support::*;

/// Cases per test: `STATEGRAPH_DAMAGE_CASES`, else 32.
fn cases() -> u32 {
    std::env::var("STATEGRAPH_DAMAGE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

/// The undamaged files every case starts from, and the names the commands use.
struct Template {
    _dir: tempfile::TempDir,
    /// A closed file: everything folded into the main file, nothing beside it.
    plain: PathBuf,
    /// A copy taken while a writer had its last commits (thread `late`) only in the `-wal`:
    /// the main file, its `-wal` and its high-water record, no `-shm`.
    walled: PathBuf,
    /// An older and the newest checkpoint of `main`, the subgraph namespace of `main`.
    older: String,
    newest: String,
    ns: String,
}

/// `cp FROM TO` in a child process: opening and closing the file in this process would drop
/// the POSIX locks its open saver holds (see decision 0017).
fn cp(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(status.success(), "cp {} {}", from.display(), to.display());
}

fn template() -> Template {
    let (dir, plain) = fixture_with_runs();
    let list = history(&plain, "main");
    let older = list[3]["id"].as_str().unwrap().to_owned();
    let newest = list[0]["id"].as_str().unwrap().to_owned();
    sg(&[
        "fork",
        p(&plain),
        "-t",
        "main",
        "-c",
        &older,
        "--to",
        "forked",
    ])
    .ok();
    sg(&[
        "fork",
        p(&plain),
        "-t",
        "main",
        "-c",
        &older,
        "--set",
        "/count=9",
    ])
    .ok();
    let threads = sg(&["threads", p(&plain), "--json"]).ok().json();
    let main = threads
        .as_array()
        .and_then(|l| l.iter().find(|t| t["thread"] == "main"))
        .expect("main listed")
        .clone();
    let ns = main["namespaces"][0]["ns"].as_str().unwrap().to_owned();
    let walled_dir = dir.path().join("walled");
    std::fs::create_dir(&walled_dir).unwrap();
    let walled = walled_dir.join("threads.db");
    runtime().block_on(async {
        let g = doc_graph(&plain);
        let late = RunConfig::new().thread("late");
        g.invoke(Doc::update().topic("owls".to_owned()), &late)
            .await
            .expect("late run");
        cp(&plain, &walled);
        for side in ["-wal", "-highwater"] {
            cp(&beside(&plain, side), &beside(&walled, side));
        }
    });
    let listed = sg(&["threads", p(&walled), "--json"]).ok().json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["thread"] == "late"),
        "the copy's -wal holds thread late: {listed}"
    );
    std::fs::remove_file(beside(&walled, "-shm")).unwrap();
    assert!(
        !beside(&plain, "-wal").exists() && beside(&plain, "-highwater").exists(),
        "the closed file has no -wal and a high-water record"
    );
    Template {
        _dir: dir,
        plain,
        walled,
        older,
        newest,
        ns,
    }
}

/// Every read command, on file `db`.
fn read_commands(t: &Template, db: &str) -> Vec<Vec<String>> {
    let (a, b, ns) = (t.older.as_str(), t.newest.as_str(), t.ns.as_str());
    let lines: Vec<Vec<&str>> = vec![
        vec!["threads", db],
        vec!["threads", db, "--json"],
        vec!["history", db, "-t", "main"],
        vec!["history", db, "-t", "main", "--json", "-n", "3"],
        vec!["history", db, "-t", "main", "--tree"],
        vec!["history", db, "-t", "main", "--ns", ns, "--json"],
        vec!["history", db, "-t", "forked", "--tree", "--json"],
        vec!["show", db, "-t", "main"],
        vec!["show", db, "-t", "main", "-c", a, "--json"],
        vec!["show", db, "-t", "paused", "--field", "log"],
        vec!["show", db, "-t", "main", "-c", "step:2", "--path", "/log/0"],
        vec!["show", db, "-t", "main", "--ns", ns],
        vec!["diff", db, "-t", "main", a, b],
        vec!["diff", db, "-t", "main", "--since-parent", b, "--json"],
        vec!["verify", db],
        vec!["verify", db, "--json"],
        vec!["runs", db, "-t", "main"],
        vec!["runs", db, "-t", "paused", "--json"],
        vec!["run", db, "r-old"],
        vec!["run", db, "r-new", "--json"],
    ];
    lines
        .into_iter()
        .map(|l| l.into_iter().map(str::to_owned).collect())
        .collect()
}

/// What a case's directory holds, as far as a read may not change it.
#[derive(Debug, PartialEq)]
struct Files {
    /// Each file's name, bytes and modification time, `-shm` left out.
    files: Vec<(String, Vec<u8>, SystemTime)>,
    shm: bool,
}

fn files(dir: &Path) -> Files {
    let mut files = Vec::new();
    let mut shm = false;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with("-shm") {
            shm = true;
            continue;
        }
        let modified = entry.metadata().unwrap().modified().unwrap();
        files.push((name, std::fs::read(entry.path()).unwrap(), modified));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Files { files, shm }
}

/// A process's outcome is clean: exit 0, 1 or 2, no panic, a message on failure.
fn clean(args: &[String], ran: &Ran) -> Result<(), TestCaseError> {
    let panicked = ran.stderr.contains("panicked") || ran.stderr.contains("RUST_BACKTRACE");
    if !(0..=2).contains(&ran.code) || panicked {
        return Err(TestCaseError::fail(format!("{args:?}: {ran:#?}")));
    }
    if ran.code != 0 && ran.stderr.trim().is_empty() && ran.stdout.trim().is_empty() {
        return Err(TestCaseError::fail(format!(
            "{args:?} failed silently: {ran:#?}"
        )));
    }
    Ok(())
}

/// What the cases saw, to show they were not vacuous.
#[derive(Debug, Default)]
struct Seen {
    verify_failed: u32,
    verify_passed: u32,
    exits: [u32; 3],
}

/// Run every read command on the damaged `db`, then the write commands; check each.
fn check_case(t: &Template, db: &Path, seen: &RefCell<Seen>) -> Result<(), TestCaseError> {
    let dir = db.parent().unwrap();
    let before = files(dir);
    let mut verify_ok = None;
    for args in read_commands(t, p(db)) {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = sg(&refs);
        clean(&args, &ran)?;
        seen.borrow_mut().exits[usize::try_from(ran.code).unwrap()] += 1;
        if args[0] == "verify" {
            verify_ok = Some(ran.code == 0);
        }
        let after = files(dir);
        let wal_before = before.files.iter().any(|(n, ..)| n.ends_with("-wal"));
        if after.files != before.files || (after.shm && !before.shm && !wal_before) {
            return Err(TestCaseError::fail(format!(
                "{args:?} wrote: before {:?}, after {:?}",
                summary(&before),
                summary(&after)
            )));
        }
    }
    if verify_ok == Some(true) {
        seen.borrow_mut().verify_passed += 1;
        check_listed_threads_read(db)?;
    } else {
        seen.borrow_mut().verify_failed += 1;
    }
    for args in [
        vec!["prune", p(db), "-t", "main", "--keep", "2"],
        vec![
            "fork",
            p(db),
            "-t",
            "paused",
            "-c",
            "step:1",
            "--to",
            "copy",
        ],
    ] {
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        clean(&args, &sg(&refs))?;
    }
    Ok(())
}

/// A file `verify` passed: every thread `threads` lists shows its history and newest state.
fn check_listed_threads_read(db: &Path) -> Result<(), TestCaseError> {
    let listed = sg(&["threads", p(db), "--json"]);
    if listed.code != 0 {
        return Err(TestCaseError::fail(format!(
            "verify passed, threads failed: {listed:#?}"
        )));
    }
    let list = listed.json();
    for thread in list.as_array().into_iter().flatten() {
        let name = thread["thread"].as_str().unwrap_or_default();
        for cmd in ["history", "show"] {
            let ran = sg(&[cmd, p(db), "-t", name]);
            if ran.code != 0 {
                return Err(TestCaseError::fail(format!(
                    "verify passed, {cmd} of thread {name:?} failed: {ran:#?}"
                )));
            }
        }
    }
    Ok(())
}

/// Names and sizes, for failure messages.
fn summary(f: &Files) -> Vec<(String, usize, SystemTime)> {
    f.files
        .iter()
        .map(|(n, b, m)| (n.clone(), b.len(), *m))
        .chain(
            f.shm
                .then(|| ("-shm".to_owned(), 0, SystemTime::UNIX_EPOCH)),
        )
        .collect()
}

/// A fresh directory holding a copy of `from` (and its `-wal` and high-water record, if
/// any) as `threads.db`.
fn copy_case(from: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("threads.db");
    std::fs::copy(from, &db).unwrap();
    for side in ["-wal", "-highwater"] {
        if beside(from, side).exists() {
            std::fs::copy(beside(from, side), beside(&db, side)).unwrap();
        }
    }
    (dir, db)
}

/// The length of a file (0 when it is not there).
fn len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        // Each case runs two dozen processes: shrink a failure, but not for ever.
        max_shrink_iters: 200,
        ..Config::default()
    })
}

/// The cases were not vacuous: verify rejected some files, and commands both succeeded and
/// failed.
fn not_vacuous(seen: &Seen) {
    eprintln!("damaged files: {seen:?}");
    assert!(seen.verify_failed > 0, "no case damaged the file: {seen:?}");
    assert!(seen.exits[0] > 0 && seen.exits[1] > 0, "{seen:?}");
}

#[test]
fn byte_damage_to_the_file_or_its_wal_never_panics_and_reads_write_nothing() {
    let t = template();
    let spans_of = |db: &Path| damage::Spans {
        main: len(db),
        wal: std::fs::read(beside(db, "-wal")).map_or(0, |w| damage::wal_span(&w)),
        high_water: len(&beside(db, "-highwater")),
    };
    let (plain, walled) = (spans_of(&t.plain), spans_of(&t.walled));
    let seen = RefCell::new(Seen::default());
    let strategy = proptest::bool::ANY.prop_flat_map(|wal| (Just(wal), damage::byte_damage(wal)));
    runner()
        .run(&strategy, |(wal, damage): (bool, Vec<Bytes>)| {
            let (source, spans) = if wal {
                (&t.walled, walled)
            } else {
                (&t.plain, plain)
            };
            let (_dir, db) = copy_case(source);
            damage::apply_bytes(&db, &damage, spans);
            check_case(&t, &db, &seen)
        })
        .unwrap();
    not_vacuous(&seen.borrow());
}

#[test]
fn sql_damage_never_panics_and_reads_write_nothing() {
    let t = template();
    let seen = RefCell::new(Seen::default());
    runner()
        .run(&damage::sql_damage(), |damage: Vec<Sql>| {
            let (_dir, db) = copy_case(&t.plain);
            damage::apply_sql(&db, &damage);
            check_case(&t, &db, &seen)
        })
        .unwrap();
    not_vacuous(&seen.borrow());
}
