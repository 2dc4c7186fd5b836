//! A batch that extends a thread's head as this saver last saw it, stored by one call of a
//! server-side function outside any explicit transaction: one round trip and the server's
//! implicit transaction, where the general path takes four (decision 0059).
//!
//! The function takes the collection lock shared, checks the lease (for a fenced saver),
//! moves the head from the batch's first parent to its last checkpoint — which under the head
//! row's lock succeeds only if the head is still that parent — and only then logs the fenced
//! write and stores rows and values. When the head did not move (another writer, a stale
//! hint, a lost lease), it wrote nothing and the batch takes the general path, which says
//! why.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::{ToSql, Type};

use super::known::{Known, KnownHeads};
use super::queue::Fence;
use super::record::{apply, base_due, seal_writes, Base};
use super::rows::Rows;
use super::sql::{col, id_bytes, Sql};
use super::PostgresOptions;
use crate::{CheckpointError, PutCheckpoint, Source};

/// The function that stores an extending batch, created with the tables (`schema`). A
/// function because the server keeps the plans of its statements per connection: the call
/// is planned in microseconds where the same work as one statement of common table
/// expressions took 0.9 ms of parsing and planning on every put, and no named prepared
/// statement is needed (a transaction-mode pooler cannot follow those; decision 0047).
/// `p_old_head` is `NULL` for a new thread (its head row is created, unless another writer
/// made it first); `p_run` is `NULL` for a saver without a lease.
pub(crate) const FUNCTION: &str = r#"
CREATE OR REPLACE FUNCTION {s}.sg_extend_v1(
    p_thread text[], p_ns text[], p_id bytea[], p_parent bytea[], p_step int8[],
    p_source text[], p_created int8[], p_control text[], p_metadata text[], p_wrote text[],
    p_base text[], p_since int4[], p_refs bytea[], p_lo int4[], p_hi int4[],
    p_hashes bytea[], p_data bytea[], p_gc int8, p_head_thread text, p_head_ns text,
    p_new_head bytea, p_old_head bytea, p_run text, p_epoch int8)
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    v_worker text;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(p_gc);
    IF p_run IS NOT NULL THEN
        SELECT q.worker INTO v_worker FROM {s}.sg_run_queue q
        WHERE q.run_id = p_run AND q.epoch = p_epoch AND q.status = 'running'
        FOR SHARE;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
    END IF;
    IF p_old_head IS NULL THEN
        INSERT INTO {s}.sg_heads (thread, ns, head)
        VALUES (p_head_thread, p_head_ns, p_new_head)
        ON CONFLICT DO NOTHING;
    ELSE
        UPDATE {s}.sg_heads h SET head = p_new_head
        WHERE h.thread = p_head_thread AND h.ns = p_head_ns AND h.head = p_old_head;
    END IF;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    IF p_run IS NOT NULL THEN
        INSERT INTO {s}.sg_run_writes (run_id, epoch, thread, worker, kind, checkpoints, at)
        VALUES (p_run, p_epoch, p_head_thread, v_worker, 'checkpoints', p_id,
                clock_timestamp());
    END IF;
    INSERT INTO {s}.sg_values (hash, data)
    SELECT * FROM unnest(p_hashes, p_data)
    ON CONFLICT (hash) DO NOTHING;
    INSERT INTO {s}.sg_checkpoints
        (thread, ns, id, parent, step, source, created_at, control, metadata, wrote, base,
         since_base, refs)
    SELECT r.thread, r.ns, r.id, r.parent, r.step, r.source, r.created_at, r.control,
        r.metadata, r.wrote, r.base, r.since_base, COALESCE(p_refs[r.lo:r.hi], '{}')
    FROM unnest(p_thread, p_ns, p_id, p_parent, p_step, p_source, p_created, p_control,
        p_metadata, p_wrote, p_base, p_since, p_lo, p_hi)
    AS r(thread, ns, id, parent, step, source, created_at, control, metadata, wrote, base,
         since_base, lo, hi);
    DELETE FROM {s}.sg_writes w
    USING unnest(p_source, p_thread, p_ns, p_parent) AS r(source, thread, ns, parent)
    WHERE r.source = 'loop' AND w.thread = r.thread AND w.ns = r.ns
      AND w.checkpoint = r.parent AND w.kind LIKE '{"Output":%';
    RETURN 1;
