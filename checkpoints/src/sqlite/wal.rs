//! The writer's watch on its write-ahead log: room made in it ahead of commits, and the disk's
//! free space kept from being eaten by it.
//!
//! Room: the writer extends the `-wal` file with zeros up to the size it reaches between two
//! automatic checkpoints, so that a commit's frames overwrite blocks the file already has
//! instead of growing it.
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
//!
//! A nearly full disk: the room is made only when the disk has [`FREE_FACTOR`] times its size
//! free, and what was written of a room that could not be made is given back. After each
//! commit the writer checks the disk's free space; once it is less than the log's length and
//! [`LOW_MARGIN`], the log is folded into the main file and truncated, so the log never holds
//! the disk's last space (a log keeps many versions of the same pages: folding it grows the
//! main file by far less than it frees). See decision 0042.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
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
/// Zeros written (and bytes read back) per call.
const CHUNK: usize = 256 << 10;
/// The room is made again at most this often: a program that keeps truncating the WAL (a
/// `journal_size_limit`, periodic `wal_checkpoint(TRUNCATE)`) must not make every one of our
/// transactions write megabytes under the write lock.
const REMAKE_EVERY: Duration = Duration::from_secs(1);
/// The room is made only when the disk has this many times its size free, so it never takes
/// the last of a disk.
const FREE_FACTOR: u64 = 4;
/// The log is folded into the main file once the disk's free space falls below the log's
/// length plus this much.
const LOW_MARGIN: u64 = 1 << 20;

/// The writer's handle on its WAL file: the room it keeps there and the disk's free space.
pub(crate) struct WalRoom {
    /// `None` for an in-memory database.
    log: Option<Log>,
    /// `None`: no room is kept (disabled, `synchronous=NORMAL`, no automatic checkpoint, an
    /// in-memory database).
    room: Option<Room>,
}

/// The `-wal` file beside a database file.
struct Log {
    path: String,
    /// The size of one frame (page size + frame header).
    frame: u64,
    file: Option<File>,
}

/// The room the log is kept at.
struct Room {
    bytes: u64,
    /// Whether the room was made once (the first time is never held back).
    made: bool,
    /// When it was last tried again after that.
    remade: Option<Instant>,
    /// Given up for this writer: making it failed, or the disk filled.
    given_up: bool,
}

impl WalRoom {
    /// The watch on `conn`'s WAL, with room of `(wal_autocheckpoint + 64)` frames of the
    /// file's page size when `options` ask for it and commits are synced (`synchronous=FULL`).
    pub(crate) fn new(conn: &Connection, options: &SqliteOptions) -> WalRoom {
        let pragma = |name: &str| -> Option<u64> {
            let v: i64 = conn.pragma_query_value(None, name, |r| r.get(0)).ok()?;
            u64::try_from(v).ok()
        };
        let log = conn
            .path()
            .filter(|p| !p.is_empty())
            .zip(pragma("page_size"))
            .map(|(path, page)| Log {
                path: format!("{path}-wal"),
                frame: page + FRAME_HEADER,
                file: None,
            });
        let wanted = options.preallocate_wal && options.synchronous == Synchronous::Full;
        let room = match (&log, pragma("wal_autocheckpoint")) {
            (Some(log), Some(frames)) if wanted && frames > 0 => Some(Room {
                bytes: WAL_HEADER + (frames + SLACK_FRAMES) * log.frame,
                made: false,
                remade: None,
                given_up: false,
            }),
            _ => None,
        };
        WalRoom { log, room }
    }

    /// Whether room is kept.
    pub(crate) fn wanted(&self) -> bool {
        self.room.as_ref().is_some_and(|r| !r.given_up)
    }

    /// Extend the WAL to its room if it is shorter (the first transaction of this writer, or
    /// another connection truncated it; tried again at most once a second), when the disk has
    /// [`FREE_FACTOR`] times the missing room free. Call only while holding the write lock,
    /// before the transaction writes anything. Best effort: the room only makes commits
    /// cheaper, so a failure (a full disk) is not the transaction's; what was written of the
    /// room is given back and the room is given up for this writer.
    pub(crate) fn ensure(&mut self) {
        let (Some(log), Some(room)) = (self.log.as_mut(), self.room.as_mut()) else {
            return;
        };
        if !room.given_up && room.extend(log).is_err() {
            room.given_up = true;
        }
    }

    /// Make no more room for this writer (the disk filled).
    pub(crate) fn give_up(&mut self) {
        if let Some(room) = self.room.as_mut() {
            room.given_up = true;
        }
    }

