//! Shared helpers for the behaviour tests: a saver that records what it is asked to store.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, ListOptions, LoadedCheckpoint, MemorySaver,
    Namespace, PendingWrite, PutCheckpoint, Retention, Saver, ThreadId, ThreadInfo,
};

/// One recorded `put_writes` call: namespace, checkpoint, writes.
pub type PendingCall = (Namespace, CheckpointId, Vec<PendingWrite>);

/// A [`MemorySaver`] that also records every `put` and `put_writes` call.
#[derive(Debug, Clone, Default)]
pub struct RecordingSaver {
    /// The store behind it.
    pub inner: MemorySaver,
    /// Every checkpoint put, in order.
    pub puts: Arc<Mutex<Vec<PutCheckpoint>>>,
    /// Every pending-writes call: (namespace, checkpoint, writes).
    pub writes: Arc<Mutex<Vec<PendingCall>>>,
    /// Each `put` completes only after this delay, like a real disk.
    pub put_delay: Option<std::time::Duration>,
    /// The n-th `put` and every later one fail with a storage error (nothing stored).
    pub fail_puts_from: Option<usize>,
}

impl RecordingSaver {
    /// An empty recording saver.
    pub fn new() -> Self {
        Self::default()
    }

    /// A recording saver whose `put`s complete after `delay`.
    pub fn slow(delay: std::time::Duration) -> Self {
        RecordingSaver {
            put_delay: Some(delay),
            ..Self::default()
        }
    }

    /// A recording saver whose `n`-th and later `put`s fail.
    pub fn failing_from(n: usize) -> Self {
        RecordingSaver {
            fail_puts_from: Some(n),
            ..Self::default()
        }
    }

    /// The recorded puts.
    pub fn puts(&self) -> Vec<PutCheckpoint> {
        self.puts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The recorded pending writes.
    pub fn pending_calls(&self) -> Vec<PendingCall> {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// As a shared saver.
    pub fn shared(&self) -> Arc<dyn Saver> {
        Arc::new(self.clone())
    }
}

impl Saver for RecordingSaver {
    fn put(&self, put: PutCheckpoint) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            if let Some(delay) = self.put_delay {
                tokio::time::sleep(delay).await;
            }
            if self
                .fail_puts_from
                .is_some_and(|n| self.puts().len() + 1 >= n)
            {
                return Err(CheckpointError::Storage("disk full".into()));
            }
            self.puts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(put.clone());
            self.inner.put(put).await
        })
    }

    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.writes.lock().unwrap_or_else(|p| p.into_inner()).push((
            ns.clone(),
            id,
            writes.clone(),
        ));
        self.inner.put_writes(thread, ns, id, writes)
    }

    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<LoadedCheckpoint>, CheckpointError>> {
        self.inner.get(thread, ns, id)
    }

    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>> {
        self.inner.list(thread, ns, options)
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.inner.delete_thread(thread)
    }

    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>> {
        self.inner.list_threads()
    }

    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.inner.copy_thread(from, to)
    }

    fn prune<'a>(
        &'a self,
        thread: &'a ThreadId,
        retention: Retention,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        self.inner.prune(thread, retention)
    }
}

/// Build one target of the workspace with cargo (in the profile the tests run in) and return
/// the path of its executable. `kind` is `"--bin"` or `"--example"`.
///
/// # Errors
/// A description of why cargo could not build it or did not report its executable.
pub fn build_target(package: &str, kind: &str, name: &str) -> Result<std::path::PathBuf, String> {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace root")?
        .to_path_buf();
    let mut cmd = std::process::Command::new(env!("CARGO"));
    cmd.current_dir(&workspace)
        .args(["build", "-p", package, kind, name, "--message-format=json"]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build {kind} {name} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(std::path::PathBuf::from))
        .ok_or_else(|| format!("cargo did not report the {name} executable"))
}
