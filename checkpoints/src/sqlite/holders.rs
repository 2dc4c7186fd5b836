//! The holder index of a format-3 file (`sg_holders`, decision 0057): which threads hold each
//! value row and log, so that deleting or pruning a thread collects values by looking at what
//! that thread referred to, not at every row of the file.
//!
//! A thread holds every value row its checkpoints' records refer to, every log they refer to
//! with the logs those rest on, and the value row a root log's first part refers to (the
//! whole value an appended list started from; in a format-3 file no other part refers to a
//! value row, which is what lets a collection skip reading the parts of the logs it keeps).
//!
//! The writer adds `(kind, id, thread)` when a put of the thread stores or reuses a value row
//! or starts a log (appending to a log the thread holds adds nothing: a step of a list and a
//! counter writes no holder row), and a thread copy adds the copy's holds. Collecting after a
//! thread lost checkpoints: the values the lost rows referred to that its remaining rows do
//! not are released by the thread, and deleted when no other thread holds them.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{params, Connection, OptionalExtension, Params};

use super::read::{walk_log, ChainEnd};
use super::record::{decode_record, ValueRef};
use super::sql::{integrity, SqlResult};
use crate::envelope::{hex, open, CODEC_BINCODE};
use crate::CheckpointError;

/// `sg_holders.kind` of a value row (`sg_blobs`).
pub(crate) const BLOB: i64 = 0;
/// `sg_holders.kind` of a log (`sg_logs`).
pub(crate) const LOG: i64 = 1;

/// Note that `thread` holds row `id` of `kind` (nothing if it does already).
pub(crate) fn hold(
    conn: &Connection,
    kind: i64,
    id: i64,
    thread: &str,
) -> Result<(), CheckpointError> {
    conn.prepare_cached("INSERT OR IGNORE INTO sg_holders (kind, id, thread) VALUES (?1, ?2, ?3)")
        .during("preparing the holder insert")?
        .execute(params![kind, id, thread])
        .during("noting a value's holder")?;
    Ok(())
}

/// What some checkpoint rows refer to, read off each row's own record (no state rebuilt):
/// value rows, and logs with the most parts a row needs.
#[derive(Debug, Default)]
pub(crate) struct Refs {
    pub(crate) blobs: BTreeSet<i64>,
    pub(crate) logs: BTreeMap<i64, i64>,
    /// Why a row's record could not be read (the first such row): then these references
    /// are not all of the rows', and nothing may be collected by them.
    pub(crate) damaged: Option<CheckpointError>,
}

impl Refs {
    /// Add the references of the rows `sql` selects (columns: thread, id, body_hash, body).
    pub(crate) fn add_rows(
        &mut self,
        conn: &Connection,
        sql: &str,
        args: impl Params,
    ) -> Result<(), CheckpointError> {
        let mut stmt = conn
            .prepare_cached(sql)
            .during("preparing the checkpoints query")?;
        let mut rows = stmt.query(args).during("reading checkpoints")?;
        while let Some(row) = rows.next().during("reading checkpoints")? {
            let thread: String = row.get(0).during("reading a checkpoint's thread")?;
            self.add_row(&thread, row, 1)?;
        }
        Ok(())
    }

    /// Add the references of the record in columns `at..at + 3` of `row` (id, body_hash,
    /// body) of a checkpoint of `thread` (a record that does not open or decode is noted in
    /// [`Refs::damaged`]).
    pub(crate) fn add_row(
        &mut self,
        thread: &str,
        row: &rusqlite::Row<'_>,
        at: usize,
    ) -> Result<(), CheckpointError> {
        let read = |i| row.get_ref(i).and_then(|v| v.as_blob().map_err(Into::into));
        let (Ok(id), Ok(hash), Ok(body)) = (read(at), read(at + 1), read(at + 2)) else {
            let e = integrity(
                thread,
                "-",
                "sg_checkpoints",
                "a row's id or record is not bytes",
            );
            self.damaged.get_or_insert(e);
            return Ok(());
        };
        let damaged = |d: String| integrity(thread, &hex(id), hex(hash), d);
        let stored = match open(body, CODEC_BINCODE, hash).and_then(decode_record) {
            Ok(stored) => stored,
            Err(d) => {
                self.damaged.get_or_insert(damaged(d));
                return Ok(());
            }
        };
        for (_, r) in stored.fields {
            match r {
                ValueRef::Inline(_) => {}
                ValueRef::Blob(b) => {
                    self.blobs.insert(b);
                }
                ValueRef::Log { log, parts } => need(&mut self.logs, log, parts),
            }
        }
        Ok(())
    }

    /// The references of every checkpoint of `thread`.
    pub(crate) fn of_thread(conn: &Connection, thread: &str) -> Result<Refs, CheckpointError> {
        let mut refs = Refs::default();
        refs.add_rows(
            conn,
            "SELECT thread, id, body_hash, body FROM sg_checkpoints WHERE thread = ?1",
            [thread],
        )?;
        Ok(refs)
    }

