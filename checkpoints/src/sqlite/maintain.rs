//! Maintenance: deleting, copying and pruning a thread, and collecting the values, logs and
//! log parts no checkpoint refers to any more: through the holder index in a format-3 file
//! (in proportion to what the thread referred to, see [`holders`]), by reading every row of
//! an older file.

use std::collections::{BTreeSet, HashMap};

use rusqlite::{params, Connection, OptionalExtension};

use super::holders::{self, Refs};
use super::read::{load_record, newest_id};
use super::record::encode_record;
use super::sql::{id_bytes, integrity, SqlResult};
use super::writer::memory::GroupRecords;
use crate::envelope::{seal, CODEC_BINCODE};
use crate::{CheckpointError, CheckpointId, Namespace, Retention, StorageError, ThreadId};

/// Delete a thread: its checkpoints in every namespace, its pending writes, then the values
/// only it used.
pub(crate) fn delete_thread(
    conn: &Connection,
    records: &mut GroupRecords<'_>,
    thread: &ThreadId,
) -> Result<(), CheckpointError> {
    // With the holder index, what the thread referred to is read before its rows go.
    let dropped = match records.memory.holders {
        true => Some(Refs::of_thread(conn, thread.as_str())?.close(conn)?),
        false => None,
    };
    conn.execute(
        "DELETE FROM sg_checkpoints WHERE thread = ?1",
        [thread.as_str()],
    )
    .during("deleting a thread's checkpoints")?;
    conn.execute("DELETE FROM sg_writes WHERE thread = ?1", [thread.as_str()])
        .during("deleting a thread's pending writes")?;
    super::runs::delete_thread_runs(conn, thread)?;
    super::shapes::delete_thread(conn, thread.as_str())?;
    records.clear_shared();
    match dropped {
        Some(dropped) if dropped.damaged.is_none() => {
            holders::collect(conn, thread.as_str(), &dropped, &Refs::default())
        }
        // A record of the thread does not read: what it referred to is unknown, so the
        // values are collected by reading every remaining row, as in an older file.
        Some(_) => {
            conn.execute(
                "DELETE FROM sg_holders WHERE thread = ?1",
                [thread.as_str()],
            )
            .during("releasing a deleted thread's values")?;
            gc(conn)
        }
        None => gc(conn),
    }
}

