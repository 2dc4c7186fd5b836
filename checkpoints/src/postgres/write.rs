//! Writes: a batch of puts in one transaction (the parent check under the head row's lock,
//! the rows stored together by `rows`), and a task's pending writes in one statement.

use std::collections::HashMap;

use tokio_postgres::types::Type;
use tokio_postgres::{Client, GenericClient};

use super::known::{Known, KnownHeads};
use super::record::{apply, seal_writes, Base, Wrote};
use super::resolve::state_of;
use super::rows::Rows;
use super::sql::{col, id_bytes, id_from, task_bytes, Sql};
use super::PostgresOptions;
use crate::{
    CheckpointError, CheckpointId, Namespace, PendingWrite, PutCheckpoint, Source, ThreadId,
};

/// Lock `(thread, ns)`'s head row and read it, with the parent's distance from its base
/// record (`NULL` when the parent is not stored or not asked for).
const HEAD: &str = "
SELECT h.head, p.since_base
FROM {s}.sg_heads h
LEFT JOIN {s}.sg_checkpoints p ON p.thread = h.thread AND p.ns = h.ns AND p.id = $3
WHERE h.thread = $1 AND h.ns = $2
FOR UPDATE OF h";

/// What a batch knows of the threads whose head rows it has locked: each one's head, and how
/// far from its base record each checkpoint the batch wrote is. A put that extends one of
/// them skips the head query (the row stays locked until the commit).
#[derive(Default)]
struct Locked {
    heads: HashMap<(ThreadId, Namespace), Option<CheckpointId>>,
    since: HashMap<(ThreadId, Namespace, CheckpointId), i32>,
}

impl Locked {
    /// The head and the parent's `since_base`, if this batch knows both.
    fn known(&self, put: &PutCheckpoint) -> Option<(Option<CheckpointId>, Option<i32>)> {
        let key = (put.thread.clone(), put.ns.clone());
        let head = *self.heads.get(&key)?;
        match put.checkpoint.parent {
            None => Some((head, None)),
            Some(p) => {
                let since = self.since.get(&(key.0, key.1, p))?;
                Some((head, Some(*since)))
            }
        }
    }
}

/// Store `puts` in order in one transaction. A put refused by a check (stale parent, missing
/// parent, id not after its parent, value too large) stores nothing and the others go on;
/// the first such error is returned after the commit. A storage error fails the batch.
pub(crate) async fn put_batch(
    tx: &Client,
    sql: &Sql,
    (options, known): (&PostgresOptions, &KnownHeads),
    puts: Vec<PutCheckpoint>,
) -> Result<Result<(), CheckpointError>, CheckpointError> {
    let mut first_error = None;
    let mut rows = Rows::default();
    let mut locked = Locked::default();
    for put in puts {
        match put_one(tx, sql, options, &put, &mut locked, &mut rows).await {
            Ok(Ok((wrote, base, since))) => learn(known, &put, &wrote, base, since),
            Ok(Err(refused)) => {
                known.forget(&put.thread, &put.ns);
                first_error.get_or_insert(refused);
            }
            Err(storage) => return Err(storage),
        }
    }
    rows.store(tx, sql, true).await?;
    Ok(first_error.map_or(Ok(()), Err))
}

/// Move what `known` holds of `put`'s thread to `put`'s checkpoint: its state is its base
/// record if it has one, or the known parent's state with `wrote` applied; neither, and the
/// thread is forgotten.
fn learn(known: &KnownHeads, put: &PutCheckpoint, wrote: &Wrote, base: Option<Base>, since: i32) {
    let cp = &put.checkpoint;
    let next = match base {
        Some(state) => Some(Known {
            head: cp.id,
            since,
            state,
        }),
        None => known
            .take(&put.thread, &put.ns)
            .filter(|k| Some(k.head) == cp.parent)
            .map(|mut k| {
                apply(&mut k.state, wrote);
                k.head = cp.id;
                k.since = since;
                k
            }),
    };
    match next {
        Some(k) => known.remember(&put.thread, &put.ns, k),
        None => known.forget(&put.thread, &put.ns),
    }
}

