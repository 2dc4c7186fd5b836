//! A put: checking the parent, storing the step's new values (value rows, list log parts,
//! small values in the record) and inserting the checkpoint row with its record.

use std::sync::Arc;

use rusqlite::{params, Connection, ErrorCode, OptionalExtension};

use super::read::{load_record, newest_id};
use super::record::{encode_record, StateRecord, StoredRecord, ValueRef, INLINE_MAX};
use super::schema::SqliteOptions;
use super::sql::{id_bytes, SqlResult};
use super::writer::memory::{GroupRecords, KnownHead, WriterMemory};
use super::writer::StoredPut;
use crate::envelope::{seal, CODEC_BINCODE, CODEC_JSON};
use crate::{CheckpointError, FieldPart, FieldWrite, PutCheckpoint, Source, StorageError};

/// Store one checkpoint in the open transaction.
pub(crate) fn put(
    conn: &Connection,
    records: &mut GroupRecords<'_>,
    options: &SqliteOptions,
    stored: &StoredPut,
) -> Result<(), CheckpointError> {
    let p = &stored.put;
    let cp = &p.checkpoint;
    let key = (p.thread.as_str().to_owned(), p.ns.as_str().to_owned());
    let known = records.memory.heads.get(&key).copied();
    let extends_head = matches!(cp.source, Source::Loop | Source::Input);
    if extends_head {
        check_parent_is_head(conn, p, known)?;
    }
    let parent = Parent::load(conn, records, p, known)?;
    let mut record = StateRecord {
        control: Arc::clone(&stored.control),
        fields: parent.record.fields.clone(),
    };
    let values = Values {
        conn,
        thread: p.thread.as_str(),
    };
    store_values(values, records.memory, options, &p.writes, &mut record)?;
    super::shapes::note(conn, records.memory, &key, p)?;
    crate::failpoint::hit("put.after_values");
    let (row_record, depth) = parent.row_record(&record, options);
    let seq = insert_row(conn, p, parent.seq, depth, &row_record)?;
    settle_parent(conn, records.memory, &key, p)?;
    crate::failpoint::hit("put.after_row");
    records.add(seq, Arc::new(record));
    // Remember the new head when it is known to be one (ids are time-ordered).
    let newest = match known {
        Some(head) => cp.id > head.id,
        None => extends_head,
    };
    if newest {
        let head = KnownHead {
            id: cp.id,
            seq,
            depth,
        };
        records.memory.heads.insert(key, head);
    }
    Ok(())
}

/// A checkpoint that extends its thread must have the thread's head as its parent:
/// otherwise another runner moved the thread ([`CheckpointError::StaleParent`]).
fn check_parent_is_head(
    conn: &Connection,
    p: &PutCheckpoint,
    known: Option<KnownHead>,
) -> Result<(), CheckpointError> {
    let found = match known {
        Some(head) => Some(head.id),
        None => newest_id(conn, &p.thread, &p.ns)?,
    };
    if found != p.checkpoint.parent {
        return Err(CheckpointError::StaleParent {
            thread: p.thread.clone(),
            ns: p.ns.clone(),
            expected: p.checkpoint.parent,
            found,
        });
    }
    Ok(())
}

/// The parent a new checkpoint row builds on.
struct Parent {
    /// Its row (`None`: the checkpoint has no parent).
    seq: Option<i64>,
    /// Its depth (`-1` without a parent).
    depth: i64,
    /// Its whole record (empty without a parent).
    record: Arc<StateRecord>,
}

