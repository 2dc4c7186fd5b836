//! Maintenance: deleting, copying and pruning threads, and garbage collection of values no
//! checkpoint refers to (safe while other processes write; decision 0046).

use tokio_postgres::types::Type;
use tokio_postgres::Transaction;

use super::record::{base_text, refs};
use super::resolve::state_of;
use super::sql::{col, id_bytes, id_from, Sql};
use super::write::lock_shared;
use crate::{CheckpointError, CheckpointId, Namespace, Retention, ThreadId};

/// Take this schema's collection lock alone, for the transaction: it waits for every open
/// put (which holds it shared) to finish, and holds new ones back until the commit.
async fn lock_alone(tx: &Transaction<'_>, sql: &Sql) -> Result<(), CheckpointError> {
    sql.query(
        tx,
        "SELECT pg_advisory_xact_lock($1)",
        &[(&sql.gc_lock_key(), Type::INT8)],
        "taking the collection lock",
    )
    .await?;
    Ok(())
}

/// Delete the values among `candidates` that no checkpoint refers to. Runs under the
/// collection lock taken alone, so no put that refers to one of them is open.
async fn collect(
    tx: &Transaction<'_>,
    sql: &Sql,
    candidates: Vec<Vec<u8>>,
) -> Result<u64, CheckpointError> {
    if candidates.is_empty() {
        return Ok(0);
    }
    let rows = sql
        .query(
            tx,
            "DELETE FROM {s}.sg_values v WHERE v.hash = ANY($1) AND NOT EXISTS \
             (SELECT 1 FROM {s}.sg_checkpoints c WHERE c.refs @> ARRAY[v.hash]) RETURNING 1",
            &[(&candidates, Type::BYTEA_ARRAY)],
            "collecting unreferenced values",
        )
        .await?;
    Ok(rows.len() as u64)
}

/// The distinct hashes in the `refs` arrays of deleted rows.
fn hashes_of(rows: &[tokio_postgres::Row]) -> Result<Vec<Vec<u8>>, CheckpointError> {
    let mut all = std::collections::BTreeSet::new();
    for row in rows {
        let refs: Vec<Vec<u8>> = col(row, 0)?;
        all.extend(refs);
    }
    Ok(all.into_iter().collect())
}

/// [`Saver::delete_thread`](crate::Saver::delete_thread), with its runs and receipts, and the
/// values only it referred to.
pub(crate) async fn delete_thread(
    tx: &Transaction<'_>,
    sql: &Sql,
    thread: &ThreadId,
) -> Result<(), CheckpointError> {
    lock_alone(tx, sql).await?;
    let t = thread.as_str();
    let p: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)] = &[(&t, Type::TEXT)];
    sql.query(
        tx,
        "DELETE FROM {s}.sg_heads WHERE thread = $1",
        p,
        "deleting heads",
    )
    .await?;
    sql.query(
        tx,
        "DELETE FROM {s}.sg_writes WHERE thread = $1",
        p,
        "deleting pending writes",
    )
    .await?;
    sql.query(
        tx,
        "DELETE FROM {s}.sg_receipts r USING {s}.sg_runs u \
         WHERE r.run_id = u.run_id AND u.thread = $1",
        p,
        "deleting receipts",
    )
    .await?;
    for (statement, what) in [
        ("DELETE FROM {s}.sg_runs WHERE thread = $1", "deleting runs"),
        // A worker still running one of these runs loses its lease: its next write fails.
        (
            "DELETE FROM {s}.sg_run_queue WHERE thread = $1",
            "deleting queued runs",
        ),
        (
            "DELETE FROM {s}.sg_run_writes WHERE thread = $1",
            "deleting the run write log",
        ),
    ] {
        sql.query(tx, statement, p, what).await?;
    }
    let deleted = sql
        .query(
            tx,
            "DELETE FROM {s}.sg_checkpoints WHERE thread = $1 RETURNING refs",
            p,
            "deleting checkpoints",
        )
        .await?;
    collect(tx, sql, hashes_of(&deleted)?).await?;
    Ok(())
}

/// [`CheckpointError::StaleParent`] when `to` has checkpoints already (its heads locked).
async fn refuse_existing(
    tx: &Transaction<'_>,
    sql: &Sql,
    to: &ThreadId,
) -> Result<(), CheckpointError> {
    let row = sql
        .query_opt(
            tx,
            "SELECT ns, head FROM {s}.sg_heads WHERE thread = $1 ORDER BY ns LIMIT 1 FOR UPDATE",
            &[(&to.as_str(), Type::TEXT)],
            "looking for the target thread's checkpoints",
        )
        .await?;
    match row {
        Some(r) => Err(CheckpointError::StaleParent {
            thread: to.clone(),
            ns: Namespace::parse(col(&r, 0)?),
            expected: None,
            found: Some(id_from(col(&r, 1)?, to.as_str(), "sg_heads.head")?),
        }),
        None => Ok(()),
    }
}

