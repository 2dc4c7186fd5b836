//! One agent's use of a sandbox: how it is acquired ([`SandboxOptions`]), which ids an
//! invocation holds, and their release exactly once when the invocation ends.
//!
//! A run releases exactly the ids it acquired itself (lazily through a tool, or eagerly before
//! the first step). An id the run found in its starting state was acquired by an earlier run
//! (or is a value restored by a fork from an older checkpoint): the run uses it but does not
//! release it, so a fork never releases what its origin holds.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::provider::{SandboxError, SandboxId, SandboxProvider};

/// When an agent acquires its sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Acquisition {
    /// The first tool that needs the sandbox acquires it (the default).
    #[default]
    Lazy,
    /// Acquired before the agent's first step, when the run context names a thread.
    Eager,
}

/// How an agent uses its sandbox: when it is acquired and which skills are mounted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxOptions {
    /// When the sandbox is acquired.
    pub acquisition: Acquisition,
    /// The read-only skill mounts: each enabled skill's virtual directory
    /// (`/mnt/skills/<category>/<skill>`) and its host directory.
    pub skills: BTreeMap<String, PathBuf>,
}

impl SandboxOptions {
    /// Lazy acquisition, no skills.
    pub fn lazy() -> Self {
        SandboxOptions::default()
    }

    /// Eager acquisition, no skills.
    pub fn eager() -> Self {
        SandboxOptions {
            acquisition: Acquisition::Eager,
            ..SandboxOptions::default()
        }
    }

    /// Mount the skill at `virtual_dir` (under `/mnt/skills`) from `host_dir`, read-only.
    pub fn skill(mut self, virtual_dir: impl Into<String>, host_dir: impl Into<PathBuf>) -> Self {
        self.skills.insert(virtual_dir.into(), host_dir.into());
        self
    }
}

/// The sandbox of one agent: the provider, the options, and the ids the current invocation
/// acquired (and must release). One invocation of an agent at a time uses it.
pub(crate) struct SandboxRuntime {
    pub(crate) provider: Arc<dyn SandboxProvider>,
    pub(crate) options: SandboxOptions,
    held: Mutex<Vec<SandboxId>>,
    release_errors: Mutex<Vec<SandboxError>>,
}

impl fmt::Debug for SandboxRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxRuntime")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl SandboxRuntime {
    pub(crate) fn new(provider: Arc<dyn SandboxProvider>, options: SandboxOptions) -> Self {
        SandboxRuntime {
            provider,
            options,
            held: Mutex::new(Vec::new()),
            release_errors: Mutex::new(Vec::new()),
        }
    }

    /// Records that the current invocation acquired `id` (once per id).
    pub(crate) fn hold(&self, id: &SandboxId) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if !held.contains(id) {
            held.push(id.clone());
        }
    }

    fn take_held(&self) -> Vec<SandboxId> {
        std::mem::take(&mut *self.held.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The release errors of past invocations, oldest first (taken).
    pub(crate) fn take_release_errors(&self) -> Vec<SandboxError> {
        std::mem::take(
            &mut *self
                .release_errors
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    async fn release_all(&self, ids: Vec<SandboxId>) {
        for id in ids {
            if let Err(e) = self.provider.release(&id).await {
                self.release_errors
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(e);
            }
        }
    }
}

/// Releases what one invocation acquired when the invocation ends: [`InvocationLease::end`]
/// on a finished run (success or error), or on drop when the run's future is dropped
/// (cancelled) before it finished.
#[derive(Debug)]
pub(crate) struct InvocationLease {
    runtime: Option<Arc<SandboxRuntime>>,
}

impl InvocationLease {
    /// A lease over `runtime` for the invocation starting now.
    pub(crate) fn begin(runtime: Option<&Arc<SandboxRuntime>>) -> Self {
        InvocationLease {
            runtime: runtime.map(Arc::clone),
        }
    }

    /// Releases the ids the invocation acquired, each once.
    pub(crate) async fn end(mut self) {
        if let Some(runtime) = self.runtime.take() {
            let ids = runtime.take_held();
            runtime.release_all(ids).await;
        }
    }
}

impl Drop for InvocationLease {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let ids = runtime.take_held();
        if ids.is_empty() {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { runtime.release_all(ids).await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::LocalSandboxProvider;

    #[tokio::test]
    async fn an_id_is_held_once_and_released_by_the_lease() -> Result<(), SandboxError> {
        let tmp = tempfile::tempdir().map_err(|source| SandboxError::Io {
            thread: "t".to_owned(),
            source,
        })?;
        let runtime = Arc::new(SandboxRuntime::new(
            Arc::new(LocalSandboxProvider::new(tmp.path())),
            SandboxOptions::lazy(),
        ));
        let lease = InvocationLease::begin(Some(&runtime));
        let id = SandboxId::new("local:u:t");
        runtime.hold(&id);
        runtime.hold(&id);
        assert_eq!(runtime.held.lock().map(|h| h.len()).unwrap_or(0), 1);
        lease.end().await;
        assert!(runtime.take_held().is_empty());
        assert!(runtime.take_release_errors().is_empty());
        Ok(())
    }
}
