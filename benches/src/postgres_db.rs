//! A [`PostgresSaver`] on a fresh schema of the server at `--pg-url`, its footprint (the
//! keys `sqlite_db` prints, read from the Postgres tables), and the Postgres commit floor.
//!
//! Key mapping (as `sqlite_db`'s, for the Postgres tables):
//! - `checkpoint_rows`: rows of `sg_checkpoints`;
//! - `checkpoint_blob_bytes`: `sum(octet_length)` of the rows' records (`control`, `wrote`,
//!   `base`) plus `sum(length(data))` of `sg_values`; apart as `checkpoint_body_bytes` and
//!   `blob_bytes` (with `blob_rows`);
//! - `checkpoint_blob_max_bytes`: the largest row's records; `metadata_bytes`: its metadata;
//! - `write_rows`, `write_blob_bytes`: rows and `sum(octet_length(kind))` of `sg_writes`;
//! - `db_logical_bytes`: `pg_total_relation_size` of the schema's tables (indexes and TOAST
//!   included).
//!
//! The floor: a bare loop of one-row commits (`INSERT` of a ~190-byte row in autocommit,
//! `synchronous_commit = on`) on its own connection to the same server: what one durable
//! round trip costs there.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use stategraph::checkpoints::{PostgresOptions, PostgresSaver};
use stategraph::BoxError;

use crate::report::{round, Record};

static SERIAL: AtomicU64 = AtomicU64::new(0);

/// `--pg-prepared-statements`, set once at start.
static PREPARED: AtomicBool = AtomicBool::new(false);

/// Set the savers' `prepared_statements` (`--pg-prepared-statements`).
pub(crate) fn set_prepared(on: bool) {
    PREPARED.store(on, Ordering::Relaxed);
}

/// Options of a bench saver on `schema`: `pool_size` connections, prepared statements as
/// the flag says.
pub(crate) fn options(schema: String, pool_size: usize) -> PostgresOptions {
    PostgresOptions {
        schema,
        pool_size,
        prepared_statements: PREPARED.load(Ordering::Relaxed),
        ..PostgresOptions::default()
    }
}

/// A saver on a fresh schema, dropped by [`PgDb::close`].
pub(crate) struct PgDb {
    pub(crate) saver: PostgresSaver,
    url: String,
}

impl PgDb {
    /// A fresh schema `bench_<label>_<pid>_<n>`.
    pub(crate) async fn open(url: &str, label: &str) -> Result<Self, BoxError> {
        let n = SERIAL.fetch_add(1, Ordering::Relaxed);
        let mut schema = format!("bench_{label}_{}_{n}", std::process::id()).replace('-', "_");
        schema.truncate(63);
        let saver = PostgresSaver::connect_with(url, options(schema, 8)).await?;
        Ok(PgDb {
            saver,
            url: url.to_owned(),
        })
    }

    /// The schema's footprint as record keys, then drop it.
    pub(crate) async fn close(self, r: Record) -> Result<Record, BoxError> {
        let client = connect(&self.url).await?;
        let s = format!("\"{}\"", self.saver.schema());
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*), \
                       COALESCE(sum(octet_length(control) + octet_length(wrote) \
                                + COALESCE(octet_length(base), 0)), 0)::bigint, \
                       COALESCE(max(octet_length(control) + octet_length(wrote) \
                                + COALESCE(octet_length(base), 0)), 0)::bigint, \
                       COALESCE(sum(octet_length(metadata)), 0)::bigint, \
                       (SELECT count(*) FROM {s}.sg_values), \
                       (SELECT COALESCE(sum(length(data)), 0)::bigint FROM {s}.sg_values), \
                       (SELECT count(*) FROM {s}.sg_writes), \
                       (SELECT COALESCE(sum(octet_length(kind)), 0)::bigint FROM {s}.sg_writes), \
                       (SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint \
                          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                          WHERE n.nspname = $1 AND c.relkind = 'r') \
                     FROM {s}.sg_checkpoints"
                ),
                &[&self.saver.schema()],
            )
            .await?;
        let g = |i: usize| row.try_get::<_, i64>(i);
        let (body, blobs) = (g(1)?, g(5)?);
        let r = r
            .kv("pg_prepared_statements", PREPARED.load(Ordering::Relaxed))
            .kv("checkpoint_rows", g(0)?)
            .kv("checkpoint_blob_bytes", body + blobs)
            .kv("checkpoint_blob_max_bytes", g(2)?)
            .kv("metadata_bytes", g(3)?)
            .kv("write_rows", g(6)?)
            .kv("write_blob_bytes", g(7)?)
            .kv("db_logical_bytes", g(8)?)
            .kv("checkpoint_body_bytes", body)
            .kv("blob_rows", g(4)?)
            .kv("blob_bytes", blobs);
        self.saver.drop_schema().await?;
        Ok(r)
    }

    /// Checkpoints stored so far.
    pub(crate) async fn checkpoint_rows(&self) -> Result<i64, BoxError> {
        let client = connect(&self.url).await?;
        let s = format!("\"{}\"", self.saver.schema());
        let row = client
            .query_one(&format!("SELECT count(*) FROM {s}.sg_checkpoints"), &[])
            .await?;
        Ok(row.try_get(0)?)
    }
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, BoxError> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// The `env` row's `pg_*` keys: the server's version and the settings that bear on what a
/// commit costs, as a session opened with `url` has them — so options the URL passes (such as
/// `options=-c commit_delay=1000 -c commit_siblings=0`, a slower flush emulated on every
/// commit) show in the output.
pub(crate) async fn server_keys(url: &str, r: Record) -> Result<Record, BoxError> {
    const SETTINGS: [(&str, &str); 8] = [
        ("postgres", "server_version"),
        ("pg_synchronous_commit", "synchronous_commit"),
        ("pg_fsync", "fsync"),
        ("pg_wal_sync_method", "wal_sync_method"),
        ("pg_full_page_writes", "full_page_writes"),
        ("pg_shared_buffers", "shared_buffers"),
        ("pg_commit_delay", "commit_delay"),
        ("pg_commit_siblings", "commit_siblings"),
    ];
    let names: Vec<&str> = SETTINGS.iter().map(|(_, setting)| *setting).collect();
    let row = connect(url)
        .await?
        .query_one(
            "SELECT array_agg(current_setting(name) ORDER BY i) \
             FROM unnest($1::text[]) WITH ORDINALITY AS s(name, i)",
            &[&names],
        )
        .await?;
    let values: Vec<String> = row.try_get(0)?;
    Ok(SETTINGS
        .iter()
        .zip(values)
        .fold(r, |r, ((key, _), value)| r.kv(key, value)))
}

