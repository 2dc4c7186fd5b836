//! Errors of checkpoint storage.

use std::path::PathBuf;
use std::sync::Arc;

use crate::{CheckpointId, Namespace, RunId, RunStatus, ThreadId};

/// What went wrong storing or loading checkpoints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A thread id that is empty, too long or holds control characters.
    #[error("invalid thread id `{}`: {reason}", .id.escape_debug())]
    InvalidThreadId {
        /// The offending id (at most 64 characters of it).
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// Text that is not a checkpoint id (32 hex digits).
    #[error("invalid checkpoint id `{}`: expected 32 hex digits", .text.escape_debug())]
    InvalidCheckpointId {
        /// The offending text.
        text: String,
    },
    /// No such checkpoint in this thread (also said for an id that belongs to another thread).
    #[error("checkpoint {id} not found in thread {thread}{}", in_namespace(.ns))]
    NotFound {
        /// Thread.
        thread: ThreadId,
        /// Namespace.
        ns: Namespace,
        /// The checkpoint asked for.
        id: CheckpointId,
    },
    /// Another runner committed to this thread since this one loaded it.
    #[error(
        "thread {thread}{} moved: expected head {}, found {}",
        in_namespace(.ns),
        head_text(.expected),
        head_text(.found)
    )]
    StaleParent {
        /// Thread.
        thread: ThreadId,
        /// Namespace.
        ns: Namespace,
        /// The head this runner built on.
        expected: Option<CheckpointId>,
        /// The head the store has.
        found: Option<CheckpointId>,
    },
    /// A checkpoint whose id is not greater than its parent's: ids order a thread's history,
    /// so a saver that checks it (the PostgreSQL saver) refuses such a child and stores
    /// nothing. Make ids with [`CheckpointId::generate_after`] (or after loading the parent).
    #[error(
        "checkpoint {id} in thread {thread}{} is not newer than its parent {parent}: a child's id must be greater",
        in_namespace(.ns)
    )]
    IdNotAfterParent {
        /// Thread.
        thread: ThreadId,
        /// Namespace.
        ns: Namespace,
        /// The child's id.
        id: CheckpointId,
        /// The parent's id.
        parent: CheckpointId,
    },
    /// The TLS settings of a PostgreSQL saver cannot be used: a CA file or client
    /// certificate that cannot be read or holds no certificate, a client key that cannot be
    /// read or does not match, a client certificate with TLS off, or a system without root
    /// certificates.
    #[error("TLS to PostgreSQL: {what}: {detail}")]
    TlsSetup {
        /// What the saver was doing (naming the file, if any).
        what: String,
        /// Why it failed.
        detail: String,
    },
    /// A PostgreSQL schema name the saver cannot use (it must be a plain lowercase
    /// identifier, as `PostgresOptions::schema` documents).
    #[error("invalid PostgreSQL schema name `{}`: {reason}", .name.escape_debug())]
    InvalidSchemaName {
        /// The name as given (at most 64 characters of it).
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A metadata filter key outside the grammar `[A-Za-z_][A-Za-z0-9_.-]{0,63}`.
    #[error("invalid metadata filter key `{}`", .key.escape_debug())]
    InvalidFilterKey {
        /// The offending key.
        key: String,
    },
    /// A stored value that cannot be decoded.
    #[error("corrupt checkpoint {checkpoint} in thread {thread}: {detail}")]
    Corrupt {
        /// Thread.
        thread: ThreadId,
        /// Checkpoint.
        checkpoint: CheckpointId,
        /// What was wrong.
        detail: String,
    },
    /// Stored bytes that do not match their hash, or that are not a valid envelope or
    /// record: never decoded into a wrong or default state.
    #[error("integrity error in thread {thread}, checkpoint {checkpoint}, blob {blob}: {detail}")]
    Integrity {
        /// Thread.
        thread: String,
        /// Checkpoint (32 hex digits), or `-` when not tied to one.
        checkpoint: String,
        /// The blob's hash (hex) or the row it was read from.
        blob: String,
        /// What was wrong.
        detail: String,
    },
    /// A file written by a newer format than this build reads.
    #[error("checkpoint file format {found} is newer than the supported {supported}")]
    UnsupportedFormatVersion {
        /// The file's format version.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// A value over the configured size cap.
    #[error("value of {size} bytes is over the {limit}-byte cap")]
    BlobTooLarge {
        /// Its size.
        size: usize,
        /// The cap.
        limit: usize,
    },
    /// A run id that is empty, too long or holds control characters.
    #[error("invalid run id `{}`: {reason}", .id.escape_debug())]
    InvalidRunId {
        /// The offending id (at most 64 characters of it).
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A run status change the transition rule forbids (see [`RunStatus::may_become`]).
    #[error("run {run} cannot go from {from} to {to}")]
    InvalidRunTransition {
        /// The run.
        run: RunId,
        /// Its stored status.
        from: RunStatus,
        /// The status put.
        to: RunStatus,
    },
    /// A put of a stored run naming another thread than the one it runs on.
    #[error("run {run} belongs to thread {stored}, not {given}")]
    RunOfAnotherThread {
        /// The run.
        run: RunId,
        /// The thread stored for it.
        stored: ThreadId,
        /// The thread the put named.
        given: ThreadId,
    },
    /// No such run (a receipt is only stored for a run the store has).
    #[error("run {run} not found")]
    RunNotFound {
        /// The run asked for.
        run: RunId,
    },
    /// The saver does not implement this operation (a third-party saver written before it).
    #[error("this saver does not support {what}")]
    Unsupported {
        /// The operation, such as "runs".
        what: &'static str,
    },
    /// A non-empty SQLite database that is not a stategraph checkpoint file (another
    /// application's): the saver refuses it and writes nothing to it.
    #[error(
        "{}: not a stategraph checkpoint file (it holds table `{}` and no sg_meta); nothing was written to it",
        .file.display(),
        .table.escape_debug()
    )]
    ForeignDatabase {
        /// The file.
        file: PathBuf,
        /// A table (or other schema object) the file holds.
        table: String,
    },
    /// The file's format record (`sg_meta.format_version`) is missing or unreadable: the file
    /// is damaged, and is reported rather than repaired.
    #[error("{}: the format record sg_meta.format_version {problem}", .file.display())]
    FormatRecord {
        /// The file.
        file: PathBuf,
        /// What is wrong: "is missing", "is unreadable: \"x\"".
        problem: String,
    },
    /// A path the SQLite saver cannot keep checkpoints at, such as `""` or `:memory:` (a
    /// private database per connection, which its readers would not see).
    #[error("`{}` is not a checkpoint file path: {reason}", .path.escape_debug())]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The file lost committed checkpoints: its high-water record (`<file>-highwater`,
    /// decision 0043) names a newer checkpoint than the file holds. SQLite drops every commit
    /// after a damaged frame of the `-wal` without an error; this is how that is noticed.
    /// Restore the file (with its `-wal`) from a copy, or open it with
    /// [`SqliteOptions::accept_lost_commits`](crate::SqliteOptions::accept_lost_commits) to
    /// go on from what is left.
    #[error(
        "{}: committed checkpoints are missing: the newest committed one, {checkpoint} of thread \
         {}, was row {recorded}, and the file ends at row {found} (its -wal was damaged or \
         lost); restore it from a copy, or accept the loss to go on from what is left",
        .file.display(),
        .thread.escape_debug()
    )]
    LostCommits {
        /// The file.
        file: PathBuf,
        /// The thread of the newest committed checkpoint (`-` when not recorded).
        thread: String,
        /// That checkpoint's id (32 hex digits; `-` when not recorded).
        checkpoint: String,
        /// Its row (`sg_checkpoints.seq`).
        recorded: i64,
        /// The newest row the file holds (0 for none).
        found: i64,
    },
    /// The saver was opened read-only ([`SqliteSaver::open_read_only`](crate::SqliteSaver::open_read_only)):
    /// it does not write.
    #[error("{}: opened read-only, so it cannot be written", .file.display())]
    ReadOnly {
        /// The file.
        file: PathBuf,
    },
    /// A write under a run lease that is no longer current: another worker took the run
    /// over (its lease had expired), or the run ended. Checked inside the write's own
    /// transaction, so nothing of the write was stored.
    #[error(
        "run {run}: lease epoch {epoch} is no longer current (the run was taken over or ended); \
         nothing was written"
    )]
    LeaseLost {
        /// The run.
        run: RunId,
        /// The epoch the writer held.
        epoch: u64,
    },
    /// A write under a run lease naming another thread than the run's.
    #[error("run {run} is leased on thread {leased}; it cannot write thread {given}")]
    OutsideLease {
        /// The run.
        run: RunId,
        /// The thread the run is on.
        leased: ThreadId,
        /// The thread the write named.
        given: ThreadId,
    },
    /// A run submitted with the `reject` strategy to a thread that has an unfinished run.
    #[error("thread {thread} is busy with run {run} ({status}); the new run was rejected")]
    ThreadBusy {
        /// The thread.
        thread: ThreadId,
        /// Its unfinished run.
        run: RunId,
        /// That run's status (pending or running).
        status: RunStatus,
    },
    /// The storage backend failed. The SQLite saver puts a [`StorageError`] here (what it
    /// was doing and SQLite's error); other savers may put their own error type.
    ///
    /// Its message says `storage error: ` once, also when the backend's error is itself a
    /// storage error (a saver wrapping another's).
    #[error("storage error: {}", without_prefix(.0))]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A storage backend's failure: what the saver was doing, and the backend's error.
