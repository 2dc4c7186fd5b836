//! Damaged values, missing files, unknown threads and checkpoints: clear errors.

use rusqlite::Connection;

use crate::support::*;

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
    assert!(ran.stderr.contains("no thread ghost in "), "{ran:#?}");
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
    assert!(
        ran.stderr.contains("invalid checkpoint reference"),
        "{ran:#?}"
    );
    // A checkpoint of another thread is not found in this one.
    let other = history(&db, "paused")[0]["id"].as_str().unwrap().to_owned();
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
fn an_unknown_thread_is_named_plainly_without_debug_quotes(
) -> Result<(), Box<dyn std::error::Error>> {
    let (_dir, db) = fixture();
    for args in [
        vec!["history", p(&db), "-t", "zz"],
        vec!["show", p(&db), "-t", "zz"],
        vec!["diff", p(&db), "-t", "zz", "--since-parent", "step:0"],
        vec!["fork", p(&db), "-t", "zz", "-c", "step:0", "--to", "y"],
    ] {
        let ran = sg(&args).fails(1);
        let line = ran.stderr.trim_end();
        assert_eq!(
            line,
            format!("stategraph: no thread zz in {}", p(&db)),
            "{args:?}"
        );
    }
    let ran = sg(&["history", p(&db), "-t", "main", "--ns", "nope:1"]).fails(1);
    assert_eq!(
        ran.stderr.trim_end(),
        format!(
            "stategraph: thread main has no checkpoints in namespace nope:1 in {}",
            p(&db)
        )
    );
    for ran in [
        sg(&["show", p(&db), "-t", "main", "-c", "ffffff"]).fails(1),
        sg(&["runs", p(&db), "-t", "zz"]),
        sg(&["run", p(&db), "zz"]).fails(1),
    ] {
        let all = format!("{}{}", ran.stdout, ran.stderr);
        assert!(!all.contains("Some(") && !all.contains('"'), "{ran:#?}");
    }
    Ok(())
}
