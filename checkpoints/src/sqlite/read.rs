//! Reading checkpoints: a [`Reader`] over one thread and namespace loads a checkpoint's
//! header, its state record (applying deltas up to the nearest whole or cached record), its
//! field values and its list logs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rusqlite::{params, CachedStatement, Connection, OptionalExtension};

use super::cache::RecordCache;
use super::pending::load_writes;
use super::record::{decode_record, StateRecord, StoredRecord, ValueRef};
use super::sql::{blob_at, id_bytes, id_from, integrity, SqlResult};
use crate::checkpoint::whole_first;
use crate::envelope::{hex, open, CODEC_BINCODE, CODEC_JSON};
use crate::sync::Unpoisoned;
use crate::{
    Checkpoint, CheckpointError, CheckpointId, FieldPart, LoadedCheckpoint, Namespace,
    PendingWrite, Source, StepChanges, ThreadId,
};

/// A query of checkpoint headers: the columns [`HeaderRow::from_row`] reads, then `$rest`
/// (the one place that lists them).
macro_rules! header_query {
    ($rest:literal) => {
        concat!(
            "SELECT seq, id, parent, step, source, created_at, metadata FROM sg_checkpoints ",
            $rest
        )
    };
}
pub(crate) use header_query;

/// The header of one checkpoint by id.
const HEADER_BY_ID: &str = header_query!("WHERE thread = ?1 AND ns = ?2 AND id = ?3");
/// The header of a thread's newest checkpoint (ids are time-ordered).
const NEWEST_HEADER: &str = header_query!("WHERE thread = ?1 AND ns = ?2 ORDER BY id DESC LIMIT 1");

/// A checkpoint row's columns other than its record.
pub(crate) struct HeaderRow {
    pub(crate) seq: i64,
    pub(super) id: Vec<u8>,
    pub(super) parent: Option<Vec<u8>>,
    pub(super) step: i64,
    pub(super) source: String,
    pub(super) created_at: i64,
    pub(super) metadata: String,
}