///
/// Cheap to clone (the cause is shared), so when one failure undoes a whole group of writes
/// (the SQLite writer commits several operations in one transaction), each operation of the
/// group gets the same typed error rather than its text. Its message includes the cause's;
/// find the cause itself with [`StorageError::cause`] (and downcast it, e.g. to
/// `rusqlite::Error`).
#[derive(Debug, Clone)]
pub struct StorageError {
    during: &'static str,
    cause: Arc<dyn std::error::Error + Send + Sync>,
}

impl StorageError {
    /// A failure of `cause` while the saver was `during` (a phrase such as
    /// "inserting a checkpoint row").
    pub fn new(
        during: &'static str,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StorageError {
            during,
            cause: Arc::new(cause),
        }
    }

    /// A failure already boxed (another storage error of unknown type), kept as it is.
    pub(crate) fn boxed(
        during: &'static str,
        cause: Box<dyn std::error::Error + Send + Sync>,
    ) -> Self {
        StorageError {
            during,
            cause: Arc::from(cause),
        }
    }

    /// What the saver was doing.
    pub fn during(&self) -> &'static str {
        self.during
    }

    /// The backend's error.
    pub fn cause(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.cause
    }
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The cause's message is part of this one (so it is not also given as `source`), and
        // so are the causes under it that it does not already say: a failed TLS handshake's
        // "error performing TLS handshake" is followed by the certificate problem.
        let mut text = format!("{}: {}", self.during, self.cause);
        let mut below = self.cause.source();
        while let Some(e) = below {
            let said = e.to_string();
            if !said.is_empty() && !text.contains(&said) {
                text.push_str(": ");
                text.push_str(&said);
            }
            below = e.source();
        }
        f.write_str(&text)
    }
}

