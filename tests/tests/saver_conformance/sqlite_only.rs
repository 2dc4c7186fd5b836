//! Clauses only the SQLite saver has: its file, byte by byte.

use stategraph_tests::writes::{header, put_of, tail, whole};
use std::sync::Arc;

use rusqlite::Connection;
use stategraph_checkpoints::{
    CheckpointError, CheckpointId, FieldPart, FieldWrite, LoadedCheckpoint, Namespace,
    PendingWrite, PutCheckpoint, Saver, Source, SqliteSaver, TaskId, ThreadId, WriteKind,
};

use crate::TestResult;

/// The JSON of the `i`-th `title`: long enough to be a value row of its own (`sg_blobs`; small
/// values are kept in the records), so the damage tests reach that table.
fn title(i: i64) -> Vec<u8> {
    format!("\"title {i}: {}\"", "t".repeat(64)).into_bytes()
}

/// The `i`-th checkpoint of a thread: a whole field `title` and one part appended to `log`.
fn step_put(t: &ThreadId, parent: Option<CheckpointId>, i: i64) -> PutCheckpoint {
    put_of(
        t,
        parent,
        i - 1,
        vec![
            whole("title", title(i)),
            tail("log", format!("[{i}]").as_bytes()),
        ],
    )
}

/// The newest checkpoint of `t` in the root namespace, loaded.
async fn head_of(
    saver: &SqliteSaver,
    t: &ThreadId,
) -> Result<LoadedCheckpoint, Box<dyn std::error::Error + Send + Sync>> {
    Ok(saver
        .get(t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?)
}

/// The file's `sg_meta.format_version`.
fn format_version(path: &std::path::Path) -> rusqlite::Result<String> {
    Connection::open(path)?.query_row(
        "SELECT value FROM sg_meta WHERE key = 'format_version'",
        [],
        |r| r.get(0),
    )
}

/// Put `n` checkpoints of `t` (see [`step_put`]) after `parent`, one at a time; their ids.
async fn put_steps(
    saver: &SqliteSaver,
    t: &ThreadId,
    mut parent: Option<CheckpointId>,
    from: i64,
    n: i64,
) -> Result<Vec<CheckpointId>, CheckpointError> {
    let mut ids = Vec::new();
    for i in from..from + n {
        let put = step_put(t, parent, i);
        let id = put.checkpoint.id;
        saver.put(put).await?;
        ids.push(id);
        parent = Some(id);
    }
    Ok(ids)
}

/// A file with one thread of 20 checkpoints: a whole field, an appended list, pending writes.
async fn populated(
    path: &std::path::Path,
) -> Result<(ThreadId, Vec<CheckpointId>), Box<dyn std::error::Error + Send + Sync>> {
    let saver = SqliteSaver::open(path)?;
    let t = ThreadId::new("victim")?;
    let ids = put_steps(&saver, &t, None, 0, 20).await?;
    let last = *ids.last().ok_or("no checkpoint")?;
    saver
        .put_writes(
            &t,
            &Namespace::root(),
            last,
            vec![PendingWrite {
                task_id: TaskId::derive(&[b"t"]),
                node: "n".into(),
                kind: WriteKind::Error("boom".into()),
            }],
        )
        .await?;
    saver.close()?;
    Ok((t, ids))
}

/// Every stored byte string that a load of some checkpoint reads: (table, column, rowid key).
fn targets(conn: &Connection) -> rusqlite::Result<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    for (table, key, columns) in [
        ("sg_blobs", "id", &["data", "hash"][..]),
        ("sg_log_parts", "rowid", &["data", "hash"][..]),
        ("sg_checkpoints", "seq", &["body", "body_hash"][..]),
        ("sg_writes", "rowid", &["data", "hash"][..]),
    ] {
        // WITHOUT ROWID tables have no rowid: address their rows by their primary key text.
        let keyexpr = match table {
            "sg_log_parts" => "log || ':' || part",
            "sg_writes" => "hex(task) || ':' || idx",
            _ => key,
        };
        let mut stmt = conn.prepare(&format!("SELECT {keyexpr} FROM {table}"))?;
        let keys: Vec<String> = stmt
            .query_map([], |r| r.get::<_, rusqlite::types::Value>(0))?
            .filter_map(|v| v.ok())
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })
            .collect();
        for k in keys {
            for c in columns {
                out.push((table.to_owned(), (*c).to_owned(), k.clone()));
            }
        }
    }
    Ok(out)
}

