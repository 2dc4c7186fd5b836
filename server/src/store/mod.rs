//! The server's own records, beside the saver's checkpoints: threads (metadata, status), in
//! a table of the checkpoint file or of the saver's PostgreSQL schema; and runs, which are
//! the run queue's, each queued with its [`Ticket`] as its input (so a queued or running run
//! survives a restart, and any server on the database can run it).
//!
//! Inside: `sqlite` and `postgres` the two backends of the threads; here the records, and
//! the runs as the queue holds them.

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod sqlite;

use serde_json::{Map, Value};

use serde::{Deserialize, Serialize};
use stategraph_runs::{QueuedRun, RunId, RunQueue, ThreadId, TokenUsage};

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
    /// Its token usage, once it has ended (decision 0083).
    pub(crate) usage: Option<TokenUsage>,
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

/// What a run's submission queues as its input: all a worker of any server needs to run it,
/// and all `GET /runs/{id}` shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Ticket {
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) multitask: Multitask,
    pub(crate) request: RunCreate,
    pub(crate) stateless: bool,
}

impl Ticket {
    pub(crate) fn of(row: &RunRow) -> Self {
        Ticket {
            assistant_id: row.assistant_id.clone(),
            graph_id: row.graph_id.clone(),
            metadata: row.metadata.clone(),
            multitask: row.multitask,
            request: row.request.clone(),
            stateless: row.stateless,
        }
    }

    /// The run it makes, as its queue row says it stands.
    pub(crate) fn row(
        self,
        run: &str,
        thread: &str,
        status: RunStatus,
        times: (i64, i64),
        attempt: u32,
    ) -> RunRow {
        RunRow {
            run_id: run.to_owned(),
            thread_id: thread.to_owned(),
            assistant_id: self.assistant_id,
            graph_id: self.graph_id,
            status,
            created_at: times.0,
            updated_at: times.1,
            metadata: self.metadata,
            multitask: self.multitask,
            request: self.request,
            attempt: attempt.max(1),
            stateless: self.stateless,
            usage: None,
        }
    }
}

/// A queued run as a run of this server: `None` for one whose input is no ticket (another
/// program's), or that a rollback undid (as if deleted). A cancelled run reads as
/// `interrupted`, as on LangGraph's server.
fn run_row(q: QueuedRun) -> Option<RunRow> {
    let undone =
        q.status == RunStatus::Cancelled && q.stop == Some(stategraph_runs::StopRequest::Rollback);
    let ticket: Ticket = serde_json::from_value(q.input).ok().filter(|_| !undone)?;
    let status = match q.status {
        RunStatus::Cancelled => RunStatus::Interrupted,
        other => other,
    };
    let times = (
        i64::try_from(q.created_at_ms).unwrap_or(0),
        i64::try_from(q.updated_at_ms).unwrap_or(0),
    );
    // A run whose lease ended is about to be taken over: its next frames are its next
    // attempt's.
    let attempt = q.attempts + u32::from(q.lease_expired);
    let mut row = ticket.row(q.run.as_str(), q.thread.as_str(), status, times, attempt);
    row.usage = q.usage;
    Some(row)
}

/// The run `run`, as the queue holds it.
pub(crate) async fn run(queue: &dyn RunQueue, run: &str) -> ApiResult<Option<RunRow>> {
    let Ok(id) = RunId::new(run) else {
        return Ok(None);
    };
    Ok(queue.run(&id).await?.and_then(run_row))
}

/// A thread's runs, newest first, paged; with `status`, those of that status.
pub(crate) async fn runs_of(
    queue: &dyn RunQueue,
    thread: &str,
    (limit, offset): (usize, usize),
    status: Option<RunStatus>,
) -> ApiResult<Vec<RunRow>> {
    let thread = ThreadId::new(thread)?;
    let all = queue.runs(&thread).await?;
    Ok(all
        .into_iter()
        .rev()
        .filter_map(run_row)
        .filter(|r| status.is_none_or(|s| r.status == s))
        .skip(offset)
        .take(limit)
        .collect())
}

/// Where the threads are.
#[derive(Debug)]
pub(crate) enum Book {
    /// Tables of the checkpoint file.
    Sqlite(SqliteBook),
    /// The saver's PostgreSQL schema.
    #[cfg(feature = "postgres")]
    Postgres(postgres::PgBook),
}

impl Book {
    /// The SQLite tables, if the records are there.
    pub(crate) fn sqlite(&self) -> Option<&SqliteBook> {
        match self {
            Book::Sqlite(b) => Some(b),
            #[cfg(feature = "postgres")]
            Book::Postgres(_) => None,
        }
    }

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

    /// Delete a thread's record; whether it existed.
    pub(crate) async fn delete_thread(&self, id: &str) -> ApiResult<bool> {
        match self {
            Book::Sqlite(b) => b.delete_thread(id),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.delete_thread(id).await,
        }
    }

    /// Set the thread's status (what its last run left it), and its error.
    pub(crate) async fn set_thread_status(
        &self,
        id: &str,
        status: ThreadStatus,
        error: Option<&Value>,
    ) -> ApiResult<()> {
        match self {
            Book::Sqlite(b) => b.set_thread_status(id, status, error),
            #[cfg(feature = "postgres")]
            Book::Postgres(b) => b.set_thread_status(id, status, error).await,
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
}
