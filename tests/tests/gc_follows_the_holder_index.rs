//! Deleting and pruning a thread collects values through the holder index of a format-3 file
//! (which threads hold each value row and log): a value another thread holds stays, a value a
//! kept list starts from stays, what only the deleted checkpoints held goes, and the other
//! threads' rows are never read. A file written before the index (format 2) collects by
//! reading every row, as before.

use stategraph_tests::writes::{tail, whole};
use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{params, Connection};
use stategraph_checkpoints::inspect::verify;
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, Control, FieldPart, FieldWrite, Namespace,
    PutCheckpoint, Retention, Saver, Source, SqliteSaver, ThreadId,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A JSON string long enough to get a value row of its own (small values stay in records).
fn big(label: &str) -> Vec<u8> {
    format!("\"{label}: {}\"", "v".repeat(80)).into_bytes()
}

/// Checkpoint `k` of a linear thread (ids `base + k`), writing `writes`.
fn step(t: &ThreadId, base: u128, k: u128, writes: Vec<FieldWrite>) -> PutCheckpoint {
    PutCheckpoint {
        thread: t.clone(),
        ns: Namespace::root(),
        checkpoint: Checkpoint {
            id: CheckpointId::from_u128(base + k),
            parent: (k > 0).then(|| CheckpointId::from_u128(base + k - 1)),
            step: k as i64 - 1,
            source: if k == 0 { Source::Input } else { Source::Loop },
            created_at_ms: 0,
            control: Control::default(),
            metadata: Default::default(),
        },
        writes,
    }
}

type Fields = BTreeMap<String, Vec<FieldPart>>;

