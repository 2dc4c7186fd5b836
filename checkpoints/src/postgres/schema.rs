//! The PostgreSQL tables (format version 1), created and migrated by the saver inside one
//! transaction under an advisory lock, so concurrent openers create them once.

use tokio_postgres::types::Type;
use tokio_postgres::Client;

use super::sql::{col, PgResult, Sql};
use super::{extend, get, queue, read};
use crate::CheckpointError;

/// The newest format of the PostgreSQL tables this build reads, and the one it gives a new
/// schema. A schema recorded with a newer one is refused untouched.
pub const POSTGRES_FORMAT_VERSION: u32 = 1;

/// The tables of format 1. See `docs/design.md` ("PostgreSQL tables") for each column.
const TABLES: &str = "
CREATE TABLE IF NOT EXISTS {s}.sg_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.sg_heads (
    thread text  NOT NULL,
    ns     text  NOT NULL,
    head   bytea NOT NULL,
    PRIMARY KEY (thread, ns)
);
CREATE TABLE IF NOT EXISTS {s}.sg_checkpoints (
    thread     text    NOT NULL,
    ns         text    NOT NULL,
    id         bytea   NOT NULL,
    parent     bytea,
    step       bigint  NOT NULL,
    source     text    NOT NULL,
    created_at bigint  NOT NULL,
    control    text    NOT NULL,
    metadata   text    NOT NULL,
    wrote      text    NOT NULL,
    base       text,
    since_base integer NOT NULL,
    refs       bytea[] NOT NULL,
    PRIMARY KEY (thread, ns, id)
);
ALTER TABLE {s}.sg_checkpoints
    ALTER COLUMN base SET STORAGE EXTERNAL, ALTER COLUMN refs SET STORAGE EXTERNAL;
