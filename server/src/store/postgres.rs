//! The records on PostgreSQL, in the saver's schema: a table of threads. A thread's status
//! reads `busy` while the run queue (`sg_run_queue`) holds an unfinished run of it, so every
//! server on the database sees the same status without writing it at each submission.
//! Frames and results of runs (`server_frames`, `server_results`) are the relay's
//! (`runs::relay`); their tables are made here with the others.

use serde_json::{Map, Value};
use stategraph::checkpoints::PostgresSaver;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::sqlite::{json_map, json_text, storage};
use super::{search_terms, ThreadRow, ThreadStatus};
use crate::error::ApiResult;
use crate::ids::now_ms;
use crate::wire::ThreadSearch;

/// The server's tables, in the saver's schema, reached through the saver's pool.
#[derive(Debug, Clone)]
pub(crate) struct PgBook {
    pub(crate) saver: PostgresSaver,
    /// `"schema".` to put before a table's name.
    pub(crate) s: String,
}

impl PgBook {
    /// Make the tables (if missing) in `saver`'s schema.
    pub(crate) async fn open(saver: PostgresSaver) -> ApiResult<PgBook> {
        let s = format!("\"{}\".", saver.schema());
        let book = PgBook { saver, s };
        let s = &book.s;
        let ddl = format!(
            "SELECT pg_advisory_xact_lock(hashtext('stategraph server tables'));
             CREATE TABLE IF NOT EXISTS {s}server_threads (
                 thread_id TEXT PRIMARY KEY,
                 created_at BIGINT NOT NULL,
                 updated_at BIGINT NOT NULL,
                 metadata JSONB NOT NULL,
                 status TEXT NOT NULL,
                 error JSONB,
                 seq BIGSERIAL);
             CREATE TABLE IF NOT EXISTS {s}server_frames (
                 run_id TEXT NOT NULL,
                 pos BIGINT NOT NULL,
                 attempt INT NOT NULL,
                 event TEXT NOT NULL,
                 data TEXT NOT NULL,
                 PRIMARY KEY (run_id, pos));
             CREATE TABLE IF NOT EXISTS {s}server_results (
                 run_id TEXT PRIMARY KEY,
                 result TEXT NOT NULL,
                 at BIGINT NOT NULL);"
        );
        let mut c = book.saver.connection().await?;
        let tx = c.transaction().await.map_err(storage)?;
        tx.batch_execute(&ddl).await.map_err(storage)?;
        tx.commit().await.map_err(storage)?;
        Ok(book)
    }

