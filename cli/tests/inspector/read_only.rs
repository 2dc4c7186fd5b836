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

/// Every read command of the inspector on `db`, with a checkpoint id `a` and `b` of `main`.
fn read_commands<'a>(db: &'a str, a: &'a str, b: &'a str) -> Vec<Vec<&'a str>> {
    vec![
        vec!["threads", db],
        vec!["history", db, "-t", "main"],
        vec!["show", db, "-t", "main", "-c", a],
        vec!["diff", db, "-t", "main", a, b],
        vec!["verify", db],
        vec!["runs", db, "-t", "main"],
    ]
}

/// The names in `dir`, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A read-only bind mount of a directory, unmounted on drop.
struct ReadOnlyMount(std::path::PathBuf);

impl ReadOnlyMount {
    /// Mount `from` read-only at a new directory; `None` (with the reason printed) where the
    /// machine does not let this process mount.
    fn new(from: &std::path::Path, at: &std::path::Path) -> Option<Self> {
        std::fs::create_dir_all(at).unwrap();
        let run = |args: &[&str]| {
            std::process::Command::new("mount")
                .args(args)
                .output()
                .map(|o| {
                    (
                        o.status.success(),
                        String::from_utf8_lossy(&o.stderr).into_owned(),
                    )
                })
        };
        match run(&["--bind", p(from), p(at)]) {
            Ok((true, _)) => {}
            Ok((false, why)) => {
                eprintln!("SKIPPED: cannot bind-mount here: {why}");
                return None;
            }
            Err(why) => {
                eprintln!("SKIPPED: cannot run mount: {why}");
                return None;
            }
        }
        let mount = ReadOnlyMount(at.to_path_buf());
        match run(&["-o", "remount,ro,bind", p(at)]) {
            Ok((true, _)) => Some(mount),
            other => {
                eprintln!("SKIPPED: cannot remount read-only: {other:?}");
                None
            }
        }
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn read_commands_work_on_a_file_in_a_read_only_directory() {
    let (dir, db) = fixture();
    let list = history(&db, "main");
    let (a, b) = (
        list[3]["id"].as_str().unwrap().to_owned(),
        list[0]["id"].as_str().unwrap().to_owned(),
    );
    let before = names_in(dir.path());
    assert_eq!(
        before,
        ["threads.db", "threads.db-highwater"],
        "the fixture left side files beyond its high-water record"
    );
    // Root ignores file permissions, so the directory is made read-only for everyone: a
    // read-only mount, where no process can write or create a file.
    let elsewhere = tempfile::tempdir().unwrap();
    let at = elsewhere.path().join("ro");
    let Some(_mount) = ReadOnlyMount::new(dir.path(), &at) else {
        return;
    };
    let ro_db = at.join("threads.db");
    assert!(
        std::fs::write(at.join("probe"), b"x").is_err(),
        "the mount is writable"
    );
    for args in read_commands(p(&ro_db), &a, &b) {
        let ran = sg(&args);
        assert_eq!(ran.code, 0, "{args:?} on a read-only directory: {ran:#?}");
    }
    let threads = sg(&["threads", p(&ro_db), "--json"]).ok().json();
    assert_eq!(threads.as_array().map(Vec::len), Some(2), "{threads}");
    // A write command says it cannot write, cleanly.
    sg(&["prune", p(&ro_db), "-t", "main", "--keep", "1"]).fails(1);
}

#[test]
fn read_commands_leave_no_side_files_and_the_file_byte_identical() {
    let (dir, db) = fixture();
    let list = history(&db, "main");
    let (a, b) = (
        list[3]["id"].as_str().unwrap().to_owned(),
        list[0]["id"].as_str().unwrap().to_owned(),
    );
    let bytes = std::fs::read(&db).unwrap();
    let modified = std::fs::metadata(&db).unwrap().modified().unwrap();
    let names = names_in(dir.path());
    assert_eq!(names, ["threads.db", "threads.db-highwater"]);
    let high_water = std::fs::read(dir.path().join("threads.db-highwater")).unwrap();
    for args in read_commands(p(&db), &a, &b) {
        sg(&args).ok();
        assert_eq!(names_in(dir.path()), names, "{args:?} left files");
    }
    assert!(std::fs::read(&db).unwrap() == bytes, "the file changed");
    assert_eq!(
        std::fs::metadata(&db).unwrap().modified().unwrap(),
        modified,
        "the file was written"
    );
    assert_eq!(
        std::fs::read(dir.path().join("threads.db-highwater")).unwrap(),
        high_water,
        "a read wrote the high-water record"
    );
}

#[test]
fn a_missing_format_record_is_reported_by_reads_and_never_written_back() {
    let (dir, db) = fixture();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("DELETE FROM sg_meta WHERE key = 'format_version'", [])
            .unwrap();
    }
    let bytes = std::fs::read(&db).unwrap();
    for args in [
        vec!["verify", p(&db)],
        vec!["threads", p(&db)],
        vec!["history", p(&db), "-t", "main"],
    ] {
        let ran = sg(&args).fails(1);
        assert!(
            ran.stderr.contains(p(&db)) && ran.stderr.contains("format_version is missing"),
            "{args:?}: {ran:#?}"
        );
    }
    assert!(std::fs::read(&db).unwrap() == bytes, "the file changed");
    assert_eq!(names_in(dir.path()), ["threads.db", "threads.db-highwater"]);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM sg_meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 0, "a read wrote the format record back");
}