const CHECKPOINT_COLUMNS: &str = "ns, id, parent, step, source, created_at, control, metadata, \
                                  wrote, base, since_base, refs";

/// [`Saver::copy_thread`](crate::Saver::copy_thread): rows copied in the database; the
/// values are shared, not copied.
pub(crate) async fn copy_thread(
    tx: &Transaction<'_>,
    sql: &Sql,
    from: &ThreadId,
    to: &ThreadId,
) -> Result<(), CheckpointError> {
    lock_shared(tx, sql).await?;
    refuse_existing(tx, sql, to).await?;
    let p: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)] =
        &[(&from.as_str(), Type::TEXT), (&to.as_str(), Type::TEXT)];
    sql.query(
        tx,
        &format!(
            "INSERT INTO {{s}}.sg_checkpoints (thread, {CHECKPOINT_COLUMNS}) \
             SELECT $2, {CHECKPOINT_COLUMNS} FROM {{s}}.sg_checkpoints WHERE thread = $1"
        ),
        p,
        "copying checkpoints",
    )
    .await?;
    sql.query(
        tx,
        "INSERT INTO {s}.sg_heads (thread, ns, head) \
         SELECT $2, ns, head FROM {s}.sg_heads WHERE thread = $1",
        p,
        "copying heads",
    )
    .await?;
    sql.query(
        tx,
        "INSERT INTO {s}.sg_writes (thread, ns, checkpoint, task, idx, node, kind) \
         SELECT $2, ns, checkpoint, task, idx, node, kind FROM {s}.sg_writes \
         WHERE thread = $1 ORDER BY seq",
        p,
        "copying pending writes",
    )
    .await?;
    Ok(())
}

/// The root-namespace branch ending at `head`: every ancestor still stored.
const BRANCH: &str = "
WITH RECURSIVE branch AS (
    SELECT id, parent FROM {s}.sg_checkpoints WHERE thread = $1 AND ns = '' AND id = $3
  UNION ALL
    SELECT c.id, c.parent FROM branch b JOIN {s}.sg_checkpoints c
      ON c.thread = $1 AND c.ns = '' AND c.id = b.parent
)";

/// [`Saver::copy_branch`](crate::Saver::copy_branch).
pub(crate) async fn copy_branch(
    tx: &Transaction<'_>,
    sql: &Sql,
    from: &ThreadId,
    to: &ThreadId,
    head: CheckpointId,
) -> Result<(), CheckpointError> {
    lock_shared(tx, sql).await?;
    refuse_existing(tx, sql, to).await?;
    let head_b = id_bytes(head);
    let p: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)] = &[
        (&from.as_str(), Type::TEXT),
        (&to.as_str(), Type::TEXT),
        (&head_b, Type::BYTEA),
    ];
    let copied = sql
        .query(
            tx,
            &format!(
                "{BRANCH} INSERT INTO {{s}}.sg_checkpoints (thread, {CHECKPOINT_COLUMNS}) \
                 SELECT $2, {CHECKPOINT_COLUMNS} FROM {{s}}.sg_checkpoints \
                 WHERE thread = $1 AND ns = '' AND id IN (SELECT id FROM branch) RETURNING 1"
            ),
            p,
            "copying a branch",
        )
        .await?;
    if copied.is_empty() {
        return Err(CheckpointError::NotFound {
            thread: from.clone(),
            ns: Namespace::root(),
            id: head,
        });
    }
    sql.query(
        tx,
        "INSERT INTO {s}.sg_heads (thread, ns, head) VALUES ($2, '', $3)",
        p,
        "creating the copy's head",
    )
    .await?;
    sql.query(
        tx,
        &format!(
            "{BRANCH} INSERT INTO {{s}}.sg_writes (thread, ns, checkpoint, task, idx, node, kind) \
             SELECT $2, ns, checkpoint, task, idx, node, kind FROM {{s}}.sg_writes \
             WHERE thread = $1 AND ns = '' AND checkpoint IN (SELECT id FROM branch) ORDER BY seq"
        ),
        p,
        "copying the branch's pending writes",
    )
    .await?;
    Ok(())
}