/// Take this schema's garbage-collection lock shared, for the transaction: a collection
/// (which takes it alone) never runs while a put that refers to stored values is open.
pub(crate) async fn lock_shared(tx: &impl GenericClient, sql: &Sql) -> Result<(), CheckpointError> {
    sql.query(
        tx,
        "SELECT pg_advisory_xact_lock_shared($1)",
        &[(&sql.gc_lock_key(), Type::INT8)],
        "taking the collection lock shared",
    )
    .await?;
    Ok(())
}

/// The head of `(thread, ns)`, locked, and the parent's `since_base` (if stored). A thread
/// without a head row gets one (pointing at `id`) when `create` is set.
async fn lock_head(
    tx: &Client,
    sql: &Sql,
    put: &PutCheckpoint,
    create: bool,
) -> Result<Option<(Option<CheckpointId>, Option<i32>)>, CheckpointError> {
    let (t, ns) = (put.thread.as_str(), put.ns.as_str());
    let parent = put.checkpoint.parent.map(id_bytes);
    for _ in 0..2 {
        let row = sql
            .query_opt(
                tx,
                HEAD,
                &[(&t, Type::TEXT), (&ns, Type::TEXT), (&parent, Type::BYTEA)],
                "locking the thread's head",
            )
            .await?;
        if let Some(row) = row {
            let head = id_from(col(&row, 0)?, t, "sg_heads.head")?;
            return Ok(Some((Some(head), col(&row, 1)?)));
        }
        if !create {
            return Ok(None);
        }
        let id = id_bytes(put.checkpoint.id);
        let inserted = sql
            .query(
                tx,
                "INSERT INTO {s}.sg_heads (thread, ns, head) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING RETURNING 1",
                &[(&t, Type::TEXT), (&ns, Type::TEXT), (&id, Type::BYTEA)],
                "creating the thread's head",
            )
            .await?;
        if !inserted.is_empty() {
            return Ok(Some((None, None)));
        }
        // Another writer created the thread meanwhile: read (and lock) its head.
    }
    Ok(None)
}

/// Check one put and write its row: what it wrote, its whole state if its row holds it, and
/// its distance from its base record; `Ok(Err(_))` for a put refused by a check (nothing of
/// it was written).
async fn put_one(
    tx: &Client,
    sql: &Sql,
    options: &PostgresOptions,
    put: &PutCheckpoint,
    batch: &mut Locked,
    rows: &mut Rows,
) -> Result<Result<(Wrote, Option<Base>, i32), CheckpointError>, CheckpointError> {
    let (wrote, values) = match seal_writes(&put.writes, options.max_value_bytes) {
        Ok(sealed) => sealed,
        Err(e) => return Ok(Err(e)),
    };
    let cp = &put.checkpoint;
    let must_extend_head = matches!(cp.source, Source::Loop | Source::Input);
    let key = (put.thread.clone(), put.ns.clone());
    let (head, parent_since) = match batch.known(put) {
        Some(known) => known,
        None => {
            // The head row reads as this batch left it only once its rows are stored.
            if batch.heads.contains_key(&key) && !rows.is_empty() {
                rows.store(tx, sql, false).await?;
            }
            match lock_head(tx, sql, put, cp.parent.is_none()).await? {
                Some(row) => {
                    batch.heads.insert(key.clone(), row.0);
                    row
                }
                None => (None, None),
            }
        }
    };
    if must_extend_head && cp.parent != head {
        return Ok(Err(stale(put, head)));
    }
    let since_base = match (cp.parent, parent_since) {
        (None, _) => 0,
        (Some(parent), None) => return Ok(Err(not_found(&put.thread, &put.ns, parent))),
        (Some(parent), Some(_)) if cp.id <= parent => {
            return Ok(Err(CheckpointError::IdNotAfterParent {
                thread: put.thread.clone(),
                ns: put.ns.clone(),
                id: cp.id,
                parent,
            }))
        }
        (Some(_), Some(since)) => since.saturating_add(1),
    };
    let base = match cp.parent {
        None => Some(Base::new()),
        Some(parent) if since_base >= i32::try_from(options.full_every).unwrap_or(i32::MAX) => {
            // The parent may be a row of this batch not stored yet.
            if !rows.is_empty() {
                rows.store(tx, sql, false).await?;
            }
            Some(
                state_of(tx, sql, &put.thread, &put.ns, parent)
                    .await?
                    .ok_or_else(|| not_found(&put.thread, &put.ns, parent))?,
            )
        }
        Some(_) => None,
    };
    let base = base.map(|mut b| {
        apply(&mut b, &wrote);
        b
    });
    rows.push(put, (&wrote, base.as_ref(), since_base), values)?;
    let stored_since = if base.is_some() { 0 } else { since_base };
    batch.heads.insert(key.clone(), head.max(Some(cp.id)));
    batch.since.insert((key.0, key.1, cp.id), stored_since);
    Ok(Ok((wrote, base, stored_since)))
}

