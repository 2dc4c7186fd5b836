//! Reads: checkpoint headers, the head, pending writes, history lists, what a
//! step changed, and the list of threads.

use std::collections::BTreeMap;

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::Type;
use tokio_postgres::{GenericClient, Row};

use super::record::{parse_wrote, PartRef};
use super::resolve::{load_fields, parts, state_of, values};
use super::sql::{bad_record, col, id_bytes, id_from, task_from, to_u64, Sql};
use crate::checkpoint::whole_first;
use crate::{
    validate_filter_key, Checkpoint, CheckpointError, CheckpointId, Control, ListOptions,
    LoadedCheckpoint, Namespace, NamespaceInfo, PendingWrite, Source, StepChanges, ThreadId,
    ThreadInfo, ThreadStatus, WriteKind,
};

/// The header columns, in the order [`header`] reads them.
pub(crate) const HEADER: &str = "id, parent, step, source, created_at, control, metadata";

/// A checkpoint header from a row that starts with the [`HEADER`] columns.
pub(crate) fn header(row: &Row, thread: &str) -> Result<Checkpoint, CheckpointError> {
    let id = id_from(col::<&[u8]>(row, 0)?, thread, "sg_checkpoints.id")?;
    let parent = match col::<Option<&[u8]>>(row, 1)? {
        Some(b) => Some(id_from(b, thread, "sg_checkpoints.parent")?),
        None => None,
    };
    let source = match col::<&str>(row, 3)? {
        "input" => Source::Input,
        "loop" => Source::Loop,
        "update" => Source::Update,
        "fork" => Source::Fork,
        other => {
            return Err(bad_record(
                thread,
                id,
                "sg_checkpoints.source",
                format!("unknown source {other:?}"),
            ))
        }
    };
    let control: Control = serde_json::from_str(col::<&str>(row, 5)?)
        .map_err(|e| bad_record(thread, id, "sg_checkpoints.control", e))?;
    let metadata: BTreeMap<String, serde_json::Value> = serde_json::from_str(col::<&str>(row, 6)?)
        .map_err(|e| bad_record(thread, id, "sg_checkpoints.metadata", e))?;
    Ok(Checkpoint {
        id,
        parent,
        step: col(row, 2)?,
        source,
        created_at_ms: to_u64(col(row, 4)?),
        control,
        metadata,
    })
}

