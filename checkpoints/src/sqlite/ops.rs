//! The SQL of each operation. Every statement binds its parameters; none is formatted in.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};

use super::record::{
    decode_record, encode_record, StateRecord, StoredRecord, ValueRef, INLINE_MAX,
};
use super::schema::{storage, SqliteOptions};
use super::wal::WalRoom;
use super::{Cache, Op, Reply, StoredPut};
use crate::checkpoint::whole_first;
use crate::envelope::{hex, open, seal, CODEC_BINCODE, CODEC_JSON};
use crate::{
    validate_filter_key, Checkpoint, CheckpointError, CheckpointId, FieldPart, ListOptions,
    LoadedCheckpoint, Namespace, PendingWrite, Retention, Source, StepChanges, TaskId, ThreadId,
    ThreadInfo, ThreadStatus, WriteKind,
};

pub(crate) enum GroupResult {
    Committed(Vec<Result<Reply, CheckpointError>>),
    /// The database was locked: nothing was done; try the same operations again.
    Busy(Vec<Op>),
    Failed(CheckpointError, usize),
}

fn busy(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code()
        .is_some_and(|c| matches!(c, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

fn busy_checkpoint_error(e: &CheckpointError) -> bool {
    match e {
        CheckpointError::Storage(inner) => {
            inner.downcast_ref::<rusqlite::Error>().is_some_and(busy)
        }
        _ => false,
    }
}

/// StateRecord records computed inside the current group, published to the shared cache on commit.
struct Local<'a> {
    shared: &'a Mutex<Cache>,
    added: Vec<(i64, Arc<StateRecord>)>,
    writer: &'a mut WriterState,
}

/// What the writer connection remembers between transactions: each thread's head and the
/// row of each value it stored, as its own commits left them. Forgotten whenever another
/// connection commits (`PRAGMA data_version` moves) or an operation of ours is rolled back or
/// deletes. And the room it keeps in the WAL.
pub(crate) struct WriterState {
    data_version: Option<i64>,
    /// `(thread, ns)` → head id, its row, its depth.
    heads: HashMap<(String, String), (CheckpointId, i64, i64)>,
    /// Value hash → its `sg_blobs` row.
    blobs: HashMap<[u8; 32], i64>,
    /// Extends the WAL before a transaction writes (see [`WalRoom`]).
    room: WalRoom,
    /// Whether whole values of up to [`INLINE_MAX`] bytes are kept in the record: in a
    /// format-2 file; never in a format-1 file (even an empty value), which this build keeps
    /// readable by older builds.
    inline: bool,
}

/// Most value rows the writer remembers (then it starts over).
const BLOB_MEMORY: usize = 1 << 16;

impl WriterState {
    pub(crate) fn new(conn: &Connection, options: &SqliteOptions, format: u32) -> WriterState {
        WriterState {
            data_version: None,
            heads: HashMap::new(),
            blobs: HashMap::new(),
            room: WalRoom::new(conn, options),
            inline: format >= 2,
        }
    }

    /// Give the WAL its room in a transaction of its own (the writer does this when it
    /// starts, so that the first commits do not wait for it). Best effort: if another
    /// connection holds the write lock, it does not wait (the first group's transaction makes
    /// the room instead).
    pub(crate) fn make_room(&mut self, conn: &Connection, options: &SqliteOptions) {
        if !self.room.wanted() || conn.busy_timeout(std::time::Duration::ZERO).is_err() {
            return;
        }
        if conn.execute_batch("BEGIN IMMEDIATE").is_ok() {
            self.room.ensure();
            let _ = conn.execute_batch("COMMIT");
        }
        let _ = conn.busy_timeout(options.busy_timeout);
    }

    fn forget(&mut self) {
        self.heads.clear();
        self.blobs.clear();
    }
}

impl Local<'_> {
    fn lookup(&self, seq: i64) -> Option<Arc<StateRecord>> {
        self.added
            .iter()
            .rev()
            .find(|(s, _)| *s == seq)
            .map(|(_, f)| f.clone())
            .or_else(|| {
                self.shared
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(seq)
            })
    }
}

/// Run `ops` in one transaction.
///
/// Most groups succeed whole, so they first run without a savepoint per op (each savepoint
/// costs a sub-journal of the pages it touches). If an op fails, that transaction is rolled
/// back and the group runs again with a savepoint each, so the failure stays that op's alone
/// (a single op needs no second run: rolling back its transaction isolates it). If SQLite
/// itself rolls a transaction back (a full disk, an I/O error), the whole group fails with
/// that error and nothing of it is committed.
///
/// Before committing, the group asks `more` for operations that arrived meanwhile and runs
/// them in the same transaction, until it answers `None` (see `writer_loop`: the writer keeps
/// a group open while a run says more checkpoints follow). A group run again with savepoints
/// takes no more.
pub(crate) fn run_group(
    conn: &mut Connection,
    cache: &Mutex<Cache>,
    writer: &mut WriterState,
    options: &SqliteOptions,
    ops: Vec<Op>,
    more: &mut dyn FnMut() -> Option<Vec<Op>>,
) -> GroupResult {
    let ops = match run_group_in(conn, cache, writer, options, ops, false, more) {
        Ok(done) => return done,
        Err(ops) => ops,
    };
    match run_group_in(conn, cache, writer, options, ops, true, &mut || None) {
        Ok(done) => done,
        Err(ops) => GroupResult::Failed(
            CheckpointError::Storage("a group failed without an error".into()),
            ops.len(),
        ),
    }
}

/// One attempt at a group: with `isolate`, a savepoint per op; without, the first failing op
/// rolls the whole transaction back and the ops come back as `Err` to be run isolated.
fn run_group_in(
    conn: &mut Connection,
    cache: &Mutex<Cache>,
    writer: &mut WriterState,
    options: &SqliteOptions,
    mut ops: Vec<Op>,
    isolate: bool,
    more: &mut dyn FnMut() -> Option<Vec<Op>>,
) -> Result<GroupResult, Vec<Op>> {
    crate::failpoint::hit("group.before_begin");
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) if busy(&e) => return Ok(GroupResult::Busy(ops)),
        Err(e) => return Ok(GroupResult::Failed(storage(e), ops.len())),
    };
    // Holding the write lock, before anything is written.
    writer.room.ensure();
    // Another connection committed since our last transaction: what we remember may be stale.
    let version = tx
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut st| st.query_row([], |r| r.get::<_, i64>(0)));
    match version {
        Ok(v) if writer.data_version == Some(v) => {}
        Ok(v) => {
            writer.forget();
            writer.data_version = Some(v);
        }
        Err(e) => return Ok(GroupResult::Failed(storage(e), ops.len())),
    }
    let mut local = Local {
        shared: cache,
        added: Vec::new(),
        writer,
    };
    let mut results = Vec::with_capacity(ops.len());
    let mut i = 0;
    loop {
        if i == ops.len() {
            match more() {
                Some(extra) => {
                    ops.extend(extra);
                    continue;
                }
                None => break,
            }
        }
        let n = ops.len();
        let op = &ops[i];
        i += 1;
        if !isolate {
            match run_op(&tx, &mut local, options, op) {
                Ok(reply) => results.push(Ok(reply)),
                Err(e) => {
                    local.writer.forget();
                    drop(tx);
                    return if busy_checkpoint_error(&e) {
                        Ok(GroupResult::Busy(ops))
                    } else if n == 1 {
                        // Alone in its transaction: rolling it back isolates the failure.
                        Ok(GroupResult::Committed(vec![Err(e)]))
                    } else {
                        // Run the group again with a savepoint per op, so only the failing op
                        // fails (unless SQLite rolls the whole transaction back again).
                        Err(ops)
                    };
                }
            }
            continue;
        }
        let mark = local.added.len();
        let mut sp = match tx.savepoint() {
            Ok(sp) => sp,
            Err(e) => {
                // The whole transaction is undone: nothing it stored may be remembered.
                local.writer.forget();
                return Ok(GroupResult::Failed(storage(e), n));
            }
        };
        let r = run_op(&sp, &mut local, options, op);
        match r {
            Ok(reply) => {
                if let Err(e) = sp.commit() {
                    local.writer.forget();
                    return Ok(GroupResult::Failed(storage(e), n));
                }
                results.push(Ok(reply));
            }
            Err(e) if busy_checkpoint_error(&e) => {
                local.writer.forget();
                drop(sp);
                drop(tx);
                return Ok(GroupResult::Busy(ops));
            }
            Err(e) => {
                local.writer.forget();
                if sp.is_autocommit() {
                    // SQLite rolled the whole transaction back (a full disk, I/O): the ops
                    // before this one are gone too, so the group fails with this error.
                    drop(sp);
                    drop(tx);
                    return Ok(GroupResult::Failed(e, n));
                }
                if let Err(undo) = sp.rollback() {
                    // The op's partial writes could not be undone: commit nothing.
                    drop(sp);
                    drop(tx);
                    return Ok(GroupResult::Failed(
                        CheckpointError::Storage(
                            format!("{e}; undoing it failed too: {undo}").into(),
                        ),
                        n,
                    ));
                }
                drop(sp);
                local.added.truncate(mark);
                results.push(Err(e));
            }
        }
    }
    crate::failpoint::hit("group.before_commit");
    let committed = tx.commit();
    if committed.is_err() {
        local.writer.forget();
    } else {
        crate::failpoint::hit("group.after_commit");
    }
    match committed {
        Ok(()) => {
            let mut shared = cache.lock().unwrap_or_else(|p| p.into_inner());
            for (seq, full) in local.added {
                shared.insert(seq, full);
            }
            Ok(GroupResult::Committed(results))
        }
        Err(e) if busy(&e) => Ok(GroupResult::Busy(ops)),
        Err(e) => Ok(GroupResult::Failed(storage(e), ops.len())),
    }
}