/// Milliseconds per commit of `commits` one-row autocommit inserts of `row` on the server,
/// with `synchronous_commit = on`.
pub(crate) async fn floor_ms(url: &str, commits: usize, row: &[u8]) -> Result<f64, BoxError> {
    let client = connect(url).await?;
    let table = format!("bench_floor_{}", std::process::id());
    client
        .batch_execute(&format!(
            "SET synchronous_commit = on; \
             CREATE TABLE IF NOT EXISTS \"{table}\" (id bigserial PRIMARY KEY, row bytea NOT NULL)"
        ))
        .await?;
    let insert = client
        .prepare(&format!("INSERT INTO \"{table}\" (row) VALUES ($1)"))
        .await?;
    // Warm-up: the first commits pay for the table's first pages.
    for _ in 0..10 {
        client.execute(&insert, &[&row]).await?;
    }
    let t0 = Instant::now();
    for _ in 0..commits {
        client.execute(&insert, &[&row]).await?;
    }
    let ms = t0.elapsed().as_secs_f64() * 1000.0 / commits.max(1) as f64;
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\""))
        .await?;
    Ok(round(ms, 6))
}

/// Floor samples taken next to a timed run (before and after: the disk's fsync latency
/// drifts on a shared machine).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PgFloor {
    pub(crate) before: f64,
    pub(crate) after: f64,
}

impl PgFloor {
    /// Add `pg_floor_adjacent_ms` and, for a run that committed `commits` times in
    /// `wall_s`, `per_commit_vs_pg_floor` (per commit over the mean of the two samples).
    pub(crate) fn keys(self, r: Record, wall_s: f64, commits: i64) -> Record {
        let mean = (self.before + self.after) / 2.0;
        let per_commit = wall_s * 1000.0 / commits.max(1) as f64;
        r.kv("pg_floor_adjacent_ms", vec![self.before, self.after])
            .kv("pg_synchronous_commit", "on")
            .kv("per_commit_ms", round(per_commit, 6))
            .kv(
                "per_commit_vs_pg_floor",
                round(per_commit / mean.max(f64::MIN_POSITIVE), 3),
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's URL from `STATEGRAPH_PG_URL`; `None` (after saying how to start one) when
    /// unset, a failure under `CI=true`, as the other Postgres tests do.
    fn url() -> Option<String> {
        let how = "start a throwaway server with: eval \"export $(.ci/postgres.sh | tail -n 1)\"";
        match std::env::var("STATEGRAPH_PG_URL") {
            Ok(url) if !url.is_empty() => Some(url),
            _ => {
                assert!(
                    std::env::var("CI").map_or(true, |v| v != "true"),
                    "STATEGRAPH_PG_URL is not set and CI=true: {how}"
                );
                eprintln!("skipped: STATEGRAPH_PG_URL is not set; {how}");
                None
            }
        }
    }

    #[test]
    fn the_env_row_reports_the_commit_settings_a_url_passes() -> Result<(), BoxError> {
        let Some(url) = url() else { return Ok(()) };
        let sep = if url.contains('?') { '&' } else { '?' };
        let dearer =
            format!("{url}{sep}options=-c%20commit_delay%3D700%20-c%20commit_siblings%3D3");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (plain, passed) = rt.block_on(async {
            let plain = server_keys(&url, Record::new()).await?;
            let passed = server_keys(&dearer, Record::new()).await?;
            Ok::<_, BoxError>((serde_json::to_value(plain)?, serde_json::to_value(passed)?))
        })?;
        assert_eq!(passed["pg_commit_delay"], "700", "{passed}");
        assert_eq!(passed["pg_commit_siblings"], "3", "{passed}");
        assert_eq!(
            plain["pg_commit_delay"], "0",
            "the server's default: {plain}"
        );
        assert!(
            passed["postgres"]
                .as_str()
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit())),
            "a server version: {passed}"
        );
        Ok(())
    }
}