impl HeaderRow {
    /// The row as [`header_query`] selects it.
    pub(crate) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<HeaderRow> {
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

    /// The checkpoint this row and its record describe.
    pub(crate) fn checkpoint(
        &self,
        record: &StateRecord,
        thread: &str,
    ) -> Result<Checkpoint, CheckpointError> {
        let id = id_from(&self.id, thread)?;
        let cp = id.to_string();
        let source = match self.source.as_str() {
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
        let metadata = serde_json::from_str(&self.metadata)
            .map_err(|e| integrity(thread, &cp, "sg_checkpoints.metadata", e.to_string()))?;
        let control = record
            .control
            .to_control()
            .map_err(|e| integrity(thread, &cp, "control", e.to_string()))?;
        Ok(Checkpoint {
            id,
            parent: self
                .parent
                .as_deref()
                .map(|p| id_from(p, thread))
                .transpose()?,
            step: self.step,
            source,
            created_at_ms: u64::try_from(self.created_at).unwrap_or(0),
            control,
            metadata,
        })
    }
}

/// The header of the newest checkpoint of `thread` in `ns`.
pub(crate) fn newest_header(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Option<HeaderRow>, CheckpointError> {
    conn.prepare_cached(NEWEST_HEADER)
        .during("preparing the newest checkpoint's query")?
        .query_row(params![thread.as_str(), ns.as_str()], HeaderRow::from_row)
        .optional()
        .during("reading the newest checkpoint's row")
}

/// The id of the newest checkpoint of `thread` in `ns`.
pub(crate) fn newest_id(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Option<CheckpointId>, CheckpointError> {
    newest_header(conn, thread, ns)?
        .map(|h| id_from(&h.id, thread.as_str()))
        .transpose()
}

/// Longest chain of delta records a load follows before calling the chain broken.
const MAX_DELTA_CHAIN: usize = 100_000;

/// The whole state record of checkpoint row `seq`: its stored record applied on its
/// ancestors' (up to the nearest whole one, or one `known` has).
pub(crate) fn load_record(
    conn: &Connection,
    known: &dyn Fn(i64) -> Option<Arc<StateRecord>>,
    seq: i64,
    thread: &str,
) -> Result<Arc<StateRecord>, CheckpointError> {
    let mut chain: Vec<StoredRecord> = Vec::new();
    let mut cur = seq;
    let base = loop {
        if let Some(record) = known(cur) {
            break record;
        }
        let RecordRow {
            record: stored,
            parent_seq,
            checkpoint,
            hash,
        } = RecordRow::read(conn, cur, thread)?;
        let whole = stored.full;
        chain.push(stored);
        if whole {
            break Arc::new(StateRecord::default());
        }
        let broken = |detail: &str| integrity(thread, &checkpoint, hex(&hash), detail);
        if chain.len() > MAX_DELTA_CHAIN {
            return Err(broken("delta chain does not end"));
        }
        cur = parent_seq.ok_or_else(|| broken("a delta record without parent"))?;
    };
    if chain.is_empty() {
        return Ok(base);
    }
    let mut record = (*base).clone();
    for stored in chain.into_iter().rev() {
        record.apply(stored);
    }
    Ok(Arc::new(record))
}

/// A checkpoint row's stored record (hash-checked), with what names it in errors.
struct RecordRow {
    record: StoredRecord,
    parent_seq: Option<i64>,
    /// The checkpoint's id, in hex.
    checkpoint: String,
    hash: Vec<u8>,
}

impl RecordRow {
    /// Row `seq`'s record; an integrity error if the row is missing (it is a delta's
    /// parent) or its record is damaged.
    fn read(conn: &Connection, seq: i64, thread: &str) -> Result<RecordRow, CheckpointError> {
        type Columns = (Option<i64>, Vec<u8>, Vec<u8>, Vec<u8>);
        let row: Option<Columns> = conn
            .prepare_cached(
                "SELECT parent_seq, id, body_hash, body FROM sg_checkpoints WHERE seq = ?1",
            )
            .during("preparing the record query")?
            .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()
            .during("reading a checkpoint's record")?;
        let Some((parent_seq, id, hash, env)) = row else {
            return Err(integrity(
                thread,
                "-",
                format!("sg_checkpoints row {seq}"),
                "a delta record's parent row is missing",
            ));
        };
        let cp = hex(&id);
        let payload =
            open(&env, CODEC_BINCODE, &hash).map_err(|d| integrity(thread, &cp, hex(&hash), d))?;
        let record = decode_record(payload).map_err(|d| integrity(thread, &cp, hex(&hash), d))?;
        Ok(RecordRow {
            record,
            parent_seq,
            checkpoint: cp,
            hash,
        })
    }
}

/// Longest chain of log bases a walk follows before calling the chain broken.
const MAX_LOG_BASES: usize = 10_000;

/// A log's base, as `sg_logs` records it: the log it continues and how many of that log's
/// parts it continues after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogBase {
    /// The log this one continues (`None`: a root log).
    pub(crate) log: Option<i64>,
    /// How many parts of it come first.
    pub(crate) parts: i64,
}

/// The base of log `log` (`None` if the log's row is missing).
pub(crate) fn log_base(conn: &Connection, log: i64) -> Result<Option<LogBase>, CheckpointError> {
    conn.prepare_cached("SELECT base_log, base_parts FROM sg_logs WHERE id = ?1")
        .during("preparing the log query")?
        .query_row([log], |r| {
            Ok(LogBase {
                log: r.get(0)?,
                parts: r.get(1)?,
            })
        })
        .optional()
        .during("reading a log's row")
}

/// The parts `[from, upto)` of one log that belong to a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogSegment {
    pub(crate) log: i64,
    pub(crate) from: i64,
    pub(crate) upto: i64,
}

/// How a walk down a list's log bases ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChainEnd {
    /// At a root log: the segments hold the whole list.
    Root,
    /// At a log whose row is missing, of which the list needed `upto` parts.
    Missing { log: i64, upto: i64 },
    /// After [`MAX_LOG_BASES`] logs, the last still having a base.
    Endless,
}

/// The logs a list's parts are in, newest log first, and how the walk down them ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogChain {
    pub(crate) segments: Vec<LogSegment>,
    pub(crate) end: ChainEnd,
}