fn run_op(
    conn: &Connection,
    local: &mut Local<'_>,
    options: &SqliteOptions,
    op: &Op,
) -> Result<Reply, CheckpointError> {
    if !matches!(op, Op::Put(_) | Op::PutWrites { .. } | Op::Flush) {
        // Deleting, copying and pruning move heads and values behind what we remember.
        local.writer.forget();
    }
    match op {
        Op::Put(p) => put(conn, local, options, p).map(|()| Reply::Done),
        Op::PutWrites {
            thread,
            ns,
            id,
            writes,
        } => put_writes(conn, thread, ns, *id, writes).map(|()| Reply::Done),
        Op::DeleteThread(thread) => {
            conn.execute(
                "DELETE FROM sg_checkpoints WHERE thread = ?1",
                [thread.as_str()],
            )
            .map_err(storage)?;
            conn.execute("DELETE FROM sg_writes WHERE thread = ?1", [thread.as_str()])
                .map_err(storage)?;
            local
                .shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
            gc(conn)?;
            Ok(Reply::Done)
        }
        Op::CopyThread { from, to } => copy_thread(conn, from, to).map(|()| Reply::Done),
        Op::Flush => Ok(Reply::Done),
        Op::Prune { thread, retention } => {
            let n = prune(conn, local, thread, *retention)?;
            Ok(Reply::Count(n))
        }
    }
}

fn id_bytes(id: CheckpointId) -> [u8; 16] {
    id.as_u128().to_be_bytes()
}

fn id_from(bytes: &[u8], thread: &str) -> Result<CheckpointId, CheckpointError> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| CheckpointError::Integrity {
        thread: thread.to_string(),
        checkpoint: "-".to_string(),
        blob: "sg_checkpoints.id".to_string(),
        detail: format!("checkpoint id of {} bytes", bytes.len()),
    })?;
    Ok(CheckpointId::from_u128(u128::from_be_bytes(arr)))
}

