//! The server's own records: threads (metadata, status) and runs (status, the request that
//! made them, so a queued or running run survives a restart), beside the saver's
//! checkpoints. On SQLite they are tables of the checkpoint file; on PostgreSQL a table of
//! threads in the saver's schema, and the runs are the run queue's.
//!
//! Inside: `sqlite` and `postgres` the two backends; here the records and the calls the
//! routes make, whichever backend holds them.

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod sqlite;

use serde_json::{Map, Value};

use crate::error::ApiResult;
use crate::wire::{Multitask, RunCreate, ThreadSearch};
pub(crate) use sqlite::SqliteBook;

/// Where a thread stands, as the clients read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadStatus {
    Idle,
    Busy,
    Interrupted,
    Error,
}

impl ThreadStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Busy => "busy",
            ThreadStatus::Interrupted => "interrupted",
            ThreadStatus::Error => "error",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        [Self::Idle, Self::Busy, Self::Interrupted, Self::Error]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// Where a run stands: the saver's run statuses, which are LangGraph's (this server never
/// gives `cancelled`: a cancelled run is `interrupted`, as on LangGraph's server).
pub(crate) use stategraph::checkpoints::RunStatus;

/// A thread's record.
#[derive(Debug, Clone)]
pub(crate) struct ThreadRow {
    pub(crate) thread_id: String,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) status: ThreadStatus,
    /// Why its last run did not end well (`{error, message}`), if it did not.
    pub(crate) error: Option<Value>,
}

impl ThreadRow {
    /// The graph the thread's runs used (stamped by the first run).
    pub(crate) fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Value::as_str)
    }
}

/// A run's record.
#[derive(Debug, Clone)]
pub(crate) struct RunRow {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    pub(crate) status: RunStatus,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) multitask: Multitask,
    pub(crate) request: RunCreate,
    pub(crate) attempt: u32,
    /// A run without a thread of the client's: its thread goes when it ends.
    pub(crate) stateless: bool,
}

/// A thread search's terms, checked.
pub(crate) struct SearchTerms {
    pub(crate) status: Option<ThreadStatus>,
    /// The column to sort by.
    pub(crate) column: &'static str,
    /// `ASC` or `DESC`.
    pub(crate) order: &'static str,
    pub(crate) limit: i64,
    pub(crate) offset: i64,
}

/// Check a search's status, sort and page (10 threads, newest first, by default).
pub(crate) fn search_terms(q: &ThreadSearch) -> ApiResult<SearchTerms> {
    use crate::error::ApiError;
    let status = match &q.status {
        Some(s) => Some(ThreadStatus::parse(s).ok_or_else(|| {
            ApiError::Invalid(format!(
                "status {s:?}: expected idle, busy, interrupted or error"
            ))
        })?),
        None => None,
    };
    let column = match q.sort_by.as_deref().unwrap_or("created_at") {
        "thread_id" => "thread_id",
        "status" => "status",
        "created_at" => "created_at",
        "updated_at" => "updated_at",
        other => {
            return Err(ApiError::Invalid(format!(
                "sort_by {other:?}: expected thread_id, status, created_at or updated_at"
            )))
        }
    };
    let order = match q.sort_order.as_deref().unwrap_or("desc") {
        "asc" => "ASC",
        "desc" => "DESC",
        other => {
            return Err(ApiError::Invalid(format!(
                "sort_order {other:?}: expected asc or desc"
            )))
        }
    };
    Ok(SearchTerms {
        status,
        column,
        order,
        limit: i64::try_from(q.limit.unwrap_or(10).min(10_000)).unwrap_or(10),
        offset: i64::try_from(q.offset.unwrap_or(0).min(1 << 40)).unwrap_or(0),
    })
}

/// Where the records are.
#[derive(Debug)]
pub(crate) enum Book {
    /// Tables of the checkpoint file.
    Sqlite(SqliteBook),
    /// The saver's PostgreSQL schema.
    #[cfg(feature = "postgres")]
    Postgres(postgres::PgBook),
}

impl Book {
    /// Create a thread; `Ok(None)` if it exists.
    pub(crate) async fn create_thread(
        &self,
        id: &str,
        metadata: &Map<String, Value>,
    ) -> ApiResult<Option<ThreadRow>> {
        match self {
            Book::Sqlite(b) => b.create_thread(id, metadata),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.create_thread(id, metadata).await,
        }
    }

    pub(crate) async fn thread(&self, id: &str) -> ApiResult<Option<ThreadRow>> {
        match self {
            Book::Sqlite(b) => b.thread(id),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.thread(id).await,
        }
    }

    /// Merge `metadata` into the thread's; `None` if there is no such thread.
    pub(crate) async fn merge_metadata(
        &self,
        id: &str,
        metadata: &Map<String, Value>,
    ) -> ApiResult<Option<ThreadRow>> {
        match self {
            Book::Sqlite(b) => b.merge_metadata(id, metadata),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.merge_metadata(id, metadata).await,
        }
    }

    /// Delete a thread's record (and, on SQLite, its runs'); whether it existed.
    pub(crate) async fn delete_thread(&self, id: &str) -> ApiResult<bool> {
        match self {
            Book::Sqlite(b) => b.delete_thread(id),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.delete_thread(id).await,
        }
    }

    /// Threads matching a search, sorted and paged.
    pub(crate) async fn search_threads(&self, q: &ThreadSearch) -> ApiResult<Vec<ThreadRow>> {
        match self {
            Book::Sqlite(b) => b.search_threads(q),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.search_threads(q).await,
        }
    }

    pub(crate) async fn run(&self, run: &str) -> ApiResult<Option<RunRow>> {
        match self {
            Book::Sqlite(b) => b.run(run),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.run(run).await,
        }
    }

    /// A thread's runs, newest first.
    pub(crate) async fn runs_of(
        &self,
        thread: &str,
        limit: usize,
        offset: usize,
        status: Option<RunStatus>,
    ) -> ApiResult<Vec<RunRow>> {
        match self {
            Book::Sqlite(b) => b.runs_of(thread, limit, offset, status),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.runs_of(thread, limit, offset, status).await,
        }
    }

    /// Delete an ended run's record; whether it existed.
    pub(crate) async fn delete_run(&self, run: &str) -> ApiResult<bool> {
        match self {
            Book::Sqlite(b) => b.delete_run(run),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.delete_run(run).await,
        }
    }

    /// The SQLite tables, which the in-process queue keeps its runs' states in.
    pub(crate) fn local(&self) -> ApiResult<&SqliteBook> {
        match self {
            Book::Sqlite(b) => Ok(b),
            #[cfg(feature = "postgres")]
            Book::Postgres(_) => Err(crate::error::ApiError::Internal(
                "the in-process run queue was asked of a server on PostgreSQL".to_owned(),
            )),
        }
    }
}