/// Every checkpoint of `t` (ids `base..base + n`) loaded: its fields.
async fn states(
    saver: &SqliteSaver,
    t: &ThreadId,
    base: u128,
    n: u128,
) -> Result<Vec<Fields>, CheckpointError> {
    let mut out = Vec::new();
    for k in 0..n {
        let id = CheckpointId::from_u128(base + k);
        match saver.get(t, &Namespace::root(), Some(id)).await {
            Ok(Some(c)) => out.push(c.fields),
            Ok(None) | Err(CheckpointError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn count(path: &Path, table: &str) -> rusqlite::Result<i64> {
    Connection::open(path)?.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
}

/// Whether the file holds a value row with exactly this JSON.
fn has_value(path: &Path, json: &[u8]) -> rusqlite::Result<bool> {
    let hash = blake3::hash(json);
    Connection::open(path)?.query_row(
        "SELECT count(*) FROM sg_blobs WHERE hash = ?1",
        [&hash.as_bytes()[..]],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )
}

/// A thread that sets a shared value, its own value, a list it appends to, then a new value
/// of its own at every step.
fn thread_puts(t: &ThreadId, base: u128, steps: u128, shared: &[u8]) -> Vec<PutCheckpoint> {
    (0..steps)
        .map(|k| {
            let mut writes = vec![whole("own", big(&format!("{t} {k}")))];
            if k == 0 {
                writes.push(whole("shared", shared));
                writes.push(whole("list", b"[]"));
            } else {
                writes.push(tail("list", format!("[{k}]").as_bytes()));
            }
            step(t, base, k, writes)
        })
        .collect()
}

#[tokio::test]
async fn a_value_two_threads_hold_stays_until_the_last_holder_goes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.db");
    let saver = SqliteSaver::open(&path)?;
    let (a, b) = (ThreadId::new("a")?, ThreadId::new("b")?);
    let (copy, branch) = (ThreadId::new("copy")?, ThreadId::new("branch")?);
    let shared = big("shared");
    saver.put_many(thread_puts(&a, 100, 6, &shared)).await?;
    saver.put_many(thread_puts(&b, 200, 4, &shared)).await?;
    saver.copy_thread(&a, &copy).await?;
    saver
        .copy_branch(&a, &branch, CheckpointId::from_u128(102))
        .await?;
    let before_b = states(&saver, &b, 200, 4).await?;
    let before_copy = states(&saver, &copy, 100, 6).await?;
    let before_branch = states(&saver, &branch, 100, 3).await?;
    assert_eq!(before_branch.len(), 3);

    saver.delete_thread(&a).await?;
    saver.flush().await?;
    assert_eq!(states(&saver, &b, 200, 4).await?, before_b);
    assert_eq!(states(&saver, &copy, 100, 6).await?, before_copy);
    assert_eq!(states(&saver, &branch, 100, 3).await?, before_branch);
    saver.delete_thread(&copy).await?;
    saver.flush().await?;
    // The branch still holds a's list and its first values; the rest of a's went with copy.
    assert_eq!(states(&saver, &branch, 100, 3).await?, before_branch);
    assert!(has_value(&path, &big("a 2"))?);
    assert!(!has_value(&path, &big("a 3"))?);
    assert!(has_value(&path, &shared)?);
    saver.delete_thread(&branch).await?;
    saver.flush().await?;
    assert_eq!(states(&saver, &b, 200, 4).await?, before_b);
    assert!(has_value(&path, &shared)?, "b still holds the shared value");
    let report = verify(&path).await?;
    assert!(report.is_ok(), "{:?}", report.problems);

    saver.delete_thread(&b).await?;
    saver.close()?;
    for table in ["sg_blobs", "sg_logs", "sg_log_parts", "sg_holders"] {
        assert_eq!(
            count(&path, table)?,
            0,
            "{table} keeps rows no thread holds"
        );
    }
    Ok(())
}

#[tokio::test]
async fn pruning_keeps_the_value_a_kept_list_starts_from_and_drops_the_replaced_ones() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.db");
    let saver = SqliteSaver::open(&path)?;
    let t = ThreadId::new("t")?;
    let start = format!("[\"{}\"]", "s".repeat(80)).into_bytes();
    let mut puts = vec![step(
        &t,
        0,
        0,
        vec![whole("doc", &start), whole("own", big("t 0"))],
    )];
    for k in 1..5 {
        let writes = vec![
            tail("doc", format!("[{k}]").as_bytes()),
            whole("own", big(&format!("t {k}"))),
        ];
        puts.push(step(&t, 0, k, writes));
    }
    saver.put_many(puts).await?;
    let head_before = states(&saver, &t, 0, 5).await?.pop().ok_or("no head")?;

    assert_eq!(saver.prune(&t, Retention::KeepLast(2)).await?, 3);
    saver.close()?;
    let saver = SqliteSaver::open(&path)?;
    let kept = states(&saver, &t, 0, 5).await?;
    assert_eq!(kept.len(), 2);
    assert_eq!(kept.last(), Some(&head_before));
    // Only the deleted checkpoints held the first three `own` values; the list still starts
    // from the value the first checkpoint set, which the kept ones reach through the log.
    assert!(has_value(&path, &start)?);
    for k in 0..3 {
        assert!(
            !has_value(&path, &big(&format!("t {k}")))?,
            "t {k} was kept"
        );
    }
    for k in 3..5 {
        assert!(has_value(&path, &big(&format!("t {k}")))?, "t {k} is gone");
    }
    saver.close()?;
    let report = verify(&path).await?;
    assert!(report.is_ok(), "{:?}", report.problems);
    Ok(())
}

/// A file with a long thread `long` and a short thread `short` (format `format`), with one
/// record of the long thread damaged.
async fn beside_a_damaged_long_thread(path: &Path, format: Option<u32>) -> TestResult {
    SqliteSaver::open(path)?.close()?;
    if let Some(format) = format {
        Connection::open(path)?.execute(
            "UPDATE sg_meta SET value = ?1 WHERE key = 'format_version'",
            [format.to_string()],
        )?;
    }
    let saver = SqliteSaver::open(path)?;
    let (long, short) = (ThreadId::new("long")?, ThreadId::new("short")?);
    saver
        .put_many(thread_puts(&long, 1_000, 300, &big("shared")))
        .await?;
    saver
        .put_many(thread_puts(&short, 5_000, 20, &big("shared")))
        .await?;
    saver.close()?;
    let conn = Connection::open(path)?;
    let (seq, mut body): (i64, Vec<u8>) = conn.query_row(
        "SELECT seq, body FROM sg_checkpoints WHERE thread = 'long' AND id = ?1",
        [&1_150u128.to_be_bytes()[..]],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let last = body.len() - 1;
    body[last] ^= 1;
    conn.execute(
        "UPDATE sg_checkpoints SET body = ?2 WHERE seq = ?1",
        params![seq, body],
    )?;
    Ok(())
}

#[tokio::test]
async fn pruning_a_short_thread_never_reads_the_long_thread_beside_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.db");
    beside_a_damaged_long_thread(&path, None).await?;
    let saver = SqliteSaver::open(&path)?;
    let short = ThreadId::new("short")?;
    // A walk of the whole file would decode the damaged record and fail; this one reads
    // only the short thread's rows and the holders of its values.
    assert_eq!(saver.prune(&short, Retention::KeepLast(2)).await?, 18);
    let kept = states(&saver, &short, 5_000, 20).await?;
    assert_eq!(kept.len(), 2);
    saver.close()?;
    for k in 0..18 {
        assert!(!has_value(&path, &big(&format!("short {k}")))?);
    }
    assert!(has_value(&path, &big("short 19"))? && has_value(&path, &big("shared"))?);
    let report = verify(&path).await?;
    // The one damaged record, and the checkpoints resting on it; nothing of the short thread.
    assert!(!report.problems.is_empty());
    assert!(
        report.problems.iter().all(|p| p.key.contains("\"long\"")),
        "{:?}",
        report.problems
    );
    Ok(())
}

#[tokio::test]
async fn a_file_written_before_the_index_collects_by_reading_every_row() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("v2.db");
    beside_a_damaged_long_thread(&path, Some(2)).await?;
    assert_eq!(
        count(&path, "sg_holders")?,
        0,
        "a format-2 file has no holders"
    );
    let saver = SqliteSaver::open(&path)?;
    let short = ThreadId::new("short")?;
    // The whole-file walk reads the long thread's damaged record, and refuses to guess.
    match saver.prune(&short, Retention::KeepLast(2)).await {
        Err(CheckpointError::Integrity { thread, .. }) => assert_eq!(thread, "long"),
        other => return Err(format!("expected an integrity error, got {other:?}").into()),
    }
    saver.close()?;

    // Undamaged, the same walk collects exactly the values no remaining row refers to.
    let clean = dir.path().join("clean.db");
    SqliteSaver::open(&clean)?.close()?;
    Connection::open(&clean)?.execute(
        "UPDATE sg_meta SET value = '2' WHERE key = 'format_version'",
        [],
    )?;
    let saver = SqliteSaver::open(&clean)?;
    let (a, b) = (ThreadId::new("a")?, ThreadId::new("b")?);
    saver
        .put_many(thread_puts(&a, 100, 5, &big("shared")))
        .await?;
    saver
        .put_many(thread_puts(&b, 200, 5, &big("shared")))
        .await?;
    let before_b = states(&saver, &b, 200, 5).await?;
    saver.delete_thread(&a).await?;
    assert_eq!(saver.prune(&b, Retention::KeepLast(1)).await?, 4);
    saver.close()?;
    let saver = SqliteSaver::open(&clean)?;
    assert_eq!(states(&saver, &b, 200, 5).await?, before_b[4..]);
    saver.close()?;
    assert!(has_value(&clean, &big("shared"))? && has_value(&clean, &big("b 4"))?);
    assert!(!has_value(&clean, &big("a 4"))? && !has_value(&clean, &big("b 3"))?);
    assert_eq!(count(&clean, "sg_holders")?, 0);
    let format: String = Connection::open(&clean)?.query_row(
        "SELECT value FROM sg_meta WHERE key = 'format_version'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(format, "2", "the file stays format 2");
    Ok(())
}

#[tokio::test]
async fn a_thread_with_a_damaged_record_is_still_deleted_and_its_values_collected() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.db");
    beside_a_damaged_long_thread(&path, None).await?;
    let saver = SqliteSaver::open(&path)?;
    let (long, short) = (ThreadId::new("long")?, ThreadId::new("short")?);
    let before_short = states(&saver, &short, 5_000, 20).await?;
    // What the damaged record referred to is unknown: every remaining row is read instead.
    saver.delete_thread(&long).await?;
    assert_eq!(states(&saver, &short, 5_000, 20).await?, before_short);
    saver.close()?;
    assert!(!has_value(&path, &big("long 299"))? && has_value(&path, &big("shared"))?);
    let held_by_long: i64 = Connection::open(&path)?.query_row(
        "SELECT count(*) FROM sg_holders WHERE thread = 'long'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(held_by_long, 0);
    let report = verify(&path).await?;
    assert!(report.is_ok(), "{:?}", report.problems);
    Ok(())
}