fn integrity(
    thread: &str,
    checkpoint: &str,
    blob: impl Into<String>,
    detail: impl Into<String>,
) -> CheckpointError {
    CheckpointError::Integrity {
        thread: thread.to_string(),
        checkpoint: checkpoint.to_string(),
        blob: blob.into(),
        detail: detail.into(),
    }
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

fn head(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Option<CheckpointId>, CheckpointError> {
    let bytes: Option<Vec<u8>> = conn
        .prepare_cached(
            "SELECT id FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 ORDER BY id DESC LIMIT 1",
        )
        .map_err(storage)?
        .query_row(params![thread.as_str(), ns.as_str()], |r| r.get(0))
        .optional()
        .map_err(storage)?;
    bytes.map(|b| id_from(&b, thread.as_str())).transpose()
}

fn put(
    conn: &Connection,
    local: &mut Local<'_>,
    options: &SqliteOptions,
    stored: &StoredPut,
) -> Result<(), CheckpointError> {
    let p = &stored.put;
    let cp = &p.checkpoint;
    let thread = p.thread.as_str();
    let key = (thread.to_string(), p.ns.as_str().to_string());
    let cached_head = local.writer.heads.get(&key).copied();
    let extends_head = matches!(cp.source, Source::Loop | Source::Input);
    if extends_head {
        let found = match cached_head {
            Some((id, _, _)) => Some(id),
            None => head(conn, &p.thread, &p.ns)?,
        };
        if found != cp.parent {
            return Err(CheckpointError::StaleParent {
                thread: p.thread.clone(),
                ns: p.ns.clone(),
                expected: cp.parent,
                found,
            });
        }
    }
    let (parent_seq, parent_depth, parent_full) = match cp.parent {
        Some(parent) => {
            let known = cached_head.filter(|h| h.0 == parent).map(|h| (h.1, h.2));
            let row: Option<(i64, i64)> = match known {
                Some(k) => Some(k),
                None => conn
                .prepare_cached("SELECT seq, depth FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3")
                .map_err(storage)?
                .query_row(params![thread, p.ns.as_str(), id_bytes(parent)], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(storage)?,
            };
            let (seq, depth) = row.ok_or_else(|| CheckpointError::NotFound {
                thread: p.thread.clone(),
                ns: p.ns.clone(),
                id: parent,
            })?;
            let full = load_full(conn, &|s| local.lookup(s), seq, thread)?;
            (Some(seq), depth, full)
        }
        None => (None, -1, Arc::new(StateRecord::default())),
    };
    let mut full = StateRecord {
        control: Arc::clone(&stored.control),
        fields: parent_full.fields.clone(),
    };
    for w in &p.writes {
        match &w.part {
            FieldPart::Whole(bytes) => {
                check_size(bytes.len(), options)?;
                let r = if local.writer.inline && bytes.len() <= INLINE_MAX {
                    ValueRef::Inline(Arc::from(bytes.as_slice()))
                } else {
                    ValueRef::Blob(upsert_blob(conn, &mut local.writer.blobs, bytes)?)
                };
                full.set_field(&w.field, r);
            }
            FieldPart::Tail(bytes) => {
                check_size(bytes.len(), options)?;
                let prev = full.fields.get(w.field.as_str()).cloned();
                let r = append_log(conn, &mut local.writer.blobs, prev, bytes)?;
                full.set_field(&w.field, r);
            }
        }
    }
    crate::failpoint::hit("put.after_values");
    let depth = parent_depth + 1;
    let (body, depth) = match (parent_seq, depth >= i64::from(options.full_every)) {
        (Some(_), false) => match full.delta_from(&parent_full) {
            Some(delta) => (delta, depth),
            None => (full.to_whole_record(), 0),
        },
        _ => (full.to_whole_record(), 0),
    };
    let bytes = encode_record(&body).map_err(|e| CheckpointError::Storage(Box::new(e)))?;
    let (env, hash) = seal(CODEC_BINCODE, &bytes);
    let metadata =
        serde_json::to_string(&cp.metadata).map_err(|e| CheckpointError::Storage(Box::new(e)))?;
    let created = i64::try_from(cp.created_at_ms).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "INSERT INTO sg_checkpoints (thread, ns, id, parent, parent_seq, step, source, created_at, metadata, depth, body_hash, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .map_err(storage)?
    .execute(params![
        thread,
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
        Some(ErrorCode::ConstraintViolation) => CheckpointError::StaleParent {
            thread: p.thread.clone(),
            ns: p.ns.clone(),
            expected: cp.parent,
            found: Some(cp.id),
        },
        _ => storage(e),
    })?;
    let seq = conn.last_insert_rowid();
    crate::failpoint::hit("put.after_row");
    local.added.push((seq, Arc::new(full)));
    // Remember the new head when it is known to be one (ids are time-ordered).
    let newest = match cached_head {
        Some((h, _, _)) => cp.id > h,
        None => extends_head,
    };
    if newest {
        local.writer.heads.insert(key, (cp.id, seq, depth));
    }
    Ok(())
}

/// The row of a value: the one already stored with its hash, or a new one.
fn upsert_blob(
    conn: &Connection,
    known: &mut HashMap<[u8; 32], i64>,
    payload: &[u8],
) -> Result<i64, CheckpointError> {
    let (env, hash) = seal(CODEC_JSON, payload);
    if let Some(id) = known.get(&hash) {
        return Ok(*id);
    }
    let inserted = conn
        .prepare_cached("INSERT OR IGNORE INTO sg_blobs (hash, data) VALUES (?1, ?2)")
        .map_err(storage)?
        .execute(params![&hash[..], env])
        .map_err(storage)?;
    let id = if inserted == 1 {
        conn.last_insert_rowid()
    } else {
        // An identical value is stored already: reuse it.
        conn.prepare_cached("SELECT id FROM sg_blobs WHERE hash = ?1")
            .map_err(storage)?
            .query_row([&hash[..]], |r| r.get(0))
            .map_err(storage)?
    };
    if known.len() >= BLOB_MEMORY {
        known.clear();
    }
    known.insert(hash, id);
    Ok(id)
}

fn new_log(conn: &Connection, base: Option<(i64, i64)>, tip: i64) -> Result<i64, CheckpointError> {
    conn.prepare_cached("INSERT INTO sg_logs (base_log, base_parts, tip) VALUES (?1, ?2, ?3)")
        .map_err(storage)?
        .execute(params![base.map(|b| b.0), base.map_or(0, |b| b.1), tip])
        .map_err(storage)?;
    Ok(conn.last_insert_rowid())
}

/// Insert part `part` of `log`; `false` if the log already has that part (another branch
/// appended there first).
fn insert_part(
    conn: &Connection,
    log: i64,
    part: i64,
    blob: Option<i64>,
    inline: Option<(&[u8], &[u8])>,
) -> Result<bool, CheckpointError> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO sg_log_parts (log, part, blob, hash, data) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT DO NOTHING",
        )
        .map_err(storage)?
        .execute(params![
            log,
            part,
            blob,
            inline.map(|i| i.0),
            inline.map(|i| i.1)
        ])
        .map_err(storage)?;
    Ok(inserted == 1)
}

/// Append `payload` (a JSON array of new items) to the list field whose current value is
/// `prev`. If another branch already appended to that log at the same place (its part exists:
/// the primary key says so), this branch forks into a new log based on `prev`.
fn append_log(
    conn: &Connection,
    blobs: &mut HashMap<[u8; 32], i64>,
    prev: Option<ValueRef>,
    payload: &[u8],
) -> Result<ValueRef, CheckpointError> {
    let (env, hash) = seal(CODEC_JSON, payload);
    let inline = Some((&hash[..], &env[..]));
    // A new log after a whole value: part 0 refers to the value's row, part 1 is the payload.
    let after_value = |blob: i64| -> Result<ValueRef, CheckpointError> {
        let log = new_log(conn, None, 2)?;
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
                    .map_err(storage)?
                    .execute(params![log, parts + 1])
                    .map_err(storage)?;
                return Ok(ValueRef::Log {
                    log,
                    parts: parts + 1,
                });
            }
            let fork = new_log(conn, Some((log, parts)), parts + 1)?;
            own_part(conn, fork, parts, None, inline)?;
            Ok(ValueRef::Log {
                log: fork,
                parts: parts + 1,
            })
        }
        Some(ValueRef::Blob(blob)) => after_value(blob),
        // A value kept in the record gets its row first (a log part refers to a row).
        Some(ValueRef::Inline(value)) => after_value(upsert_blob(conn, blobs, &value)?),
        None => {
            let log = new_log(conn, None, 1)?;
            own_part(conn, log, 0, None, inline)?;
            Ok(ValueRef::Log { log, parts: 1 })
        }
    }
}