/// The logs holding the first `parts` parts of the list in log `log`.
pub(crate) fn walk_log(
    conn: &Connection,
    log: i64,
    parts: i64,
) -> Result<LogChain, CheckpointError> {
    let mut segments = Vec::new();
    let (mut cur, mut upto) = (log, parts);
    loop {
        let Some(base) = log_base(conn, cur)? else {
            let end = ChainEnd::Missing { log: cur, upto };
            return Ok(LogChain { segments, end });
        };
        let from = if base.log.is_some() { base.parts } else { 0 };
        segments.push(LogSegment {
            log: cur,
            from,
            upto,
        });
        match base.log {
            Some(b) if segments.len() < MAX_LOG_BASES => {
                cur = b;
                upto = base.parts;
            }
            Some(_) => {
                return Ok(LogChain {
                    segments,
                    end: ChainEnd::Endless,
                })
            }
            None => {
                return Ok(LogChain {
                    segments,
                    end: ChainEnd::Root,
                })
            }
        }
    }
}

/// Reads one thread and namespace, on a connection inside a read transaction, sharing the
/// saver's records cache.
pub(crate) struct Reader<'a> {
    conn: &'a Connection,
    cache: &'a Mutex<RecordCache>,
    thread: &'a ThreadId,
    ns: &'a Namespace,
}