    /// With every log the referred logs rest on, each with the parts of it the lists need
    /// (a missing log is noted too: nothing of it is there to delete), and the value row each
    /// root log starts from (in a format-3 file only a root log's first part refers to a
    /// value row: the whole value an appended list started from).
    pub(crate) fn close(self, conn: &Connection) -> Result<Refs, CheckpointError> {
        let mut logs = BTreeMap::new();
        let mut roots = BTreeSet::new();
        for (log, parts) in self.logs {
            let chain = walk_log(conn, log, parts)?;
            if let (ChainEnd::Root, Some(root)) = (chain.end, chain.segments.last()) {
                if root.upto > 0 {
                    roots.insert(root.log);
                }
            }
            for s in chain.segments {
                need(&mut logs, s.log, s.upto);
            }
            if let ChainEnd::Missing { log, upto } = chain.end {
                need(&mut logs, log, upto);
            }
        }
        let mut blobs = self.blobs;
        for root in roots {
            blobs.extend(first_part_blob(conn, root)?);
        }
        Ok(Refs {
            blobs,
            logs,
            damaged: self.damaged,
        })
    }
}

/// The value row part 0 of `log` refers to, if it does.
fn first_part_blob(conn: &Connection, log: i64) -> Result<Option<i64>, CheckpointError> {
    conn.prepare_cached("SELECT blob FROM sg_log_parts WHERE log = ?1 AND part = 0")
        .during("preparing the first part query")?
        .query_row([log], |r| r.get::<_, Option<i64>>(0))
        .optional()
        .during("reading a log's first part")
        .map(Option::flatten)
}

fn need(logs: &mut BTreeMap<i64, i64>, log: i64, parts: i64) {
    let most = logs.entry(log).or_insert(0);
    *most = (*most).max(parts);
}

/// Note that `thread` holds every value and log of `refs` (closed).
pub(crate) fn hold_all(
    conn: &Connection,
    refs: &Refs,
    thread: &str,
) -> Result<(), CheckpointError> {
    for &b in &refs.blobs {
        hold(conn, BLOB, b, thread)?;
    }
    for &l in refs.logs.keys() {
        hold(conn, LOG, l, thread)?;
    }
    Ok(())
}

/// Whether any thread holds row `id` of `kind`.
fn held(conn: &Connection, kind: i64, id: i64) -> Result<bool, CheckpointError> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM sg_holders WHERE kind = ?1 AND id = ?2)")
        .during("preparing the holder lookup")?
        .query_row(params![kind, id], |r| r.get(0))
        .during("looking up a value's holders")
}

/// Whether a thread other than `thread` holds row `id` of `kind`.
fn others_hold(
    conn: &Connection,
    kind: i64,
    id: i64,
    thread: &str,
) -> Result<bool, CheckpointError> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sg_holders WHERE kind = ?1 AND id = ?2 AND thread <> ?3)",
    )
    .during("preparing the holder lookup")?
    .query_row(params![kind, id, thread], |r| r.get(0))
    .during("looking up a value's holders")
}

/// `thread` no longer holds row `id` of `kind`.
fn release(conn: &Connection, kind: i64, id: i64, thread: &str) -> Result<(), CheckpointError> {
    conn.prepare_cached("DELETE FROM sg_holders WHERE kind = ?1 AND id = ?2 AND thread = ?3")
        .during("preparing the holder delete")?
        .execute(params![kind, id, thread])
        .during("releasing a value")?;
    Ok(())
}

/// Collect what `thread` no longer refers to: `dropped` is what its deleted checkpoints
/// referred to, `kept` what its remaining ones refer to (both closed). A log no remaining row
/// needs is released, and deleted with its parts when no other thread holds it; a log the
/// remaining rows need fewer parts of loses the rest when no other thread holds it; then each
/// value row likewise.
pub(crate) fn collect(
    conn: &Connection,
    thread: &str,
    dropped: &Refs,
    kept: &Refs,
) -> Result<(), CheckpointError> {
    for (&log, &had) in &dropped.logs {
        match kept.logs.get(&log) {
            None => {
                release(conn, LOG, log, thread)?;
                if !held(conn, LOG, log)? {
                    delete_log(conn, log, None)?;
                }
            }
            Some(&keep) if keep < had && !others_hold(conn, LOG, log, thread)? => {
                delete_log(conn, log, Some(keep))?;
            }
            Some(_) => {}
        }
    }
    for &b in dropped.blobs.difference(&kept.blobs) {
        release(conn, BLOB, b, thread)?;
        if !held(conn, BLOB, b)? {
            conn.prepare_cached("DELETE FROM sg_blobs WHERE id = ?1")
                .during("preparing the value delete")?
                .execute([b])
                .during("deleting a value")?;
        }
    }
    Ok(())
}

/// Delete log `log` with its parts (`None`), or its parts from `keep` on.
fn delete_log(conn: &Connection, log: i64, keep: Option<i64>) -> Result<(), CheckpointError> {
    conn.prepare_cached("DELETE FROM sg_log_parts WHERE log = ?1 AND part >= ?2")
        .during("preparing the log parts delete")?
        .execute(params![log, keep.unwrap_or(0)])
        .during("deleting log parts")?;
    match keep {
        None => conn
            .prepare_cached("DELETE FROM sg_logs WHERE id = ?1")
            .during("preparing the log delete")?
            .execute([log])
            .during("deleting a log")?,
        Some(keep) => conn
            .prepare_cached("UPDATE sg_logs SET tip = ?2 WHERE id = ?1")
            .during("preparing the log tip update")?
            .execute(params![log, keep])
            .during("updating a log's tip")?,
    };
    Ok(())
}