    pub(crate) async fn query(
        &self,
        text: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> ApiResult<Vec<Row>> {
        let c = self.saver.connection().await?;
        c.query(text, params).await.map_err(storage)
    }

    /// The threads' columns, with the status as the queue makes it.
    fn threads(&self) -> String {
        let s = &self.s;
        format!(
            "SELECT t.thread_id, t.created_at, t.updated_at, t.metadata::text,
                 CASE WHEN EXISTS (SELECT 1 FROM {s}sg_run_queue q
                     WHERE q.thread = t.thread_id AND q.status IN ('pending', 'running'))
                 THEN 'busy' ELSE t.status END AS status,
                 t.error::text, t.seq
             FROM {s}server_threads t"
        )
    }

    pub(crate) async fn create_thread(
        &self,
        id: &str,
        metadata: &Map<String, Value>,
    ) -> ApiResult<Option<ThreadRow>> {
        let now = now_ms();
        let text = format!(
            "INSERT INTO {}server_threads (thread_id, created_at, updated_at, metadata, status)
             VALUES ($1, $2, $2, $3::text::jsonb, 'idle')
             ON CONFLICT (thread_id) DO NOTHING RETURNING 1",
            self.s
        );
        let made = self
            .query(&text, &[&id, &now, &json_text(metadata)])
            .await?;
        Ok((!made.is_empty()).then(|| ThreadRow {
            thread_id: id.to_owned(),
            created_at: now,
            updated_at: now,
            metadata: metadata.clone(),
            status: ThreadStatus::Idle,
            error: None,
        }))
    }

    pub(crate) async fn thread(&self, id: &str) -> ApiResult<Option<ThreadRow>> {
        let text = format!("{} WHERE t.thread_id = $1", self.threads());
        let rows = self.query(&text, &[&id]).await?;
        rows.first().map(thread_row).transpose()
    }

    /// Merge `metadata` into the thread's, in one statement (a concurrent merge is not lost).
    pub(crate) async fn merge_metadata(
        &self,
        id: &str,
        metadata: &Map<String, Value>,
    ) -> ApiResult<Option<ThreadRow>> {
        let text = format!(
            "UPDATE {}server_threads SET metadata = metadata || $2::text::jsonb,
                 updated_at = $3 WHERE thread_id = $1",
            self.s
        );
        let c = self.saver.connection().await?;
        let n = c
            .execute(&text, &[&id, &json_text(metadata), &now_ms()])
            .await
            .map_err(storage)?;
        drop(c);
        if n == 0 {
            return Ok(None);
        }
        self.thread(id).await
    }

    /// Set the thread's status (what its last run left it), and its error.
    pub(crate) async fn set_thread_status(
        &self,
        id: &str,
        status: ThreadStatus,
        error: Option<&Value>,
    ) -> ApiResult<()> {
        let text = format!(
            "UPDATE {}server_threads SET status = $2, error = $3::text::jsonb, updated_at = $4
             WHERE thread_id = $1",
            self.s
        );
        let error = error.map(Value::to_string);
        self.query(&text, &[&id, &status.as_str(), &error, &now_ms()])
            .await
            .map(drop)
    }

    pub(crate) async fn delete_thread(&self, id: &str) -> ApiResult<bool> {
        let text = format!(
            "DELETE FROM {}server_threads WHERE thread_id = $1 RETURNING 1",
            self.s
        );
        Ok(!self.query(&text, &[&id]).await?.is_empty())
    }

    /// Threads matching a search: metadata containment as PostgreSQL's `@>` has it (as on
    /// LangGraph's server), ids, status; sorted and paged.
    pub(crate) async fn search_threads(&self, q: &ThreadSearch) -> ApiResult<Vec<ThreadRow>> {
        let terms = search_terms(q)?;
        let metadata = json_text(&q.metadata.clone().unwrap_or_default());
        let status = terms.status.map(ThreadStatus::as_str);
        let ids = q.ids.clone();
        let (limit, offset) = (terms.limit, terms.offset);
        let text = format!(
            "SELECT * FROM ({}) x
             WHERE x.metadata::jsonb @> $1::text::jsonb
               AND ($2::text IS NULL OR x.status = $2)
               AND ($3::text[] IS NULL OR x.thread_id = ANY($3))
             ORDER BY {col} {order}, seq {order} LIMIT $4 OFFSET $5",
            self.threads(),
            col = terms.column,
            order = terms.order,
        );
        let rows = self
            .query(&text, &[&metadata, &status, &ids, &limit, &offset])
            .await?;
        rows.iter().map(thread_row).collect()
    }
}

fn thread_row(r: &Row) -> ApiResult<ThreadRow> {
    let text = |i: usize| r.try_get::<_, Option<String>>(i).map_err(storage);
    let status = text(4)?.unwrap_or_default();
    Ok(ThreadRow {
        thread_id: r.try_get(0).map_err(storage)?,
        created_at: r.try_get(1).map_err(storage)?,
        updated_at: r.try_get(2).map_err(storage)?,
        metadata: json_map(&text(3)?.unwrap_or_default()),
        status: ThreadStatus::parse(&status).unwrap_or(ThreadStatus::Idle),
        error: text(5)?.and_then(|e| serde_json::from_str(&e).ok()),
    })
}