#[test]
fn a_damaged_format_record_is_reported_with_its_value() {
    let (_dir, db) = fixture();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "UPDATE sg_meta SET value = 'two' WHERE key = 'format_version'",
            [],
        )
        .unwrap();
    }
    let ran = sg(&["verify", p(&db)]).fails(1);
    assert!(
        ran.stderr.contains("format_version is unreadable: \"two\""),
        "{ran:#?}"
    );
}

#[test]
fn a_read_of_a_file_whose_write_was_cut_short_says_a_writer_must_roll_it_back() {
    let (dir, db) = fixture();
    // A write cut short: a rollback-journal transaction spilled into the file, copied with
    // its journal while it is open (as a crash would leave them).
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=DELETE; PRAGMA cache_size=1; BEGIN;
         CREATE TABLE pad (b); INSERT INTO pad VALUES (zeroblob(200000));
         UPDATE sg_meta SET value = value;",
    )
    .unwrap();
    let cut = dir.path().join("cut.db");
    std::fs::copy(&db, &cut).unwrap();
    std::fs::copy(
        dir.path().join("threads.db-journal"),
        dir.path().join("cut.db-journal"),
    )
    .unwrap();
    drop(conn);
    let bytes = std::fs::read(&cut).unwrap();
    let ran = sg(&["threads", p(&cut)]).fails(1);
    assert!(
        ran.stderr.contains("last write was cut short") && ran.stderr.contains("needs a"),
        "{ran:#?}"
    );
    assert!(
        std::fs::read(&cut).unwrap() == bytes,
        "a read rolled the file back"
    );
    // A writer rolls it back; then reads work.
    sg(&["prune", p(&cut), "-t", "main", "--keep", "100"]).ok();
    sg(&["threads", p(&cut)]).ok();
}

#[test]
fn a_read_of_an_empty_file_beside_a_wal_fails_and_keeps_the_wal() {
    // SQLite deletes the -wal of a database file of zero pages when it opens it, even
    // read-only; a main file cut to nothing must not cost its log.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("threads.db");
    std::fs::write(&db, b"").unwrap();
    let wal = dir.path().join("threads.db-wal");
    std::fs::write(&wal, b"frames of a log").unwrap();
    for args in [
        vec!["threads", p(&db)],
        vec!["verify", p(&db)],
        vec!["history", p(&db), "-t", "main"],
        vec!["prune", p(&db), "-t", "main", "--keep", "1"],
    ] {
        let ran = sg(&args).fails(1);
        assert!(
            ran.stderr.contains("is empty but has a -wal beside it"),
            "{args:?}: {ran:#?}"
        );
        assert_eq!(std::fs::read(&wal).unwrap(), b"frames of a log", "{args:?}");
    }
    assert_eq!(names_in(dir.path()), ["threads.db", "threads.db-wal"]);
}
