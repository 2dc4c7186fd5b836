//! The PostgreSQL server the Postgres tests run against: its URL from `STATEGRAPH_PG_URL`
//! (printed by `.ci/postgres.sh`), the transaction-mode PgBouncer in front of it from
//! `STATEGRAPH_PGB_URL` (printed by `.ci/pgbouncer.sh`), and a throwaway schema per test,
//! dropped after it.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU64, Ordering};

use stategraph_checkpoints::{CheckpointError, PostgresOptions, PostgresSaver};

/// How to start the server, as the skip and failure messages say it.
pub const HOW_TO_START: &str =
    "start a throwaway server with: eval \"export $(.ci/postgres.sh | tail -n 1)\"";

/// The value of the environment variable `var`; `None` (after saying `how` to get it) when it
/// is unset or empty. Under `CI=true` a missing value fails the test instead of skipping it.
pub fn from_env(var: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{var} is not set and CI=true: {how}");
            }
            eprintln!("skipped: {var} is not set; {how}");
            None
        }
    }
}

/// The server's URL, from `STATEGRAPH_PG_URL` (see [`from_env`]).
pub fn url() -> Option<String> {
    from_env("STATEGRAPH_PG_URL", HOW_TO_START)
}

/// How to start the transaction-mode pooler, as the skip and failure messages say it.
pub const HOW_TO_START_PGB: &str = "start the server, then a PgBouncer in transaction mode in \
     front of it, with: eval \"export $(.ci/postgres.sh | tail -n 1)\"; \
     eval \"export $(.ci/pgbouncer.sh | tail -n 1)\"";

/// The URL of the transaction-mode PgBouncer in front of the server, from
/// `STATEGRAPH_PGB_URL` (printed by `.ci/pgbouncer.sh`; see [`from_env`]).
pub fn pgb_url() -> Option<String> {
    from_env("STATEGRAPH_PGB_URL", HOW_TO_START_PGB)
}

/// How to get the server's CA, as the skip and failure messages say it.
pub const HOW_TO_GET_CA: &str = "start the server, then export its CA with: \
     eval \"export $(.ci/postgres.sh | tail -n 1)\"; eval \"export $(.ci/postgres.sh ca | tail -n 1)\"";

/// The file of the CA that signed the server's TLS certificate, from `STATEGRAPH_PG_CA`
/// (printed by `.ci/postgres.sh ca`; see [`from_env`]).
pub fn ca() -> Option<std::path::PathBuf> {
    from_env("STATEGRAPH_PG_CA", HOW_TO_GET_CA).map(Into::into)
}

/// How to get the client certificate, as the skip and failure messages say it.
pub const HOW_TO_GET_CLIENT: &str = "start the server, then export its client certificate \
     with: eval \"export $(.ci/postgres.sh | tail -n 1)\"; \
     eval \"export $(.ci/postgres.sh client | tail -n 1)\"";

/// The user the server lets in by client certificate only (`.ci/postgres.sh`).
pub const CERT_USER: &str = "sg_cert";

/// The certificate and key the server's CA signed for [`CERT_USER`], from
/// `STATEGRAPH_PG_CLIENT_CERT` and `STATEGRAPH_PG_CLIENT_KEY` (printed by
/// `.ci/postgres.sh client`; see [`from_env`]).
pub fn client_cert() -> Option<stategraph_checkpoints::TlsClientCert> {
    let cert = from_env("STATEGRAPH_PG_CLIENT_CERT", HOW_TO_GET_CLIENT)?;
    let key = from_env("STATEGRAPH_PG_CLIENT_KEY", HOW_TO_GET_CLIENT)?;
    Some(stategraph_checkpoints::TlsClientCert {
        cert: cert.into(),
        key: key.into(),
    })
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A schema name no other test (or test process) uses.
pub fn unique_schema(prefix: &str) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut name = format!("{prefix}_{}_{n}_{nanos}", std::process::id());
    name.truncate(63);
    name
}

/// Drops its schema when dropped (also when the test fails).
#[derive(Debug)]
pub struct SchemaGuard {
    pub url: String,
    pub schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        // A thread of its own: the test's runtime may be shutting down.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&url, tokio_postgres::NoTls).await
                {
                    tokio::spawn(conn);
                    let _ = client
                        // Never wait forever behind a transaction of the test's own runtime,
                        // which cannot run while this drop blocks it: give up, leave the schema.
                        .batch_execute(&format!(
                            "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                        ))
                        .await;
                }
            });
        })
        .join();
    }
}

/// A saver on a fresh schema of its own, with the guard that drops it.
pub async fn fresh_with(
    url: &str,
    prefix: &str,
    options: PostgresOptions,
) -> Result<(PostgresSaver, SchemaGuard), CheckpointError> {
    let schema = unique_schema(prefix);
    let guard = SchemaGuard {
        url: url.to_owned(),
        schema: schema.clone(),
    };
    let mut options = options;
    options.schema = schema;
    let saver = PostgresSaver::connect_with(url, options).await?;
    Ok((saver, guard))
}

/// A saver on a fresh schema with default options (a small pool: tests run in parallel).
pub async fn fresh(
    url: &str,
    prefix: &str,
) -> Result<(PostgresSaver, SchemaGuard), CheckpointError> {
    let options = PostgresOptions {
        pool_size: 4,
        ..PostgresOptions::default()
    };
    fresh_with(url, prefix, options).await
}

/// [`fresh`] on the server of [`url`]; `None` (the test skips) without one.
///
/// # Panics
/// When the schema cannot be made: the server is there but refuses.
pub async fn fresh_or_skip(prefix: &str) -> Option<(PostgresSaver, SchemaGuard)> {
    let url = url()?;
    Some(fresh(&url, prefix).await.expect("a fresh schema"))
}

/// A plain connection for looking at (or damaging) the tables directly.
pub async fn raw(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// A worker serving in the background of a test.
pub struct Serving {
    shutdown: stategraph::CancelToken,
    task: tokio::task::JoinHandle<()>,
}

impl Serving {
    /// Start `worker` serving its queue.
    pub fn start<S: stategraph::State>(worker: stategraph::worker::Worker<S>) -> Self {
        let shutdown = stategraph::CancelToken::new();
        let stop = shutdown.clone();
        let task = tokio::spawn(async move { worker.serve(stop).await });
        Serving { shutdown, task }
    }

    /// Stop it and wait until it has: no transaction of it is left open when the test's
    /// schema is dropped.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }
}
