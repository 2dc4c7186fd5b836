//! The high-water record: a small file beside the checkpoint file (`<file>-highwater`) naming
//! the newest checkpoint row the file has committed, so that commits a damaged or lost `-wal`
//! took with it are noticed instead of silently resumed from an older checkpoint (decision
//! 0043).
//!
//! SQLite reads a WAL up to its first damaged frame and drops everything after it without an
//! error: one flipped byte can take a thread back thousands of steps, and the file still
//! passes every check, because what is left is consistent. What is left cannot tell what is
//! missing; something outside the WAL's reach can. `sg_checkpoints.seq` is `AUTOINCREMENT`:
//! SQLite keeps the largest row number ever given out (`sqlite_sequence`), never hands it out
//! again, and does not lower it when rows are deleted (prune, deleted threads and replay's
//! scratch copies leave it as it is). After each commit that added checkpoint rows, the writer
//! writes that number, with the thread and id of its row, to the high-water file (in place,
//! not synced: the page cache carries it to disk with the next writeback). On open, and in
//! `verify`, a file whose `sqlite_sequence` is below the record lost committed transactions.
//!
//! The record names the file it belongs to (`sg_meta.file_id`, a random id made when the file
//! is created, or when an older file is first opened for writing): a record left beside
//! another file of the same name is ignored and replaced.
//!
//! What is not detected: a loss when the record itself is lost or damaged (ignored: detection
//! is weakened, never a false alarm), a power loss that drops the record's last writes with
//! the log's (the record is not synced), and the loss of pending writes, runs or receipts
//! committed without a checkpoint row after the last checkpoint row.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::sql::SqlResult;
use crate::envelope::hex;
use crate::CheckpointError;

/// Version of the record's layout.
const LAYOUT: u32 = 1;
/// The record is padded with spaces to a multiple of this, so a shorter record overwrites a
/// longer one without a truncate.
const PAD: usize = 256;

/// What the high-water file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    layout: u32,
    /// `sg_meta.file_id` of the file it belongs to.
    file: String,
    /// The newest checkpoint row committed (`sqlite_sequence` of `sg_checkpoints`).
    seq: i64,
    /// Its thread and checkpoint id (hex), when the row was still there when recorded.
    thread: Option<String>,
    checkpoint: Option<String>,
}

/// A file that lost committed checkpoints: the newest one recorded is past its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lost {
    /// The newest checkpoint row recorded as committed.
    pub(crate) recorded: i64,
    /// The newest row the file holds (0 for none).
    pub(crate) found: i64,
    /// That newest recorded checkpoint's thread and id (hex), `-` when not known.
    pub(crate) thread: String,
    pub(crate) checkpoint: String,
}

impl Lost {
    /// The typed error for opening `file` for writing.
    pub(crate) fn into_error(self, file: &Path) -> CheckpointError {
        CheckpointError::LostCommits {
            file: file.to_path_buf(),
            thread: self.thread,
            checkpoint: self.checkpoint,
            recorded: self.recorded,
            found: self.found,
        }
    }
}

/// The high-water file of the checkpoint file at `db`.
pub(crate) fn path_of(db: &Path) -> PathBuf {
    super::read_only::beside(db, "-highwater")
}

/// The file's id (`sg_meta.file_id`), `None` for a file that has none yet.
pub(crate) fn file_id(conn: &Connection) -> Result<Option<String>, CheckpointError> {
    conn.query_row("SELECT value FROM sg_meta WHERE key = 'file_id'", [], |r| {
        r.get(0)
    })
    .optional()
    .during("reading the file id")
}

