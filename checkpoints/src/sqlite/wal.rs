//! Room in the write-ahead log: the writer extends the `-wal` file with zeros up to the size
//! it reaches between two automatic checkpoints, so that a commit's frames overwrite blocks
//! the file already has instead of growing it.
//!
//! Why: with `synchronous=FULL` every commit ends in an fsync of the WAL. While the WAL
//! grows, that fsync must also commit the file system's metadata for the new blocks; once
//! SQLite restarts the log after a checkpoint, the frames overwrite the file in place and the
//! same fsync costs little more than the data (on the ext4 disks we measured, a 4 kB commit:
//! about 180 µs growing against 100 µs overwriting). A long-lived file reaches that steady
//! state after its first checkpoint; the room gives a fresh or reopened file the same cost
//! from its first commit. See decision 0017.
//!
//! Why it is safe: SQLite reads a WAL frame by frame from its header and stops at the first
//! frame whose salt or checksum does not match (the log's end), and after every restart the
//! file holds old frames past the end anyway. Zeros never match a salt, so they read as the
//! end of the log; a crash in the middle of extending leaves a shorter run of zeros, read the
//! same way. The room is added only while this connection holds the write lock (inside
//! `BEGIN IMMEDIATE`, before the transaction writes anything), so no other writer appends
//! frames meanwhile, and only past the file's current end: no frame is ever touched. SQLite
//! takes no file locks on the `-wal` file itself (its locks live in the `-shm` file), so
//! holding our own handle to it releases none of them.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::schema::{SqliteOptions, Synchronous};

/// Frames of room beyond the automatic checkpoint's threshold: the commit that crosses the
/// threshold still lands in the room.
const SLACK_FRAMES: u64 = 64;
/// Size of a frame header in the WAL format.
const FRAME_HEADER: u64 = 24;
/// Size of the WAL file header.
const WAL_HEADER: u64 = 32;
/// Zeros written per call while extending.
const CHUNK: usize = 256 << 10;
/// The room is made again at most this often: a program that keeps truncating the WAL (a
/// `journal_size_limit`, periodic `wal_checkpoint(TRUNCATE)`) must not make every one of our
/// transactions write megabytes under the write lock.
const REMAKE_EVERY: Duration = Duration::from_secs(1);

/// The writer's handle on its WAL file and the size it keeps the file at.
pub(crate) struct WalRoom {
    /// `None`: no room is kept (disabled, `synchronous=NORMAL`, no automatic checkpoint, an
    /// in-memory database, or extending failed once).
    target: Option<Target>,
}

struct Target {
    path: String,
    bytes: u64,
    file: Option<File>,
    /// Whether the room was made once (the first time is never held back).
    made: bool,
    /// When it was last made again after that.
    remade: Option<Instant>,
}

impl WalRoom {
    /// The room `conn`'s WAL should have: `(wal_autocheckpoint + 64)` frames of the file's
    /// page size, when `options` ask for it and commits are synced (`synchronous=FULL`).
    pub(crate) fn new(conn: &Connection, options: &SqliteOptions) -> WalRoom {
        WalRoom {
            target: Self::target(conn, options),
        }
    }

    fn target(conn: &Connection, options: &SqliteOptions) -> Option<Target> {
        if !options.preallocate_wal || options.synchronous != Synchronous::Full {
            return None;
        }
        let path = conn.path().filter(|p| !p.is_empty())?;
        let page: i64 = conn
            .pragma_query_value(None, "page_size", |r| r.get(0))
            .ok()?;
        let frames: i64 = conn
            .pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))
            .ok()?;
        let (page, frames) = (u64::try_from(page).ok()?, u64::try_from(frames).ok()?);
        if frames == 0 {
            return None;
        }
        Some(Target {
            path: format!("{path}-wal"),
            bytes: WAL_HEADER + (frames + SLACK_FRAMES) * (page + FRAME_HEADER),
            file: None,
            made: false,
            remade: None,
        })
    }

    /// Whether room is kept.
    pub(crate) fn wanted(&self) -> bool {
        self.target.is_some()
    }

    /// Extend the WAL to its target size if it is shorter (the first transaction of this
    /// writer, or another connection truncated it; made again at most once a second). Call
    /// only while holding the write lock, before the transaction writes anything. Best
    /// effort: the room only makes commits cheaper, so a failure (a full disk) is not the
    /// transaction's; the room is then given up for this writer.
    pub(crate) fn ensure(&mut self) {
        let Some(target) = &mut self.target else {
            return;
        };
        if target.extend().is_err() {
            self.target = None;
        }
    }
}

impl Target {
    fn extend(&mut self) -> std::io::Result<()> {
        if self.file.is_none() {
            // Never create it: SQLite creates the WAL when the connection opens the file in
            // WAL mode; if it is missing, try again at the next transaction.
            match std::fs::OpenOptions::new().write(true).open(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        let Some(mut file) = self.file.as_ref() else {
            return Ok(());
        };
        let mut len = file.metadata()?.len();
        if len >= self.bytes || self.remade.is_some_and(|t| t.elapsed() < REMAKE_EVERY) {
            return Ok(());
        }
        if self.made {
            self.remade = Some(Instant::now());
        }
        self.made = true;
        let zeros = vec![0u8; CHUNK];
        file.seek(SeekFrom::Start(len))?;
        while len < self.bytes {
            let n = usize::try_from(self.bytes - len).map_or(CHUNK, |left| left.min(CHUNK));
            file.write_all(&zeros[..n])?;
            len += n as u64;
        }
        file.sync_data()
    }
}
