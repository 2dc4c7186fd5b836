//! Vector search on PostgreSQL: pgvector's inner product in SQL when the extension is
//! installed, otherwise exact ranking in this process over a mirror of the vectors table
//! (decision 0088).

use tokio_postgres::types::Type;
use tokio_postgres::Transaction;

use super::batch::{Batch, Found};
use super::mirror::Mirror;
use super::rows::col;
use super::schema::named;
use super::sql::{big, db, Query};
use crate::{vector, SearchOp, StoreError};

/// How a [`PostgresStore`](super::PostgresStore) ranks by vector.
///
/// ```
/// use stategraph_store::VectorBackend;
/// assert_eq!(VectorBackend::default(), VectorBackend::Auto);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum VectorBackend {
    /// pgvector when the database has it (installed, or installable by
    /// `CREATE EXTENSION IF NOT EXISTS vector`), the fallback otherwise.
    #[default]
    Auto,
    /// pgvector: the inner product computed by the server, in SQL. Opening fails when the
    /// extension cannot be had.
    PgVector,
    /// No extension: each process keeps the vectors in memory, brought up to date from a
    /// log of changes when another process changed them, and ranks exactly there.
    Fallback,
}

/// The backend a store resolved [`VectorBackend`] to, with its state.
#[derive(Debug)]
pub(super) enum Vectors {
    /// The store has no index: no vectors are written or searched.
    Off,
    /// pgvector's `<#>`.
    PgVector,
    /// The in-memory mirror.
    Mirror(Mirror),
}

impl Vectors {
    /// Whether every write counts the vectors' generation: in every store with an index,
    /// since a process ranking by the fallback may share the tables with one using
    /// pgvector. A store without one counts only the writes that drop vectors another
    /// process's index gave (its puts and deletes of such items, its sweeps of them).
    pub(super) fn counted(&self) -> bool {
        !matches!(self, Self::Off)
    }

    /// Whether the store has no index (and so writes no vectors).
    pub(super) fn is_off(&self) -> bool {
        matches!(self, Self::Off)
    }

    /// Which backend this is.
    pub(super) fn backend(&self) -> VectorBackend {
        match self {
            Self::PgVector => VectorBackend::PgVector,
            Self::Mirror(_) | Self::Off => VectorBackend::Fallback,
        }
    }
}

/// Resolves `asked` against the database (whether pgvector is there or can be created),
/// for vectors of `dims` numbers.
pub(super) async fn resolve(
    client: &tokio_postgres::Client,
    asked: VectorBackend,
    dims: usize,
) -> Result<Vectors, StoreError> {
    if asked == VectorBackend::Fallback {
        return Ok(Vectors::Mirror(Mirror::new(dims)));
    }
    let available = client
        .query_typed(
            "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
            &[],
        )
        .await
        .map_err(db("looking for the pgvector extension"))?
        .first()
        .map(|row| col::<bool>(row, 0))
        .transpose()?
        .unwrap_or(false);
    let created = available
        && client
            .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
            .await
            .is_ok();
    match (created, asked) {
        (true, _) => Ok(Vectors::PgVector),
        (false, VectorBackend::PgVector) => Err(StoreError::Invalid {
            what: "vector backend",
            why: if available {
                "pgvector is available but `CREATE EXTENSION vector` failed (it needs a \
                 privileged role the first time)"
                    .to_owned()
            } else {
                "the pgvector extension is not installed on the server".to_owned()
            },
        }),
        (false, _) => Ok(Vectors::Mirror(Mirror::new(dims))),
    }
}

/// Raises the vectors' generation: every mirror catches up (or, for this process's own
/// batch, applies it) before its next search. The row's lock orders vector writers.
pub(super) async fn bump_generation(tx: &Transaction<'_>, schema: &str) -> Result<i64, StoreError> {
    let rows = tx
        .query_typed(
            &named(
                schema,
                "UPDATE {s}.sg_store_meta SET value = (value::bigint + 1)::text \
                 WHERE key = 'vector_generation' RETURNING value::bigint",
            ),
            &[],
        )
        .await
        .map_err(db("counting a change of the vectors"))?;
    rows.first().map_or(Ok(0), |row| col(row, 0))
}

