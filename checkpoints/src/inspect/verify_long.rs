//! `verify` on a long thread: damage in the middle of a 2,000-step chain (a record, a log
//! part, a value, a parent link) is found and named, and exactly the checkpoints that rest on
//! it fail to load.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use super::verify::{verify, VerifyReport};
use crate::envelope::hex;
use crate::{
    Checkpoint, CheckpointId, Control, FieldPart, FieldWrite, Namespace, PutCheckpoint, Saver,
    Source, SqliteSaver, ThreadId,
};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const STEPS: i64 = 2_000;

fn write(field: &str, part: FieldPart) -> FieldWrite {
    FieldWrite {
        field: field.to_owned(),
        part,
    }
}

/// Step `k` of the thread: appends one message, sets the counter, and every 100 steps a
/// document too large to be stored inline.
fn step(k: i64) -> PutCheckpoint {
    let mut writes = vec![write(
        "counter",
        FieldPart::Whole(k.to_string().into_bytes()),
    )];
    let msg = format!(r#"[{{"i":{k},"text":"{}"}}]"#, "m".repeat(80));
    writes.push(write(
        "messages",
        if k == 0 {
            FieldPart::Whole(b"[]".to_vec())
        } else {
            FieldPart::Tail(msg.into_bytes())
        },
    ));
    if k % 100 == 0 {
        let doc = format!(r#"{{"version":{k},"body":"{}"}}"#, "d".repeat(100));
        writes.push(write("doc", FieldPart::Whole(doc.into_bytes())));
    }
    PutCheckpoint {
        thread: ThreadId::new("long").expect("a thread id"),
        ns: Namespace::root(),
        checkpoint: Checkpoint {
            id: CheckpointId::from_u128(1_000 + k as u128),
            parent: (k > 0).then(|| CheckpointId::from_u128(999 + k as u128)),
            step: k - 1,
            source: if k == 0 { Source::Input } else { Source::Loop },
            created_at_ms: 0,
            control: Control::default(),
            metadata: Default::default(),
        },
        writes,
    }
}

/// A file holding the 2,000-step thread.
async fn long_thread(dir: &Path) -> Result<PathBuf, Box<dyn std::error::Error + Send + Sync>> {
    let path = dir.join("long.db");
    let saver = SqliteSaver::open(&path)?;
    saver.put_many((0..STEPS).map(step).collect()).await?;
    saver.close()?;
    Ok(path)
}

/// A copy of `clean` to damage.
fn copy(clean: &Path, name: &str) -> Result<PathBuf, std::io::Error> {
    let path = clean.with_file_name(format!("{name}.db"));
    std::fs::copy(clean, &path)?;
    Ok(path)
}

fn flip_last(mut data: Vec<u8>) -> Vec<u8> {
    let last = data.len() - 1;
    data[last] ^= 0x01;
    data
}

/// The problems on `table` whose key names `key`.
fn naming<'r>(report: &'r VerifyReport, table: &str, key: &str) -> Vec<&'r str> {
    report
        .problems
        .iter()
        .filter(|p| p.table == table && p.key.contains(key))
        .map(|p| p.detail.as_str())
        .collect()
}

fn cp_hex(k: i64) -> String {
    hex(&(1_000 + k as u128).to_be_bytes())
}

#[tokio::test]
async fn a_long_thread_verifies_clean() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clean = long_thread(dir.path()).await?;
    let report = verify(&clean).await?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.counts.checkpoints, STEPS as usize);
    assert_eq!(report.counts.loaded, STEPS as usize);
    assert_eq!(report.counts.log_parts, STEPS as usize);
    Ok(())
}

#[tokio::test]
async fn a_damaged_middle_record_fails_it_and_the_deltas_on_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clean = long_thread(dir.path()).await?;
    let db = copy(&clean, "record")?;
    let conn = Connection::open(&db)?;
    // A delta record in the middle, and the next whole record after it.
    let (seq, body, hash): (i64, Vec<u8>, Vec<u8>) = conn.query_row(
        "SELECT seq, body, body_hash FROM sg_checkpoints WHERE step >= 999 AND depth > 0
         ORDER BY seq LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let next_whole: i64 = conn.query_row(
        "SELECT min(seq) FROM sg_checkpoints WHERE seq > ?1 AND depth = 0",
        [seq],
        |r| r.get(0),
    )?;
    conn.execute(
        "UPDATE sg_checkpoints SET body = ?2 WHERE seq = ?1",
        params![seq, flip_last(body)],
    )?;
    let k: i64 = conn.query_row(
        "SELECT step + 1 FROM sg_checkpoints WHERE seq = ?1",
        [seq],
        |r| r.get(0),
    )?;
    drop(conn);
    let report = verify(&db).await?;
    let here = naming(&report, "sg_checkpoints", &cp_hex(k));
    assert!(
        here.iter()
            .any(|d| d.contains("record body") && d.contains(&hex(&hash))),
        "{here:?}"
    );
    assert!(
        here.iter().any(|d| d.starts_with("does not load")),
        "{here:?}"
    );
    // Every delta built on it fails, naming the damaged record; nothing else does.
    let failed = usize::try_from(next_whole - seq)?;
    assert_eq!(report.counts.loaded, STEPS as usize - failed);
    let next = naming(&report, "sg_checkpoints", &cp_hex(k + 1));
    assert!(next.iter().any(|d| d.contains(&hex(&hash))), "{next:?}");
    Ok(())
}

