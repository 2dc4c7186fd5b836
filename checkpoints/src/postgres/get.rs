//! [`Saver::get`](crate::Saver::get) by one call of a server-side function: a checkpoint's
//! header, its chain up to a base record (or, for a head this saver remembers, the values
//! of its remembered state) and its pending writes, all read in the call's one snapshot.
//! A walked chain's values take a second statement.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, Row};

use super::known::{Known, KnownHeads};
use super::read::{header, pending_write_at};
use super::resolve::{
    bad_value, fetch_values, fold_chain, missing, open_values, parts, walk_cte, wanted,
};
use super::sql::{bad_record, col, id_bytes, id_from, Sql};
use crate::{CheckpointError, CheckpointId, LoadedCheckpoint, Namespace, ThreadId};

/// The function [`call`] runs, created with the tables. Rows, in this order: the header
/// (`h`; or `m` with the id of a checkpoint that is not stored); then the values of
/// `p_hashes` (`v`) when the checkpoint is `p_known`, else its chain nearest first (`c`);
/// then its pending writes (`w`). No rows: the thread has no head. A `STABLE` function's
/// statements all read the snapshot of the call.
pub(crate) const FUNCTION: &str = concat!(
    r#"
CREATE OR REPLACE FUNCTION {s}.sg_get_v1(p_thread text, p_ns text, p_id bytea,
    p_known bytea, p_hashes bytea[])
RETURNS TABLE(o_id bytea, o_parent bytea, o_step int8, o_source text, o_created int8,
    o_control text, o_metadata text, o_cid bytea, o_base text, o_wrote text,
    o_task bytea, o_node text, o_wkind text, o_hash bytea, o_data bytea, o_kind text)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    IF p_id IS NULL THEN
        SELECT h.head INTO p_id FROM {s}.sg_heads h
        WHERE h.thread = p_thread AND h.ns = p_ns;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT c.id, c.parent, c.step, c.source, c.created_at, c.control, c.metadata,
        NULL::bytea, NULL::text, NULL::text, NULL::bytea, NULL::text, NULL::text,
        NULL::bytea, NULL::bytea, 'h'::text
    FROM {s}.sg_checkpoints c
    WHERE c.thread = p_thread AND c.ns = p_ns AND c.id = p_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT p_id, NULL::bytea, NULL::int8, NULL::text, NULL::int8,
            NULL::text, NULL::text, NULL::bytea, NULL::text, NULL::text, NULL::bytea,
            NULL::text, NULL::text, NULL::bytea, NULL::bytea, 'm'::text;
        RETURN;
    END IF;
    IF p_id = p_known THEN
        RETURN QUERY
        SELECT NULL::bytea, NULL::bytea, NULL::int8, NULL::text, NULL::int8, NULL::text,
            NULL::text, NULL::bytea, NULL::text, NULL::text, NULL::bytea, NULL::text,
            NULL::text, v.hash, v.data, 'v'::text
        FROM {s}.sg_values v WHERE v.hash = ANY(p_hashes);
    ELSE
        RETURN QUERY"#,
    walk_cte!(),
    r#"
        SELECT NULL::bytea, NULL::bytea, NULL::int8, NULL::text, NULL::int8, NULL::text,
            NULL::text, w.id, w.base, w.wrote, NULL::bytea, NULL::text, NULL::text,
            NULL::bytea, NULL::bytea, 'c'::text
        FROM walk w ORDER BY w.n;
    END IF;
    RETURN QUERY
    SELECT NULL::bytea, NULL::bytea, NULL::int8, NULL::text, NULL::int8, NULL::text,
        NULL::text, NULL::bytea, NULL::text, NULL::text, w.task, w.node, w.kind,
        NULL::bytea, NULL::bytea, 'w'::text
    FROM {s}.sg_writes w
    WHERE w.thread = p_thread AND w.ns = p_ns AND w.checkpoint = p_id
    ORDER BY w.seq;
END
$fn$;
"#
);