END
$fn$;
"#;

/// The function's name, as the schema check looks for it.
pub(crate) const FUNCTION_NAME: &str = "sg_extend_v1";

/// The call: `$1`–`$17` are [`Rows::columns`]; `$18` the collection lock's key; `$19`/`$20`
/// thread and namespace; `$21` the new head; `$22` the head it must replace (`NULL`: none yet);
/// `$23`/`$24` run and epoch, or `NULL`.
const EXTEND: &str = "SELECT {s}.sg_extend_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
     $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)";

/// Store `puts` by one statement if they extend a head this saver knows: `Ok(true)` when
/// stored, `Ok(false)` when nothing was written and the general path must run.
pub(crate) async fn try_extend(
    client: &ClientWrapper,
    sql: &Sql,
    options: &PostgresOptions,
    known: &KnownHeads,
    fence: Option<&Fence>,
    puts: &[PutCheckpoint],
) -> Result<bool, CheckpointError> {
    let Some(first) = puts.first() else {
        return Ok(false);
    };
    let (thread, ns) = (&first.thread, &first.ns);
    let one_chain = puts.iter().all(|p| {
        &p.thread == thread
            && &p.ns == ns
            && matches!(p.checkpoint.source, Source::Loop | Source::Input)
    });
    if !one_chain {
        return Ok(false);
    }
    // A first put without a parent starts a new thread: the function creates its head row.
    let start = match first.checkpoint.parent {
        None => None,
        Some(_) => match known.take(thread, ns) {
            Some(head) => Some(head),
            None => return Ok(false),
        },
    };
    let expected = start.as_ref().map(|k| id_bytes(k.head));
    let Some((rows, head)) = chain_rows(start, puts, options)? else {
        return Ok(false);
    };
    let (hashes, data) = rows.values();
    let mut params = rows.columns((&hashes, &data));
    let gc = sql.gc_lock_key();
    let (t, n) = (thread.as_str(), ns.as_str());
    let new_head = id_bytes(head.head);
    params.extend([
        (&gc as &(dyn ToSql + Sync), Type::INT8),
        (&t, Type::TEXT),
        (&n, Type::TEXT),
        (&new_head, Type::BYTEA),
        (&expected, Type::BYTEA),
    ]);
    let lease = fence.map(Fence::run_and_epoch);
    let (run, epoch) = (lease.map(|l| l.0), lease.map(|l| l.1));
    params.extend([
        (&run as &(dyn ToSql + Sync), Type::TEXT),
        (&epoch, Type::INT8),
    ]);
    let rows = sql
        .call(
            client,
            EXTEND,
            &params,
            "storing checkpoints that extend the head",
        )
        .await?;
    let moved: i32 = match rows.first() {
        Some(r) => col(r, 0)?,
        None => 0,
    };
    if moved == 1 {
        known.remember(thread, ns, head);
    }
    Ok(moved == 1)
}

/// The rows of `puts` if each one's parent is the one before it (the first's: `start`'s
/// head, or none for a new thread), and the head they make; `None` when they are not such a
/// chain or a check would refuse one.
fn chain_rows(
    start: Option<Known>,
    puts: &[PutCheckpoint],
    options: &PostgresOptions,
) -> Result<Option<(Rows, Known)>, CheckpointError> {
    let mut rows = Rows::default();
    let mut head = start;
    for put in puts {
        let cp = &put.checkpoint;
        let mut next = match (head.take(), cp.parent) {
            (None, None) => Known {
                head: cp.id,
                since: -1,
                state: Base::new(),
            },
            (Some(h), Some(parent)) if parent == h.head && cp.id > parent => h,
            _ => return Ok(None),
        };
        let Ok((wrote, values)) = seal_writes(&put.writes, options.max_value_bytes) else {
            return Ok(None);
        };
        apply(&mut next.state, &wrote);
        let since = next.since.saturating_add(1);
        let full = since == 0 || base_due(since, &next.state, options.full_every);
        rows.push(put, (&wrote, full.then_some(&next.state), since), values)?;
        next.since = if full { 0 } else { since };
        next.head = cp.id;
        head = Some(next);
    }
    Ok(head.map(|h| (rows, h)))
}
