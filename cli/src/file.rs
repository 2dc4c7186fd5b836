//! The checkpoint file a command reads: opening it (never creating it), and finding its
//! threads, checkpoints and states, with the messages every command gives when one is not
//! there. A `postgres://` (or `postgresql://`) URL in place of the file opens a PostgreSQL
//! saver on the schema its `schema=` query parameter names (default `stategraph`), which
//! must exist.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stategraph_checkpoints::diff::fields_to_json;
use stategraph_checkpoints::inspect::{self, find_checkpoint, LookupError};
use stategraph_checkpoints::shape::Shape;
use stategraph_checkpoints::{
    ChannelName, Checkpoint, CheckpointError, CheckpointId, ListOptions, LoadedCheckpoint,
    Namespace, PostgresOptions, PostgresSaver, PostgresTls, Saver, SqliteSaver, ThreadId,
    TlsClientCert,
};

use crate::failure::{Failure, Outcome};

/// What a command reads: a checkpoint file or a PostgreSQL schema.
#[derive(Debug)]
pub(crate) enum Store {
    File(SqliteSaver),
    Postgres(PostgresSaver),
}

impl std::ops::Deref for Store {
    type Target = dyn Saver;
    fn deref(&self) -> &(dyn Saver + 'static) {
        match self {
            Store::File(s) => s,
            Store::Postgres(s) => s,
        }
    }
}

impl Store {
    /// Close a file (its log folded back); a database needs nothing.
    pub(crate) fn close(&self) -> Result<(), CheckpointError> {
        match self {
            Store::File(s) => s.close(),
            Store::Postgres(_) => Ok(()),
        }
    }

    /// The recorded shape of each field of a thread (none for a database, which records
    /// none).
    pub(crate) async fn field_shapes(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
    ) -> Result<std::collections::BTreeMap<String, Shape>, CheckpointError> {
        match self {
            Store::File(s) => s.field_shapes(thread, ns).await,
            Store::Postgres(_) => Ok(Default::default()),
        }
    }

    /// Every `(thread, namespace, checkpoints)` of the store.
    pub(crate) async fn namespaces(
        &self,
        file: &Path,
    ) -> Result<Vec<(String, String, usize)>, Failure> {
        match self {
            Store::File(_) => inspect::namespaces(file).map_err(|e| file_error(file, e)),
            Store::Postgres(s) => s.namespaces().await.map_err(|e| file_error(file, e)),
        }
    }
}

/// Whether `file` is a PostgreSQL URL rather than a path.
pub(crate) fn is_url(file: &Path) -> bool {
    file.to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// Open the schema a PostgreSQL URL names (its `schema=` parameter, taken out of the URL
/// the server sees), without creating it.
async fn open_url(file: &Path) -> Result<Store, Failure> {
    open_database(file).await.map(Store::Postgres)
}

/// [`open_url`]'s saver. Besides `schema=`, the URL may ask for TLS as libpq's do:
/// `sslrootcert=FILE` (the CA to check the server's certificate against; `system` for the
/// system's roots) or `sslmode=verify-full` / `verify-ca` (the system's roots unless
/// `sslrootcert` names a file); either turns TLS on and required (decision 0062).
/// `sslcert=FILE&sslkey=FILE` present a client certificate (with TLS on).
pub(crate) async fn open_database(file: &Path) -> Result<PostgresSaver, Failure> {
    let text = file.to_str().unwrap_or_default();
    let (base, query) = text.split_once('?').unwrap_or((text, ""));
    let mut schema = "stategraph".to_owned();
    let (mut root, mut verify) = (None, false);
    let (mut cert, mut key) = (None, None);
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("schema", name)) => schema = name.to_owned(),
            Some(("sslrootcert", path)) => root = Some(path.to_owned()),
            Some(("sslmode", "verify-full" | "verify-ca")) => verify = true,
            Some(("sslcert", path)) => cert = Some(PathBuf::from(path)),
            Some(("sslkey", path)) => key = Some(PathBuf::from(path)),
            _ => rest.push(pair),
        }
    }
    let tls_client_cert = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(TlsClientCert { cert, key }),
        (Some(_), None) | (None, Some(_)) => {
            return Err(Failure::usage(
                "a client certificate needs both sslcert=FILE and sslkey=FILE in the URL",
            ))
        }
    };
    let tls = match (root.as_deref(), verify) {
        (Some("system"), _) | (None, true) => PostgresTls::SystemRoots,
        (Some(path), _) => PostgresTls::CaFile(path.into()),
        (None, false) => PostgresTls::Off,
    };
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    let options = PostgresOptions {
        schema,
        pool_size: 2,
        create_schema: false,
        tls,
        tls_client_cert,
        ..PostgresOptions::default()
    };
    PostgresSaver::connect_with(&url, options)
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
