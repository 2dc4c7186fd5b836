//! The checkpoint file a command reads: opening it (never creating it), and finding its
//! threads, checkpoints and states, with the messages every command gives when one is not
//! there. A `postgres://` (or `postgresql://`) URL in place of the file opens a PostgreSQL
//! saver on the schema its `schema=` query parameter names (default `stategraph`), which
//! must exist.

use std::path::Path;

use serde_json::Value;
use stategraph_checkpoints::diff::fields_to_json;
use stategraph_checkpoints::inspect::{self, find_checkpoint, LookupError};
use stategraph_checkpoints::{
    ChannelName, Checkpoint, CheckpointError, CheckpointId, ListOptions, LoadedCheckpoint,
    Namespace, PostgresSaver, Saver, ThreadId,
};

use crate::failure::{Failure, Outcome};

/// What a command reads: a checkpoint file or a PostgreSQL schema (the library's inspector
/// store, which the studio opens the same way).
pub(crate) use stategraph_checkpoints::inspect::Store;

/// Every `(thread, namespace, checkpoints)` of the store.
pub(crate) async fn namespaces(
    store: &Store,
    file: &Path,
) -> Result<Vec<(String, String, usize)>, Failure> {
    match store {
        Store::File(_) => inspect::namespaces(file).map_err(|e| file_error(file, e)),
        Store::Postgres(s) => s.namespaces().await.map_err(|e| file_error(file, e)),
        other => Err(Failure::runtime(format!(
            "{}: cannot list the namespaces of this store ({other:?})",
            file.display()
        ))),
    }
}

/// Whether `file` is a PostgreSQL URL rather than a path.
pub(crate) fn is_url(file: &Path) -> bool {
    inspect::is_database_url(file)
}

/// Open the schema a PostgreSQL URL names (its `schema=` parameter, taken out of the URL
/// the server sees), without creating it.
async fn open_url(file: &Path) -> Result<Store, Failure> {
    open_database(file).await.map(Store::Postgres)
}

/// [`open_url`]'s saver, as [`inspect::database_options`] reads the URL (its `schema=` and
/// libpq-style TLS parameters: `sslrootcert`, `sslmode=verify-full`/`verify-ca`,
/// `sslcert` and `sslkey`; decision 0062).
pub(crate) async fn open_database(file: &Path) -> Result<PostgresSaver, Failure> {
    let text = file.to_str().unwrap_or_default();
    let (server, options) =
        inspect::database_options(text).map_err(|e| Failure::usage(e.to_string()))?;
    PostgresSaver::connect_with(&server, options)
        .await
        .map_err(|e| file_error(file, e))
}

/// Check that the file exists (never create it) and open it as a saver.
pub(crate) async fn open(file: &Path) -> Result<Store, Failure> {
    if is_url(file) {
        return open_url(file).await;
    }
    exists(file)?;
    inspect::open_existing(file)
        .map(Store::File)
        .map_err(|e| file_error(file, e))
}

/// Check that the file exists and open it read-only, for a command that only reads: it
/// works without write access, writes nothing, and reports a damaged format record.
pub(crate) async fn open_read(file: &Path) -> Result<Store, Failure> {
    if is_url(file) {
        return open_url(file).await;
    }
    exists(file)?;
    inspect::open_existing_read_only(file)
        .map(Store::File)
        .map_err(|e| file_error(file, e))
}

/// A missing file or a directory is a run-time problem.
pub(crate) fn exists(file: &Path) -> Outcome {
    if file.is_dir() {
        return Err(Failure::runtime(format!(
            "{}: is a directory, not a checkpoint file",
            file.display()
        )));
    }
    if !file.is_file() {
        return Err(Failure::runtime(format!(
            "{}: no such file",
            file.display()
        )));
    }
    Ok(())
}

/// An error about the file as a whole, prefixed with its path.
pub(crate) fn file_error(file: &Path, e: CheckpointError) -> Failure {
    match e {
        CheckpointError::Integrity { blob, detail, .. } if blob.ends_with("sg_meta") => {
            Failure::runtime(format!("{}: {detail}", file.display()))
        }
        CheckpointError::Storage(inner) => Failure::runtime(format!("{}: {inner}", file.display())),
        e @ CheckpointError::LostCommits { .. } => Failure::runtime(format!(
            "{e} (to go on from what is left: stategraph accept-loss {})",
            file.display()
        )),
        // These name the file themselves.
        e @ (CheckpointError::ForeignDatabase { .. }
        | CheckpointError::FormatRecord { .. }
        | CheckpointError::ReadOnly { .. }) => Failure::runtime(e.to_string()),
        other => Failure::runtime(format!("{}: {other}", file.display())),
    }
}

