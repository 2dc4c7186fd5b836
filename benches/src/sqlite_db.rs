//! A file-backed [`SqliteSaver`] and its on-disk footprint, as `langgraph_bench.py`'s
//! `SqliteDB` reports it.
//!
//! Key mapping (LangGraph's tables → stategraph's format-1 tables):
//! - `checkpoint_rows`: rows of `sg_checkpoints` (LangGraph: rows of `checkpoints`);
//! - `checkpoint_blob_bytes`: everything that stores checkpointed state:
//!   `sum(length(body))` of `sg_checkpoints` (the delta / full state records and control) +
//!   `sum(length(data))` of `sg_blobs` (content-addressed whole values) + `sum(length(data))`
//!   of `sg_log_parts` (appended items of append-reducer fields) (LangGraph:
//!   `sum(length(checkpoint))` of `checkpoints`, whose blob holds the whole state);
//!   the three terms are also printed apart as `checkpoint_body_bytes`, `blob_bytes`,
//!   `log_part_bytes`;
//! - `checkpoint_blob_max_bytes`: `max(length(body))` of `sg_checkpoints`;
//! - `metadata_bytes`: `sum(length(metadata))` of `sg_checkpoints`;
//! - `write_rows`, `write_blob_bytes`: rows and `sum(length(data))` of `sg_writes`
//!   (LangGraph: rows and `sum(length(value))` of `writes`);
//! - `wal_bytes_before_close`, `db_logical_bytes` (`page_count × page_size`, WAL included)
//!   as LangGraph's; `db_file_bytes`: main file + `-wal` + `-shm` after
//!   [`SqliteSaver::close`], which checkpoints (TRUNCATE) the WAL into the main file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;
use stategraph::checkpoints::{SqliteOptions, SqliteSaver};
use stategraph::BoxError;

use crate::report::Record;

static SERIAL: AtomicU64 = AtomicU64::new(0);

/// A saver on a fresh file in the work directory.
pub(crate) struct SqliteDb {
    pub(crate) path: PathBuf,
    pub(crate) saver: SqliteSaver,
}

/// What the file holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Stats {
    pub(crate) checkpoint_rows: i64,
    pub(crate) checkpoint_blob_bytes: i64,
    pub(crate) checkpoint_body_bytes: i64,
    pub(crate) blob_rows: i64,
    pub(crate) blob_bytes: i64,
    pub(crate) log_part_rows: i64,
    pub(crate) log_part_bytes: i64,
    pub(crate) checkpoint_blob_max_bytes: i64,
    pub(crate) metadata_bytes: i64,
    pub(crate) write_rows: i64,
    pub(crate) write_blob_bytes: i64,
    pub(crate) wal_bytes_before_close: u64,
    pub(crate) db_logical_bytes: i64,
    /// Set by [`SqliteDb::close`].
    pub(crate) db_file_bytes: Option<u64>,
}

impl Stats {
    /// Append the keys `langgraph_bench.py` prints, then the breakdown of
    /// `checkpoint_blob_bytes`.
    pub(crate) fn add_to(&self, r: Record) -> Record {
        let mut r = r
            .kv("checkpoint_rows", self.checkpoint_rows)
            .kv("checkpoint_blob_bytes", self.checkpoint_blob_bytes)
            .kv("checkpoint_blob_max_bytes", self.checkpoint_blob_max_bytes)
            .kv("metadata_bytes", self.metadata_bytes)
            .kv("write_rows", self.write_rows)
            .kv("write_blob_bytes", self.write_blob_bytes)
            .kv("wal_bytes_before_close", self.wal_bytes_before_close)
            .kv("db_logical_bytes", self.db_logical_bytes);
        if let Some(b) = self.db_file_bytes {
            r = r.kv("db_file_bytes", b);
        }
        r.kv("checkpoint_body_bytes", self.checkpoint_body_bytes)
            .kv("blob_rows", self.blob_rows)
            .kv("blob_bytes", self.blob_bytes)
            .kv("log_part_rows", self.log_part_rows)
            .kv("log_part_bytes", self.log_part_bytes)
    }
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// Remove a checkpoint file and the files SQLite and the saver keep beside it.
pub(crate) fn remove_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-highwater"] {
        let _ = std::fs::remove_file(with_suffix(path, suffix));
    }
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Count rows and bytes of each table through a fresh connection.
fn query(path: &Path) -> Result<Stats, BoxError> {
    let conn = Connection::open(path)?;
    let one = |sql: &str| -> Result<(i64, i64, i64), BoxError> {
        Ok(conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?)
    };
    let (ck_rows, body, body_max) = one(
        "SELECT count(*), coalesce(sum(length(body)),0), coalesce(max(length(body)),0) \
         FROM sg_checkpoints",
    )?;
    let (_, meta, _) = one("SELECT 0, coalesce(sum(length(metadata)),0), 0 FROM sg_checkpoints")?;
    let (blob_rows, blob, _) =
        one("SELECT count(*), coalesce(sum(length(data)),0), 0 FROM sg_blobs")?;
    let (part_rows, part, _) =
        one("SELECT count(*), coalesce(sum(length(data)),0), 0 FROM sg_log_parts")?;
    let (wr_rows, wr, _) = one("SELECT count(*), coalesce(sum(length(data)),0), 0 FROM sg_writes")?;
    let pc: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let ps: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(Stats {
        checkpoint_rows: ck_rows,
        checkpoint_blob_bytes: body + blob + part,
        checkpoint_body_bytes: body,
        blob_rows,
        blob_bytes: blob,
        log_part_rows: part_rows,
        log_part_bytes: part,
        checkpoint_blob_max_bytes: body_max,
        metadata_bytes: meta,
        write_rows: wr_rows,
        write_blob_bytes: wr,
        wal_bytes_before_close: 0,
        db_logical_bytes: pc * ps,
        db_file_bytes: None,
    })
}

impl SqliteDb {
    /// Open a saver on `workdir/name-N.sqlite`.
    pub(crate) fn open(
        workdir: &Path,
        name: &str,
        options: SqliteOptions,
    ) -> Result<Self, BoxError> {
        let n = SERIAL.fetch_add(1, Ordering::Relaxed);
        let path = workdir.join(format!("{name}-{}-{n}.sqlite", std::process::id()));
        let saver = SqliteSaver::open_with(&path, options)?;
        Ok(SqliteDb { path, saver })
    }

    /// What the file holds now (committed data, WAL included), the saver still open.
    pub(crate) fn stats(&self) -> Result<Stats, BoxError> {
        let wal = file_len(&with_suffix(&self.path, "-wal"));
        let mut st = query(&self.path)?;
        st.wal_bytes_before_close = wal;
        Ok(st)
    }

    /// Close the saver (WAL folded into the main file), measure the file, count the tables;
    /// remove the files unless `keep`.
    pub(crate) fn close(self, keep: bool) -> Result<Stats, BoxError> {
        let wal = file_len(&with_suffix(&self.path, "-wal"));
        self.saver.close()?;
        let files = [
            self.path.clone(),
            with_suffix(&self.path, "-wal"),
            with_suffix(&self.path, "-shm"),
        ];
        let bytes: u64 = files.iter().map(|p| file_len(p)).sum();
        let mut st = query(&self.path)?;
        st.wal_bytes_before_close = wal;
        st.db_file_bytes = Some(bytes);
        if !keep {
            remove_files(&self.path);
        }
        Ok(st)
    }
}