/// The function's name, for the schema check.
pub(crate) const FUNCTION_NAME: &str = "sg_get_v1";

/// The statement that calls [`FUNCTION`].
const CALL: &str = "SELECT * FROM {s}.sg_get_v1($1, $2, $3, $4, $5)";

/// Where the columns of each kind of row start.
const CHAIN_AT: usize = 7;
const WRITE_AT: usize = 10;
const VALUE_AT: usize = 13;
const KIND_AT: usize = 15;

/// What a statement reading a checkpoint says it is doing.
const WHAT: &str = "reading a checkpoint";

/// A loaded checkpoint (`None`: the thread has no head), or the value that was missing.
pub(crate) type Loaded = Result<Option<LoadedCheckpoint>, Missing>;

/// A value the checkpoint refers to that was not found. Outside a transaction the checkpoint
/// may have been deleted between the call and the read of its values: read it again in
/// one, which tells.
pub(crate) struct Missing {
    checkpoint: CheckpointId,
    hash: [u8; 32],
}

/// A checkpoint (`id`, or the thread's head) by one call on `conn`, outside any
/// transaction, and one more statement for the values of a walked chain. A head the saver
/// remembers needs no walk; a loaded head is remembered.
///
/// `Ok(None)`: the thread has no head; `Ok(Err(_))`: a value was missing.
///
/// # Errors
/// [`CheckpointError::NotFound`] for an `id` (or a head) that is not stored;
/// [`CheckpointError::Integrity`] for a damaged record or value; storage errors.
pub(crate) async fn call(
    conn: &ClientWrapper,
    sql: &Sql,
    key: (&ThreadId, &Namespace),
    id: Option<CheckpointId>,
    known: &KnownHeads,
) -> Result<Loaded, CheckpointError> {
    let ask = Ask::new(key, id, Some(known));
    let hashes: Vec<&[u8]> = ask.hashes.iter().map(|h| &h[..]).collect();
    let hashes: &(dyn ToSql + Sync) = &hashes;
    let rows = sql.call(conn, CALL, &ask.params(hashes), WHAT).await?;
    load(&**conn, sql, key, &rows, ask, Some(known)).await
}

/// [`call`] on `client`, in the caller's transaction: a missing value is an integrity
/// error.
///
/// # Errors
/// As [`call`], and [`CheckpointError::Integrity`] naming the missing value.
pub(crate) async fn read(
    client: &impl GenericClient,
    sql: &Sql,
    key: (&ThreadId, &Namespace),
    id: Option<CheckpointId>,
    known: Option<&KnownHeads>,
) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
    let ask = Ask::new(key, id, known);
    let hashes: Vec<&[u8]> = ask.hashes.iter().map(|h| &h[..]).collect();
    let hashes: &(dyn ToSql + Sync) = &hashes;
    let rows = sql.query(client, CALL, &ask.params(hashes), WHAT).await?;
    load(client, sql, key, &rows, ask, known)
        .await?
        .map_err(|Missing { checkpoint, hash }| {
            bad_value(key.0, checkpoint, &hash, "the value is missing")
        })
}

/// The function's arguments: the thread, the checkpoint asked for, and the head this saver
/// remembers (with its hashes), when it may be the one asked for.
struct Ask<'a> {
    thread: &'a str,
    ns: &'a str,
    id: Option<Vec<u8>>,
    known: Option<Known>,
    known_id: Option<Vec<u8>>,
    /// The remembered head's hashes, each once, for `p_hashes`.
    hashes: Vec<[u8; 32]>,
}

impl<'a> Ask<'a> {
    fn new(
        (thread, ns): (&'a ThreadId, &'a Namespace),
        id: Option<CheckpointId>,
        known: Option<&KnownHeads>,
    ) -> Self {
        let known = known
            .and_then(|k| k.head(thread, ns))
            .filter(|k| id.is_none_or(|id| id == k.head));
        Ask {
            thread: thread.as_str(),
            ns: ns.as_str(),
            id: id.map(id_bytes),
            known_id: known.as_ref().map(|k| id_bytes(k.head)),
            hashes: known
                .as_ref()
                .map(|k| wanted(k.state.values().flatten()))
                .unwrap_or_default(),
            known,
        }
    }

