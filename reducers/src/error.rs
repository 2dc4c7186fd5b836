//! The error a reducer returns.

/// Why the writes of one step could not be merged into a field.
///
/// The engine wraps it with the field's name and the writing nodes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReduceError {
    /// A last-value field received more than one write in one step.
    #[error("received {writes} writes in one step; a last-value field takes one (use a reducer that merges)")]
    ConcurrentUpdate {
        /// How many writes arrived.
        writes: usize,
    },
    /// A field received more than one overwrite in one step (whatever its reducer).
    #[error(
        "received {writes} overwrites in one step; a field takes at most one overwrite per step"
    )]
    ConcurrentOverwrite {
        /// How many overwrites arrived.
        writes: usize,
    },
    /// A message removal named an id that is not in the list.
    #[error("cannot remove message {id:?}: no message has that id")]
    UnknownMessageId {
        /// The id that was not found.
        id: String,
    },
    /// A second, different sandbox id for a thread that already has one.
    #[error("conflicting sandbox ids: stored {stored:?}, update {incoming:?}")]
    SandboxConflict {
        /// The id already in the state (`None` for an empty record).
        stored: Option<String>,
        /// The id the update carried.
        incoming: Option<String>,
    },
    /// A user-defined reducer failed.
    #[error("{0}")]
    Custom(Box<dyn std::error::Error + Send + Sync>),
}

impl ReduceError {
    /// Wrap any error from a custom reducer.
    pub fn custom(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ReduceError::Custom(err.into())
    }
}