/// A field being read: the checkpoint (32 hex digits) and the field's name, for errors.
#[derive(Clone, Copy)]
struct FieldAt<'a> {
    checkpoint: &'a str,
    field: &'a str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(
        conn: &'a Connection,
        cache: &'a Mutex<RecordCache>,
        thread: &'a ThreadId,
        ns: &'a Namespace,
    ) -> Self {
        Reader {
            conn,
            cache,
            thread,
            ns,
        }
    }

    /// Checkpoint `id`, or the newest; a missing `id` is [`CheckpointError::NotFound`].
    pub(crate) fn get(
        &self,
        id: Option<CheckpointId>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
        let row = match id {
            Some(id) => self.header_by_id(id)?,
            None => newest_header(self.conn, self.thread, self.ns)?,
        };
        let Some(h) = row else {
            return match id {
                Some(id) => Err(self.not_found(id)),
                None => Ok(None),
            };
        };
        let record = self.cached_record(h.seq)?;
        let checkpoint = h.checkpoint(&record, self.thread.as_str())?;
        let cp = checkpoint.id.to_string();
        let mut fields = BTreeMap::new();
        for (name, r) in &record.fields {
            let at = FieldAt {
                checkpoint: &cp,
                field: name,
            };
            fields.insert(name.to_string(), self.field(at, r)?);
        }
        let pending = self.pending(checkpoint.id)?;
        Ok(Some(LoadedCheckpoint {
            checkpoint,
            fields,
            pending,
        }))
    }

    /// The newest checkpoint's header and pending writes, without its field values.
    pub(crate) fn head(&self) -> Result<Option<crate::saver::Head>, CheckpointError> {
        let Some(h) = newest_header(self.conn, self.thread, self.ns)? else {
            return Ok(None);
        };
        let record = self.cached_record(h.seq)?;
        let checkpoint = h.checkpoint(&record, self.thread.as_str())?;
        let pending = self.pending(checkpoint.id)?;
        Ok(Some(crate::saver::Head {
            checkpoint,
            pending,
        }))
    }

    /// What checkpoint `id` changed since its parent (see
    /// [`Saver::changes`](crate::Saver::changes)).
    pub(crate) fn changes(&self, id: CheckpointId) -> Result<StepChanges, CheckpointError> {
        let t = self.thread.as_str();
        let row: Option<(i64, Option<i64>, Option<Vec<u8>>)> = self
            .conn
            .prepare_cached(
                "SELECT seq, parent_seq, parent FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3",
            )
            .during("preparing the checkpoint's parent query")?
            .query_row(params![t, self.ns.as_str(), id_bytes(id)], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()
            .during("reading a checkpoint's parent")?;
        let (seq, parent_seq, parent_id) = row.ok_or_else(|| self.not_found(id))?;
        let record = self.cached_record(seq)?;
        let parent = match parent_seq {
            Some(p) => self.record(p)?,
            None => Arc::new(StateRecord::default()),
        };
        let cp = id.to_string();
        let mut fields = Vec::new();
        for (name, r) in &record.fields {
            let before = parent.fields.get(name);
            if before == Some(r) {
                continue;
            }
            let at = FieldAt {
                checkpoint: &cp,
                field: name,
            };
            fields.push((name.to_string(), self.change(at, r, before)?));
        }
        let pending = self.pending(id)?;
        let parent = parent_id.as_deref().map(|p| id_from(p, t)).transpose()?;
        Ok(StepChanges {
            parent,
            fields,
            pending,
        })
    }

    /// What a field's change from `before` to `now` stored: the appended items when `now`
    /// is `before` with items appended, else the whole value.
    fn change(
        &self,
        at: FieldAt<'_>,
        now: &ValueRef,
        before: Option<&ValueRef>,
    ) -> Result<Vec<FieldPart>, CheckpointError> {
        match (now, before) {
            (&ValueRef::Log { log, parts }, Some(&ValueRef::Log { log: pl, parts: pn }))
                if self.extends(log, parts, pl, pn)? =>
            {
                self.log_parts(at, log, parts, pn)
            }
            _ => Ok(whole_first(self.field(at, now)?)),
        }
    }

    /// Whether the list `(log, parts)` is the list `(pl, pn)` with items appended.
    fn extends(&self, log: i64, parts: i64, pl: i64, pn: i64) -> Result<bool, CheckpointError> {
        if parts < pn {
            return Ok(false);
        }
        if log == pl {
            return Ok(true);
        }
        let continues = LogBase {
            log: Some(pl),
            parts: pn,
        };
        Ok(log_base(self.conn, log)? == Some(continues))
    }

    fn header_by_id(&self, id: CheckpointId) -> Result<Option<HeaderRow>, CheckpointError> {
        self.conn
            .prepare_cached(HEADER_BY_ID)
            .during("preparing the checkpoint query")?
            .query_row(
                params![self.thread.as_str(), self.ns.as_str(), id_bytes(id)],
                HeaderRow::from_row,
            )
            .optional()
            .during("reading a checkpoint's row")
    }

    fn not_found(&self, id: CheckpointId) -> CheckpointError {
        CheckpointError::NotFound {
            thread: self.thread.clone(),
            ns: self.ns.clone(),
            id,
        }
    }

    fn pending(&self, id: CheckpointId) -> Result<Vec<PendingWrite>, CheckpointError> {
        load_writes(self.conn, self.thread, self.ns, id)
    }

    /// Row `seq`'s record, starting from any cached ancestor.
    fn record(&self, seq: i64) -> Result<Arc<StateRecord>, CheckpointError> {
        let cached = |s: i64| self.cache.lock().unpoisoned().get(s);
        load_record(self.conn, &cached, seq, self.thread.as_str())
    }

    /// As [`Reader::record`], and cache it.
    fn cached_record(&self, seq: i64) -> Result<Arc<StateRecord>, CheckpointError> {
        let record = self.record(seq)?;
        self.cache.lock().unpoisoned().insert(seq, record.clone());
        Ok(record)
    }

    /// A field's value, as the parts it is stored in.
    fn field(&self, at: FieldAt<'_>, r: &ValueRef) -> Result<Vec<FieldPart>, CheckpointError> {
        let (thread, cp, field) = (self.thread.as_str(), at.checkpoint, at.field);
        match *r {
            ValueRef::Inline(ref value) => Ok(vec![FieldPart::Whole(value.to_vec())]),
            ValueRef::Blob(id) => {
                let row: Option<(Vec<u8>, Vec<u8>)> = self
                    .conn
                    .prepare_cached("SELECT hash, data FROM sg_blobs WHERE id = ?1")
                    .during("preparing the value query")?
                    .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
                    .during("reading a value's row")?;
                let (hash, env) = row.ok_or_else(|| {
                    integrity(
                        thread,
                        cp,
                        format!("blob {id}"),
                        format!("field {field:?}: blob is missing"),
                    )
                })?;
                let payload = open(&env, CODEC_JSON, &hash).map_err(|d| {
                    integrity(thread, cp, hex(&hash), format!("field {field:?}: {d}"))
                })?;
                Ok(vec![FieldPart::Whole(payload.to_vec())])
            }
            ValueRef::Log { log, parts } => self.log_parts(at, log, parts, 0),
        }
    }

    /// The parts `[lower, parts)` of the list held by log `log` (counting across its bases).
    fn log_parts(
        &self,
        at: FieldAt<'_>,
        log: i64,
        parts: i64,
        lower: i64,
    ) -> Result<Vec<FieldPart>, CheckpointError> {
        let (thread, cp) = (self.thread.as_str(), at.checkpoint);
        let chain = walk_log(self.conn, log, parts)?;
        let segments = match chain.end {
            ChainEnd::Root => chain.segments,
            ChainEnd::Missing { log: missing, .. } => {
                return Err(integrity(
                    thread,
                    cp,
                    format!("log {missing}"),
                    format!("field {:?}: log is missing", at.field),
                ))
            }
            ChainEnd::Endless => {
                return Err(integrity(
                    thread,
                    cp,
                    format!("log {log}"),
                    "log bases do not end",
                ))
            }
        };
        let mut out = Vec::new();
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT p.part, p.blob, p.hash, p.data, b.hash, b.data FROM sg_log_parts p
                 LEFT JOIN sg_blobs b ON b.id = p.blob
                 WHERE p.log = ?1 AND p.part >= ?2 AND p.part < ?3 ORDER BY p.part",
            )
            .during("preparing the list parts query")?;
        for segment in segments.into_iter().rev() {
            let from = segment.from.max(lower);
            if from < segment.upto {
                self.read_segment(&mut stmt, at, segment.log, from..segment.upto, &mut out)?;
            }
        }
        Ok(out)
    }

    /// Append parts `range` of log `log` to `out`; each must be there, in order.
    fn read_segment(
        &self,
        stmt: &mut CachedStatement<'_>,
        at: FieldAt<'_>,
        log: i64,
        range: std::ops::Range<i64>,
        out: &mut Vec<FieldPart>,
    ) -> Result<(), CheckpointError> {
        let (thread, cp, field) = (self.thread.as_str(), at.checkpoint, at.field);
        let mut rows = stmt
            .query(params![log, range.start, range.end])
            .during("reading a list's parts")?;
        let mut expect = range.start;
        // The row's bytes are read in place (borrowed from SQLite), checked, and only the
        // payload is copied: a long list has hundreds of small parts.
        while let Some(r) = rows.next().during("reading a list's parts")? {
            let row = PartRow::from_row(r).during("reading a list part")?;
            if row.part != expect {
                return Err(integrity(
                    thread,
                    cp,
                    format!("log {log} part {expect}"),
                    format!("field {field:?}: log part is missing"),
                ));
            }
            expect += 1;
            out.push(row.item(thread, at, log)?);
        }
        if expect != range.end {
            return Err(integrity(
                thread,
                cp,
                format!("log {log} part {expect}"),
                format!("field {field:?}: log is truncated"),
            ));
        }
        Ok(())
    }
}