fn where_clause(table: &str) -> &'static str {
    match table {
        "sg_blobs" => "id = ?1",
        "sg_checkpoints" => "seq = ?1",
        "sg_log_parts" => "log || ':' || part = ?1",
        _ => "hex(task) || ':' || idx = ?1",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_flipped_bit_or_truncation_is_an_integrity_error_never_a_wrong_state() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("flips.db");
    let (t, ids) = populated(&path).await?;
    let conn = Connection::open(&path)?;
    let all = targets(&conn)?;
    assert!(all.len() > 80, "{} targets", all.len());
    let mut seed: u64 = 0x5eed;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let trials = std::env::var("STATEGRAPH_FLIPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300usize);
    for trial in 0..trials {
        let (table, column, key) = &all[(next() % all.len() as u64) as usize];
        let sql_get = format!("SELECT {column} FROM {table} WHERE {}", where_clause(table));
        let original: Vec<u8> = conn.query_row(&sql_get, [key], |r| r.get(0))?;
        let mut damaged = original.clone();
        let truncate = trial % 5 == 0;
        if truncate {
            damaged.truncate((next() % original.len().max(1) as u64) as usize);
        } else {
            let i = (next() % damaged.len().max(1) as u64) as usize;
            if let Some(b) = damaged.get_mut(i) {
                *b ^= 1 << (next() % 8);
            }
        }
        let sql_set = format!(
            "UPDATE {table} SET {column} = ?2 WHERE {}",
            where_clause(table)
        );
        conn.execute(&sql_set, rusqlite::params![key, damaged])?;
        // A fresh saver (no cache) loads every checkpoint: each load either matches the
        // undamaged file or fails with a typed integrity error.
        let saver: Arc<dyn Saver> = Arc::new(SqliteSaver::open(&path)?);
        let mut failures = 0;
        for id in &ids {
            match saver.get(&t, &Namespace::root(), Some(*id)).await {
                Ok(_) => {}
                Err(CheckpointError::Integrity {
                    thread,
                    checkpoint,
                    blob,
                    ..
                }) => {
                    assert_eq!(thread, "victim");
                    assert!(!blob.is_empty());
                    assert!(checkpoint == "-" || checkpoint.len() == 32, "{checkpoint}");
                    failures += 1;
                }
                Err(other) => {
                    return Err(
                        format!("trial {trial} {table}.{column}: unexpected error {other}").into(),
                    )
                }
            }
        }
        assert!(
            failures > 0,
            "trial {trial}: damage to {table}.{column} {key} went unnoticed"
        );
        conn.execute(&sql_set, rusqlite::params![key, original])?;
    }
    Ok(())
}

#[tokio::test]
async fn a_file_of_a_newer_format_is_refused_before_anything_is_written() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("future.db");
    populated(&path).await?;
    let conn = Connection::open(&path)?;
    conn.execute(
        "UPDATE sg_meta SET value = '99' WHERE key = 'format_version'",
        [],
    )?;
    drop(conn);
    let before = std::fs::read(&path)?;
    let err = SqliteSaver::open(&path).err().ok_or("expected a refusal")?;
    assert!(
        matches!(
            err,
            CheckpointError::UnsupportedFormatVersion {
                found: 99,
                supported: stategraph_checkpoints::FORMAT_VERSION
            }
        ),
        "{err}"
    );
    assert_eq!(std::fs::read(&path)?, before, "the file was modified");
    Ok(())
}

#[tokio::test]
async fn a_value_over_the_cap_is_refused_and_stores_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let options = stategraph_checkpoints::SqliteOptions {
        max_value_bytes: 64,
        ..Default::default()
    };
    let saver = SqliteSaver::open_with(dir.path().join("cap.db"), options)?;
    let t = ThreadId::new("t")?;
    let cp = header(None, -1, Source::Input);
    let big = FieldWrite {
        field: "x".into(),
        part: FieldPart::Whole(vec![b'1'; 65]),
    };
    let err = saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: Namespace::root(),
            checkpoint: cp,
            writes: vec![big],
        })
        .await
        .err();
    assert!(
        matches!(
            err,
            Some(CheckpointError::BlobTooLarge {
                size: 65,
                limit: 64
            })
        ),
        "{err:?}"
    );
    assert!(saver.get(&t, &Namespace::root(), None).await?.is_none());
    Ok(())
}

