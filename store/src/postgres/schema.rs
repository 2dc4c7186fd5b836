//! The store's tables in the saver's schema (schema version 1), created in one transaction under an
//! advisory lock, so concurrent openers create them once; and the version check.

use tokio_postgres::types::Type;
use tokio_postgres::Client;

use super::sql::db;
use super::writes;
use crate::StoreError;

/// The newest schema version of the store's PostgreSQL tables this build reads, and the one it
/// gives a new schema. A schema recorded with a newer one is refused untouched.
pub const POSTGRES_SCHEMA_VERSION: u32 = 1;

/// The tables of version 1. Namespaces and keys compare by bytes (`COLLATE "C"`), so a
/// namespace prefix is a range of the primary key. `tsv` is the `simple` (unstemmed)
/// tsvector of every string of the value; `ttl_ms` and `expires_at` are milliseconds.
/// A vector is `real[]` whatever the vector backend (decision 0088). The vector log names
/// the items whose vectors each generation changed, for the mirrors to catch up.
/// `sg_store_items_by_recency` is in the order of a search without a query (newest first,
/// then namespace and key), so such a search reads a page off it and stops; it came after
/// the first version's tables, and an index changes no answer, so a schema without it is
/// still version 1 and gets it when opened; so does the put function a single put calls,
/// created after the tables ([`writes::put_function`]).
const TABLES: &str = r#"
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.sg_store_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.sg_store_items (
    ns         text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      jsonb    NOT NULL,
    tsv        tsvector NOT NULL,
    created_at bigint   NOT NULL,
    updated_at bigint   NOT NULL,
    ttl_ms     bigint,
    expires_at bigint,
    PRIMARY KEY (ns, key)
);
CREATE INDEX IF NOT EXISTS sg_store_items_expiry
    ON {s}.sg_store_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS sg_store_items_tsv ON {s}.sg_store_items USING gin (tsv);
CREATE TABLE IF NOT EXISTS {s}.sg_store_vectors (
    ns    text COLLATE "C" NOT NULL,
    key   text COLLATE "C" NOT NULL,
    field integer NOT NULL,
    vec   real[]  NOT NULL,
    PRIMARY KEY (ns, key, field),
    FOREIGN KEY (ns, key) REFERENCES {s}.sg_store_items (ns, key) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS {s}.sg_store_vector_log (
    generation bigint NOT NULL,
    ns         text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL
);
CREATE INDEX IF NOT EXISTS sg_store_vector_log_by_generation
    ON {s}.sg_store_vector_log (generation);
CREATE INDEX IF NOT EXISTS sg_store_items_by_recency
    ON {s}.sg_store_items (updated_at DESC, ns COLLATE "C", key COLLATE "C");
INSERT INTO {s}.sg_store_meta (key, value) VALUES ('vector_generation', '0')
    ON CONFLICT (key) DO NOTHING;
"#;

/// `text` with `{s}` replaced by the quoted schema (a name the saver validated).
pub(super) fn named(schema: &str, text: &str) -> String {
    text.replace("{s}", &format!("\"{schema}\""))
}

/// Creates the tables if missing and checks the recorded version.
///
/// # Errors
/// [`StoreError::SchemaTooNew`] for a newer schema version (nothing is written);
/// [`StoreError::Corrupt`] for an unreadable version record; database errors.
pub(super) async fn init(client: &mut Client, schema: &str) -> Result<(), StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(db("beginning the store's schema transaction"))?;
    tx.query_typed(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[(&format!("stategraph-store:{schema}"), Type::TEXT)],
    )
    .await
    .map_err(db("locking the store's schema against other openers"))?;
    let exists = holds(&tx, schema, Object::Relation, "sg_store_meta").await?;
    let found = if exists {
        check_version(&tx, schema).await?
    } else {
        None
    };
    if found == Some(POSTGRES_SCHEMA_VERSION)
        && holds(&tx, schema, Object::Relation, LAST_OBJECT).await?
        && holds(&tx, schema, Object::Function, writes::PUT_FUNCTION).await?
    {
        // Nothing to create: no DDL, whose table locks would wait for (and could deadlock
        // with) the writers of a schema in use.
        return tx
            .commit()
            .await
            .map_err(db("ending the store's schema check"));
    }
    tx.batch_execute(&named(schema, TABLES))
        .await
        .map_err(db("creating the store's tables"))?;
    // After the tables, as the recency index came: a schema of version 1 without it gets
    // it; older builds never call it.
    tx.batch_execute(&named(schema, &writes::put_function()))
        .await
        .map_err(db("creating the store's put function"))?;
    tx.query_typed(
        &named(
            schema,
            "INSERT INTO {s}.sg_store_meta (key, value) VALUES ('schema_version', $1) \
             ON CONFLICT (key) DO NOTHING",
        ),
        &[(&POSTGRES_SCHEMA_VERSION.to_string(), Type::TEXT)],
    )
    .await
    .map_err(db("recording the store's schema version"))?;
    tx.commit()
        .await
        .map_err(db("committing the store's schema"))
}

/// The object [`TABLES`] creates last: when it exists, every one before it does.
const LAST_OBJECT: &str = "sg_store_items_by_recency";

/// A kind of object in a schema, by the catalog function that resolves its name.
#[derive(Clone, Copy)]
enum Object {
    /// A table or index (`to_regclass`).
    Relation,
    /// A function (`to_regproc`).
    Function,
}

/// Whether the schema holds an object of `kind` named `name`.
async fn holds(
    tx: &tokio_postgres::Transaction<'_>,
    schema: &str,
    kind: Object,
    name: &str,
) -> Result<bool, StoreError> {
    let (sql, what) = match kind {
        Object::Relation => (
            "SELECT to_regclass($1) IS NOT NULL",
            "looking for the store's tables",
        ),
        Object::Function => (
            "SELECT to_regproc($1) IS NOT NULL",
            "looking for the store's put function",
        ),
    };
    let name = format!("\"{schema}\".{name}");
    let rows = tx
        .query_typed(sql, &[(&name, Type::TEXT)])
        .await
        .map_err(db(what))?;
    match rows.first() {
        Some(row) => super::rows::col(row, 0),
        None => Ok(false),
    }
}

/// The recorded schema version (`None`: none recorded yet), refused when newer.
async fn check_version(
    tx: &tokio_postgres::Transaction<'_>,
    schema: &str,
) -> Result<Option<u32>, StoreError> {
    let rows = tx
        .query_typed(
            &named(
                schema,
                "SELECT value FROM {s}.sg_store_meta WHERE key = 'schema_version'",
            ),
            &[],
        )
        .await
        .map_err(db("reading the store's schema version"))?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let text: String = super::rows::col(row, 0)?;
    match text.parse::<u32>() {
        Ok(found) if found > POSTGRES_SCHEMA_VERSION => Err(StoreError::SchemaTooNew {
            found,
            supported: POSTGRES_SCHEMA_VERSION,
        }),
        Ok(found) if found >= 1 => Ok(Some(found)),
        _ => Err(StoreError::Corrupt {
            namespace: format!("{schema}.sg_store_meta"),
            key: "schema_version".to_owned(),
            why: format!("the schema version {text:?} is not a number"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{LAST_OBJECT, TABLES};

    #[test]
    fn the_completeness_check_names_the_object_created_last() {
        let last = TABLES.lines().rfind(|l| l.starts_with("CREATE"));
        assert!(
            last.is_some_and(|l| l.contains(&format!(" {LAST_OBJECT}"))),
            "{last:?}"
        );
    }
}