/// Give the file an id if it has none (inside the schema transaction); whether it made one.
pub(crate) fn ensure_file_id(conn: &Connection, db: &Path) -> Result<bool, CheckpointError> {
    if file_id(conn)?.is_some() {
        return Ok(false);
    }
    let mut seed = blake3::Hasher::new();
    seed.update(db.as_os_str().as_encoded_bytes());
    seed.update(&std::process::id().to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    seed.update(&now.as_nanos().to_le_bytes());
    let id = hex(&seed.finalize().as_bytes()[..16]);
    conn.execute(
        "INSERT INTO sg_meta(key, value) VALUES ('file_id', ?1)",
        [id],
    )
    .during("recording the file id")?;
    Ok(true)
}

/// A checkpoint row's thread and id.
type RowOf = (String, Vec<u8>);

/// The newest checkpoint row ever committed to the file, with its thread and id if the row
/// is still there; `None` when the file has given out none (or keeps no sequence).
fn newest(conn: &Connection) -> Result<Option<(i64, Option<RowOf>)>, CheckpointError> {
    let seq: Option<i64> = conn
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'sg_checkpoints'")
        .and_then(|mut st| st.query_row([], |r| r.get(0)).optional())
        .during("reading the newest checkpoint row")?;
    let Some(seq) = seq else {
        return Ok(None);
    };
    let row = conn
        .prepare_cached("SELECT thread, id FROM sg_checkpoints WHERE seq = ?1")
        .and_then(|mut st| {
            st.query_row([seq], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .during("reading the newest checkpoint")?;
    Ok(Some((seq, row)))
}

/// Compare the file with its high-water record: `Some` when it lost committed checkpoints.
/// No record, a damaged one, or one of another file: `None` (nothing to compare with).
pub(crate) fn check(conn: &Connection, db: &Path) -> Result<Option<Lost>, CheckpointError> {
    let Some(record) = read(&path_of(db)) else {
        return Ok(None);
    };
    if file_id(conn)?.as_deref() != Some(record.file.as_str()) {
        return Ok(None);
    }
    let found = newest(conn)?.map_or(0, |(seq, _)| seq);
    if found >= record.seq {
        return Ok(None);
    }
    Ok(Some(Lost {
        recorded: record.seq,
        found,
        thread: record.thread.unwrap_or_else(|| "-".to_owned()),
        checkpoint: record.checkpoint.unwrap_or_else(|| "-".to_owned()),
    }))
}

/// The record at `path`, if it is there and whole.
fn read(path: &Path) -> Option<Record> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    let (json, sum) = text.trim_end().rsplit_once('\t')?;
    if sum != checksum(json) {
        return None;
    }
    serde_json::from_str::<Record>(json)
        .ok()
        .filter(|r| r.layout == LAYOUT)
}

fn checksum(json: &str) -> String {
    hex(&blake3::hash(json.as_bytes()).as_bytes()[..8])
}

/// The writer's side: writes the record after commits that added checkpoint rows.
pub(crate) struct HighWater {
    path: PathBuf,
    file_id: Option<String>,
    file: Option<File>,
    /// The row last recorded.
    written: i64,
}

impl HighWater {
    /// The record of the file at `db` (opened by `conn`); nothing is written for a file
    /// without an id (in memory).
    pub(crate) fn new(conn: &Connection, db: &Path) -> HighWater {
        HighWater {
            path: path_of(db),
            file_id: file_id(conn).ok().flatten(),
            file: None,
            written: 0,
        }
    }

    /// Record the file's newest committed checkpoint row, if it moved. Best effort: a record
    /// that cannot be written weakens detection, and is never the commit's failure.
    pub(crate) fn after_commit(&mut self, conn: &Connection) {
        let Some(file) = self.file_id.clone() else {
            return;
        };
        let Ok(Some((seq, row))) = newest(conn) else {
            return;
        };
        if seq <= self.written {
            return;
        }
        let (thread, checkpoint) = match row {
            Some((thread, id)) => (Some(thread), Some(hex(&id))),
            None => (None, None),
        };
        let record = Record {
            layout: LAYOUT,
            file,
            seq,
            thread,
            checkpoint,
        };
        if self.write(&record).is_ok() {
            self.written = seq;
        }
    }

    fn write(&mut self, record: &Record) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&self.path)?,
            );
        }
        let Some(mut file) = self.file.as_ref() else {
            return Ok(());
        };
        let json = serde_json::to_string(record).map_err(std::io::Error::other)?;
        let mut line = format!("{json}\t{}\n", checksum(&json));
        let len = file.metadata()?.len();
        let padded = line.len().div_ceil(PAD) * PAD;
        let width = usize::try_from(len).map_or(padded, |l| l.max(padded));
        line.insert_str(line.len() - 1, &" ".repeat(width - line.len()));
        file.seek(SeekFrom::Start(0))?;
        file.write_all(line.as_bytes())
    }

    /// Record the file as it is now (its newest row), replacing a record it is below: the
    /// user accepted the loss (`SqliteOptions::accept_lost_commits`).
    pub(crate) fn reset(&mut self, conn: &Connection) -> Result<(), CheckpointError> {
        let seq = newest(conn)?.map_or(0, |(seq, _)| seq);
        let Some(file) = self.file_id.clone() else {
            return Ok(());
        };
        let record = Record {
            layout: LAYOUT,
            file,
            seq,
            thread: None,
            checkpoint: None,
        };
        self.write(&record)
            .map_err(|e| crate::StorageError::new("rewriting the high-water record", e))?;
        self.written = seq;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_record_reads_back_and_a_damaged_one_reads_as_none() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.db-highwater");
        let mut hw = HighWater {
            path: path.clone(),
            file_id: Some("f".into()),
            file: None,
            written: 0,
        };
        let long = Record {
            layout: LAYOUT,
            file: "f".into(),
            seq: 12,
            thread: Some("x".repeat(300)),
            checkpoint: Some("ab".into()),
        };
        hw.write(&long)?;
        assert_eq!(read(&path), Some(long));
        // A shorter record over a longer one: padded, not truncated.
        let short = Record {
            layout: LAYOUT,
            file: "f".into(),
            seq: 13,
            thread: None,
            checkpoint: None,
        };
        hw.write(&short)?;
        assert_eq!(read(&path), Some(short));
        let mut bytes = std::fs::read(&path)?;
        bytes[10] ^= 1;
        std::fs::write(&path, bytes)?;
        assert_eq!(read(&path), None);
        Ok(())
    }
}