#[tokio::test]
async fn a_full_disk_under_a_group_of_puts_is_sqlites_typed_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let options = stategraph_checkpoints::SqliteOptions {
        max_page_count: Some(32),
        ..Default::default()
    };
    let saver = SqliteSaver::open_with(dir.path().join("full.db"), options)?;
    let t = ThreadId::new("t")?;
    // One batch (one writer group) of 40 checkpoints of 8 kB each: far over 32 pages.
    let mut puts = Vec::new();
    let mut parent = None;
    for i in 0..40 {
        let value = format!("\"{i}{}\"", "x".repeat(8 << 10));
        let put = put_of(&t, parent, i - 1, vec![whole("big", value.as_bytes())]);
        parent = Some(put.checkpoint.id);
        puts.push(put);
    }
    let err = saver.put_many(puts).await.err().ok_or("the batch fit")?;
    assert!(matches!(err, CheckpointError::Storage(_)), "{err:?}");
    let storage = err.storage_error().ok_or("not a StorageError")?;
    let code = storage
        .cause()
        .downcast_ref::<rusqlite::Error>()
        .and_then(rusqlite::Error::sqlite_error_code);
    assert_eq!(code, Some(rusqlite::ErrorCode::DiskFull), "{err}");
    assert!(err.to_string().contains("full"), "{err}");
    Ok(())
}

#[tokio::test]
async fn a_reopened_file_has_every_thread_and_value() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("reopen.db");
    let (t, ids) = populated(&path).await?;
    let saver = SqliteSaver::open(&path)?;
    let head = head_of(&saver, &t).await?;
    assert_eq!(Some(head.checkpoint.id), ids.last().copied());
    assert_eq!(head.fields.get("log").map(Vec::len), Some(20));
    assert_eq!(head.pending.len(), 1);
    let threads = saver.list_threads().await?;
    assert_eq!(threads.len(), 1);
    Ok(())
}

/// A log's `tip` is its number of parts, as the format describes it, after appends on one
/// branch and a fork that appends at a place the first branch already took.
#[tokio::test]
async fn every_log_tip_counts_its_parts() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tips.db");
    let (t, ids) = populated(&path).await?;
    let saver = SqliteSaver::open(&path)?;
    // A fork from the 10th checkpoint appends where the main branch already has a part.
    let fork = header(Some(ids[9]), 9, Source::Fork);
    saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: Namespace::root(),
            checkpoint: fork,
            writes: vec![FieldWrite {
                field: "log".into(),
                part: FieldPart::Tail(b"[99]".to_vec()),
            }],
        })
        .await?;
    drop(saver);
    let conn = Connection::open(&path)?;
    let logs: Vec<(i64, i64, Option<i64>, i64)> = conn
        .prepare(
            "SELECT l.id, l.tip, l.base_log,
                    (SELECT max(part) + 1 FROM sg_log_parts p WHERE p.log = l.id)
             FROM sg_logs l ORDER BY l.id",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    assert_eq!(logs.len(), 2, "the main log and the fork's: {logs:?}");
    for (id, tip, _, parts) in &logs {
        assert_eq!(tip, parts, "log {id}");
    }
    assert_eq!(logs[0].1, 20);
    assert_eq!((logs[1].1, logs[1].2), (11, Some(logs[0].0)));
    Ok(())
}

/// A flush when everything handed over is committed has nothing to wait for: it answers at
/// once even while another connection holds the write lock (it does not take the lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_with_nothing_pending_does_not_wait_for_the_write_lock() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("flush.db");
    let saver = SqliteSaver::open(&path)?;
    let t = ThreadId::new("flushed")?;
    saver
        .put_streamed(vec![PutCheckpoint {
            thread: t.clone(),
            ns: Namespace::root(),
            checkpoint: header(None, -1, Source::Input),
            writes: vec![FieldWrite {
                field: "i".into(),
                part: FieldPart::Whole(b"1".to_vec()),
            }],
        }])
        .await?;
    let other = Connection::open(&path)?;
    other.execute_batch("BEGIN IMMEDIATE")?;
    let flushed = tokio::time::timeout(std::time::Duration::from_secs(3), saver.flush()).await;
    other.execute_batch("COMMIT")?;
    assert!(
        matches!(flushed, Ok(Ok(()))),
        "the flush waited for the lock: {flushed:?}"
    );
    assert!(saver.get(&t, &Namespace::root(), None).await?.is_some());
    Ok(())
}

