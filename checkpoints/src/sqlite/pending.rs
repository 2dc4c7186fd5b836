//! Pending writes (`sg_writes`): what the tasks of an unfinished step wrote, stored under the
//! checkpoint the step started from, each as a kind and a JSON value.

use std::collections::{BTreeSet, HashMap};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::sql::{id_bytes, integrity, SqlResult};
use crate::envelope::{hex, open, seal, CODEC_JSON};
use crate::{
    CheckpointError, CheckpointId, Namespace, PendingWrite, StorageError, TaskId, ThreadId,
    WriteKind,
};

/// An interrupt's stored value: `{"id": …, "value": …}`.
#[derive(Serialize)]
struct StoredInterrupt<'a> {
    id: &'a str,
    value: &'a serde_json::Value,
}

/// A write's `kind` column and the JSON bytes of its value.
fn encode(kind: &WriteKind) -> Result<(&'static str, Vec<u8>), serde_json::Error> {
    Ok(match kind {
        WriteKind::Output(v) => ("output", serde_json::to_vec(v)?),
        WriteKind::Error(e) => ("error", serde_json::to_vec(e)?),
        WriteKind::Interrupt { id, value } => (
            "interrupt",
            serde_json::to_vec(&StoredInterrupt { id, value })?,
        ),
        WriteKind::Resume(values) => ("resume", serde_json::to_vec(values)?),
    })
}

/// A write from its `kind` column and its JSON value (`None` for an unknown kind).
fn decode(kind: &str, value: serde_json::Value) -> Option<WriteKind> {
    Some(match kind {
        "output" => WriteKind::Output(value),
        "error" => WriteKind::Error(value.as_str().unwrap_or_default().to_owned()),
        "interrupt" => WriteKind::Interrupt {
            id: value
                .get("id")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned(),
            value: value.get("value").cloned().unwrap_or_default(),
        },
        "resume" => WriteKind::Resume(value.as_array().cloned().unwrap_or_default()),
        _ => return None,
    })
}