/// [`Saver::prune`](crate::Saver::prune): in each namespace, the checkpoints `retention`
/// does not keep are deleted; a kept one whose parent goes becomes a root with a base
/// record of its whole state. Returns how many were deleted.
pub(crate) async fn prune(
    tx: &Transaction<'_>,
    sql: &Sql,
    thread: &ThreadId,
    retention: Retention,
) -> Result<usize, CheckpointError> {
    lock_alone(tx, sql).await?;
    let t = thread.as_str();
    let rows = sql
        .query(
            tx,
            "SELECT ns, id, parent, created_at FROM {s}.sg_checkpoints WHERE thread = $1 \
             ORDER BY ns, id DESC",
            &[(&t, Type::TEXT)],
            "listing checkpoints to prune",
        )
        .await?;
    let mut doomed: Vec<(String, Vec<u8>)> = Vec::new();
    let mut kept: std::collections::BTreeSet<(String, Vec<u8>)> = Default::default();
    let mut orphans: Vec<(String, CheckpointId, Vec<u8>)> = Vec::new();
    let mut rank = 0usize;
    let mut last_ns: Option<String> = None;
    for row in &rows {
        let ns: String = col(row, 0)?;
        if last_ns.as_deref() != Some(ns.as_str()) {
            rank = 0;
            last_ns = Some(ns.clone());
        }
        let created: i64 = col(row, 3)?;
        let keep = match retention {
            Retention::KeepLast(n) => rank < n.max(1),
            Retention::NewerThan(ms) => rank == 0 || super::sql::to_u64(created) >= ms,
        };
        rank += 1;
        let id: Vec<u8> = col(row, 1)?;
        if keep {
            if let Some(parent) = col::<Option<Vec<u8>>>(row, 2)? {
                orphans.push((ns.clone(), id_from(&id, t, "sg_checkpoints.id")?, parent));
            }
            kept.insert((ns, id));
        } else {
            doomed.push((ns, id));
        }
    }
    if doomed.is_empty() {
        return Ok(0);
    }
    for (ns, id, parent) in orphans {
        if !kept.contains(&(ns.clone(), parent)) {
            make_root(tx, sql, thread, &Namespace::parse(&ns), id).await?;
        }
    }
    let (nss, ids): (Vec<String>, Vec<Vec<u8>>) = doomed.into_iter().unzip();
    let p: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)] = &[
        (&t, Type::TEXT),
        (&nss, Type::TEXT_ARRAY),
        (&ids, Type::BYTEA_ARRAY),
    ];
    sql.query(
        tx,
        "DELETE FROM {s}.sg_writes w USING unnest($2::text[], $3::bytea[]) AS d(ns, id) \
         WHERE w.thread = $1 AND w.ns = d.ns AND w.checkpoint = d.id",
        p,
        "deleting pruned pending writes",
    )
    .await?;
    let deleted = sql
        .query(
            tx,
            "DELETE FROM {s}.sg_checkpoints c USING unnest($2::text[], $3::bytea[]) AS d(ns, id) \
             WHERE c.thread = $1 AND c.ns = d.ns AND c.id = d.id RETURNING c.refs",
            p,
            "deleting pruned checkpoints",
        )
        .await?;
    collect(tx, sql, hashes_of(&deleted)?).await?;
    Ok(deleted.len())
}

/// Make a kept checkpoint whose parent is pruned a root: its whole state as its base record.
async fn make_root(
    tx: &Transaction<'_>,
    sql: &Sql,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<(), CheckpointError> {
    let state = state_of(tx, sql, thread, ns, id).await?.unwrap_or_default();
    let all = refs(&Vec::new(), Some(&state));
    let text = base_text(&state);
    let id_b = id_bytes(id);
    sql.query(
        tx,
        "UPDATE {s}.sg_checkpoints SET parent = NULL, base = $4, since_base = 0, \
         refs = ARRAY(SELECT DISTINCT unnest(refs || $5::bytea[])) \
         WHERE thread = $1 AND ns = $2 AND id = $3",
        &[
            (&thread.as_str(), Type::TEXT),
            (&ns.as_str(), Type::TEXT),
            (&id_b, Type::BYTEA),
            (&text, Type::TEXT),
            (&all, Type::BYTEA_ARRAY),
        ],
        "making a kept checkpoint a root",
    )
    .await?;
    Ok(())
}

/// Delete every value no checkpoint refers to (values of puts refused mid-batch, or of a
/// schema edited by hand); how many were deleted.
pub(crate) async fn collect_all(tx: &Transaction<'_>, sql: &Sql) -> Result<u64, CheckpointError> {
    lock_alone(tx, sql).await?;
    let rows = sql
        .query(
            tx,
            "DELETE FROM {s}.sg_values v WHERE NOT EXISTS \
             (SELECT 1 FROM {s}.sg_checkpoints c WHERE c.refs @> ARRAY[v.hash]) RETURNING 1",
            &[],
            "collecting unreferenced values",
        )
        .await?;
    Ok(rows.len() as u64)
}
