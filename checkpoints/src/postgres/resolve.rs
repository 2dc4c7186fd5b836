//! Resolving records: a checkpoint's whole state from the nearest base record on its chain
//! and the deltas after it, and the values those records refer to, hash-checked.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::types::Type;
use tokio_postgres::{GenericClient, Row};

use super::record::{apply, parse_base, parse_wrote, Base, PartRef, Wrote};
use super::sql::{col, id_bytes, id_from, Sql};
use crate::envelope::{hex, open, CODEC_JSON};
use crate::{CheckpointError, CheckpointId, FieldPart, Namespace, ThreadId};

/// The walk from the checkpoint `$3` of thread `$1`, namespace `$2`, up its parents to the
/// first one with a base record (at most `full_every` rows): a `walk` of `id, base, wrote`
/// and `n`, the distance from `$3`. A macro so that [`WALK`] and the get function
/// (`get::FUNCTION`) are made of one text.
macro_rules! walk_cte {
    () => {
        "
WITH RECURSIVE walk AS (
    SELECT c.id, c.parent, c.base, c.wrote, 0 AS n
    FROM {s}.sg_checkpoints c
    WHERE c.thread = $1 AND c.ns = $2 AND c.id = $3
  UNION ALL
    SELECT c.id, c.parent, c.base, c.wrote, w.n + 1
    FROM walk w JOIN {s}.sg_checkpoints c
      ON c.thread = $1 AND c.ns = $2 AND c.id = w.parent
    WHERE w.base IS NULL
)"
    };
}
pub(crate) use walk_cte;

/// The walk of [`walk_cte`], nearest first.
const WALK: &str = concat!(walk_cte!(), " SELECT id, base, wrote FROM walk ORDER BY n");

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
    fold_chain(&rows, 0, thread, id).map(|(state, _)| Some(state))
}

/// The state at the first of `rows`, a chain nearest first whose columns from `at` are
/// `id, base, wrote` (as [`WALK`] reads them), with how many records after its base record
/// it is.
///
/// # Errors
/// [`CheckpointError::Integrity`] for a damaged record or a chain without a base record.
pub(crate) fn fold_chain<'r>(
    rows: impl IntoIterator<Item = &'r Row>,
    at: usize,
    thread: &ThreadId,
    id: CheckpointId,
) -> Result<(Base, i32), CheckpointError> {
    let t = thread.as_str();
    let mut deltas: Vec<Wrote> = Vec::new();
    let mut base: Option<Base> = None;
    for row in rows {
        let row_id = id_from(col::<&[u8]>(row, at)?, t, "sg_checkpoints.id")?;
        if let Some(text) = col::<Option<&str>>(row, at + 1)? {
            base = Some(parse_base(text, t, row_id)?);
            break;
        }
        deltas.push(parse_wrote(col::<&str>(row, at + 2)?, t, row_id)?);
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
    Ok((state, since))
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
    let wanted = wanted(refs);
    let out = fetch_values(client, sql, thread, checkpoint, &wanted).await?;
    match missing(&wanted, &out) {
        Some(hash) => Err(bad_value(thread, checkpoint, hash, "the value is missing")),
        None => Ok(out),
    }
}

/// The values of `wanted` that are stored, each opened and hash-checked: hash → payload.
///
/// # Errors
/// As [`open_values`]; storage errors.
pub(crate) async fn fetch_values(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    checkpoint: CheckpointId,
    wanted: &[[u8; 32]],
) -> Result<HashMap<[u8; 32], Vec<u8>>, CheckpointError> {
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
    open_values(&rows, 0, thread, checkpoint)
}

/// The hashes `refs` refer to, sorted, each once.
pub(crate) fn wanted<'r>(refs: impl IntoIterator<Item = &'r PartRef>) -> Vec<[u8; 32]> {
    let mut wanted: Vec<[u8; 32]> = refs.into_iter().map(|p| p.hash).collect();
    wanted.sort_unstable();
    wanted.dedup();
    wanted
}

/// The first of `wanted` that `values` lacks.
pub(crate) fn missing<'w>(
    wanted: &'w [[u8; 32]],
    values: &HashMap<[u8; 32], Vec<u8>>,
) -> Option<&'w [u8; 32]> {
    wanted.iter().find(|h| !values.contains_key(*h))
}

/// The values in `rows`, whose columns from `at` are `hash, data`, each opened and
/// hash-checked: hash → payload.
///
/// # Errors
/// [`CheckpointError::Integrity`] naming thread, checkpoint and value for bytes that do not
/// match their hash or a bad envelope.
pub(crate) fn open_values<'r>(
    rows: impl IntoIterator<Item = &'r Row>,
    at: usize,
    thread: &ThreadId,
    checkpoint: CheckpointId,
) -> Result<HashMap<[u8; 32], Vec<u8>>, CheckpointError> {
    let mut out = HashMap::new();
    for row in rows {
        let hash: &[u8] = col(row, at)?;
        let data: &[u8] = col(row, at + 1)?;
        let payload =
            open(data, CODEC_JSON, hash).map_err(|e| bad_value(thread, checkpoint, hash, &e))?;
        let key: [u8; 32] = hash.try_into().map_err(|_| {
            let detail = format!("a hash of {} bytes, not 32", hash.len());
            bad_value(thread, checkpoint, hash, &detail)
        })?;
        out.insert(key, payload.to_vec());
    }
    Ok(out)
}

/// An integrity error for the value `hash` of `checkpoint`.
pub(crate) fn bad_value(
    thread: &ThreadId,
    checkpoint: CheckpointId,
    hash: &[u8],
    detail: &str,
) -> CheckpointError {
    CheckpointError::Integrity {
        thread: thread.to_string(),
        checkpoint: checkpoint.to_string(),
        blob: hex(hash),
        detail: detail.to_owned(),
    }
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