#[tokio::test]
async fn a_damaged_middle_log_part_fails_every_list_that_reaches_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clean = long_thread(dir.path()).await?;
    let db = copy(&clean, "part")?;
    let conn = Connection::open(&db)?;
    let (log, data, hash): (i64, Vec<u8>, Vec<u8>) = conn.query_row(
        "SELECT log, data, hash FROM sg_log_parts WHERE part = 1000",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    conn.execute(
        "UPDATE sg_log_parts SET data = ?2 WHERE log = ?1 AND part = 1000",
        params![log, flip_last(data)],
    )?;
    drop(conn);
    let report = verify(&db).await?;
    let part = naming(&report, "sg_log_parts", &hex(&hash));
    assert!(part.iter().any(|d| d.contains("hash")), "{part:?}");
    // Step k's list has parts 0..=k: steps 1,000 on fail, the 1,000 before load.
    assert_eq!(report.counts.loaded, 1_000);
    let at = naming(&report, "sg_checkpoints", &cp_hex(1_500));
    assert!(
        at.iter()
            .any(|d| d.starts_with("does not load") && d.contains(&hex(&hash))),
        "{at:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_damaged_middle_value_and_a_broken_parent_link_are_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clean = long_thread(dir.path()).await?;
    let db = copy(&clean, "links")?;
    let conn = Connection::open(&db)?;
    let doc = format!(r#"{{"version":1000,"body":"{}"}}"#, "d".repeat(100));
    let hash = blake3::hash(doc.as_bytes());
    let data: Vec<u8> = conn.query_row(
        "SELECT data FROM sg_blobs WHERE hash = ?1",
        [&hash.as_bytes()[..]],
        |r| r.get(0),
    )?;
    conn.execute(
        "UPDATE sg_blobs SET data = ?2 WHERE hash = ?1",
        params![&hash.as_bytes()[..], flip_last(data)],
    )?;
    // Checkpoint 1,550 is cut from its parent's row.
    conn.execute(
        "UPDATE sg_checkpoints SET parent_seq = 99999 WHERE id = ?1",
        [&(1_000u128 + 1_550).to_be_bytes()[..]],
    )?;
    // Checkpoint 1,700's step is a blob, which every listing fails to read as a number.
    conn.execute(
        "UPDATE sg_checkpoints SET step = x'01' WHERE id = ?1",
        [&(1_000u128 + 1_700).to_be_bytes()[..]],
    )?;
    drop(conn);
    let report = verify(&db).await?;
    let blob = naming(&report, "sg_blobs", &hex(hash.as_bytes()));
    assert!(blob.iter().any(|d| d.contains("hash")), "{blob:?}");
    // The document of steps 1,000..1,099 is that value.
    for k in [1_000, 1_099] {
        let at = naming(&report, "sg_checkpoints", &cp_hex(k));
        assert!(
            at.iter().any(|d| d.contains("field \"doc\"")),
            "{k}: {at:?}"
        );
    }
    let at = naming(&report, "sg_checkpoints", &cp_hex(1_550));
    assert!(
        at.iter().any(|d| d.contains("parent_seq 99999 is missing")),
        "{at:?}"
    );
    let at = naming(&report, "sg_checkpoints", &cp_hex(1_700));
    assert!(at.contains(&"step stored as blob"), "{at:?}");
    assert!(naming(&report, "sg_checkpoints", &cp_hex(999)).is_empty());
    assert!(naming(&report, "sg_checkpoints", &cp_hex(1_100)).is_empty());
    Ok(())
}

#[tokio::test]
async fn a_value_row_referred_to_past_a_logs_first_part_is_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clean = long_thread(dir.path()).await?;
    let db = copy(&clean, "part-blob")?;
    let conn = Connection::open(&db)?;
    let (log, blob): (i64, i64) = conn.query_row(
        "SELECT (SELECT log FROM sg_log_parts WHERE part = 7), (SELECT min(id) FROM sg_blobs)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    conn.execute(
        "UPDATE sg_log_parts SET blob = ?2, hash = NULL, data = NULL WHERE log = ?1 AND part = 7",
        params![log, blob],
    )?;
    drop(conn);
    let report = verify(&db).await?;
    let here = naming(&report, "sg_log_parts", &format!("log {log} part 7"));
    assert!(
        here.iter().any(|d| d.contains("only part 0 of a root log")),
        "{here:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_hold_missing_from_the_holder_index_is_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clean = long_thread(dir.path()).await?;
    let db = copy(&clean, "holders")?;
    let conn = Connection::open(&db)?;
    let (kind, id): (i64, i64) = conn.query_row(
        "SELECT kind, id FROM sg_holders WHERE thread = 'long' ORDER BY kind DESC, id LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    conn.execute(
        "DELETE FROM sg_holders WHERE kind = ?1 AND id = ?2",
        params![kind, id],
    )?;
    drop(conn);
    let report = verify(&db).await?;
    let what = if kind == 0 { "value row" } else { "log" };
    let here = naming(
        &report,
        "sg_holders",
        &format!("{what} {id} (thread \"long\")"),
    );
    assert!(
        here.iter()
            .any(|d| d.contains("holder index does not say so")),
        "{:?}",
        report.problems
    );
    // The clean file says nothing of the index.
    assert!(verify(&clean).await?.is_ok());
    Ok(())
}