/// The vector search of `op` for the unit vector `query`: items under the prefix that
/// meet the filter and have vectors, by their best cosine similarity, best first.
pub(super) async fn search(
    batch: &Batch<'_>,
    op: &SearchOp,
    query: &[f32],
) -> Result<Vec<Found>, StoreError> {
    match batch.vectors {
        Vectors::PgVector => search_pgvector(batch, op, query).await,
        Vectors::Off => Ok(Vec::new()),
        Vectors::Mirror(mirror) if !batch.wrote_vectors => mirror.search(batch, op, query).await,
        // This batch changed vectors the mirror does not hold yet: read them here.
        Vectors::Mirror(_) => search_loaded(batch, op, query).await,
    }
}

async fn search_pgvector(
    batch: &Batch<'_>,
    op: &SearchOp,
    query: &[f32],
) -> Result<Vec<Found>, StoreError> {
    let mut q = Query::new("");
    let v = q.bind(query.to_vec(), Type::FLOAT4_ARRAY);
    q.push(&named(
        batch.schema,
        &format!(
            "SELECT max(-(v.vec::vector <#> {v}::vector))::float8 AS score, ns, key \
             FROM {{s}}.sg_store_items JOIN {{s}}.sg_store_vectors v USING (ns, key) WHERE true"
        ),
    ));
    q.push_search_conditions(batch.now, &op.prefix, &op.filter);
    let (limit, offset) = (
        q.bind(big(op.limit), Type::INT8),
        q.bind(big(op.offset), Type::INT8),
    );
    q.push(&format!(
        " GROUP BY ns, key ORDER BY score DESC, ns, key LIMIT {limit} OFFSET {offset}"
    ));
    let rows = batch
        .tx
        .query_typed(q.text(), &q.params())
        .await
        .map_err(db("ranking items by pgvector"))?;
    let ranked = rows
        .iter()
        .map(|row| Ok((col::<f64>(row, 0)? as f32, (col(row, 1)?, col(row, 2)?))))
        .collect::<Result<Vec<_>, StoreError>>()?;
    batch.items_at(ranked, None).await
}

/// Exact ranking over the vectors read in the batch's transaction (what the mirror cannot
/// answer: a search after a put of the same batch).
async fn search_loaded(
    batch: &Batch<'_>,
    op: &SearchOp,
    query: &[f32],
) -> Result<Vec<Found>, StoreError> {
    let mut q = Query::new(named(
        batch.schema,
        "SELECT ns, key, v.vec FROM {s}.sg_store_items \
         JOIN {s}.sg_store_vectors v USING (ns, key) WHERE true",
    ));
    q.push_search_conditions(batch.now, &op.prefix, &op.filter);
    let rows = batch
        .tx
        .query_typed(q.text(), &q.params())
        .await
        .map_err(db("reading vectors to rank"))?;
    let mut best: std::collections::HashMap<(String, String), f32> =
        std::collections::HashMap::new();
    for row in &rows {
        let at: (String, String) = (col(row, 0)?, col(row, 1)?);
        let v: Vec<f32> = col(row, 2)?;
        let score = vector::dot(query, &v);
        best.entry(at)
            .and_modify(|s| *s = s.max(score))
            .or_insert(score);
    }
    let scored = best.into_iter().map(|(at, s)| (s, at)).collect();
    let keep = op.offset.saturating_add(op.limit);
    let page = vector::top_k(scored, keep)
        .into_iter()
        .skip(op.offset)
        .collect();
    batch.items_at(page, None).await
}

/// Reads every stored vector with the generation it belongs to (at least as new).
pub(super) async fn load_all(
    tx: &Transaction<'_>,
    schema: &str,
) -> Result<(i64, Vec<((String, String), Vec<f32>)>), StoreError> {
    let generation = generation(tx, schema).await?;
    let rows = tx
        .query_typed(
            &named(schema, "SELECT ns, key, vec FROM {s}.sg_store_vectors"),
            &[],
        )
        .await
        .map_err(db("loading the vectors into memory"))?;
    let vectors = rows
        .iter()
        .map(|row| Ok(((col(row, 0)?, col(row, 1)?), col(row, 2)?)))
        .collect::<Result<_, StoreError>>()?;
    Ok((generation, vectors))
}

