//! The PostgreSQL backend's opener: a fresh schema per store (tests run in parallel),
//! dropped when the test's fixture goes. Without `STATEGRAPH_PG_URL` the backend is
//! unavailable (its tests skip), except under `CI=true`, where that fails.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use futures::FutureExt;
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use stategraph_store::{PostgresStore, StoreConfig, VectorBackend};

use crate::support::{BoxError, Opened};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Drops its schema when dropped (the conformance tests run on a multi-thread runtime).
struct DropSchema(PostgresSaver);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let saver = self.0.clone();
        let _ = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(saver.drop_schema())
        });
    }
}

/// A store in a schema of its own, vectors by `vectors`; `None` without a server.
pub fn open_with(
    config: StoreConfig,
    vectors: VectorBackend,
) -> BoxFuture<'static, Result<Option<Opened>, BoxError>> {
    open_saver(config, vectors, false)
}

/// A store in a schema of its own, vectors by `vectors`, its saver preparing statements
/// when `prepared`; `None` without a server.
fn open_saver(
    config: StoreConfig,
    vectors: VectorBackend,
    prepared: bool,
) -> BoxFuture<'static, Result<Option<Opened>, BoxError>> {
    async move {
        let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "STATEGRAPH_PG_URL is not set and CI=true: start one with .ci/postgres.sh"
            );
            return Ok(None);
        };
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let options = PostgresOptions {
            schema: format!("conf_{:?}_{prepared}_{}_{n}", vectors, std::process::id())
                .to_lowercase(),
            pool_size: 2,
            prepared_statements: prepared,
            ..PostgresOptions::default()
        };
        let saver = PostgresSaver::connect_with(&url, options).await?;
        let store = PostgresStore::from_saver_with(&saver, config, vectors).await?;
        Ok(Some(Opened {
            store: std::sync::Arc::new(store),
            keep: Some(Box::new(DropSchema(saver))),
        }))
    }
    .boxed()
}

/// The backend as it opens by default: pgvector when the server has it.
pub fn open(config: StoreConfig) -> BoxFuture<'static, Result<Option<Opened>, BoxError>> {
    open_with(config, VectorBackend::Auto)
}

/// The backend with vectors ranked by the in-memory fallback.
pub fn open_fallback(config: StoreConfig) -> BoxFuture<'static, Result<Option<Opened>, BoxError>> {
    open_with(config, VectorBackend::Fallback)
}

/// The backend with its saver's statements prepared: gets and writes go as named statements.
pub fn open_prepared(config: StoreConfig) -> BoxFuture<'static, Result<Option<Opened>, BoxError>> {
    open_saver(config, VectorBackend::Auto, true)
}
