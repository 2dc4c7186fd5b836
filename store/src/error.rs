//! What can go wrong in a store operation.

use crate::{EmbedError, FilterError, NamespaceError};

/// A store operation that failed. Nothing of a failed batch is applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A namespace that cannot be stored.
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// A filter that cannot be used.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// An argument out of range, named.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// What was wrong (`key`, `limit`, …).
        what: &'static str,
        /// Why.
        why: String,
    },
    /// The database failed.
    #[error("store database: {0}")]
    Database(String),
    /// A stored row could not be read back.
    #[error("stored item {namespace}/{key} is unreadable: {why}")]
    Corrupt {
        /// Its namespace, `.`-joined.
        namespace: String,
        /// Its key.
        key: String,
        /// Why.
        why: String,
    },
    /// Store tables (a SQLite file's, a PostgreSQL schema's) written by a newer version of
    /// this crate: nothing was read from or written to them.
    #[error(
        "the store's tables are schema version {found}; this build reads up to version {supported}"
    )]
    SchemaTooNew {
        /// The version the tables record.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}

/// Checks an item key: non-empty.
pub fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        return Err(StoreError::Invalid {
            what: "key",
            why: "an item key cannot be empty".to_owned(),
        });
    }
    Ok(())
}