impl Parent {
    fn load(
        conn: &Connection,
        records: &GroupRecords<'_>,
        p: &PutCheckpoint,
        known: Option<KnownHead>,
    ) -> Result<Parent, CheckpointError> {
        let Some(parent) = p.checkpoint.parent else {
            return Ok(Parent {
                seq: None,
                depth: -1,
                record: Arc::new(StateRecord::default()),
            });
        };
        let thread = p.thread.as_str();
        let row = match known.filter(|h| h.id == parent) {
            Some(head) => Some((head.seq, head.depth)),
            None => conn
                .prepare_cached(
                    "SELECT seq, depth FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3",
                )
                .during("preparing the parent lookup")?
                .query_row(params![thread, p.ns.as_str(), id_bytes(parent)], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
                .during("looking up the parent checkpoint")?,
        };
        let (seq, depth) = row.ok_or_else(|| CheckpointError::NotFound {
            thread: p.thread.clone(),
            ns: p.ns.clone(),
            id: parent,
        })?;
        let record = load_record(conn, &|s| records.lookup(s), seq, thread)?;
        Ok(Parent {
            seq: Some(seq),
            depth,
            record,
        })
    }

    /// What the new row stores for `record`, and the row's depth: the change since this
    /// parent, or the whole record (without a parent, every
    /// [`full_every`](SqliteOptions::full_every) rows, or when an entry disappeared).
    fn row_record(&self, record: &StateRecord, options: &SqliteOptions) -> (StoredRecord, i64) {
        let depth = self.depth + 1;
        if self.seq.is_some() && depth < i64::from(options.full_every) {
            if let Some(delta) = record.delta_from(&self.record) {
                return (delta, depth);
            }
        }
        (record.to_whole_record(), 0)
    }
}

/// Where a put stores values: the connection, and the thread that will hold them.
#[derive(Clone, Copy)]
struct Values<'a> {
    conn: &'a Connection,
    thread: &'a str,
}

impl Values<'_> {
    /// Note that the put's thread holds row `id` of `kind`, in a file with the holder index.
    fn hold(self, memory: &WriterMemory, kind: i64, id: i64) -> Result<(), CheckpointError> {
        if memory.holders {
            super::holders::hold(self.conn, kind, id, self.thread)?;
        }
        Ok(())
    }
}

/// Store the step's changed values and point `record`'s fields at them.
fn store_values(
    at: Values<'_>,
    memory: &mut WriterMemory,
    options: &SqliteOptions,
    writes: &[FieldWrite],
    record: &mut StateRecord,
) -> Result<(), CheckpointError> {
    for w in writes {
        match &w.part {
            FieldPart::Whole(bytes) => {
                check_size(bytes.len(), options)?;
                let r = if memory.inline && bytes.len() <= INLINE_MAX {
                    ValueRef::Inline(Arc::from(bytes.as_slice()))
                } else {
                    ValueRef::Blob(upsert_blob(at, memory, bytes)?)
                };
                record.set_field(&w.field, r);
            }
            FieldPart::Tail(bytes) => {
                check_size(bytes.len(), options)?;
                let prev = record.fields.get(w.field.as_str()).cloned();
                let r = append_log(at, memory, prev, bytes)?;
                record.set_field(&w.field, r);
            }
        }
    }
    Ok(())
}

/// Insert the checkpoint row; its row id.
fn insert_row(
    conn: &Connection,
    p: &PutCheckpoint,
    parent_seq: Option<i64>,
    depth: i64,
    record: &StoredRecord,
) -> Result<i64, CheckpointError> {
    let cp = &p.checkpoint;
    let bytes =
        encode_record(record).map_err(|e| StorageError::new("encoding a checkpoint record", e))?;
    let (env, hash) = seal(CODEC_BINCODE, &bytes);
    let metadata = serde_json::to_string(&cp.metadata)
        .map_err(|e| StorageError::new("encoding checkpoint metadata", e))?;
    let created = i64::try_from(cp.created_at_ms).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "INSERT INTO sg_checkpoints (thread, ns, id, parent, parent_seq, step, source, created_at, metadata, depth, body_hash, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .during("preparing the checkpoint insert")?
    .execute(params![
        p.thread.as_str(),
        p.ns.as_str(),
        id_bytes(cp.id),
        cp.parent.map(id_bytes),
        parent_seq,
        cp.step,
        cp.source.as_str(),
        created,
        metadata,
        depth,
        &hash[..],
        env
    ])
    .map_err(|e| match e.sqlite_error_code() {
        // The id is in the thread already: another runner stored this very checkpoint.
        Some(ErrorCode::ConstraintViolation) => CheckpointError::StaleParent {
            thread: p.thread.clone(),
            ns: p.ns.clone(),
            expected: cp.parent,
            found: Some(cp.id),
        },
        _ => StorageError::new("inserting a checkpoint row", e).into(),
    })?;
    Ok(conn.last_insert_rowid())
}