/// Copy every checkpoint and pending write of `from` into the new thread `to` (values are
/// shared, not copied); with `head`, only the root-namespace branch that ends at `head` and
/// the pending writes of its checkpoints. `to` must have no checkpoints.
pub(crate) fn copy_thread(
    conn: &Connection,
    keep_holders: bool,
    from: &ThreadId,
    to: &ThreadId,
    head: Option<CheckpointId>,
) -> Result<(), CheckpointError> {
    refuse_existing(conn, to)?;
    let rows: Vec<(i64, Option<i64>)> = match head {
        None => conn
            .prepare("SELECT seq, parent_seq FROM sg_checkpoints WHERE thread = ?1 ORDER BY seq")
            .during("preparing the thread's rows query")?
            .query_map([from.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .during("reading the thread's rows")?
            .collect::<Result<_, _>>()
            .during("reading the thread's rows")?,
        Some(head) => branch_rows(conn, from, head)?,
    };
    let mut map: HashMap<i64, i64> = HashMap::new();
    for &(seq, parent_seq) in &rows {
        let new_parent = parent_seq.and_then(|p| map.get(&p).copied());
        conn.execute(
            "INSERT INTO sg_checkpoints (thread, ns, id, parent, parent_seq, step, source, created_at, metadata, depth, body_hash, body)
             SELECT ?1, ns, id, parent, ?2, step, source, created_at, metadata, depth, body_hash, body FROM sg_checkpoints WHERE seq = ?3",
            params![to.as_str(), new_parent, seq],
        )
        .during("copying a checkpoint row")?;
        map.insert(seq, conn.last_insert_rowid());
    }
    crate::failpoint::hit("copy.after_checkpoints");
    if keep_holders {
        // The copy holds what its rows refer to (all of them new: `to` had none).
        let refs = Refs::of_thread(conn, to.as_str())?.close(conn)?;
        holders::hold_all(conn, &refs, to.as_str())?;
    }
    super::shapes::copy_thread(conn, from.as_str(), to.as_str())?;
    match head {
        None => {
            conn.execute(
                "INSERT INTO sg_writes (thread, ns, checkpoint, task, idx, ord, node, kind, hash, data)
                 SELECT ?2, ns, checkpoint, task, idx, ord, node, kind, hash, data FROM sg_writes WHERE thread = ?1",
                params![from.as_str(), to.as_str()],
            )
            .during("copying the thread's pending writes")?;
        }
        Some(_) => {
            for &(seq, _) in &rows {
                conn.execute(
                    "INSERT INTO sg_writes (thread, ns, checkpoint, task, idx, ord, node, kind, hash, data)
                     SELECT ?2, w.ns, w.checkpoint, w.task, w.idx, w.ord, w.node, w.kind, w.hash, w.data
                     FROM sg_writes w JOIN sg_checkpoints c
                       ON c.thread = w.thread AND c.ns = w.ns AND c.id = w.checkpoint
                     WHERE w.thread = ?1 AND c.seq = ?3",
                    params![from.as_str(), to.as_str(), seq],
                )
                .during("copying a branch's pending writes")?;
            }
        }
    }
    Ok(())
}

/// [`CheckpointError::StaleParent`] when `to` has checkpoints already.
fn refuse_existing(conn: &Connection, to: &ThreadId) -> Result<(), CheckpointError> {
    let existing: i64 = conn
        .query_row(
            "SELECT count(*) FROM sg_checkpoints WHERE thread = ?1",
            [to.as_str()],
            |r| r.get(0),
        )
        .during("counting the target thread's checkpoints")?;
    if existing > 0 {
        let found = newest_id(conn, to, &Namespace::root())?;
        return Err(CheckpointError::StaleParent {
            thread: to.clone(),
            ns: Namespace::root(),
            expected: None,
            found,
        });
    }
    Ok(())
}

/// The rows of the root-namespace branch of `thread` that ends at `head`, oldest first.
fn branch_rows(
    conn: &Connection,
    thread: &ThreadId,
    head: CheckpointId,
) -> Result<Vec<(i64, Option<i64>)>, CheckpointError> {
    let root = Namespace::root();
    let first: Option<(i64, Option<i64>)> = conn
        .query_row(
            "SELECT seq, parent_seq FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3",
            params![thread.as_str(), root.as_str(), id_bytes(head)],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .during("finding the branch's head")?;
    let Some(mut row) = first else {
        return Err(CheckpointError::NotFound {
            thread: thread.clone(),
            ns: root,
            id: head,
        });
    };
    let mut rows = vec![row];
    while let Some(parent) = row.1 {
        row = conn
            .query_row(
                "SELECT seq, parent_seq FROM sg_checkpoints WHERE seq = ?1",
                [parent],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .during("walking a branch to its root")?;
        rows.push(row);
    }
    rows.reverse();
    Ok(rows)
}

/// Delete the checkpoints of `thread` that `retention` does not keep, in every namespace
/// (the newest always stays); how many went.
pub(crate) fn prune(
    conn: &Connection,
    records: &mut GroupRecords<'_>,
    thread: &ThreadId,
    retention: Retention,
) -> Result<usize, CheckpointError> {
    let namespaces: Vec<String> = conn
        .prepare("SELECT DISTINCT ns FROM sg_checkpoints WHERE thread = ?1")
        .during("preparing the namespaces query")?
        .query_map([thread.as_str()], |r| r.get(0))
        .during("reading the thread's namespaces")?
        .collect::<Result<_, _>>()
        .during("reading the thread's namespaces")?;
    let mut deleted = 0usize;
    // With the holder index: what the deleted rows referred to, read before they go.
    let mut dropped = records.memory.holders.then(Refs::default);
    for ns in namespaces {
        let n = prune_namespace(conn, records, thread, &ns, retention, dropped.as_mut())?;
        if n > 0 {
            deleted += n;
            crate::failpoint::hit("prune.after_delete");
        }
    }
    if deleted > 0 {
        records.clear_all();
        match dropped {
            Some(dropped) if dropped.damaged.is_none() => {
                let kept = Refs::of_thread(conn, thread.as_str())?.close(conn)?;
                match kept.damaged {
                    None => holders::collect(conn, thread.as_str(), &dropped.close(conn)?, &kept)?,
                    // A remaining record does not read: the walk of every row says so.
                    Some(_) => gc(conn)?,
                }
            }
            // A deleted record did not read: collect by reading every remaining row (the
            // thread's holds of what that walk deletes stay behind, unused).
            _ => gc(conn)?,
        }
    }
    Ok(deleted)
}

/// A checkpoint row as pruning sees it.
struct PruneRow {
    seq: i64,
    created_at: i64,
    parent_seq: Option<i64>,
}

/// Prune one namespace of `thread`: the kept checkpoints become self-contained (a whole
/// record, no parent outside the kept ones) before the others are deleted.
fn prune_namespace(
    conn: &Connection,
    records: &GroupRecords<'_>,
    thread: &ThreadId,
    ns: &str,
    retention: Retention,
    dropped: Option<&mut Refs>,
) -> Result<usize, CheckpointError> {
    let t = thread.as_str();
    // Newest first.
    let rows: Vec<PruneRow> = conn
        .prepare("SELECT seq, created_at, parent_seq FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 ORDER BY id DESC")
        .during("preparing the checkpoints query")?
        .query_map(params![t, ns], |r| {
            Ok(PruneRow {
                seq: r.get(0)?,
                created_at: r.get(1)?,
                parent_seq: r.get(2)?,
            })
        })
        .during("reading the namespace's checkpoints")?
        .collect::<Result<_, _>>()
        .during("reading the namespace's checkpoints")?;
    let keep: BTreeSet<i64> = rows
        .iter()
        .enumerate()
        .filter(|(i, row)| match retention {
            Retention::KeepLast(n) => *i < n.max(1),
            Retention::NewerThan(ms) => *i == 0 || u64::try_from(row.created_at).unwrap_or(0) >= ms,
        })
        .map(|(_, row)| row.seq)
        .collect();
    let drop_set: Vec<i64> = rows
        .iter()
        .map(|r| r.seq)
        .filter(|s| !keep.contains(s))
        .collect();
    if drop_set.is_empty() {
        return Ok(0);
    }
    for &seq in &keep {
        make_whole(conn, records, seq, t)?;
    }
    for row in &rows {
        if keep.contains(&row.seq) && row.parent_seq.is_some_and(|p| !keep.contains(&p)) {
            conn.execute(
                "UPDATE sg_checkpoints SET parent = NULL, parent_seq = NULL WHERE seq = ?1",
                [row.seq],
            )
            .during("detaching a kept checkpoint from its pruned parent")?;
        }
    }
    let mut dropped = dropped;
    for seq in &drop_set {
        delete_checkpoint(conn, t, ns, *seq, dropped.as_deref_mut())?;
    }
    Ok(drop_set.len())
}

/// Rewrite row `seq`'s record as a whole record (depth 0).
fn make_whole(
    conn: &Connection,
    records: &GroupRecords<'_>,
    seq: i64,
    thread: &str,
) -> Result<(), CheckpointError> {
    let record = load_record(conn, &|s| records.lookup(s), seq, thread)?;
    let bytes = encode_record(&record.to_whole_record())
        .map_err(|e| StorageError::new("encoding a checkpoint record", e))?;
    let (env, hash) = seal(CODEC_BINCODE, &bytes);
    conn.execute(
        "UPDATE sg_checkpoints SET body = ?2, body_hash = ?3, depth = 0 WHERE seq = ?1",
        params![seq, env, &hash[..]],
    )
    .during("rewriting a kept checkpoint's record")?;
    Ok(())
}

/// Delete checkpoint row `seq` and its pending writes (adding what its record refers to to
/// `refs`).
fn delete_checkpoint(
    conn: &Connection,
    thread: &str,
    ns: &str,
    seq: i64,
    refs: Option<&mut Refs>,
) -> Result<(), CheckpointError> {
    let mut stmt = conn
        .prepare_cached("SELECT id, body_hash, body FROM sg_checkpoints WHERE seq = ?1")
        .during("preparing the pruned checkpoint query")?;
    let mut rows = stmt.query([seq]).during("reading a pruned checkpoint")?;
    let row = rows
        .next()
        .during("reading a pruned checkpoint")?
        .ok_or_else(|| integrity(thread, "-", format!("sg_checkpoints row {seq}"), "missing"))?;
    let id: Vec<u8> = row.get(0).during("reading a pruned checkpoint's id")?;
    if let Some(refs) = refs {
        refs.add_row(thread, row, 0)?;
    }
    drop(rows);
    conn.prepare_cached("DELETE FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3")
        .during("preparing the pending writes delete")?
        .execute(params![thread, ns, id])
        .during("deleting a pruned checkpoint's pending writes")?;
    conn.prepare_cached("DELETE FROM sg_checkpoints WHERE seq = ?1")
        .during("preparing the checkpoint delete")?
        .execute([seq])
        .during("deleting a pruned checkpoint")?;
    Ok(())
}

/// Delete blobs, logs and log parts no remaining checkpoint refers to.
pub(crate) fn gc(conn: &Connection) -> Result<(), CheckpointError> {
    let live = live_values(conn)?;
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS sg_keep_blobs (id INTEGER PRIMARY KEY);
         CREATE TEMP TABLE IF NOT EXISTS sg_keep_logs (id INTEGER PRIMARY KEY, parts INTEGER NOT NULL);
         DELETE FROM sg_keep_blobs; DELETE FROM sg_keep_logs;",
    )
    .during("preparing the tables of values to keep")?;
    for b in &live.blobs {
        conn.execute("INSERT INTO sg_keep_blobs (id) VALUES (?1)", [b])
            .during("noting a value to keep")?;
    }
    for (log, parts) in &live.logs {
        conn.execute(
            "INSERT INTO sg_keep_logs (id, parts) VALUES (?1, ?2)",
            params![log, parts],
        )
        .during("noting a log to keep")?;
    }
    conn.execute_batch(
        "DELETE FROM sg_log_parts WHERE NOT EXISTS (
             SELECT 1 FROM sg_keep_logs k WHERE k.id = sg_log_parts.log AND sg_log_parts.part < k.parts);
         DELETE FROM sg_logs WHERE id NOT IN (SELECT id FROM sg_keep_logs);
         UPDATE sg_logs SET tip = (SELECT parts FROM sg_keep_logs k WHERE k.id = sg_logs.id);
         INSERT OR IGNORE INTO sg_keep_blobs (id) SELECT blob FROM sg_log_parts WHERE blob IS NOT NULL;
         DELETE FROM sg_blobs WHERE id NOT IN (SELECT id FROM sg_keep_blobs);",
    )
    .during("deleting unreferenced values")?;
    Ok(())
}

/// Every value row and log part the remaining checkpoints refer to. A checkpoint's own
/// record (its delta, or a whole record) names the values its step set; every value a
/// checkpoint holds was set by it or by an ancestor, and ancestors remain (pruning makes a
/// kept checkpoint whole before its parents go). So the references of each row's own record,
/// read one row at a time and without rebuilding any state, are what is live; each log is
/// walked once, to the most parts any row needs. (A file without the holder index: every row
/// of the file is read.)
fn live_values(conn: &Connection) -> Result<Refs, CheckpointError> {
    let mut refs = Refs::default();
    refs.add_rows(
        conn,
        "SELECT thread, id, body_hash, body FROM sg_checkpoints",
        [],
    )?;
    // Without every row's references nothing can be told unused.
    if let Some(e) = refs.damaged.take() {
        return Err(e);
    }
    refs.close(conn)
}