/// The pending writes stored under checkpoint `id`, in the order they were put.
pub(crate) fn load_writes(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<Vec<PendingWrite>, CheckpointError> {
    type Columns = (Vec<u8>, String, String, Vec<u8>, Vec<u8>);
    let t = thread.as_str();
    let cp = id.to_string();
    let mut stmt = conn
        .prepare_cached(
            "SELECT task, node, kind, hash, data FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3 ORDER BY ord, idx",
        )
        .during("preparing the pending writes query")?;
    let rows = stmt
        .query_map(
            params![t, ns.as_str(), id_bytes(id)],
            |r| -> rusqlite::Result<Columns> {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            },
        )
        .during("reading pending writes")?;
    let mut out = Vec::new();
    for row in rows {
        let (task, node, kind, hash, env) = row.during("reading a pending write")?;
        let payload = open(&env, CODEC_JSON, &hash)
            .map_err(|d| integrity(t, &cp, hex(&hash), format!("pending write: {d}")))?;
        let value: serde_json::Value = serde_json::from_slice(payload)
            .map_err(|e| integrity(t, &cp, hex(&hash), format!("pending write: {e}")))?;
        let task: [u8; 16] = task
            .as_slice()
            .try_into()
            .map_err(|_| integrity(t, &cp, "sg_writes.task", "bad task id"))?;
        let task_id = TaskId::from_u128(u128::from_be_bytes(task));
        let kind = decode(&kind, value).ok_or_else(|| {
            integrity(
                t,
                &cp,
                hex(&hash),
                format!("unknown pending write kind {kind:?}"),
            )
        })?;
        out.push(PendingWrite {
            task_id,
            node,
            kind,
        });
    }
    Ok(out)
}

/// Delete the task outputs recorded under checkpoint `id` (its step committed).
pub(crate) fn drop_outputs(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<(), CheckpointError> {
    conn.prepare_cached(
        "DELETE FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3 AND kind = 'output'",
    )
    .during("preparing the settled outputs delete")?
    .execute(params![thread.as_str(), ns.as_str(), id_bytes(id)])
    .during("deleting a settled step's recorded outputs")?;
    Ok(())
}

/// Store `writes` under checkpoint `id`, replacing what their tasks wrote there before; the
/// last `ord` given. `known_ord`: the last `ord` this writer gave a write of `id` (else it is
/// read: a scan of the checkpoint's writes, as no index leads with `ord`).
pub(crate) fn put_writes(
    conn: &Connection,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
    writes: &[PendingWrite],
    known_ord: Option<i64>,
) -> Result<i64, CheckpointError> {
    let t = thread.as_str();
    let exists: Option<i64> = conn
        .prepare_cached("SELECT seq FROM sg_checkpoints WHERE thread = ?1 AND ns = ?2 AND id = ?3")
        .during("preparing the checkpoint lookup")?
        .query_row(params![t, ns.as_str(), id_bytes(id)], |r| r.get(0))
        .optional()
        .during("looking up the checkpoint of pending writes")?;
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
        .during("preparing the pending writes delete")?
        .execute(params![
            t,
            ns.as_str(),
            id_bytes(id),
            task.as_u128().to_be_bytes()
        ])
        .during("deleting a task's earlier pending writes")?;
    }
    let mut ord: i64 = match known_ord {
        Some(ord) => ord,
        None => conn
            .prepare_cached("SELECT coalesce(max(ord), 0) FROM sg_writes WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3")
            .during("preparing the pending writes order query")?
            .query_row(params![t, ns.as_str(), id_bytes(id)], |r| r.get(0))
            .during("reading the pending writes order")?,
    };
    let mut idx_of: HashMap<TaskId, i64> = HashMap::new();
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO sg_writes (thread, ns, checkpoint, task, idx, ord, node, kind, hash, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .during("preparing the pending write insert")?;
    for w in writes {
        ord += 1;
        let idx = idx_of.entry(w.task_id).or_insert(0);
        let (kind, payload) =
            encode(&w.kind).map_err(|e| StorageError::new("encoding a pending write", e))?;
        let (env, hash) = seal(CODEC_JSON, &payload);
        insert
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
            .during("inserting a pending write")?;
        *idx += 1;
    }
    Ok(ord)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The value each kind was stored as before this encoder: the bytes must not change.
    fn old_encoding(kind: &WriteKind) -> Result<Vec<u8>, serde_json::Error> {
        let value = match kind {
            WriteKind::Output(v) => v.clone(),
            WriteKind::Error(e) => serde_json::Value::String(e.clone()),
            WriteKind::Interrupt { id, value } => json!({ "id": id, "value": value }),
            WriteKind::Resume(values) => serde_json::Value::Array(values.clone()),
        };
        serde_json::to_vec(&value)
    }

    fn kinds() -> Vec<WriteKind> {
        vec![
            WriteKind::Output(json!({"n": 1, "a": [true, null, "x\"y"]})),
            WriteKind::Error("boom \u{1F4A5}".into()),
            WriteKind::Interrupt {
                id: "i-1".into(),
                value: json!({"ask": "ok?"}),
            },
            WriteKind::Resume(vec![json!(1), json!("two")]),
        ]
    }

    #[test]
    fn every_kind_keeps_its_stored_bytes_and_round_trips() -> Result<(), Box<dyn std::error::Error>>
    {
        for kind in kinds() {
            let (name, bytes) = encode(&kind)?;
            assert_eq!(bytes, old_encoding(&kind)?, "{name}");
            let back = decode(name, serde_json::from_slice(&bytes)?).ok_or("unknown kind")?;
            assert_eq!(back, kind);
        }
        Ok(())
    }

    #[test]
    fn an_unknown_kind_is_not_decoded() {
        assert_eq!(decode("later", json!(1)), None);
    }
}
