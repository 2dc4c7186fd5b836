//! The stores the `store` workload opens: ours, by backend name, each fresh and removed
//! afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stategraph::BoxError;
use stategraph_store::{
    IndexConfig, MemoryStore, PostgresStore, SqliteStore, SqliteStoreOptions, Store, StoreConfig,
    Synchronous,
};

use crate::postgres_db::PgDb;
use crate::Args;

/// The backends the workload knows.
pub(crate) const BACKENDS: [&str; 3] = ["memory", "sqlite", "postgres"];

/// Serial numbers of the stores' files.
static SERIAL: AtomicUsize = AtomicUsize::new(0);

/// Whether LangGraph's store on `backend` runs without a vector index here (its
/// PostgreSQL index needs pgvector).
pub(crate) fn langgraph_has_no_index(backend: &str) -> bool {
    backend == "postgres"
}

/// An open store and what to remove with it.
pub(crate) struct Opened {
    pub(crate) store: Arc<dyn Store>,
    file: Option<std::path::PathBuf>,
    pg: Option<PgDb>,
}

impl Opened {
    /// Closes the store and removes its file or schema.
    pub(crate) async fn close(self) -> Result<(), BoxError> {
        drop(self.store);
        if let Some(file) = self.file {
            for suffix in ["", "-wal", "-shm"] {
                let mut p = file.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        }
        if let Some(pg) = self.pg {
            pg.saver.drop_schema().await?;
        }
        Ok(())
    }
}

/// A fresh, empty store on `backend`, with `index` when given.
pub(crate) async fn open(
    backend: &str,
    index: Option<IndexConfig>,
    args: &Args,
) -> Result<Opened, BoxError> {
    let config = StoreConfig {
        index,
        ..StoreConfig::default()
    };
    let n = SERIAL.fetch_add(1, Ordering::Relaxed);
    match backend {
        "memory" => Ok(Opened {
            store: Arc::new(MemoryStore::new(config)),
            file: None,
            pg: None,
        }),
        "sqlite" => {
            let file = args
                .workdir
                .join(format!("store-{}-{n}.db", std::process::id()));
            let options = SqliteStoreOptions {
                synchronous: match args.sqlite_sync {
                    stategraph::checkpoints::Synchronous::Normal => Synchronous::Normal,
                    _ => Synchronous::Full,
                },
                ..SqliteStoreOptions::default()
            };
            let store = SqliteStore::open_with(&file, config, options)?;
            Ok(Opened {
                store: Arc::new(store),
                file: Some(file),
                pg: None,
            })
        }
        "postgres" => {
            let url = args
                .pg_url
                .as_deref()
                .ok_or("store: the postgres backend needs --pg-url or STATEGRAPH_PG_URL")?;
            let db = PgDb::open(url, "store").await?;
            let store = PostgresStore::from_saver(&db.saver, config).await?;
            Ok(Opened {
                store: Arc::new(store),
                file: None,
                pg: Some(db),
            })
        }
        other => Err(format!("store: unknown backend {other:?} ({})", BACKENDS.join(", ")).into()),
    }
}