/// A checkpoint's header with its `wrote` record; `None` if it is not stored.
async fn header_row(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<Option<(Checkpoint, String)>, CheckpointError> {
    let id_b = id_bytes(id);
    let row = sql
        .query_opt(
            client,
            &format!(
                "SELECT {HEADER}, wrote FROM {{s}}.sg_checkpoints \
                 WHERE thread = $1 AND ns = $2 AND id = $3"
            ),
            &[
                (&thread.as_str(), Type::TEXT),
                (&ns.as_str(), Type::TEXT),
                (&id_b, Type::BYTEA),
            ],
            "reading a checkpoint header",
        )
        .await?;
    match row {
        Some(r) => Ok(Some((header(&r, thread.as_str())?, col::<String>(&r, 7)?))),
        None => Ok(None),
    }
}

/// The pending writes recorded against a checkpoint, in the order they were recorded.
pub(crate) async fn pending(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<Vec<PendingWrite>, CheckpointError> {
    let id_b = id_bytes(id);
    let rows = sql
        .query(
            client,
            "SELECT task, node, kind FROM {s}.sg_writes \
             WHERE thread = $1 AND ns = $2 AND checkpoint = $3 ORDER BY seq",
            &[
                (&thread.as_str(), Type::TEXT),
                (&ns.as_str(), Type::TEXT),
                (&id_b, Type::BYTEA),
            ],
            "reading pending writes",
        )
        .await?;
    rows.iter()
        .map(|r| pending_write(r, thread.as_str(), id))
        .collect()
}

fn pending_write(
    row: &Row,
    thread: &str,
    id: CheckpointId,
) -> Result<PendingWrite, CheckpointError> {
    pending_write_at(row, 0, thread, id)
}

/// A pending write from a row's columns `task, node, kind` starting at `at`.
pub(crate) fn pending_write_at(
    row: &Row,
    at: usize,
    thread: &str,
    id: CheckpointId,
) -> Result<PendingWrite, CheckpointError> {
    let kind: WriteKind = serde_json::from_str(col::<&str>(row, at + 2)?)
        .map_err(|e| bad_record(thread, id, "sg_writes.kind", e))?;
    Ok(PendingWrite {
        task_id: task_from(col(row, at)?, thread, id)?,
        node: col(row, at + 1)?,
        kind,
    })
}

/// The function [`head`] calls, created with the tables: the head's header and its pending
/// writes (one row each, in order; one row of `NULL` writes when it has none) from one
/// call, in one round trip where a read transaction took five — at every invoke's start. A
/// `STABLE` function's statements all read the snapshot of the call. Each statement looks a
/// row up by its whole key, so the plan the server keeps for the connection stays an index
/// lookup however the rows of one thread dominate the table.
pub(crate) const HEAD_FUNCTION: &str = r#"
CREATE OR REPLACE FUNCTION {s}.sg_head_v1(p_thread text, p_ns text)
RETURNS TABLE(o_id bytea, o_parent bytea, o_step int8, o_source text, o_created int8,
    o_control text, o_metadata text, o_task bytea, o_node text, o_kind text)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_head bytea;
BEGIN
    SELECT h.head INTO v_head FROM {s}.sg_heads h
    WHERE h.thread = p_thread AND h.ns = p_ns;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.id, c.parent, c.step, c.source, c.created_at, c.control, c.metadata,
        w.task, w.node, w.kind
    FROM {s}.sg_checkpoints c
    LEFT JOIN {s}.sg_writes w
        ON w.thread = c.thread AND w.ns = c.ns AND w.checkpoint = c.id
    WHERE c.thread = p_thread AND c.ns = p_ns AND c.id = v_head
    ORDER BY w.seq;
END
$fn$;
"#;

/// [`Saver::head`](crate::Saver::head): the newest header with its pending writes, by one
/// call of [`HEAD_FUNCTION`] outside any explicit transaction.
pub(crate) async fn head(
    client: &ClientWrapper,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Option<crate::Head>, CheckpointError> {
    let rows = sql
        .call(
            client,
            "SELECT * FROM {s}.sg_head_v1($1, $2)",
            &[(&thread.as_str(), Type::TEXT), (&ns.as_str(), Type::TEXT)],
            "reading a thread's head",
        )
        .await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let checkpoint = header(first, thread.as_str())?;
    let mut pending = Vec::new();
    for row in &rows {
        if col::<Option<&[u8]>>(row, 7)?.is_some() {
            pending.push(pending_write_at(row, 7, thread.as_str(), checkpoint.id)?);
        }
    }
    Ok(Some(crate::Head {
        checkpoint,
        pending,
    }))
}

/// [`Saver::changes`](crate::Saver::changes): from what the checkpoint's put wrote, by field
/// name; a root (also one whose parent was pruned) reports every field.
pub(crate) async fn changes(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<StepChanges, CheckpointError> {
    let Some((checkpoint, wrote)) = header_row(client, sql, thread, ns, id).await? else {
        return Err(CheckpointError::NotFound {
            thread: thread.clone(),
            ns: ns.clone(),
            id,
        });
    };
    let fields = if checkpoint.parent.is_some() {
        let mut wrote = parse_wrote(&wrote, thread.as_str(), id)?;
        // By field name, as the SQLite saver reports them (a stable sort: two writes of one
        // field keep their order).
        wrote.sort_by(|a, b| a.0.cmp(&b.0));
        let vals = values(client, sql, thread, id, wrote.iter().map(|(_, p)| p)).await?;
        wrote
            .iter()
            .map(|(f, p)| (f.clone(), parts(std::slice::from_ref::<PartRef>(p), &vals)))
            .collect()
    } else {
        let state = state_of(client, sql, thread, ns, id)
            .await?
            .unwrap_or_default();
        load_fields(client, sql, thread, id, &state)
            .await?
            .into_iter()
            .map(|(f, p)| (f, whole_first(p)))
            .collect()
    };
    Ok(StepChanges {
        parent: checkpoint.parent,
        fields,
        pending: pending(client, sql, thread, ns, id).await?,
    })
}

/// [`Saver::list`](crate::Saver::list): newest first; the metadata filter is applied here,
/// exactly (JSON values compared as serde_json compares them).
pub(crate) async fn list(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    options: ListOptions,
) -> Result<Vec<Checkpoint>, CheckpointError> {
    for key in options.filter.keys() {
        validate_filter_key(key)?;
    }
    let before = options.before.map(id_bytes);
    let limit: Option<i64> = if options.filter.is_empty() {
        options.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
    } else {
        None
    };
    let rows = sql
        .query(
            client,
            &format!(
                "SELECT {HEADER} FROM {{s}}.sg_checkpoints \
                 WHERE thread = $1 AND ns = $2 AND ($3::bytea IS NULL OR id < $3) \
                 ORDER BY id DESC LIMIT $4"
            ),
            &[
                (&thread.as_str(), Type::TEXT),
                (&ns.as_str(), Type::TEXT),
                (&before, Type::BYTEA),
                (&limit, Type::INT8),
            ],
            "listing checkpoints",
        )
        .await?;
    let mut out = Vec::new();
    for row in &rows {
        if out.len() >= options.limit.unwrap_or(usize::MAX) {
            break;
        }
        let cp = header(row, thread.as_str())?;
        if matches_filter(&cp, &options.filter) {
            out.push(cp);
        }
    }
    Ok(out)
}

fn matches_filter(cp: &Checkpoint, filter: &BTreeMap<String, serde_json::Value>) -> bool {
    filter.iter().all(|(k, v)| match k.as_str() {
        "source" => v.as_str() == Some(cp.source.as_str()),
        "step" => v.as_i64() == Some(cp.step),
        _ => cp.metadata.get(k) == Some(v),
    })
}

/// [`Saver::list_threads`](crate::Saver::list_threads): threads with root-namespace
/// checkpoints, by thread id.
pub(crate) async fn list_threads(
    client: &impl GenericClient,
    sql: &Sql,
) -> Result<Vec<ThreadInfo>, CheckpointError> {
    let rows = sql
        .query(
            client,
            &format!(
                "SELECT {HEADER}, h.thread, \
                   (SELECT count(*) FROM {{s}}.sg_checkpoints n \
                    WHERE n.thread = h.thread AND n.ns = '') \
                 FROM {{s}}.sg_heads h JOIN {{s}}.sg_checkpoints c \
                   ON c.thread = h.thread AND c.ns = h.ns AND c.id = h.head \
                 WHERE h.ns = ''"
            ),
            &[],
            "listing threads",
        )
        .await?;
    let writes = sql
        .query(
            client,
            "SELECT w.task, w.node, w.kind, w.thread FROM {s}.sg_writes w \
             JOIN {s}.sg_heads h ON w.thread = h.thread AND w.ns = h.ns AND w.checkpoint = h.head \
             WHERE h.ns = '' ORDER BY w.seq",
            &[],
            "reading the heads' pending writes",
        )
        .await?;
    let mut pending: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for w in &writes {
        pending.entry(col(w, 3)?).or_default().push(w);
    }
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = col(row, 7)?;
        // A name that is not a valid thread id (only an edit of the tables makes one) is
        // left out rather than failing the whole list.
        let Ok(thread) = ThreadId::new(name.clone()) else {
            continue;
        };
        let checkpoint = header(row, &name)?;
        let count: i64 = col(row, 8)?;
        let writes = pending
            .get(&name)
            .map(|ws| {
                ws.iter()
                    .map(|w| pending_write(w, &name, checkpoint.id))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        let (last_step, updated_at_ms) = (checkpoint.step, checkpoint.created_at_ms);
        let loaded = LoadedCheckpoint {
            checkpoint,
            fields: BTreeMap::new(),
            pending: writes,
        };
        out.push(ThreadInfo {
            thread,
            checkpoints: usize::try_from(count).unwrap_or(0),
            last_step,
            status: ThreadStatus::of(&loaded),
            updated_at_ms,
        });
    }
    out.sort_by(|a, b| a.thread.cmp(&b.thread));
    Ok(out)
}

/// Every namespace of `thread` with its count and its oldest and newest checkpoint ids, by
/// namespace text (each end read through the primary key: `bytea` has no `min`/`max`).
pub(crate) async fn list_namespaces(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
) -> Result<Vec<NamespaceInfo>, CheckpointError> {
    let rows = sql
        .query(
            client,
            "SELECT g.ns, g.n, \
               (SELECT c.id FROM {s}.sg_checkpoints c WHERE c.thread = $1 AND c.ns = g.ns \
                ORDER BY c.id LIMIT 1), \
               (SELECT c.id FROM {s}.sg_checkpoints c WHERE c.thread = $1 AND c.ns = g.ns \
                ORDER BY c.id DESC LIMIT 1) \
             FROM (SELECT ns, count(*) AS n FROM {s}.sg_checkpoints WHERE thread = $1 \
                   GROUP BY ns) g ORDER BY g.ns",
            &[(&thread.as_str(), Type::TEXT)],
            "listing a thread's namespaces",
        )
        .await?;
    let name = thread.as_str();
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let ns: String = col(r, 0)?;
        let n: i64 = col(r, 1)?;
        let first = id_from(col::<&[u8]>(r, 2)?, name, "sg_checkpoints.id")?;
        let last = id_from(col::<&[u8]>(r, 3)?, name, "sg_checkpoints.id")?;
        out.push(NamespaceInfo::new(
            Namespace::parse(&ns),
            usize::try_from(n).unwrap_or(0),
            first,
            last,
        ));
    }
    // Byte order, as SQLite's and the memory saver's: the database's collation may differ.
    out.sort_by(|a, b| a.ns.as_str().cmp(b.ns.as_str()));
    Ok(out)
}