fn stale(put: &PutCheckpoint, found: Option<CheckpointId>) -> CheckpointError {
    CheckpointError::StaleParent {
        thread: put.thread.clone(),
        ns: put.ns.clone(),
        expected: put.checkpoint.parent,
        found,
    }
}

fn not_found(thread: &ThreadId, ns: &Namespace, id: CheckpointId) -> CheckpointError {
    CheckpointError::NotFound {
        thread: thread.clone(),
        ns: ns.clone(),
        id,
    }
}

/// Record pending writes against checkpoint `id` in one statement (one short transaction):
/// the writes given for a task replace the task's earlier ones; `false` if the checkpoint is
/// not stored (nothing written).
const PUT_WRITES: &str = "
WITH ok AS (
    SELECT 1 FROM {s}.sg_checkpoints
    WHERE thread = $1 AND ns = $2 AND id = $3
    FOR SHARE
),
d AS (
    DELETE FROM {s}.sg_writes
    WHERE thread = $1 AND ns = $2 AND checkpoint = $3 AND task = ANY($4)
      AND EXISTS (SELECT 1 FROM ok)
),
i AS (
    INSERT INTO {s}.sg_writes (thread, ns, checkpoint, task, idx, node, kind)
    SELECT $1, $2, $3, w.task, w.idx, w.node, w.kind
    FROM unnest($4::bytea[], $5::int4[], $6::text[], $7::text[])
         WITH ORDINALITY AS w(task, idx, node, kind, ord)
    WHERE EXISTS (SELECT 1 FROM ok)
    ORDER BY w.ord
)
SELECT count(*) FROM ok";

/// [`Saver::put_writes`](crate::Saver::put_writes).
pub(crate) async fn put_writes(
    client: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
    writes: Vec<PendingWrite>,
) -> Result<(), CheckpointError> {
    let mut tasks = Vec::with_capacity(writes.len());
    let mut idx = Vec::with_capacity(writes.len());
    let mut nodes = Vec::with_capacity(writes.len());
    let mut kinds = Vec::with_capacity(writes.len());
    for (i, w) in writes.iter().enumerate() {
        tasks.push(task_bytes(w.task_id));
        idx.push(i32::try_from(i).unwrap_or(i32::MAX));
        nodes.push(w.node.as_str());
        kinds.push(
            serde_json::to_string(&w.kind)
                .map_err(|e| crate::StorageError::new("encoding a pending write", e))?,
        );
    }
    let id_b = id_bytes(id);
    let row = sql
        .query_opt(
            client,
            PUT_WRITES,
            &[
                (&thread.as_str(), Type::TEXT),
                (&ns.as_str(), Type::TEXT),
                (&id_b, Type::BYTEA),
                (&tasks, Type::BYTEA_ARRAY),
                (&idx, Type::INT4_ARRAY),
                (&nodes, Type::TEXT_ARRAY),
                (&kinds, Type::TEXT_ARRAY),
            ],
            "recording pending writes",
        )
        .await?;
    let found: i64 = match &row {
        Some(r) => col(r, 0)?,
        None => 0,
    };
    if found == 0 {
        return Err(not_found(thread, ns, id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::WriteKind;

    #[test]
    fn an_outputs_stored_kind_starts_as_the_settling_delete_expects(
    ) -> Result<(), serde_json::Error> {
        let out = serde_json::to_string(&WriteKind::Output(serde_json::json!({"a": [1]})))?;
        assert!(out.starts_with("{\"Output\":"), "{out}");
        for other in [
            WriteKind::Error("Output".into()),
            WriteKind::Resume(vec![serde_json::json!("{\"Output\":")]),
        ] {
            assert!(!serde_json::to_string(&other)?.starts_with("{\"Output\":"));
        }
        Ok(())
    }
}