/// The room the writer keeps in the WAL at SQLite's defaults (4096-byte pages, an automatic
/// checkpoint at 1000 frames): the header and 1064 frames.
const WAL_ROOM: u64 = 32 + (1000 + 64) * (4096 + 24);

fn wal_len(path: &std::path::Path) -> u64 {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// Copy files with a child process: opening and closing the database file in this process
/// would drop the POSIX locks the open savers' connections hold on it.
fn copy_files(pairs: &[(std::ffi::OsString, std::ffi::OsString)]) -> TestResult {
    for (from, to) in pairs {
        let status = std::process::Command::new("cp")
            .arg(from)
            .arg(to)
            .status()?;
        assert!(status.success(), "cp {from:?} {to:?}: {status}");
    }
    Ok(())
}

/// Copy the main file and its WAL (not the `-shm` index, so that the copy rebuilds it by
/// reading the WAL frame by frame, as after a crash).
fn copy_without_index(from: &std::path::Path, to: &std::path::Path) -> TestResult {
    let pairs: Vec<_> = ["", "-wal"]
        .iter()
        .map(|suffix| {
            let (mut a, mut b) = (from.as_os_str().to_owned(), to.as_os_str().to_owned());
            a.push(suffix);
            b.push(suffix);
            (a, b)
        })
        .collect();
    copy_files(&pairs)
}

/// With `synchronous=FULL` (the default) the writer extends the WAL with zeros before its
/// commits need the space; a file recovered from that WAL (its index rebuilt frame by frame,
/// as after a crash) reads the zeros as the log's end and has every committed checkpoint.
#[tokio::test]
async fn the_wal_gets_room_before_the_first_commit_and_recovery_reads_the_zeros_as_its_end(
) -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("room.db");
    let saver = SqliteSaver::open(&path)?;
    let t = ThreadId::new("roomy")?;
    let ids = put_steps(&saver, &t, None, 0, 20).await?;
    assert!(
        wal_len(&path) >= WAL_ROOM,
        "WAL of {} bytes, room {WAL_ROOM}",
        wal_len(&path)
    );
    // The 20 commits are still in the WAL only: the main file alone does not have them.
    let copy = dir.path().join("copy.db");
    copy_without_index(&path, &copy)?;
    let main_only = dir.path().join("main-only.db");
    copy_files(&[(path.clone().into(), main_only.clone().into())])?;
    let main_only = Connection::open(&main_only)?;
    let has_table: bool = main_only.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'sg_checkpoints'",
        [],
        |r| r.get(0),
    )?;
    let rows: i64 = if has_table {
        main_only.query_row("SELECT count(*) FROM sg_checkpoints", [], |r| r.get(0))?
    } else {
        0
    };
    assert_eq!(
        rows, 0,
        "the checkpoints were already folded into the main file"
    );

    let check: String =
        Connection::open(&copy)?.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    assert_eq!(check, "ok");
    let recovered = SqliteSaver::open(&copy)?;
    let head = head_of(&recovered, &t).await?;
    assert_eq!(Some(head.checkpoint.id), ids.last().copied());
    assert_eq!(head.fields.get("log").map(Vec::len), Some(20));
    assert_eq!(
        head.fields.get("title").and_then(|parts| parts.last()),
        Some(&FieldPart::Whole(title(19)))
    );
    assert_eq!(
        recovered
            .list(&t, &Namespace::root(), Default::default())
            .await?
            .len(),
        20
    );
    recovered.close()?;

    // Closing folds the WAL back into the main file and truncates it.
    saver.close()?;
    assert_eq!(wal_len(&path), 0);
    Ok(())
}

