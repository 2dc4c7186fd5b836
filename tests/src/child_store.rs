//! Where a crash test's child process stores its thread: a SQLite file or a schema of a
//! PostgreSQL database, named to the child through environment variables under a prefix.

use std::path::PathBuf;
use std::sync::Arc;

use stategraph_checkpoints::{CheckpointError, PostgresOptions, PostgresSaver, Saver, SqliteSaver};

/// A thread's store, as a test and its child process both name it.
#[derive(Debug, Clone)]
pub enum ChildStore {
    /// A SQLite file.
    File(PathBuf),
    /// A schema of the PostgreSQL database at `url`.
    Postgres {
        /// The database's URL.
        url: String,
        /// The schema.
        schema: String,
    },
}

impl ChildStore {
    /// The child's environment naming this store: `{prefix}_DB`, or `{prefix}_PG_URL` and
    /// `{prefix}_PG_SCHEMA`.
    pub fn env(&self, prefix: &str) -> Vec<(String, String)> {
        match self {
            ChildStore::File(db) => vec![(format!("{prefix}_DB"), db.display().to_string())],
            ChildStore::Postgres { url, schema } => vec![
                (format!("{prefix}_PG_URL"), url.clone()),
                (format!("{prefix}_PG_SCHEMA"), schema.clone()),
            ],
        }
    }

    /// The store the environment names under `prefix` (see [`ChildStore::env`]); `None`
    /// outside a child.
    pub fn from_env(prefix: &str) -> Option<ChildStore> {
        if let Ok(db) = std::env::var(format!("{prefix}_DB")) {
            return Some(ChildStore::File(PathBuf::from(db)));
        }
        let url = std::env::var(format!("{prefix}_PG_URL")).ok()?;
        let schema = std::env::var(format!("{prefix}_PG_SCHEMA")).ok()?;
        Some(ChildStore::Postgres { url, schema })
    }

    /// Open a saver on it; `read_only`: a file only looked at, `None` if it does not exist.
    ///
    /// # Errors
    /// The saver's error when it cannot open.
    pub async fn open(&self, read_only: bool) -> Result<Option<Arc<dyn Saver>>, CheckpointError> {
        Ok(Some(match self {
            ChildStore::File(db) if read_only => {
                if !db.exists() {
                    return Ok(None);
                }
                Arc::new(SqliteSaver::open_read_only(db)?)
            }
            ChildStore::File(db) => Arc::new(SqliteSaver::open(db)?),
            ChildStore::Postgres { url, schema } => {
                let options = PostgresOptions {
                    schema: schema.clone(),
                    pool_size: 2,
                    ..PostgresOptions::default()
                };
                Arc::new(PostgresSaver::connect_with(url, options).await?)
            }
        }))
    }
}
