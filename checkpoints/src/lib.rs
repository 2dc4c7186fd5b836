//! Checkpoints for stategraph: the data model, the [`Saver`] trait and the savers.
//!
//! After every superstep of a thread the engine hands a saver a [`PutCheckpoint`]: the new
//! checkpoint's header (id, parent, step, [`Source`], control state, metadata) and only the
//! fields that step changed, each as a [`FieldPart`] — the whole value, or for an appended
//! list only the appended items. Savers store bytes and versions; they never see node code or
//! the user's Rust types.
//!
//! - [`MemorySaver`]: in process memory, for tests and short-lived programs;
//! - [`SqliteSaver`]: one SQLite file, the default durable store (format in `docs/design.md`);
//! - `PostgresSaver` (feature `postgres`): a PostgreSQL database shared by many processes;
//! - runs ([`RunRecord`], [`RunStatus`]) and their [`DeliveryReceipt`]s, kept by every saver
//!   next to the thread's checkpoints;
//! - [`diff`]: field-by-field state diffs over the stored JSON; [`inspect`]: what the
//!   `stategraph` command-line inspector builds on; [`fork`]: a new branch from a
//!   checkpoint, in its thread or a new one, with changed values; [`tree`]: a thread's
//!   history as a tree of branches; [`envelope`]: how every stored value is framed and
//!   hash-checked; [`graph_shape`]: the shape of the graph that wrote a thread, stored
//!   with it so a reader can draw it.
//!
//! ```
//! use stategraph_checkpoints::{MemorySaver, Saver};
//! let saver: std::sync::Arc<dyn Saver> = std::sync::Arc::new(MemorySaver::new());
//! # let _ = saver;
//! ```

mod channel;
mod checkpoint;
pub mod diff;
pub mod envelope;
mod error;
mod failpoint;
pub mod fork;
pub mod graph_shape;
mod id;
pub mod inspect;
mod memory;
pub mod node_cache;
#[cfg(feature = "postgres")]
mod postgres;
pub mod queue;
mod run;
mod run_book;
mod saver;
pub mod shape;
mod sqlite;
pub mod sync;
pub mod tree;
mod usage;

pub use channel::{ChannelName, BRANCH_PREFIX, JOIN_PREFIX};
pub use checkpoint::{
    Checkpoint, Control, FieldPart, FieldWrite, ListOptions, LoadedCheckpoint, NamespaceInfo,
    PendingSend, PendingWrite, PutCheckpoint, Resume, Retention, Source, StepChanges, ThreadInfo,
    ThreadStatus, WriteKind,
};
pub use error::{validate_filter_key, CheckpointError, StorageError};
pub use id::{CheckpointId, Namespace, TaskId, ThreadId, MAX_THREAD_ID_LEN};
pub use memory::MemorySaver;
#[cfg(feature = "postgres")]
pub use postgres::{
    PostgresOptions, PostgresSaver, PostgresTls, RunQueue, TlsClientCert, Wakeups,
    POSTGRES_FORMAT_VERSION,
};
pub use queue::{
    FencedWrite, Lease, Multitask, QueuedCommand, QueuedGoto, QueuedRun, RunEnd, StopRequest,
};
pub use run::{DeliveryReceipt, RunId, RunRecord, RunStatus};
pub use saver::{Head, Saver};
pub use sqlite::{SqliteOptions, SqliteSaver, Synchronous, FORMAT_VERSION};
pub use usage::TokenUsage;