/// One `sg_log_parts` row, joined with the value row it may refer to; bytes borrowed.
struct PartRow<'r> {
    part: i64,
    blob: Option<i64>,
    hash: Option<&'r [u8]>,
    data: Option<&'r [u8]>,
    blob_hash: Option<&'r [u8]>,
    blob_data: Option<&'r [u8]>,
}

impl<'r> PartRow<'r> {
    fn from_row(r: &'r rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(PartRow {
            part: r.get(0)?,
            blob: r.get(1)?,
            hash: blob_at(r, 2)?,
            data: blob_at(r, 3)?,
            blob_hash: blob_at(r, 4)?,
            blob_data: blob_at(r, 5)?,
        })
    }

    /// The part: a whole value (a value row's) or appended items (its own bytes).
    fn item(&self, thread: &str, at: FieldAt<'_>, log: i64) -> Result<FieldPart, CheckpointError> {
        let cp = at.checkpoint;
        let opened = |d: &[u8], h: &[u8]| -> Result<Vec<u8>, CheckpointError> {
            Ok(open(d, CODEC_JSON, h)
                .map_err(|e| integrity(thread, cp, hex(h), e))?
                .to_vec())
        };
        match (
            self.blob,
            self.hash,
            self.data,
            self.blob_hash,
            self.blob_data,
        ) {
            (Some(_), _, _, Some(h), Some(d)) => Ok(FieldPart::Whole(opened(d, h)?)),
            (None, Some(h), Some(d), _, _) => Ok(FieldPart::Tail(opened(d, h)?)),
            _ => Err(integrity(
                thread,
                cp,
                format!("log {log} part {}", self.part),
                format!("field {:?}: unreadable log part", at.field),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::seal;
    use crate::sqlite::record::encode_record;
    use crate::sqlite::schema::SCHEMA;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn file() -> Result<Connection, rusqlite::Error> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(conn)
    }

    fn log(conn: &Connection, id: i64, base: Option<i64>, parts: i64) -> rusqlite::Result<()> {
        conn.execute(
            "INSERT INTO sg_logs (id, base_log, base_parts, tip) VALUES (?1, ?2, ?3, 0)",
            params![id, base, parts],
        )
        .map(|_| ())
    }

    #[test]
    fn a_walk_goes_down_every_base_to_the_root() -> TestResult {
        let conn = file()?;
        log(&conn, 1, None, 0)?;
        log(&conn, 2, Some(1), 2)?;
        log(&conn, 3, Some(2), 3)?;
        let seg = |log, from, upto| LogSegment { log, from, upto };
        let chain = |segments, end| LogChain { segments, end };
        assert_eq!(
            walk_log(&conn, 3, 5)?,
            chain(
                vec![seg(3, 3, 5), seg(2, 2, 3), seg(1, 0, 2)],
                ChainEnd::Root
            )
        );
        assert_eq!(
            walk_log(&conn, 1, 4)?,
            chain(vec![seg(1, 0, 4)], ChainEnd::Root)
        );
        Ok(())
    }

    #[test]
    fn a_walk_says_where_a_log_is_missing_and_when_bases_do_not_end() -> TestResult {
        let conn = file()?;
        log(&conn, 4, Some(99), 2)?;
        assert_eq!(
            walk_log(&conn, 4, 3)?,
            LogChain {
                segments: vec![LogSegment {
                    log: 4,
                    from: 2,
                    upto: 3
                }],
                end: ChainEnd::Missing { log: 99, upto: 2 }
            }
        );
        assert_eq!(
            walk_log(&conn, 9, 1)?,
            LogChain {
                segments: vec![],
                end: ChainEnd::Missing { log: 9, upto: 1 }
            }
        );
        // A log that is its own base.
        log(&conn, 5, Some(5), 1)?;
        let chain = walk_log(&conn, 5, 1)?;
        assert_eq!(
            (chain.segments.len(), chain.end),
            (MAX_LOG_BASES, ChainEnd::Endless)
        );
        Ok(())
    }

    fn row(
        conn: &Connection,
        seq: i64,
        parent_seq: Option<i64>,
        stored: &StoredRecord,
    ) -> TestResult {
        let (env, hash) = seal(CODEC_BINCODE, &encode_record(stored)?);
        conn.execute(
            "INSERT INTO sg_checkpoints (seq, thread, ns, id, parent, parent_seq, step, source, created_at, metadata, depth, body_hash, body)
             VALUES (?1, 't', '', ?2, NULL, ?3, 0, 'loop', 0, '{}', 0, ?4, ?5)",
            params![seq, id_bytes(CheckpointId::from_u128(seq.unsigned_abs().into())), parent_seq, &hash[..], env],
        )?;
        Ok(())
    }

    #[test]
    fn a_record_is_its_deltas_applied_on_the_nearest_whole_one() -> TestResult {
        let conn = file()?;
        let mut first = StateRecord::default();
        first.set_field("a", ValueRef::Blob(1));
        first.set_field("b", ValueRef::Blob(2));
        let mut second = first.clone();
        second.set_field("b", ValueRef::Log { log: 1, parts: 1 });
        let mut third = second.clone();
        third.set_field("c", ValueRef::Inline(Arc::from(&b"1"[..])));
        row(&conn, 1, None, &first.to_whole_record())?;
        row(
            &conn,
            2,
            Some(1),
            &second.delta_from(&first).ok_or("no delta")?,
        )?;
        row(
            &conn,
            3,
            Some(2),
            &third.delta_from(&second).ok_or("no delta")?,
        )?;
        assert_eq!(*load_record(&conn, &|_| None, 3, "t")?, third);
        // A known record stops the walk: what it says is what the chain builds on.
        let known = Arc::new(first.clone());
        let from_known = |s: i64| (s == 2).then(|| known.clone());
        let mut expected = first.clone();
        expected.set_field("c", ValueRef::Inline(Arc::from(&b"1"[..])));
        assert_eq!(*load_record(&conn, &from_known, 3, "t")?, expected);
        Ok(())
    }

    #[test]
    fn a_delta_whose_parent_is_gone_is_an_integrity_error() -> TestResult {
        let conn = file()?;
        let mut record = StateRecord::default();
        record.set_field("a", ValueRef::Blob(1));
        let delta = record
            .delta_from(&StateRecord::default())
            .ok_or("no delta")?;
        row(&conn, 2, Some(1), &delta)?;
        row(&conn, 3, None, &delta)?;
        for seq in [2, 3] {
            assert!(matches!(
                load_record(&conn, &|_| None, seq, "t"),
                Err(CheckpointError::Integrity { .. })
            ));
        }
        Ok(())
    }
}