/// Insert a part of a log made in this transaction (no one else can have it).
fn own_part(
    conn: &Connection,
    log: i64,
    part: i64,
    blob: Option<i64>,
    inline: Option<(&[u8], &[u8])>,
) -> Result<(), CheckpointError> {
    if insert_part(conn, log, part, blob, inline)? {
        Ok(())
    } else {
        Err(CheckpointError::Storage(
            format!("part {part} of the new log {log} exists already").into(),
        ))
    }
}

/// A checkpoint row's parent, id, body hash and body.
type BodyRow = (Option<i64>, Vec<u8>, Vec<u8>, Vec<u8>);

/// The full record of checkpoint row `seq`: its body applied on its ancestors' (up to the
/// nearest full one or cached one).
fn load_full(
    conn: &Connection,
    lookup: &dyn Fn(i64) -> Option<Arc<StateRecord>>,
    seq: i64,
    thread: &str,
) -> Result<Arc<StateRecord>, CheckpointError> {
    let mut chain: Vec<StoredRecord> = Vec::new();
    let mut cur = seq;
    let base = loop {
        if let Some(f) = lookup(cur) {
            break f;
        }
        let row: Option<BodyRow> = conn
            .prepare_cached(
                "SELECT parent_seq, id, body_hash, body FROM sg_checkpoints WHERE seq = ?1",
            )
            .map_err(storage)?
            .query_row([cur], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()
            .map_err(storage)?;
        let Some((parent_seq, id, hash, env)) = row else {
            return Err(integrity(
                thread,
                "-",
                format!("sg_checkpoints row {cur}"),
                "a delta record's parent row is missing",
            ));
        };
        let cp = hex(&id);
        let payload =
            open(&env, CODEC_BINCODE, &hash).map_err(|d| integrity(thread, &cp, hex(&hash), d))?;
        let body = decode_record(payload).map_err(|d| integrity(thread, &cp, hex(&hash), d))?;
        let full = body.full;
        chain.push(body);
        if full {
            break Arc::new(StateRecord::default());
        }
        if chain.len() > 100_000 {
            return Err(integrity(
                thread,
                &cp,
                hex(&hash),
                "delta chain does not end",
            ));
        }
        cur = parent_seq
            .ok_or_else(|| integrity(thread, &cp, hex(&hash), "a delta record without parent"))?;
    };
    if chain.is_empty() {
        return Ok(base);
    }
    let mut full = (*base).clone();
    for body in chain.into_iter().rev() {
        full.apply(body);
    }
    Ok(Arc::new(full))
}

fn load_field(
    conn: &Connection,
    thread: &str,
    cp: &str,
    field: &str,
    r: &ValueRef,
) -> Result<Vec<FieldPart>, CheckpointError> {
    match *r {
        ValueRef::Inline(ref value) => Ok(vec![FieldPart::Whole(value.to_vec())]),
        ValueRef::Blob(id) => {
            let row: Option<(Vec<u8>, Vec<u8>)> = conn
                .prepare_cached("SELECT hash, data FROM sg_blobs WHERE id = ?1")
                .map_err(storage)?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(storage)?;
            let (hash, env) = row.ok_or_else(|| {
                integrity(
                    thread,
                    cp,
                    format!("blob {id}"),
                    format!("field {field:?}: blob is missing"),
                )
            })?;
            let payload = open(&env, CODEC_JSON, &hash)
                .map_err(|d| integrity(thread, cp, hex(&hash), format!("field {field:?}: {d}")))?;
            Ok(vec![FieldPart::Whole(payload.to_vec())])
        }
        ValueRef::Log { log, parts } => load_log(conn, thread, cp, field, log, parts, 0),
    }
}

/// The parts `[lower, parts)` of the list held by log `log` (counting across its bases).
fn load_log(
    conn: &Connection,
    thread: &str,
    cp: &str,
    field: &str,
    log: i64,
    parts: i64,
    lower: i64,
) -> Result<Vec<FieldPart>, CheckpointError> {
    let mut segments = Vec::new();
    let (mut cur, mut upto) = (log, parts);
    loop {
        let row: Option<(Option<i64>, i64)> = conn
            .prepare_cached("SELECT base_log, base_parts FROM sg_logs WHERE id = ?1")
            .map_err(storage)?
            .query_row([cur], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(storage)?;
        let (base_log, base_parts) = row.ok_or_else(|| {
            integrity(
                thread,
                cp,
                format!("log {cur}"),
                format!("field {field:?}: log is missing"),
            )
        })?;
        let from = if base_log.is_some() { base_parts } else { 0 };
        segments.push((cur, from, upto));
        match base_log {
            Some(b) if segments.len() < 10_000 => {
                cur = b;
                upto = base_parts;
            }
            Some(_) => {
                return Err(integrity(
                    thread,
                    cp,
                    format!("log {log}"),
                    "log bases do not end",
                ))
            }
            None => break,
        }
    }
    let mut out = Vec::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT p.part, p.blob, p.hash, p.data, b.hash, b.data FROM sg_log_parts p
             LEFT JOIN sg_blobs b ON b.id = p.blob
             WHERE p.log = ?1 AND p.part >= ?2 AND p.part < ?3 ORDER BY p.part",
        )
        .map_err(storage)?;
    for (log, from, to) in segments.into_iter().rev() {
        let from = from.max(lower);
        if from >= to {
            continue;
        }
        let mut rows = stmt.query(params![log, from, to]).map_err(storage)?;
        let mut expect = from;
        // The row's bytes are read in place (borrowed from SQLite), checked, and only the
        // payload is copied: a long list has hundreds of small parts.
        while let Some(r) = rows.next().map_err(storage)? {
            let part: i64 = r.get(0).map_err(storage)?;
            let blob: Option<i64> = r.get(1).map_err(storage)?;
            let hash = blob_at(r, 2).map_err(storage)?;
            let data = blob_at(r, 3).map_err(storage)?;
            let bhash = blob_at(r, 4).map_err(storage)?;
            let bdata = blob_at(r, 5).map_err(storage)?;
            if part != expect {
                return Err(integrity(
                    thread,
                    cp,
                    format!("log {log} part {expect}"),
                    format!("field {field:?}: log part is missing"),
                ));
            }
            expect += 1;
            let item = match (blob, hash, data, bhash, bdata) {
                (Some(_), _, _, Some(h), Some(d)) => FieldPart::Whole(
                    open(d, CODEC_JSON, h)
                        .map_err(|e| integrity(thread, cp, hex(h), e))?
                        .to_vec(),
                ),
                (None, Some(h), Some(d), _, _) => FieldPart::Tail(
                    open(d, CODEC_JSON, h)
                        .map_err(|e| integrity(thread, cp, hex(h), e))?
                        .to_vec(),
                ),
                _ => {
                    return Err(integrity(
                        thread,
                        cp,
                        format!("log {log} part {part}"),
                        format!("field {field:?}: unreadable log part"),
                    ))
                }
            };
            out.push(item);
        }
        if expect != to {
            return Err(integrity(
                thread,
                cp,
                format!("log {log} part {expect}"),
                format!("field {field:?}: log is truncated"),
            ));
        }
    }
    Ok(out)
}

/// Column `i` of `r` as bytes borrowed from SQLite (`None` for NULL); any other type is an
/// error, as `get::<Option<Vec<u8>>>` would give.
fn blob_at<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<&'r [u8]>> {
    r.get_ref(i)?.as_blob_or_null().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Blob, Box::new(e))
    })
}