impl std::error::Error for StorageError {}

impl From<StorageError> for CheckpointError {
    fn from(e: StorageError) -> Self {
        CheckpointError::Storage(Box::new(e))
    }
}

impl CheckpointError {
    /// The message without the leading `storage error: ` of a storage error, for a message
    /// that wraps this one in another storage error.
    pub(crate) fn detail(&self) -> String {
        match self {
            CheckpointError::Storage(inner) => without_prefix(inner),
            other => other.to_string(),
        }
    }

    /// The [`StorageError`] inside a [`CheckpointError::Storage`], if that is what it holds.
    pub fn storage_error(&self) -> Option<&StorageError> {
        match self {
            CheckpointError::Storage(inner) => inner.downcast_ref::<StorageError>(),
            _ => None,
        }
    }
}

/// Validate a metadata filter key.
///
/// # Errors
/// [`CheckpointError::InvalidFilterKey`] for a key outside `[A-Za-z_][A-Za-z0-9_.-]{0,63}`.
pub fn validate_filter_key(key: &str) -> Result<(), CheckpointError> {
    let mut chars = key.chars();
    let ok = match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            key.len() <= 64 && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(CheckpointError::InvalidFilterKey {
            key: key.chars().take(64).collect(),
        })
    }
}

/// ` (namespace ns)` for a subgraph's namespace, nothing for the root one.
fn in_namespace(ns: &Namespace) -> String {
    if ns.is_root() {
        String::new()
    } else {
        format!(" (namespace {ns})")
    }
}

/// A head checkpoint as text: its id, or `none` for an empty thread.
fn head_text(head: &Option<CheckpointId>) -> String {
    head.map_or_else(|| "none".to_owned(), |id| id.to_string())
}

/// `inner`'s message without any leading `storage error: ` of its own.
fn without_prefix(inner: &dyn std::fmt::Display) -> String {
    let text = inner.to_string();
    let mut rest = text.as_str();
    while let Some(r) = rest.strip_prefix("storage error: ") {
        rest = r;
    }
    rest.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_error_inside_a_storage_error_says_storage_error_once() {
        let full = std::io::Error::other("database or disk is full");
        let inner = CheckpointError::Storage(Box::new(full));
        let outer = CheckpointError::Storage(Box::new(inner));
        assert_eq!(outer.to_string(), "storage error: database or disk is full");
        let wrapped = StorageError::new("committing", CheckpointError::Storage("full".into()));
        assert_eq!(
            CheckpointError::from(wrapped).to_string(),
            "storage error: committing: storage error: full",
            "a phrase in between keeps both: they say different things"
        );
    }

    #[test]
    fn a_moved_thread_names_its_heads_as_plain_ids() -> Result<(), CheckpointError> {
        let id = CheckpointId::from_u128(0xabc);
        let e = CheckpointError::StaleParent {
            thread: ThreadId::new("t")?,
            ns: Namespace::root(),
            expected: Some(id),
            found: None,
        };
        let text = e.to_string();
        assert_eq!(
            text,
            format!("thread t moved: expected head {id}, found none")
        );
        assert!(
            !text.contains("Some(") && !text.contains("CheckpointId("),
            "{text}"
        );
        Ok(())
    }
}
