//! Errors of checkpoint storage.

use crate::{CheckpointId, Namespace, ThreadId};

/// What went wrong storing or loading checkpoints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A thread id that is empty, too long or holds control characters.
    #[error("invalid thread id {id:?}: {reason}")]
    InvalidThreadId {
        /// The offending id (at most 64 characters of it).
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// Text that is not a checkpoint id (32 hex digits).
    #[error("invalid checkpoint id {text:?}: expected 32 hex digits")]
    InvalidCheckpointId {
        /// The offending text.
        text: String,
    },
    /// No such checkpoint in this thread (also said for an id that belongs to another thread).
    #[error("checkpoint {id} not found in thread {thread:?} (namespace {ns:?})")]
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
        "thread {thread:?} (namespace {ns:?}) moved: expected head {expected:?}, found {found:?}"
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
    /// A metadata filter key outside the grammar `[A-Za-z_][A-Za-z0-9_.-]{0,63}`.
    #[error("invalid metadata filter key {key:?}")]
    InvalidFilterKey {
        /// The offending key.
        key: String,
    },
    /// A stored value that cannot be decoded.
    #[error("corrupt checkpoint {checkpoint} in thread {thread:?}: {detail}")]
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
    #[error(
        "integrity error in thread {thread:?}, checkpoint {checkpoint}, blob {blob}: {detail}"
    )]
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
    /// The storage backend failed.
    #[error("storage error: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync>),
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