fn check_size(len: usize, options: &SqliteOptions) -> Result<(), CheckpointError> {
    if len > options.max_value_bytes {
        Err(CheckpointError::BlobTooLarge {
            size: len,
            limit: options.max_value_bytes,
        })
    } else {
        Ok(())
    }
}

/// The row of a value: the one already stored with its hash, or a new one; held by the
/// put's thread.
fn upsert_blob(
    at: Values<'_>,
    memory: &mut WriterMemory,
    payload: &[u8],
) -> Result<i64, CheckpointError> {
    let (env, hash) = seal(CODEC_JSON, payload);
    if let Some(&id) = memory.blobs.get(&hash) {
        at.hold(memory, super::holders::BLOB, id)?;
        return Ok(id);
    }
    let conn = at.conn;
    let inserted = conn
        .prepare_cached("INSERT OR IGNORE INTO sg_blobs (hash, data) VALUES (?1, ?2)")
        .during("preparing the value insert")?
        .execute(params![&hash[..], env])
        .during("inserting a value row")?;
    let id = if inserted == 1 {
        conn.last_insert_rowid()
    } else {
        // An identical value is stored already: reuse it.
        conn.prepare_cached("SELECT id FROM sg_blobs WHERE hash = ?1")
            .during("preparing the value lookup")?
            .query_row([&hash[..]], |r| r.get(0))
            .during("looking up a stored value")?
    };
    memory.remember_blob(hash, id);
    at.hold(memory, super::holders::BLOB, id)?;
    Ok(id)
}

/// A new log, held by the put's thread.
fn new_log(
    at: Values<'_>,
    memory: &WriterMemory,
    base: Option<(i64, i64)>,
    tip: i64,
) -> Result<i64, CheckpointError> {
    let conn = at.conn;
    conn.prepare_cached("INSERT INTO sg_logs (base_log, base_parts, tip) VALUES (?1, ?2, ?3)")
        .during("preparing the log insert")?
        .execute(params![base.map(|b| b.0), base.map_or(0, |b| b.1), tip])
        .during("inserting a log row")?;
    let log = conn.last_insert_rowid();
    at.hold(memory, super::holders::LOG, log)?;
    Ok(log)
}

/// A log part's bytes kept in its own row: the hash and the envelope.
type PartBytes<'a> = (&'a [u8], &'a [u8]);

/// Insert part `part` of `log`; `false` if the log already has that part (another branch
/// appended there first).
fn insert_part(
    conn: &Connection,
    log: i64,
    part: i64,
    blob: Option<i64>,
    inline: Option<PartBytes<'_>>,
) -> Result<bool, CheckpointError> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO sg_log_parts (log, part, blob, hash, data) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT DO NOTHING",
        )
        .during("preparing the log part insert")?
        .execute(params![
            log,
            part,
            blob,
            inline.map(|i| i.0),
            inline.map(|i| i.1)
        ])
        .during("inserting a log part")?;
    Ok(inserted == 1)
}

/// Append `payload` (a JSON array of new items) to the list field whose current value is
/// `prev`. If another branch already appended to that log at the same place (its part exists:
/// the primary key says so), this branch forks into a new log based on `prev`.
fn append_log(
    at: Values<'_>,
    memory: &mut WriterMemory,
    prev: Option<ValueRef>,
    payload: &[u8],
) -> Result<ValueRef, CheckpointError> {
    let conn = at.conn;
    let (env, hash) = seal(CODEC_JSON, payload);
    let inline = Some((&hash[..], &env[..]));
    // A new log after a whole value: part 0 refers to the value's row, part 1 is the payload.
    let after_value = |memory: &mut WriterMemory, blob: i64| -> Result<ValueRef, CheckpointError> {
        let log = new_log(at, memory, None, 2)?;
        own_part(conn, log, 0, Some(blob), None)?;
        own_part(conn, log, 1, None, inline)?;
        Ok(ValueRef::Log { log, parts: 2 })
    };
    match prev {
        Some(ValueRef::Log { log, parts }) => {
            if insert_part(conn, log, parts, None, inline)? {
                // `tip` stays current for readers that use it (and for builds that decided
                // forks by it); this writer decides by the primary key.
                conn.prepare_cached("UPDATE sg_logs SET tip = ?2 WHERE id = ?1 AND tip < ?2")
                    .during("preparing the log tip update")?
                    .execute(params![log, parts + 1])
                    .during("updating a log's tip")?;
                return Ok(ValueRef::Log {
                    log,
                    parts: parts + 1,
                });
            }
            let fork = new_log(at, memory, Some((log, parts)), parts + 1)?;
            own_part(conn, fork, parts, None, inline)?;
            Ok(ValueRef::Log {
                log: fork,
                parts: parts + 1,
            })
        }
        Some(ValueRef::Blob(blob)) => after_value(memory, blob),
        // A value kept in the record gets its row first (a log part refers to a row).
        Some(ValueRef::Inline(value)) => {
            let blob = upsert_blob(at, memory, &value)?;
            after_value(memory, blob)
        }
        None => {
            let log = new_log(at, memory, None, 1)?;
            own_part(conn, log, 0, None, inline)?;
            Ok(ValueRef::Log { log, parts: 1 })
        }
    }
}