/// A thread id as typed; an invalid one is a usage error.
pub(crate) fn thread_id(text: &str) -> Result<ThreadId, Failure> {
    ThreadId::new(text).map_err(|e| Failure::usage(e.to_string()))
}

/// How `threads` shows the root namespace, and what `--ns` accepts for it (as well as `""`).
pub(crate) const ROOT_NS: &str = "(root)";

/// A namespace as typed after `--ns`: the name `threads` shows, `(root)` or empty for the root.
pub(crate) fn namespace(text: &str) -> Namespace {
    if text == ROOT_NS {
        Namespace::root()
    } else {
        Namespace::parse(text)
    }
}

/// A namespace as shown: its name, or `(root)`.
pub(crate) fn ns_name(ns: &str) -> &str {
    if ns.is_empty() {
        ROOT_NS
    } else {
        ns
    }
}

/// `thread t`, with its namespace unless it is the root one.
pub(crate) fn thread_label(thread: &ThreadId, ns: &Namespace) -> String {
    if ns.is_root() {
        format!("thread {thread}")
    } else {
        format!("thread {thread} (namespace {ns})")
    }
}

/// Every checkpoint header of `(thread, ns)`, newest first; an unknown thread is an error.
pub(crate) async fn headers(
    saver: &dyn Saver,
    file: &Path,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Vec<Checkpoint>, Failure> {
    let list = saver.list(thread, ns, ListOptions::default()).await?;
    if list.is_empty() {
        let what = if ns.is_root() {
            format!("no thread {thread} in {}", file.display())
        } else {
            format!(
                "thread {thread} has no checkpoints in namespace {ns} in {}",
                file.display()
            )
        };
        return Err(Failure::runtime(what));
    }
    Ok(list)
}

/// The checkpoint `text` names among `list`: a full id, a unique start or end of one, or
/// `step:N` (see [`find_checkpoint`]).
pub(crate) fn resolve(
    list: &[Checkpoint],
    text: &str,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<CheckpointId, Failure> {
    find_checkpoint(list, text).map_err(|e| match e {
        LookupError::Invalid(_) => Failure::usage(e.to_string()),
        LookupError::NotFound(p) => {
            Failure::runtime(format!("no checkpoint {p} in {}", thread_label(thread, ns)))
        }
        LookupError::Ambiguous { .. } => Failure::usage(format!("{e}; give more digits")),
        LookupError::NoStep { .. } | LookupError::Empty(_) => {
            Failure::runtime(format!("{e} in {}", thread_label(thread, ns)))
        }
    })
}

/// Load checkpoint `id` of `(thread, ns)` with its fields and pending writes.
pub(crate) async fn load(
    saver: &dyn Saver,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<LoadedCheckpoint, Failure> {
    saver.get(thread, ns, Some(id)).await?.ok_or_else(|| {
        Failure::runtime(format!(
            "no checkpoint {id} in {}",
            thread_label(thread, ns)
        ))
    })
}

/// A loaded checkpoint's state as one JSON object.
pub(crate) fn state_of(loaded: &LoadedCheckpoint) -> Result<Value, Failure> {
    fields_to_json(&loaded.fields).map_err(|e| {
        Failure::runtime(format!(
            "checkpoint {}: a stored value is not readable: {e}",
            loaded.checkpoint.id
        ))
    })
}

/// The state's fields that have never been written at this checkpoint (they hold their
/// type's default): the fields the control state names at version 0 without a stored value.
/// A file written before the engine named every field lists none.
pub(crate) fn unwritten_fields(loaded: &LoadedCheckpoint) -> Vec<String> {
    loaded
        .checkpoint
        .control
        .versions
        .keys()
        .filter(|k| ChannelName::parse(k).is_field() && !loaded.fields.contains_key(k.as_ref()))
        .map(ToString::to_string)
        .collect()
}

/// The fields with a stored value, for messages: `a, b` or `none`.
pub(crate) fn stored_fields(loaded: &LoadedCheckpoint) -> String {
    if loaded.fields.is_empty() {
        "none".to_owned()
    } else {
        loaded
            .fields
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}
