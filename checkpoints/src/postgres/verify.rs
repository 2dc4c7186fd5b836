//! Checking a whole schema: every value against its hash, every parent link, and that every
//! checkpoint loads (what `stategraph verify` reports for a database).

use tokio_postgres::types::Type;
use tokio_postgres::GenericClient;

use super::get;
use super::sql::{col, id_from, Sql};
use crate::envelope::{hex, open, CODEC_JSON};
use crate::inspect::{Problem, VerifyCounts, VerifyReport};
use crate::{CheckpointError, Namespace, ThreadId};

/// Every `(thread, namespace)` with its number of checkpoints, by thread then namespace.
pub(crate) async fn namespaces(
    client: &impl GenericClient,
    sql: &Sql,
) -> Result<Vec<(String, String, usize)>, CheckpointError> {
    let rows = sql
        .query(
            client,
            "SELECT thread, ns, count(*) FROM {s}.sg_checkpoints GROUP BY thread, ns",
            &[],
            "listing namespaces",
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let n: i64 = col(r, 2)?;
        out.push((col(r, 0)?, col(r, 1)?, usize::try_from(n).unwrap_or(0)));
    }
    out.sort();
    Ok(out)
}

fn problem(table: &str, key: String, detail: impl ToString) -> Problem {
    Problem {
        table: table.to_owned(),
        key,
        detail: detail.to_string(),
    }
}

/// Check every value, parent link and checkpoint of the schema.
pub(crate) async fn verify(
    client: &impl GenericClient,
    sql: &Sql,
) -> Result<VerifyReport, CheckpointError> {
    let mut counts = VerifyCounts::default();
    let mut problems = Vec::new();
    check_values(client, sql, &mut counts, &mut problems).await?;
    check_links(client, sql, &mut problems).await?;
    check_loads(client, sql, &mut counts, &mut problems).await?;
    let runs = sql
        .query(
            client,
            "SELECT count(*), (SELECT count(*) FROM {s}.sg_receipts) FROM {s}.sg_runs",
            &[],
            "counting runs",
        )
        .await?;
    if let Some(r) = runs.first() {
        counts.runs = usize::try_from(col::<i64>(r, 0)?).unwrap_or(0);
        counts.receipts = usize::try_from(col::<i64>(r, 1)?).unwrap_or(0);
    }
    counts.sqlite_ok = true;
    Ok(VerifyReport { counts, problems })
}

/// Every value against its hash.
async fn check_values(
    client: &impl GenericClient,
    sql: &Sql,
    counts: &mut VerifyCounts,
    problems: &mut Vec<Problem>,
) -> Result<(), CheckpointError> {
    let values = sql
        .query(
            client,
            "SELECT hash, data FROM {s}.sg_values",
            &[],
            "reading values",
        )
        .await?;
    for r in &values {
        let (hash, data): (&[u8], &[u8]) = (col(r, 0)?, col(r, 1)?);
        if let Err(e) = open(data, CODEC_JSON, hash) {
            problems.push(problem("sg_values", hex(hash), e));
        }
        counts.blobs += 1;
    }
    Ok(())
}

/// Every parent link: a checkpoint's parent is stored (a pruned parent is cleared).
async fn check_links(
    client: &impl GenericClient,
    sql: &Sql,
    problems: &mut Vec<Problem>,
) -> Result<(), CheckpointError> {
    let links = sql
        .query(
            client,
            "SELECT c.thread, c.ns, c.id, c.parent FROM {s}.sg_checkpoints c \
             WHERE c.parent IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {s}.sg_checkpoints p \
             WHERE p.thread = c.thread AND p.ns = c.ns AND p.id = c.parent)",
            &[],
            "checking parent links",
        )
        .await?;
    for r in &links {
        let thread: String = col(r, 0)?;
        let id = id_from(col(r, 2)?, &thread, "sg_checkpoints.id")?;
        let parent = id_from(col(r, 3)?, &thread, "sg_checkpoints.parent")?;
        let key = format!("{id} of thread {thread:?} ns {:?}", col::<String>(r, 1)?);
        problems.push(problem(
            "sg_checkpoints",
            key,
            format!("parent {parent} is missing"),
        ));
    }
    Ok(())
}

/// That every checkpoint loads whole (its chain of records and every value).
async fn check_loads(
    client: &impl GenericClient,
    sql: &Sql,
    counts: &mut VerifyCounts,
    problems: &mut Vec<Problem>,
) -> Result<(), CheckpointError> {
    let spaces = namespaces(client, sql).await?;
    counts.namespaces = spaces.len();
    for (thread, ns, _) in &spaces {
        let Ok(t) = ThreadId::new(thread.clone()) else {
            let key = format!("thread {thread:?}");
            problems.push(problem("sg_checkpoints", key, "not a valid thread id"));
            continue;
        };
        let ns = Namespace::parse(ns);
        let rows = sql
            .query(
                client,
                "SELECT id FROM {s}.sg_checkpoints WHERE thread = $1 AND ns = $2 ORDER BY id",
                &[(&t.as_str(), Type::TEXT), (&ns.as_str(), Type::TEXT)],
                "listing checkpoints",
            )
            .await?;
        for r in &rows {
            counts.checkpoints += 1;
            let id = id_from(col(r, 0)?, thread, "sg_checkpoints.id")?;
            match get::read(client, sql, (&t, &ns), Some(id), None).await {
                Ok(Some(loaded)) => {
                    counts.loaded += 1;
                    counts.writes += loaded.pending.len();
                }
                Ok(None) => {}
                Err(e @ (CheckpointError::Integrity { .. } | CheckpointError::NotFound { .. })) => {
                    let key = format!("{id} of thread {thread:?} ns {:?}", ns.as_str());
                    problems.push(problem("sg_checkpoints", key, e));
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
