//! Cached node writes in the SQLite file (`sg_node_cache`): the writer's puts and clears, the
//! readers' lookups, and [`NodeCache`] for [`SqliteSaver`].

use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension};

use super::sql::SqlResult;
use super::writer::{Op, Reply};
use super::{SqliteSaver, Unavailable};
use crate::node_cache::{live, CacheEntry, CacheKey, NodeCache};
use crate::{CheckpointError, StorageError};

/// The node cache's table, made by the first store: a file whose graphs use no cache keeps
/// no page for it.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS sg_node_cache (
    ns         TEXT NOT NULL,
    key        TEXT NOT NULL,
    expires_at INTEGER,
    value      TEXT NOT NULL,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID";

/// Whether the file has the node cache's table (no store has made it yet otherwise).
fn has_table(conn: &Connection) -> Result<bool, CheckpointError> {
    conn.prepare_cached(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sg_node_cache'",
    )
    .during("preparing to look for the node cache's table")?
    .exists([])
    .during("looking for the node cache's table")
}

/// Store `entries`, each replacing its key's row (run by the writer).
pub(super) fn put(conn: &Connection, entries: &[CacheEntry]) -> Result<(), CheckpointError> {
    if !has_table(conn)? {
        conn.execute_batch(TABLE)
            .during("creating the node cache's table")?;
    }
    let mut stmt = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO sg_node_cache (ns, key, expires_at, value) \
             VALUES (?1, ?2, ?3, ?4)",
        )
        .during("preparing to store a node cache entry")?;
    for e in entries {
        let value = serde_json::to_string(&e.value)
            .map_err(|err| StorageError::new("encoding a node cache entry", err))?;
        stmt.execute((&e.key.ns, &e.key.key, e.expires_at_ms, value))
            .during("storing a node cache entry")?;
    }
    Ok(())
}

/// Drop the rows of `namespaces` (run by the writer); how many were dropped.
pub(super) fn clear(conn: &Connection, namespaces: &[String]) -> Result<usize, CheckpointError> {
    if !has_table(conn)? {
        return Ok(0);
    }
    let mut stmt = conn
        .prepare_cached("DELETE FROM sg_node_cache WHERE ns = ?1")
        .during("preparing to clear node cache entries")?;
    let mut dropped = 0;
    for ns in namespaces {
        dropped += stmt.execute([ns]).during("clearing node cache entries")?;
    }
    Ok(dropped)
}

/// The live value of each of `keys` at `now_ms` (run on a reader).
fn get(
    conn: &Connection,
    keys: &[CacheKey],
    now_ms: i64,
) -> Result<Vec<Option<serde_json::Value>>, CheckpointError> {
    if !has_table(conn)? {
        return Ok(vec![None; keys.len()]);
    }
    let mut stmt = conn
        .prepare_cached("SELECT expires_at, value FROM sg_node_cache WHERE ns = ?1 AND key = ?2")
        .during("preparing to read a node cache entry")?;
    keys.iter()
        .map(|k| {
            let row: Option<(Option<i64>, String)> = stmt
                .query_row((&k.ns, &k.key), |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .during("reading a node cache entry")?;
            match row {
                Some((expires, text)) if live(expires, now_ms) => serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| CheckpointError::Integrity {
                        thread: "-".to_owned(),
                        checkpoint: "-".to_owned(),
                        blob: format!("sg_node_cache entry {}/{}", k.ns, k.key),
                        detail: e.to_string(),
                    }),
                _ => Ok(None),
            }
        })
        .collect()
}

/// The node cache kept in the saver's file: entries outlive the process and are shared by
/// every process that opens the file. Expired entries are skipped when read and replaced
/// when their node runs again.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_checkpoints::node_cache::{CacheEntry, CacheKey, NodeCache};
/// use stategraph_checkpoints::SqliteSaver;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir()?;
/// let saver = SqliteSaver::open(dir.path().join("graph.db"))?;
/// let key = CacheKey { ns: "graph/double".into(), key: "ab12".into() };
/// let entry = CacheEntry { key: key.clone(), value: serde_json::json!(4), expires_at_ms: None };
/// saver.put_cached(vec![entry]).await?;
/// saver.close()?;
/// let reopened = SqliteSaver::open(dir.path().join("graph.db"))?;
/// assert_eq!(reopened.get_cached(&[key], 0).await?, [Some(serde_json::json!(4))]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
impl NodeCache for SqliteSaver {
    fn get_cached<'a>(
        &'a self,
        keys: &'a [CacheKey],
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<Option<serde_json::Value>>, CheckpointError>> {
        let keys = keys.to_vec();
        self.read(move |conn, _| get(conn, &keys, now_ms))
    }

    fn put_cached(&self, entries: Vec<CacheEntry>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        let fut = self.submit(Op::PutCache(entries));
        Box::pin(async move { fut.await.map(|_| ()) })
    }

    fn clear_cached<'a>(
        &'a self,
        namespaces: &'a [String],
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        let fut = self.submit(Op::ClearCache(namespaces.to_vec()));
        Box::pin(async move {
            match fut.await? {
                Reply::Count(n) => Ok(n),
                Reply::Done | Reply::Stored(_) => Err(Unavailable::wrong_reply()),
            }
        })
    }
}