    /// The arguments, with `hashes` (of `self.hashes`) as `p_hashes`.
    fn params<'p>(&'p self, hashes: &'p (dyn ToSql + Sync)) -> [(&'p (dyn ToSql + Sync), Type); 5] {
        [
            (&self.thread, Type::TEXT),
            (&self.ns, Type::TEXT),
            (&self.id, Type::BYTEA),
            (&self.known_id, Type::BYTEA),
            (hashes, Type::BYTEA_ARRAY),
        ]
    }
}

/// The call's rows past the header, by kind.
#[derive(Default)]
struct Rows<'r> {
    chain: Vec<&'r Row>,
    values: Vec<&'r Row>,
    writes: Vec<&'r Row>,
}

impl<'r> Rows<'r> {
    fn sort(rows: &'r [Row], thread: &ThreadId, id: CheckpointId) -> Result<Self, CheckpointError> {
        let mut out = Rows::default();
        for row in rows {
            match col::<&str>(row, KIND_AT)? {
                "c" => out.chain.push(row),
                "v" => out.values.push(row),
                "w" => out.writes.push(row),
                other => {
                    let detail = format!("a row of unknown kind {other:?}");
                    return Err(bad_record(thread.as_str(), id, FUNCTION_NAME, detail));
                }
            }
        }
        Ok(out)
    }
}

/// The checkpoint in the call's `rows`, its values read on `client` when the call walked
/// its chain; a loaded head (`ask` names no id) is remembered in `known`.
async fn load(
    client: &impl GenericClient,
    sql: &Sql,
    (thread, ns): (&ThreadId, &Namespace),
    rows: &[Row],
    ask: Ask<'_>,
    known: Option<&KnownHeads>,
) -> Result<Loaded, CheckpointError> {
    let Some((first, rest)) = rows.split_first() else {
        return Ok(Ok(None));
    };
    if col::<&str>(first, KIND_AT)? == "m" {
        let id = id_from(col(first, 0)?, thread.as_str(), "sg_heads.head")?;
        let (thread, ns) = (thread.clone(), ns.clone());
        return Err(CheckpointError::NotFound { thread, ns, id });
    }
    let checkpoint = header(first, thread.as_str())?;
    let id = checkpoint.id;
    let rest = Rows::sort(rest, thread, id)?;
    let (state, since, wanted, values) = match ask.known {
        Some(k) if k.head == id => {
            let values = open_values(rest.values, VALUE_AT, thread, id)?;
            (k.state, k.since, ask.hashes, values)
        }
        _ => {
            let (state, since) = fold_chain(rest.chain, CHAIN_AT, thread, id)?;
            let wanted = wanted(state.values().flatten());
            let values = fetch_values(client, sql, thread, id, &wanted).await?;
            (state, since, wanted, values)
        }
    };
    if let Some(hash) = missing(&wanted, &values) {
        let hash = *hash;
        return Ok(Err(Missing {
            checkpoint: id,
            hash,
        }));
    }
    let pending = rest
        .writes
        .iter()
        .map(|r| pending_write_at(r, WRITE_AT, thread.as_str(), id))
        .collect::<Result<Vec<_>, _>>()?;
    let fields = state
        .iter()
        .map(|(f, refs)| (f.clone(), parts(refs, &values)))
        .collect();
    if let (Some(known), None) = (known, ask.id) {
        let head = Known {
            head: id,
            since,
            state,
        };
        known.remember(thread, ns, head);
    }
    let loaded = LoadedCheckpoint {
        checkpoint,
        fields,
        pending,
    };
    Ok(Ok(Some(loaded)))
}