/// The room is only for synced commits and can be turned off: with `synchronous=NORMAL` or
/// `preallocate_wal: false` the WAL holds only its frames.
#[tokio::test]
async fn no_wal_room_with_synchronous_normal_or_when_turned_off() -> TestResult {
    let dir = tempfile::tempdir()?;
    let cases = [
        (
            "normal.db",
            stategraph_checkpoints::SqliteOptions {
                synchronous: stategraph_checkpoints::Synchronous::Normal,
                ..Default::default()
            },
        ),
        (
            "off.db",
            stategraph_checkpoints::SqliteOptions {
                preallocate_wal: false,
                ..Default::default()
            },
        ),
    ];
    for (name, options) in cases {
        let path = dir.path().join(name);
        let saver = SqliteSaver::open_with(&path, options)?;
        put_steps(&saver, &ThreadId::new("t")?, None, 0, 3).await?;
        let len = wal_len(&path);
        assert!(len > 0 && len < 200_000, "{name}: WAL of {len} bytes");
        saver.close()?;
    }
    Ok(())
}

/// Another connection may truncate the WAL (`wal_checkpoint(TRUNCATE)`, as a closing saver
/// in another process does): the next commit gives it its room back, and nothing committed
/// before or after is lost.
#[tokio::test]
async fn a_wal_truncated_by_another_connection_gets_its_room_back_at_the_next_commit() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("truncated.db");
    let saver = SqliteSaver::open(&path)?;
    let t = ThreadId::new("t")?;
    let first = put_steps(&saver, &t, None, 0, 5).await?;
    let other = Connection::open(&path)?;
    let (busy, _, _): (i64, i64, i64) =
        other.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    assert_eq!(busy, 0, "the truncating checkpoint could not run");
    assert_eq!(wal_len(&path), 0);
    let second = put_steps(&saver, &t, first.last().copied(), 5, 5).await?;
    assert!(
        wal_len(&path) >= WAL_ROOM,
        "WAL of {} bytes",
        wal_len(&path)
    );
    drop(other);
    saver.close()?;

    let reopened = SqliteSaver::open(&path)?;
    let head = head_of(&reopened, &t).await?;
    assert_eq!(Some(head.checkpoint.id), second.last().copied());
    assert_eq!(head.fields.get("log").map(Vec::len), Some(10));
    Ok(())
}

/// A reopened file's WAL is empty (the last close folded it back and removed it), so its room
/// starts with a zero header: a copy taken then (as a crash would leave it) reads as the main
/// file alone, and takes and keeps new checkpoints.
#[tokio::test]
async fn a_reopened_file_whose_wal_is_only_room_recovers_and_takes_new_checkpoints() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("reopened.db");
    let t = ThreadId::new("t")?;
    let saver = SqliteSaver::open(&path)?;
    let ids = put_steps(&saver, &t, None, 0, 3).await?;
    saver.close()?;
    assert_eq!(wal_len(&path), 0);

    let saver = SqliteSaver::open(&path)?;
    // The writer makes the room when it starts, with nothing to write.
    let start = std::time::Instant::now();
    while wal_len(&path) < WAL_ROOM {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "no room after 10 s: WAL of {} bytes",
            wal_len(&path)
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let copy = dir.path().join("copy.db");
    copy_without_index(&path, &copy)?;
    saver.close()?;

    let check: String =
        Connection::open(&copy)?.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    assert_eq!(check, "ok");
    let recovered = SqliteSaver::open(&copy)?;
    let head = head_of(&recovered, &t).await?;
    assert_eq!(Some(head.checkpoint.id), ids.last().copied());
    let more = put_steps(&recovered, &t, ids.last().copied(), 3, 2).await?;
    recovered.close()?;
    let reopened = SqliteSaver::open(&copy)?;
    let head = head_of(&reopened, &t).await?;
    assert_eq!(Some(head.checkpoint.id), more.last().copied());
    assert_eq!(head.fields.get("log").map(Vec::len), Some(5));
    Ok(())
}

/// Rows of `sg_blobs`.
fn value_rows(path: &std::path::Path) -> rusqlite::Result<i64> {
    Connection::open(path)?.query_row("SELECT count(*) FROM sg_blobs", [], |r| r.get(0))
}