struct HeaderRow {
    seq: i64,
    id: Vec<u8>,
    parent: Option<Vec<u8>>,
    step: i64,
    source: String,
    created_at: i64,
    metadata: String,
}

const HEADER_COLUMNS: &str = "seq, id, parent, step, source, created_at, metadata";

fn header_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<HeaderRow> {
    Ok(HeaderRow {
        seq: r.get(0)?,
        id: r.get(1)?,
        parent: r.get(2)?,
        step: r.get(3)?,
        source: r.get(4)?,
        created_at: r.get(5)?,
        metadata: r.get(6)?,
    })
}

fn header(h: &HeaderRow, full: &StateRecord, thread: &str) -> Result<Checkpoint, CheckpointError> {
    let id = id_from(&h.id, thread)?;
    let cp = id.to_string();
    let source = match h.source.as_str() {
        "input" => Source::Input,
        "loop" => Source::Loop,
        "update" => Source::Update,
        "fork" => Source::Fork,
        other => {
            return Err(integrity(
                thread,
                &cp,
                "sg_checkpoints.source",
                format!("unknown source {other:?}"),
            ))
        }
    };
    let metadata = serde_json::from_str(&h.metadata)
        .map_err(|e| integrity(thread, &cp, "sg_checkpoints.metadata", e.to_string()))?;
    let control = full
        .control
        .to_control()
        .map_err(|e| integrity(thread, &cp, "control", e.to_string()))?;
    Ok(Checkpoint {
        id,
        parent: h
            .parent
            .as_deref()
            .map(|p| id_from(p, thread))
            .transpose()?,
        step: h.step,
        source,
        created_at_ms: u64::try_from(h.created_at).unwrap_or(0),
        control,
        metadata,
    })
}

pub(crate) fn get(
    conn: &Connection,
    cache: &Mutex<Cache>,
    thread: &ThreadId,
    ns: &Namespace,
    id: Option<CheckpointId>,
) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
    let t = thread.as_str();
    let row = match id {
        Some(id) => conn
            .prepare_cached(&format!("SELECT {HEADER_COLUMNS} FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3"))
            .map_err(storage)?
            .query_row(params![t, ns.as_str(), id_bytes(id)], header_row)
            .optional()
            .map_err(storage)?,
        None => conn
            .prepare_cached(&format!(
                "SELECT {HEADER_COLUMNS} FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 ORDER BY id DESC LIMIT 1"
            ))
            .map_err(storage)?
            .query_row(params![t, ns.as_str()], header_row)
            .optional()
            .map_err(storage)?,
    };
    let Some(h) = row else {
        return match id {
            Some(id) => Err(CheckpointError::NotFound {
                thread: thread.clone(),
                ns: ns.clone(),
                id,
            }),
            None => Ok(None),
        };
    };
    let lookup = |s: i64| cache.lock().unwrap_or_else(|p| p.into_inner()).get(s);
    let full = load_full(conn, &lookup, h.seq, t)?;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(h.seq, full.clone());
    let checkpoint = header(&h, &full, t)?;
    let cp = checkpoint.id.to_string();
    let mut fields = BTreeMap::new();
    for (name, r) in &full.fields {
        fields.insert(name.to_string(), load_field(conn, t, &cp, name, r)?);
    }
    let pending = load_writes(conn, thread, ns, checkpoint.id)?;
    Ok(Some(LoadedCheckpoint {
        checkpoint,
        fields,
        pending,
    }))
}