    /// Give the room up for this writer and hand back the zeros past the log's end, so a
    /// disk that filled gets back what the room held. Call only while holding the write lock,
    /// before the transaction writes anything.
    pub(crate) fn give_back(&mut self) {
        self.give_up();
        if let Some(log) = self.log.as_mut() {
            // Best effort: what cannot be trimmed stays, read by SQLite as the log's end.
            let _ = log.trim();
        }
    }

    /// Whether the disk's free space is below the log's length plus [`LOW_MARGIN`]: time to
    /// fold the log into the main file. `false` when it cannot be told.
    pub(crate) fn disk_low(&mut self) -> bool {
        let Some(Ok(Some(file))) = self.log.as_mut().map(Log::file) else {
            return false;
        };
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return false;
        };
        free_space(file).is_ok_and(|free| free.is_some_and(|f| f < len + LOW_MARGIN))
    }
}

impl Log {
    /// The WAL file, opened once; `None` while SQLite has not created it.
    fn file(&mut self) -> std::io::Result<Option<&File>> {
        if self.file.is_none() {
            // Never create it: SQLite creates the WAL when the connection opens the file in
            // WAL mode; if it is missing, try again later.
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.path)
            {
                Ok(f) => self.file = Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(self.file.as_ref())
    }

    /// Cut the zeros off the end of the WAL: everything past its last non-zero byte, rounded
    /// up to a frame's end. A frame that is all zeros is never part of the log (its salt does
    /// not match), and SQLite reads no frame after one that does not match, so only room and
    /// nothing of the log goes.
    fn trim(&mut self) -> std::io::Result<()> {
        let frame = self.frame;
        let Some(file) = self.file()? else {
            return Ok(());
        };
        let len = file.metadata()?.len();
        let end = data_end(file, len)?;
        let keep = if end <= WAL_HEADER {
            end
        } else {
            (WAL_HEADER + (end - WAL_HEADER).div_ceil(frame) * frame).min(len)
        };
        if keep < len {
            file.set_len(keep)?;
        }
        Ok(())
    }
}

impl Room {
    fn extend(&mut self, log: &mut Log) -> std::io::Result<()> {
        let Some(file) = log.file()? else {
            return Ok(());
        };
        let start = file.metadata()?.len();
        if start >= self.bytes || self.remade.is_some_and(|t| t.elapsed() < REMAKE_EVERY) {
            return Ok(());
        }
        if self.made {
            self.remade = Some(Instant::now());
        }
        self.made = true;
        let need = FREE_FACTOR * (self.bytes - start);
        if free_space(file)?.is_some_and(|free| free < need) {
            // Not now: tried again (at most once a second) as the disk frees up.
            self.remade = Some(Instant::now());
            return Ok(());
        }
        let written = write_zeros(file, start, self.bytes).and_then(|()| file.sync_data());
        if written.is_err() {
            // Give back what was written of it: only zeros past the log's end.
            let _ = file.set_len(start);
        }
        written
    }
}

/// Append zeros to `file` from `start` up to `bytes`.
fn write_zeros(mut file: &File, start: u64, bytes: u64) -> std::io::Result<()> {
    let zeros = vec![0u8; CHUNK];
    file.seek(SeekFrom::Start(start))?;
    let mut len = start;
    while len < bytes {
        let n = usize::try_from(bytes - len).map_or(CHUNK, |left| left.min(CHUNK));
        file.write_all(&zeros[..n])?;
        len += n as u64;
    }
    Ok(())
}

/// The offset just past the last non-zero byte of the first `len` bytes of `file`.
fn data_end(mut file: &File, len: u64) -> std::io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut end = len;
    while end > 0 {
        let n = usize::try_from(end).map_or(CHUNK, |e| e.min(CHUNK));
        let from = end - n as u64;
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b != 0) {
            return Ok(from + i as u64 + 1);
        }
        end = from;
    }
    Ok(0)
}

/// The bytes free for this process on the disk holding `file`.
#[cfg(unix)]
fn free_space(file: &File) -> std::io::Result<Option<u64>> {
    let stat = rustix::fs::fstatvfs(file)?;
    Ok(Some(stat.f_bavail.saturating_mul(stat.f_frsize)))
}

/// Elsewhere the free space is not known: the room is made (and given back if that fails),
/// and the log is folded only when a commit finds the disk full.
#[cfg(not(unix))]
fn free_space(_file: &File) -> std::io::Result<Option<u64>> {
    Ok(None)
}