/// A part that a log made in this transaction already has: the writer's own bookkeeping
/// went wrong.
#[derive(Debug, thiserror::Error)]
#[error("part {part} of the new log {log} exists already")]
struct PartExists {
    log: i64,
    part: i64,
}

/// Insert a part of a log made in this transaction (no one else can have it).
fn own_part(
    conn: &Connection,
    log: i64,
    part: i64,
    blob: Option<i64>,
    inline: Option<PartBytes<'_>>,
) -> Result<(), CheckpointError> {
    if insert_part(conn, log, part, blob, inline)? {
        Ok(())
    } else {
        Err(StorageError::new("appending to a new log", PartExists { log, part }).into())
    }
}

/// A step's checkpoint settles its parent's step: the task outputs this writer recorded
/// against the parent while the step ran are in the new checkpoint now, and are dropped
/// (errors, interrupts and resume values stay: they are the step's history).
fn settle_parent(
    conn: &Connection,
    memory: &mut WriterMemory,
    key: &(String, String),
    p: &PutCheckpoint,
) -> Result<(), CheckpointError> {
    if memory.recorded_outputs.is_empty() || p.checkpoint.source != Source::Loop {
        return Ok(());
    }
    let Some(parent) = p.checkpoint.parent else {
        return Ok(());
    };
    if memory.recorded_outputs.get(key) != Some(&parent) {
        return Ok(());
    }
    memory.recorded_outputs.remove(key);
    super::pending::drop_outputs(conn, &p.thread, &p.ns, parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(seq: Option<i64>, depth: i64, record: &StateRecord) -> Parent {
        Parent {
            seq,
            depth,
            record: Arc::new(record.clone()),
        }
    }

    #[test]
    fn a_row_stores_the_change_until_a_whole_record_is_due() -> Result<(), &'static str> {
        let options = SqliteOptions::default();
        let mut before = StateRecord::default();
        before.set_field("a", ValueRef::Blob(1));
        let mut after = before.clone();
        after.set_field("b", ValueRef::Blob(2));

        let (stored, depth) = parent(Some(7), 3, &before).row_record(&after, &options);
        assert_eq!((stored.full, depth, stored.fields.len()), (false, 4, 1));

        // Without a parent, and every `full_every` rows, the row holds the whole record.
        let (stored, depth) =
            parent(None, -1, &StateRecord::default()).row_record(&after, &options);
        assert_eq!((stored.full, depth), (true, 0));
        let last = i64::from(options.full_every) - 1;
        let (stored, depth) = parent(Some(7), last, &before).row_record(&after, &options);
        assert_eq!((stored.full, depth, stored.fields.len()), (true, 0, 2));

        // A field that disappeared can only be said by a whole record.
        let (stored, depth) = parent(Some(7), 0, &after).row_record(&before, &options);
        assert_eq!((stored.full, depth), (true, 0));
        Ok(())
    }

    #[test]
    fn a_value_over_the_cap_is_refused() {
        let options = SqliteOptions {
            max_value_bytes: 4,
            ..SqliteOptions::default()
        };
        assert!(check_size(4, &options).is_ok());
        assert!(matches!(
            check_size(5, &options),
            Err(CheckpointError::BlobTooLarge { size: 5, limit: 4 })
        ));
    }
}