/// What checkpoint `id` changed since its parent (see [`Saver::changes`](crate::Saver::changes)).
pub(crate) fn changes(
    conn: &Connection,
    cache: &Mutex<Cache>,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<StepChanges, CheckpointError> {
    let t = thread.as_str();
    let row: Option<(i64, Option<i64>, Option<Vec<u8>>)> = conn
        .prepare_cached(
            "SELECT seq, parent_seq, parent FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3",
        )
        .map_err(storage)?
        .query_row(params![t, ns.as_str(), id_bytes(id)], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()
        .map_err(storage)?;
    let (seq, parent_seq, parent_id) = row.ok_or_else(|| CheckpointError::NotFound {
        thread: thread.clone(),
        ns: ns.clone(),
        id,
    })?;
    let lookup = |s: i64| cache.lock().unwrap_or_else(|p| p.into_inner()).get(s);
    let full = load_full(conn, &lookup, seq, t)?;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(seq, full.clone());
    let parent = match parent_seq {
        Some(p) => load_full(conn, &lookup, p, t)?,
        None => Arc::new(StateRecord::default()),
    };
    let cp = id.to_string();
    let mut fields = Vec::new();
    for (name, r) in &full.fields {
        let before = parent.fields.get(name);
        if before == Some(r) {
            continue;
        }
        let parts = match (r, before) {
            (&ValueRef::Log { log, parts }, Some(&ValueRef::Log { log: pl, parts: pn }))
                if extends(conn, log, parts, pl, pn)? =>
            {
                load_log(conn, t, &cp, name, log, parts, pn)?
            }
            _ => whole_first(load_field(conn, t, &cp, name, r)?),
        };
        fields.push((name.to_string(), parts));
    }
    let pending = load_writes(conn, thread, ns, id)?;
    let parent = parent_id.as_deref().map(|p| id_from(p, t)).transpose()?;
    Ok(StepChanges {
        parent,
        fields,
        pending,
    })
}

/// Whether the list `(log, parts)` is the list `(pl, pn)` with items appended.
fn extends(
    conn: &Connection,
    log: i64,
    parts: i64,
    pl: i64,
    pn: i64,
) -> Result<bool, CheckpointError> {
    if parts < pn {
        return Ok(false);
    }
    if log == pl {
        return Ok(true);
    }
    let base: Option<(Option<i64>, i64)> = conn
        .prepare_cached("SELECT base_log, base_parts FROM sg_logs WHERE id = ?1")
        .map_err(storage)?
        .query_row([log], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(storage)?;
    Ok(base == Some((Some(pl), pn)))
}

/// The newest checkpoint's header and pending writes, without its field values.
pub(crate) fn head_only(
    conn: &Connection,
    cache: &Mutex<Cache>,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Option<crate::saver::Head>, CheckpointError> {
    let t = thread.as_str();
    let row = conn
        .prepare_cached(&format!("SELECT {HEADER_COLUMNS} FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 ORDER BY id DESC LIMIT 1"))
        .map_err(storage)?
        .query_row(params![t, ns.as_str()], header_row)
        .optional()
        .map_err(storage)?;
    let Some(h) = row else { return Ok(None) };
    let lookup = |s: i64| cache.lock().unwrap_or_else(|p| p.into_inner()).get(s);
    let full = load_full(conn, &lookup, h.seq, t)?;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(h.seq, full.clone());
    let checkpoint = header(&h, &full, t)?;
    let pending = load_writes(conn, thread, ns, checkpoint.id)?;
    Ok(Some((checkpoint, pending)))
}

fn load_writes(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<Vec<PendingWrite>, CheckpointError> {
    let t = thread.as_str();
    let cp = id.to_string();
    let mut stmt = conn
        .prepare_cached(
            "SELECT task, node, kind, hash, data FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3 ORDER BY ord, idx",
        )
        .map_err(storage)?;
    let rows = stmt
        .query_map(params![t, ns.as_str(), id_bytes(id)], |r| {
            Ok((
                r.get::<_, Vec<u8>>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Vec<u8>>(3)?,
                r.get::<_, Vec<u8>>(4)?,
            ))
        })
        .map_err(storage)?;
    let mut out = Vec::new();
    for row in rows {
        let (task, node, kind, hash, env) = row.map_err(storage)?;
        let payload = open(&env, CODEC_JSON, &hash)
            .map_err(|d| integrity(t, &cp, hex(&hash), format!("pending write: {d}")))?;
        let value: serde_json::Value = serde_json::from_slice(payload)
            .map_err(|e| integrity(t, &cp, hex(&hash), format!("pending write: {e}")))?;
        let task: [u8; 16] = task
            .as_slice()
            .try_into()
            .map_err(|_| integrity(t, &cp, "sg_writes.task", "bad task id"))?;
        let task_id = TaskId::from_u128(u128::from_be_bytes(task));
        let kind = match kind.as_str() {
            "output" => WriteKind::Output(value),
            "error" => WriteKind::Error(value.as_str().unwrap_or_default().to_string()),
            "interrupt" => WriteKind::Interrupt {
                id: value
                    .get("id")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string(),
                value: value.get("value").cloned().unwrap_or_default(),
            },
            "resume" => WriteKind::Resume(value.as_array().cloned().unwrap_or_default()),
            other => {
                return Err(integrity(
                    t,
                    &cp,
                    hex(&hash),
                    format!("unknown pending write kind {other:?}"),
                ))
            }
        };
        out.push(PendingWrite {
            task_id,
            node,
            kind,
        });
    }
    Ok(out)
}

fn put_writes(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
    writes: &[PendingWrite],
) -> Result<(), CheckpointError> {
    let t = thread.as_str();
    let exists: Option<i64> = conn
        .prepare_cached("SELECT seq FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3")
        .map_err(storage)?
        .query_row(params![t, ns.as_str(), id_bytes(id)], |r| r.get(0))
        .optional()
        .map_err(storage)?;
    if exists.is_none() {
        return Err(CheckpointError::NotFound {
            thread: thread.clone(),
            ns: ns.clone(),
            id,
        });
    }
    let tasks: BTreeSet<TaskId> = writes.iter().map(|w| w.task_id).collect();
    for task in &tasks {
        conn.prepare_cached(
            "DELETE FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3 AND task = ?4",
        )
        .map_err(storage)?
        .execute(params![
            t,
            ns.as_str(),
            id_bytes(id),
            task.as_u128().to_be_bytes()
        ])
        .map_err(storage)?;
    }
    let mut ord: i64 = conn
        .prepare_cached("SELECT coalesce(max(ord), 0) FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3")
        .map_err(storage)?
        .query_row(params![t, ns.as_str(), id_bytes(id)], |r| r.get(0))
        .map_err(storage)?;
    let mut idx_of: HashMap<TaskId, i64> = HashMap::new();
    for w in writes {
        ord += 1;
        let idx = idx_of.entry(w.task_id).or_insert(0);
        let (kind, value) = match &w.kind {
            WriteKind::Output(v) => ("output", v.clone()),
            WriteKind::Error(e) => ("error", serde_json::Value::String(e.clone())),
            WriteKind::Interrupt { id, value } => {
                ("interrupt", serde_json::json!({ "id": id, "value": value }))
            }
            WriteKind::Resume(values) => ("resume", serde_json::Value::Array(values.clone())),
        };
        let payload =
            serde_json::to_vec(&value).map_err(|e| CheckpointError::Storage(Box::new(e)))?;
        let (env, hash) = seal(CODEC_JSON, &payload);
        conn.prepare_cached(
            "INSERT INTO sg_writes (thread, ns, checkpoint, task, idx, ord, node, kind, hash, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .map_err(storage)?
        .execute(params![
            t,
            ns.as_str(),
            id_bytes(id),
            w.task_id.as_u128().to_be_bytes(),
            *idx,
            ord,
            w.node,
            kind,
            &hash[..],
            env
        ])
        .map_err(storage)?;
        *idx += 1;
    }
    Ok(())
}

pub(crate) fn list(
    conn: &Connection,
    cache: &Mutex<Cache>,
    thread: &ThreadId,
    ns: &Namespace,
    options: &ListOptions,
) -> Result<Vec<Checkpoint>, CheckpointError> {
    let t = thread.as_str();
    let mut sql =
        format!("SELECT {HEADER_COLUMNS} FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2");
    let mut values: Vec<rusqlite::types::Value> =
        vec![t.to_string().into(), ns.as_str().to_string().into()];
    if let Some(before) = options.before {
        values.push(id_bytes(before).to_vec().into());
        sql.push_str(&format!(" AND id < ?{}", values.len()));
    }
    for (key, value) in &options.filter {
        validate_filter_key(key)?;
        match key.as_str() {
            "source" => {
                values.push(value.as_str().unwrap_or_default().to_string().into());
                sql.push_str(&format!(" AND source = ?{}", values.len()));
            }
            "step" => {
                values.push(value.as_i64().unwrap_or(i64::MIN).into());
                sql.push_str(&format!(" AND step = ?{}", values.len()));
            }
            _ => {
                values.push(format!("$.\"{key}\"").into());
                let path = values.len();
                values.push(value.to_string().into());
                let val = values.len();
                // Same type and same value: a missing key never matches (not even `null`),
                // `1` is not `1.0`, and `true` is not `1` (SQLite extracts it as 1).
                sql.push_str(&format!(
                    " AND json_type(metadata, ?{path}) IS json_type(?{val}, '$') \
                     AND json_extract(metadata, ?{path}) IS json_extract(?{val}, '$')"
                ));
            }
        }
    }
    sql.push_str(" ORDER BY id DESC");
    if let Some(limit) = options.limit {
        values.push(i64::try_from(limit).unwrap_or(i64::MAX).into());
        sql.push_str(&format!(" LIMIT ?{}", values.len()));
    }
    let mut stmt = conn.prepare_cached(&sql).map_err(storage)?;
    let rows: Vec<HeaderRow> = stmt
        .query_map(rusqlite::params_from_iter(values), header_row)
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    // Rebuild records oldest first, so each delta finds its parent's record in the memo.
    let mut memo: HashMap<i64, Arc<StateRecord>> = HashMap::new();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| rows[i].seq);
    for i in order {
        let lookup = |s: i64| {
            memo.get(&s)
                .cloned()
                .or_else(|| cache.lock().unwrap_or_else(|p| p.into_inner()).get(s))
        };
        let full = load_full(conn, &lookup, rows[i].seq, t)?;
        memo.insert(rows[i].seq, full);
    }
    rows.iter()
        .map(|h| {
            let full = memo.get(&h.seq).cloned().unwrap_or_default();
            header(h, &full, t)
        })
        .collect()
}

pub(crate) fn list_threads(
    conn: &Connection,
    cache: &Mutex<Cache>,
) -> Result<Vec<ThreadInfo>, CheckpointError> {
    let mut stmt = conn
        .prepare_cached("SELECT thread, count(*) FROM sg_checkpoints WHERE ns = '' GROUP BY thread ORDER BY thread")
        .map_err(storage)?;
    let threads: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    let mut out = Vec::new();
    for (thread, count) in threads {
        let id = ThreadId::new(thread.clone())
            .map_err(|_| integrity(&thread, "-", "sg_checkpoints.thread", "invalid thread id"))?;
        if let Some(head) = get(conn, cache, &id, &Namespace::root(), None)? {
            out.push(ThreadInfo {
                thread: id,
                checkpoints: usize::try_from(count).unwrap_or(0),
                last_step: head.checkpoint.step,
                status: ThreadStatus::of(&head),
                updated_at_ms: head.checkpoint.created_at_ms,
            });
        }
    }
    Ok(out)
}

fn copy_thread(conn: &Connection, from: &ThreadId, to: &ThreadId) -> Result<(), CheckpointError> {
    let existing: i64 = conn
        .query_row(
            "SELECT count(*) FROM sg_checkpoints WHERE thread = ?1",
            [to.as_str()],
            |r| r.get(0),
        )
        .map_err(storage)?;
    if existing > 0 {
        let found = head(conn, to, &Namespace::root())?;
        return Err(CheckpointError::StaleParent {
            thread: to.clone(),
            ns: Namespace::root(),
            expected: None,
            found,
        });
    }
    let rows: Vec<(i64, Option<i64>)> = conn
        .prepare("SELECT seq, parent_seq FROM sg_checkpoints WHERE thread = ?1 ORDER BY seq")
        .map_err(storage)?
        .query_map([from.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    let mut map: HashMap<i64, i64> = HashMap::new();
    for (seq, parent_seq) in rows {
        let new_parent = parent_seq.and_then(|p| map.get(&p).copied());
        conn.execute(
            "INSERT INTO sg_checkpoints (thread, ns, id, parent, parent_seq, step, source, created_at, metadata, depth, body_hash, body)
             SELECT ?1, ns, id, parent, ?2, step, source, created_at, metadata, depth, body_hash, body FROM sg_checkpoints WHERE seq = ?3",
            params![to.as_str(), new_parent, seq],
        )
        .map_err(storage)?;
        map.insert(seq, conn.last_insert_rowid());
    }
    crate::failpoint::hit("copy.after_checkpoints");
    conn.execute(
        "INSERT INTO sg_writes (thread, ns, checkpoint, task, idx, ord, node, kind, hash, data)
         SELECT ?2, ns, checkpoint, task, idx, ord, node, kind, hash, data FROM sg_writes WHERE thread = ?1",
        params![from.as_str(), to.as_str()],
    )
    .map_err(storage)?;
    Ok(())
}

fn prune(
    conn: &Connection,
    local: &mut Local<'_>,
    thread: &ThreadId,
    retention: Retention,
) -> Result<usize, CheckpointError> {
    let t = thread.as_str();
    let namespaces: Vec<String> = conn
        .prepare("SELECT DISTINCT ns FROM sg_checkpoints WHERE thread = ?1")
        .map_err(storage)?
        .query_map([t], |r| r.get(0))
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    let mut deleted = 0usize;
    for ns in namespaces {
        // (seq, created_at, parent_seq), newest first.
        let rows: Vec<(i64, i64, Option<i64>)> = conn
            .prepare("SELECT seq, created_at, parent_seq FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 ORDER BY id DESC")
            .map_err(storage)?
            .query_map(params![t, ns], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(storage)?
            .collect::<Result<_, _>>()
            .map_err(storage)?;
        let keep: BTreeSet<i64> = rows
            .iter()
            .enumerate()
            .filter(|(i, (_, created, _))| match retention {
                Retention::KeepLast(n) => *i < n.max(1),
                Retention::NewerThan(ms) => *i == 0 || u64::try_from(*created).unwrap_or(0) >= ms,
            })
            .map(|(_, (seq, _, _))| *seq)
            .collect();
        let drop_set: Vec<i64> = rows
            .iter()
            .map(|r| r.0)
            .filter(|s| !keep.contains(s))
            .collect();
        if drop_set.is_empty() {
            continue;
        }
        // Kept checkpoints become self-contained before their ancestors go.
        for &seq in keep.iter() {
            let lookup = |s: i64| local.lookup(s);
            let full = load_full(conn, &lookup, seq, t)?;
            let bytes = encode_record(&full.to_whole_record())
                .map_err(|e| CheckpointError::Storage(Box::new(e)))?;
            let (env, hash) = seal(CODEC_BINCODE, &bytes);
            conn.execute(
                "UPDATE sg_checkpoints SET body = ?2, body_hash = ?3, depth = 0 WHERE seq = ?1",
                params![seq, env, &hash[..]],
            )
            .map_err(storage)?;
        }
        for &(seq, _, parent_seq) in &rows {
            if keep.contains(&seq) && parent_seq.is_some_and(|p| !keep.contains(&p)) {
                conn.execute(
                    "UPDATE sg_checkpoints SET parent = NULL, parent_seq = NULL WHERE seq = ?1",
                    [seq],
                )
                .map_err(storage)?;
            }
        }
        for seq in &drop_set {
            let id: Vec<u8> = conn
                .query_row("SELECT id FROM sg_checkpoints WHERE seq = ?1", [seq], |r| {
                    r.get(0)
                })
                .map_err(storage)?;
            conn.execute(
                "DELETE FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3",
                params![t, ns, id],
            )
            .map_err(storage)?;
            conn.execute("DELETE FROM sg_checkpoints WHERE seq = ?1", [seq])
                .map_err(storage)?;
        }
        deleted += drop_set.len();
        crate::failpoint::hit("prune.after_delete");
    }
    if deleted > 0 {
        local
            .shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        local.added.clear();
        gc(conn)?;
    }
    Ok(deleted)
}

/// Delete blobs, logs and log parts no remaining checkpoint refers to.
fn gc(conn: &Connection) -> Result<(), CheckpointError> {
    let seqs: Vec<(i64, String)> = conn
        .prepare("SELECT seq, thread FROM sg_checkpoints ORDER BY seq")
        .map_err(storage)?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    let mut memo: HashMap<i64, Arc<StateRecord>> = HashMap::new();
    let mut blobs: BTreeSet<i64> = BTreeSet::new();
    // Per log: how many of its parts are needed.
    let mut logs: BTreeMap<i64, i64> = BTreeMap::new();
    for (seq, thread) in seqs {
        let full = {
            let lookup = |s: i64| memo.get(&s).cloned();
            load_full(conn, &lookup, seq, &thread)?
        };
        for r in full.fields.values() {
            match *r {
                ValueRef::Inline(_) => {}
                ValueRef::Blob(b) => {
                    blobs.insert(b);
                }
                ValueRef::Log { log, parts } => {
                    let (mut cur, mut upto) = (log, parts);
                    for _ in 0..10_000 {
                        let e = logs.entry(cur).or_insert(0);
                        *e = (*e).max(upto);
                        let base: Option<(Option<i64>, i64)> = conn
                            .prepare_cached(
                                "SELECT base_log, base_parts FROM sg_logs WHERE id = ?1",
                            )
                            .map_err(storage)?
                            .query_row([cur], |r| Ok((r.get(0)?, r.get(1)?)))
                            .optional()
                            .map_err(storage)?;
                        match base {
                            Some((Some(b), n)) => {
                                cur = b;
                                upto = n;
                            }
                            _ => break,
                        }
                    }
                }
            }
        }
        memo.insert(seq, full);
    }
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS sg_keep_blobs (id INTEGER PRIMARY KEY);
         CREATE TEMP TABLE IF NOT EXISTS sg_keep_logs (id INTEGER PRIMARY KEY, parts INTEGER NOT NULL);
         DELETE FROM sg_keep_blobs; DELETE FROM sg_keep_logs;",
    )
    .map_err(storage)?;
    for b in &blobs {
        conn.execute("INSERT INTO sg_keep_blobs (id) VALUES (?1)", [b])
            .map_err(storage)?;
    }
    for (log, parts) in &logs {
        conn.execute(
            "INSERT INTO sg_keep_logs (id, parts) VALUES (?1, ?2)",
            params![log, parts],
        )
        .map_err(storage)?;
    }
    conn.execute_batch(
        "DELETE FROM sg_log_parts WHERE NOT EXISTS (
             SELECT 1 FROM sg_keep_logs k WHERE k.id = sg_log_parts.log AND sg_log_parts.part < k.parts);
         DELETE FROM sg_logs WHERE id NOT IN (SELECT id FROM sg_keep_logs);
         UPDATE sg_logs SET tip = (SELECT parts FROM sg_keep_logs k WHERE k.id = sg_logs.id);
         INSERT OR IGNORE INTO sg_keep_blobs (id) SELECT blob FROM sg_log_parts WHERE blob IS NOT NULL;
         DELETE FROM sg_blobs WHERE id NOT IN (SELECT id FROM sg_keep_blobs);",
    )
    .map_err(storage)?;
    Ok(())
}