/// The vectors' generation now.
pub(super) async fn generation(tx: &Transaction<'_>, schema: &str) -> Result<i64, StoreError> {
    let rows = tx
        .query_typed(
            &named(
                schema,
                "SELECT value::bigint FROM {s}.sg_store_meta WHERE key = 'vector_generation'",
            ),
            &[],
        )
        .await
        .map_err(db("reading the vectors' generation"))?;
    rows.first().map_or(Ok(0), |row| col(row, 0))
}

/// Deletes the vectors of the items expired at `now` (milliseconds); how many. A store
/// without an index sweeps through this first, to learn whether the mirrors must hear of it.
pub(super) async fn drop_expired(
    tx: &Transaction<'_>,
    schema: &str,
    now: i64,
) -> Result<u64, StoreError> {
    tx.execute_typed(
        &named(
            schema,
            "DELETE FROM {s}.sg_store_vectors v USING {s}.sg_store_items i \
             WHERE v.ns = i.ns AND v.key = i.key \
             AND i.expires_at IS NOT NULL AND i.expires_at <= $1",
        ),
        &[(&now, Type::INT8)],
    )
    .await
    .map_err(db("deleting expired items' vectors"))
}

/// How many generations the vector log keeps: a mirror further behind reloads everything.
const LOG_KEEP: i64 = 10_000;

/// Records that `generation` changed the vectors of these items (`(namespace, key)`).
pub(super) async fn log_changes(
    tx: &Transaction<'_>,
    schema: &str,
    generation: i64,
    items: (Vec<String>, Vec<String>),
) -> Result<(), StoreError> {
    tx.execute_typed(
        &named(
            schema,
            "INSERT INTO {s}.sg_store_vector_log (generation, ns, key) \
             SELECT $1, * FROM unnest($2::text[], $3::text[])",
        ),
        &[
            (&generation, Type::INT8),
            (&items.0, Type::TEXT_ARRAY),
            (&items.1, Type::TEXT_ARRAY),
        ],
    )
    .await
    .map_err(db("logging the changed vectors"))?;
    Ok(())
}

/// Forgets the log of generations more than [`LOG_KEEP`] before the generation now: a
/// mirror that far behind reloads every vector and reads none of it.
pub(super) async fn prune_log(tx: &Transaction<'_>, schema: &str) -> Result<(), StoreError> {
    tx.execute_typed(
        &named(
            schema,
            "DELETE FROM {s}.sg_store_vector_log WHERE generation <= \
             (SELECT value::bigint FROM {s}.sg_store_meta WHERE key = 'vector_generation') - $1",
        ),
        &[(&LOG_KEEP, Type::INT8)],
    )
    .await
    .map_err(db("pruning the vector log"))?;
    Ok(())
}

/// The items whose vectors the generations after `held` up to `now` changed, each with its
/// vectors now (none: it has none, or is gone); `None` when the log no longer holds all of
/// those generations.
pub(super) async fn changed_since(
    tx: &Transaction<'_>,
    schema: &str,
    held: i64,
    now: i64,
) -> Result<Option<Vec<((String, String), Option<Vec<f32>>)>>, StoreError> {
    let span = [
        (
            &held as &(dyn tokio_postgres::types::ToSql + Sync),
            Type::INT8,
        ),
        (&now, Type::INT8),
    ];
    let logged = tx
        .query_typed(
            &named(
                schema,
                "SELECT count(DISTINCT generation) FROM {s}.sg_store_vector_log \
                 WHERE generation > $1 AND generation <= $2",
            ),
            &span,
        )
        .await
        .map_err(db("reading the vector log"))?;
    let count: i64 = logged.first().map_or(Ok(0), |row| col(row, 0))?;
    if count != now - held {
        return Ok(None);
    }
    let rows = tx
        .query_typed(
            &named(
                schema,
                "WITH changed AS (SELECT DISTINCT ns, key FROM {s}.sg_store_vector_log \
                 WHERE generation > $1 AND generation <= $2) \
                 SELECT c.ns, c.key, v.vec FROM changed c \
                 LEFT JOIN {s}.sg_store_vectors v ON v.ns = c.ns AND v.key = c.key",
            ),
            &span,
        )
        .await
        .map_err(db("reading the changed vectors"))?;
    rows.iter()
        .map(|row| Ok(((col(row, 0)?, col(row, 1)?), col(row, 2)?)))
        .collect::<Result<_, StoreError>>()
        .map(Some)
}