/// In a file of format 2 or later a whole value of at most 64 bytes of JSON is kept in the checkpoint's
/// record (no value row, no key-index entry); a larger one gets its value row. Both load
/// exactly, also after reopening.
#[tokio::test]
async fn values_up_to_64_bytes_live_in_the_record_and_larger_ones_in_value_rows() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("inline.db");
    let saver = SqliteSaver::open(&path)?;
    let t = ThreadId::new("t")?;
    let small = format!("\"{}\"", "s".repeat(62)).into_bytes();
    let large = format!("\"{}\"", "l".repeat(63)).into_bytes();
    assert_eq!((small.len(), large.len()), (64, 65));
    let put = put_of(
        &t,
        None,
        -1,
        vec![whole("small", &small), whole("large", &large)],
    );
    saver.put(put).await?;
    assert_eq!(value_rows(&path)?, 1, "only the 65-byte value has a row");
    saver.close()?;

    let saver = SqliteSaver::open(&path)?;
    let head = head_of(&saver, &t).await?;
    assert_eq!(head.fields["small"], [FieldPart::Whole(small)]);
    assert_eq!(head.fields["large"], [FieldPart::Whole(large)]);
    // Format 2 and every later one.
    assert_eq!(
        format_version(&path)?,
        stategraph_checkpoints::FORMAT_VERSION.to_string()
    );
    Ok(())
}

/// A list whose whole value was kept in the record (a small first value, then appends)
/// loads as that value followed by the appended parts, and its changes show the list.
#[tokio::test]
async fn a_list_that_starts_as_a_small_whole_value_appends_after_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("inline-list.db");
    let saver = SqliteSaver::open(&path)?;
    let t = ThreadId::new("t")?;
    let first = put_of(&t, None, -1, vec![whole("log", b"[1]")]);
    let first_id = first.checkpoint.id;
    saver.put(first).await?;
    let second = put_of(&t, Some(first_id), 0, vec![tail("log", b"[2]")]);
    let second_id = second.checkpoint.id;
    saver.put(second).await?;
    let expect = [
        FieldPart::Whole(b"[1]".to_vec()),
        FieldPart::Tail(b"[2]".to_vec()),
    ];
    let head = head_of(&saver, &t).await?;
    assert_eq!(head.fields["log"], expect);
    let changes = saver.changes(&t, &Namespace::root(), second_id).await?;
    assert_eq!(changes.fields, [("log".to_owned(), expect.to_vec())]);
    // The older checkpoint still holds the one-item list.
    let old = saver
        .get(&t, &Namespace::root(), Some(first_id))
        .await?
        .ok_or("no first checkpoint")?;
    assert_eq!(old.fields["log"], [FieldPart::Whole(b"[1]".to_vec())]);
    // Replaced by a small whole value again: the list goes back into the record.
    let third = put_of(&t, Some(second_id), 0, vec![whole("log", b"[9]")]);
    let third_id = third.checkpoint.id;
    saver.put(third).await?;
    let changes = saver.changes(&t, &Namespace::root(), third_id).await?;
    assert_eq!(
        changes.fields,
        [("log".to_owned(), vec![FieldPart::Whole(b"[9]".to_vec())])]
    );
    Ok(())
}

/// A format-1 file stays format 1: this build keeps even small (and empty) values in value
/// rows there, so builds that know only format 1 keep reading it.
#[tokio::test]
async fn a_format_1_file_stays_format_1_and_keeps_small_values_in_value_rows() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("v1.db");
    SqliteSaver::open(&path)?.close()?;
    Connection::open(&path)?.execute(
        "UPDATE sg_meta SET value = '1' WHERE key = 'format_version'",
        [],
    )?;
    let saver = SqliteSaver::open(&path)?;
    let t = ThreadId::new("t")?;
    saver
        .put(put_of(
            &t,
            None,
            -1,
            vec![whole("n", b"7"), whole("e", b"")],
        ))
        .await?;
    assert_eq!(
        value_rows(&path)?,
        2,
        "the small and the empty value have rows"
    );
    let head = head_of(&saver, &t).await?;
    assert_eq!(head.fields["n"], [FieldPart::Whole(b"7".to_vec())]);
    saver.close()?;
    assert_eq!(format_version(&path)?, "1");
    Ok(())
}