CREATE INDEX IF NOT EXISTS sg_checkpoints_refs ON {s}.sg_checkpoints USING gin (refs);
CREATE TABLE IF NOT EXISTS {s}.sg_values (
    hash bytea PRIMARY KEY,
    data bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.sg_writes (
    seq        bigserial PRIMARY KEY,
    thread     text    NOT NULL,
    ns         text    NOT NULL,
    checkpoint bytea   NOT NULL,
    task       bytea   NOT NULL,
    idx        integer NOT NULL,
    node       text    NOT NULL,
    kind       text    NOT NULL
);
CREATE INDEX IF NOT EXISTS sg_writes_by_checkpoint ON {s}.sg_writes (thread, ns, checkpoint, seq);
CREATE TABLE IF NOT EXISTS {s}.sg_runs (
    run_id     text   PRIMARY KEY,
    thread     text   NOT NULL,
    created_at bigint NOT NULL,
    record     text   NOT NULL
);
CREATE INDEX IF NOT EXISTS sg_runs_by_thread ON {s}.sg_runs (thread, created_at, run_id);
CREATE TABLE IF NOT EXISTS {s}.sg_receipts (
    run_id  text PRIMARY KEY,
    receipt text NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.sg_run_queue (
    run_id      text        PRIMARY KEY,
    seq         bigserial   NOT NULL,
    thread      text        NOT NULL,
    input       text        NOT NULL,
    status      text        NOT NULL,
    reason      text,
    epoch       bigint      NOT NULL DEFAULT 0,
    worker      text,
    lease_until timestamptz,
    attempts    integer     NOT NULL DEFAULT 0,
    stop        text,
    stop_reason text,
    created_at  bigint      NOT NULL,
    updated_at  bigint      NOT NULL
);
ALTER TABLE {s}.sg_run_queue ADD COLUMN IF NOT EXISTS resume text;
ALTER TABLE {s}.sg_run_queue ADD COLUMN IF NOT EXISTS command text;
ALTER TABLE {s}.sg_run_queue ADD COLUMN IF NOT EXISTS usage text;
CREATE UNIQUE INDEX IF NOT EXISTS sg_run_queue_one_running
    ON {s}.sg_run_queue (thread) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS sg_run_queue_open
    ON {s}.sg_run_queue (seq) WHERE status IN ('pending', 'running');
CREATE INDEX IF NOT EXISTS sg_run_queue_by_thread ON {s}.sg_run_queue (thread, seq);
CREATE TABLE IF NOT EXISTS {s}.sg_run_writes (
    seq         bigserial   PRIMARY KEY,
    run_id      text        NOT NULL,
    epoch       bigint      NOT NULL,
    thread      text        NOT NULL,
    worker      text        NOT NULL,
    kind        text        NOT NULL,
    checkpoints bytea[]     NOT NULL,
    at          timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS sg_run_writes_by_run ON {s}.sg_run_writes (run_id, seq);
CREATE INDEX IF NOT EXISTS sg_run_writes_by_thread ON {s}.sg_run_writes (thread, seq);
CREATE TABLE IF NOT EXISTS {s}.sg_node_cache (
    ns         text   NOT NULL,
    key        text   NOT NULL,
    expires_at bigint,
    value      text   NOT NULL,
    PRIMARY KEY (ns, key)
);
";

/// Create the schema and its tables if missing, and check the recorded format version, in
/// one transaction that first takes the schema's advisory lock: of several processes opening
/// a new schema at once, one creates it and the others find it made. The schema's format.
///
/// # Errors
/// [`CheckpointError::UnsupportedFormatVersion`] for a newer format (nothing is written);
/// [`CheckpointError::Integrity`] naming `sg_meta` for an unreadable format record; storage
/// errors.
pub(crate) async fn init(
    client: &mut Client,
    sql: &Sql,
    create: bool,
) -> Result<u32, CheckpointError> {
    let tx = client
        .transaction()
        .await
        .during("beginning the schema transaction")?;
    tx.query_typed(
        "SELECT pg_advisory_xact_lock($1)",
        &[(&sql.schema_lock_key(), Type::INT8)],
    )
    .await
    .during("locking the schema against other openers")?;
    let found = format_of(&tx, sql).await?;
    if found.is_none() && !create {
        return Err(CheckpointError::Integrity {
            thread: "-".to_owned(),
            checkpoint: "-".to_owned(),
            blob: format!("{}.sg_meta", sql.schema()),
            detail: format!(
                "no stategraph tables in schema {} (nothing was created)",
                sql.schema()
            ),
        });
    }
    if let Some(found) = found {
        if found > POSTGRES_FORMAT_VERSION {
            return Err(CheckpointError::UnsupportedFormatVersion {
                found,
                supported: POSTGRES_FORMAT_VERSION,
            });
        }
    }
    if found == Some(POSTGRES_FORMAT_VERSION) && is_complete(&tx, sql).await? {
        // Nothing to create: no DDL, whose table locks would wait on (and could deadlock
        // with) the writers of a schema in use, as a worker restarting beside others does.
        tx.commit().await.during("ending the schema check")?;
        return Ok(POSTGRES_FORMAT_VERSION);
    }
    tx.batch_execute(&sql.text("CREATE SCHEMA IF NOT EXISTS {s};"))
        .await
        .during("creating the schema")?;
    tx.batch_execute(&sql.text(TABLES))
        .await
        .during("creating the tables")?;
    for (_, function) in FUNCTIONS {
        tx.batch_execute(&sql.text(function))
            .await
            .during("creating the server-side functions")?;
    }
    if found.is_none() {
        tx.query_typed(
            &sql.text("INSERT INTO {s}.sg_meta(key, value) VALUES ('format_version', $1)"),
            &[(&POSTGRES_FORMAT_VERSION.to_string(), Type::TEXT)],
        )
        .await
        .during("recording the format version")?;
    }
    tx.commit().await.during("committing the schema")?;
    Ok(found.unwrap_or(POSTGRES_FORMAT_VERSION))
}

/// The object [`TABLES`] creates last: when it exists, every one before it does.
const LAST_OBJECT: &str = "sg_node_cache";

/// The server-side functions, `(name, definition)`, created with the tables: the statements
/// of the hottest calls (a put that extends a head, the head read at an invoke's start, a
/// lease, a run's end), planned once per server connection instead of on every call
/// (decision 0059).
const FUNCTIONS: [(&str, &str); 5] = [
    (extend::FUNCTION_NAME, extend::FUNCTION),
    (get::FUNCTION_NAME, get::FUNCTION),
    ("sg_head_v1", read::HEAD_FUNCTION),
    ("sg_lease_v3", queue::LEASE_FUNCTION),
    ("sg_finish_v1", queue::FINISH_FUNCTION),
];

/// Whether the schema holds every table and index of [`TABLES`], every one of [`FUNCTIONS`],
/// base records stored uncompressed and the run queue's `resume`, `command` and `usage`
/// columns (the last four added to format 1 later: a schema an older build made lacks them;
/// decisions 0060 and 0083).
async fn is_complete(
    tx: &tokio_postgres::Transaction<'_>,
    sql: &Sql,
) -> Result<bool, CheckpointError> {
    if !holds(tx, sql, LAST_OBJECT, "looking for the newest table").await? {
        return Ok(false);
    }
    let functions: Vec<String> = FUNCTIONS
        .iter()
        .map(|(name, _)| format!("\"{}\".{name}", sql.schema()))
        .collect();
    let table = format!("\"{}\".sg_checkpoints", sql.schema());
    let queue = format!("\"{}\".sg_run_queue", sql.schema());
    let row = tx
        .query_typed(
            "SELECT (SELECT bool_and(to_regproc(f) IS NOT NULL) FROM unnest($1::text[]) f) \
             AND (SELECT count(*) = 2 FROM pg_attribute \
             WHERE attrelid = to_regclass($2) AND attname IN ('base', 'refs') \
             AND attstorage = 'e') \
             AND (SELECT count(*) = 3 FROM pg_attribute \
             WHERE attrelid = to_regclass($3) AND attname IN ('resume', 'command', 'usage') \
             AND NOT attisdropped)",
            &[
                (&functions, Type::TEXT_ARRAY),
                (&table, Type::TEXT),
                (&queue, Type::TEXT),
            ],
        )
        .await
        .during("checking the functions and columns format 1 added later")?;
    match row.first() {
        Some(row) => col(row, 0),
        None => Ok(false),
    }
}

/// Whether the schema holds the table or index `object`.
async fn holds(
    tx: &tokio_postgres::Transaction<'_>,
    sql: &Sql,
    object: &str,
    what: &'static str,
) -> Result<bool, CheckpointError> {
    let name = format!("\"{}\".{object}", sql.schema());
    let row = tx
        .query_typed("SELECT to_regclass($1) IS NOT NULL", &[(&name, Type::TEXT)])
        .await
        .during(what)?;
    match row.first() {
        Some(row) => col(row, 0),
        None => Ok(false),
    }
}

/// The schema's recorded format version: `None` when it has no `sg_meta` table yet.
async fn format_of(
    tx: &tokio_postgres::Transaction<'_>,
    sql: &Sql,
) -> Result<Option<u32>, CheckpointError> {
    let exists = holds(tx, sql, "sg_meta", "looking for the format table").await?;
    if !exists {
        return Ok(None);
    }
    let rows = tx
        .query_typed(
            &sql.text("SELECT value FROM {s}.sg_meta WHERE key = 'format_version'"),
            &[],
        )
        .await
        .during("reading the format version")?;
    let bad = |detail: String| CheckpointError::Integrity {
        thread: "-".to_owned(),
        checkpoint: "-".to_owned(),
        blob: format!("{}.sg_meta", sql.schema()),
        detail,
    };
    let Some(row) = rows.first() else {
        return Err(bad("the format record format_version is missing".to_owned()));
    };
    let text: String = col(row, 0)?;
    match text.parse::<u32>() {
        Ok(v) if v >= 1 => Ok(Some(v)),
        _ => Err(bad(format!(
            "the format record format_version is unreadable: {text:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::{FUNCTIONS, LAST_OBJECT, TABLES};

    #[test]
    fn each_function_is_checked_by_the_name_its_definition_creates() {
        for (name, definition) in FUNCTIONS {
            assert!(
                definition.contains(&format!("FUNCTION {{s}}.{name}(")),
                "{name}"
            );
        }
    }

    #[test]
    fn the_completeness_check_names_the_object_created_last() {
        let last = TABLES.lines().rfind(|l| l.starts_with("CREATE"));
        assert!(
            last.is_some_and(|l| l.contains(&format!(" {LAST_OBJECT} "))
                || l.contains(&format!("{{s}}.{LAST_OBJECT} "))),
            "{last:?}"
        );
    }
}
