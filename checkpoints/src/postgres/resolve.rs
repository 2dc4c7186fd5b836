//! Resolving records: a checkpoint's whole state from the nearest base record on its chain
//! and the deltas after it, and the values those records refer to, hash-checked.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::types::Type;
use tokio_postgres::GenericClient;

use super::record::{apply, parse_base, parse_wrote, Base, PartRef, Wrote};
use super::sql::{col, id_bytes, id_from, Sql};
use crate::envelope::{hex, open, CODEC_JSON};
use crate::{CheckpointError, CheckpointId, FieldPart, Namespace, ThreadId};

/// The walk from a checkpoint up its parents to the first one with a base record (at most
/// `full_every` rows), nearest first.
const WALK: &str = "
WITH RECURSIVE walk AS (
    SELECT c.id, c.parent, c.base, c.wrote, 0 AS n
    FROM {s}.sg_checkpoints c
    WHERE c.thread = $1 AND c.ns = $2 AND c.id = $3
  UNION ALL
    SELECT c.id, c.parent, c.base, c.wrote, w.n + 1
    FROM walk w JOIN {s}.sg_checkpoints c
      ON c.thread = $1 AND c.ns = $2 AND c.id = w.parent
    WHERE w.base IS NULL
)
SELECT id, base, wrote FROM walk ORDER BY n";

/// The whole state of checkpoint `id` as part references; `None` if it is not stored.
///
/// # Errors
/// [`CheckpointError::Integrity`] for a damaged record or a chain without a base record;
/// storage errors.
pub(crate) async fn state_of(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<Option<Base>, CheckpointError> {
    Ok(state_and_since(client, sql, thread, ns, id)
        .await?
        .map(|(state, _)| state))
}

/// [`state_of`], with how many records after its base record the checkpoint is.
pub(crate) async fn state_and_since(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<Option<(Base, i32)>, CheckpointError> {
    let rows = sql
        .query(
            client,
            WALK,
            &[
                (&thread.as_str(), Type::TEXT),
                (&ns.as_str(), Type::TEXT),
                (&id_bytes(id), Type::BYTEA),
            ],
            "walking a checkpoint's chain",
        )
        .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let t = thread.as_str();
    let mut deltas: Vec<Wrote> = Vec::with_capacity(rows.len());
    let mut base: Option<Base> = None;
    for row in &rows {
        let row_id = id_from(col::<&[u8]>(row, 0)?, t, "sg_checkpoints.id")?;
        if let Some(text) = col::<Option<&str>>(row, 1)? {
            base = Some(parse_base(text, t, row_id)?);
            break;
        }
        deltas.push(parse_wrote(col::<&str>(row, 2)?, t, row_id)?);
    }
    let Some(mut state) = base else {
        return Err(CheckpointError::Integrity {
            thread: t.to_owned(),
            checkpoint: id.to_string(),
            blob: "sg_checkpoints.base".to_owned(),
            detail: "its chain of parents ends without a base record".to_owned(),
        });
    };
    for wrote in deltas.iter().rev() {
        apply(&mut state, wrote);
    }
    let since = i32::try_from(deltas.len()).unwrap_or(i32::MAX);
    Ok(Some((state, since)))
}

/// The values behind `refs`, each opened and hash-checked: hash → payload.
///
/// # Errors
/// [`CheckpointError::Integrity`] naming thread, checkpoint and value for a missing value,
/// bytes that do not match their hash, or a bad envelope; storage errors.
pub(crate) async fn values(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    checkpoint: CheckpointId,
    refs: impl IntoIterator<Item = &PartRef>,
) -> Result<HashMap<[u8; 32], Vec<u8>>, CheckpointError> {
    let mut wanted: Vec<[u8; 32]> = refs.into_iter().map(|p| p.hash).collect();
    wanted.sort_unstable();
    wanted.dedup();
    if wanted.is_empty() {
        return Ok(HashMap::new());
    }
    let keys: Vec<&[u8]> = wanted.iter().map(|h| &h[..]).collect();
    let rows = sql
        .query(
            client,
            "SELECT hash, data FROM {s}.sg_values WHERE hash = ANY($1)",
            &[(&keys, Type::BYTEA_ARRAY)],
            "reading values",
        )
        .await?;
    let bad = |hash: &[u8], detail: String| CheckpointError::Integrity {
        thread: thread.to_string(),
        checkpoint: checkpoint.to_string(),
        blob: hex(hash),
        detail,
    };
    let mut out = HashMap::with_capacity(rows.len());
    for row in &rows {
        let hash: &[u8] = col(row, 0)?;
        let data: &[u8] = col(row, 1)?;
        let payload = open(data, CODEC_JSON, hash).map_err(|e| bad(hash, e))?;
        let key: [u8; 32] = hash
            .try_into()
            .map_err(|_| bad(hash, format!("a hash of {} bytes, not 32", hash.len())))?;
        out.insert(key, payload.to_vec());
    }
    if let Some(missing) = wanted.iter().find(|h| !out.contains_key(*h)) {
        return Err(bad(missing, "the value is missing".to_owned()));
    }
    Ok(out)
}

/// One field's parts as loaded.
pub(crate) fn parts(refs: &[PartRef], values: &HashMap<[u8; 32], Vec<u8>>) -> Vec<FieldPart> {
    refs.iter()
        .filter_map(|p| {
            let bytes = values.get(&p.hash)?.clone();
            Some(if p.whole {
                FieldPart::Whole(bytes)
            } else {
                FieldPart::Tail(bytes)
            })
        })
        .collect()
}

/// A whole state as loaded fields.
pub(crate) async fn load_fields(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    checkpoint: CheckpointId,
    state: &Base,
) -> Result<BTreeMap<String, Vec<FieldPart>>, CheckpointError> {
    let values = values(client, sql, thread, checkpoint, state.values().flatten()).await?;
    Ok(state
        .iter()
        .map(|(f, refs)| (f.clone(), parts(refs, &values)))
        .collect())
}
