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
use std::time::Duration;

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
/// (cancelled) before it finished — also with no runtime current. What a drop could not
/// release stays held by the agent, and its next lease releases it when it ends.
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
        if !ids.is_empty() {
            release_dropped(Owed { runtime, ids });
        }
    }
}

/// How long a drop with no runtime current waits for its ids to be released.
const DROP_RELEASE_LIMIT: Duration = Duration::from_secs(30);

/// Releases a dropped lease's ids: on the current runtime in the background; with none
/// current, before the drop returns, on a runtime of its own. Ids whose release never ran
/// (the runtime shut down first, none could be made, or it timed out) go back to the agent's
/// held ids: the agent's next lease releases them when it ends.
fn release_dropped(owed: Owed) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(owed.release());
        }
        // At thread exit no runtime can be entered any more: `owed` keeps the ids.
        Err(e) if e.is_thread_local_destroyed() => {}
        Err(_) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match runtime {
                Ok(runtime) => {
                    let _ = runtime.block_on(async {
                        tokio::time::timeout(DROP_RELEASE_LIMIT, owed.release()).await
                    });
                }
                Err(e) => tracing::warn!(error = %e, "no runtime to release a dropped lease"),
            }
        }
    }
}

/// Ids a dropped lease still owes a release; dropped before they are released, they go back
/// to the runtime's held ids.
struct Owed {
    runtime: Arc<SandboxRuntime>,
    ids: Vec<SandboxId>,
}

impl Owed {
    /// Releases the ids, each once, in order; each leaves the debt once its release ended.
    async fn release(mut self) {
        while let Some(id) = self.ids.first().cloned() {
            self.runtime.release_all(vec![id]).await;
            self.ids.remove(0);
        }
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            self.runtime.hold(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::LocalSandboxProvider;
    use futures::future::BoxFuture;

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

    /// A local provider whose every release fails: the failure is the proof it ran.
    #[derive(Debug)]
    struct RefusingRelease(LocalSandboxProvider);

    impl SandboxProvider for RefusingRelease {
        fn acquire(
            &self,
            user: &str,
            thread: &str,
        ) -> BoxFuture<'static, Result<SandboxId, SandboxError>> {
            self.0.acquire(user, thread)
        }
        fn get(
            &self,
            id: &SandboxId,
        ) -> BoxFuture<'static, Result<Option<super::super::Sandbox>, SandboxError>> {
            self.0.get(id)
        }
        fn locate(
            &self,
            user: &str,
            thread: &str,
        ) -> BoxFuture<'static, Result<Option<super::super::Sandbox>, SandboxError>> {
            self.0.locate(user, thread)
        }
        fn release(&self, id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>> {
            let thread = id.as_str().to_owned();
            Box::pin(async move {
                Err(SandboxError::Io {
                    thread,
                    source: std::io::Error::other("refused"),
                })
            })
        }
        fn destroy(&self, id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>> {
            self.0.destroy(id)
        }
    }

    fn refusing() -> Result<(tempfile::TempDir, Arc<SandboxRuntime>), std::io::Error> {
        let tmp = tempfile::tempdir()?;
        let provider = RefusingRelease(LocalSandboxProvider::new(tmp.path()));
        let runtime = Arc::new(SandboxRuntime::new(
            Arc::new(provider),
            SandboxOptions::lazy(),
        ));
        Ok((tmp, runtime))
    }

    #[test]
    fn a_lease_dropped_outside_any_runtime_releases_before_the_drop_returns(
    ) -> Result<(), std::io::Error> {
        let (_tmp, runtime) = refusing()?;
        let lease = InvocationLease::begin(Some(&runtime));
        runtime.hold(&SandboxId::new("local:u:t"));
        assert!(tokio::runtime::Handle::try_current().is_err());
        drop(lease);
        assert_eq!(
            runtime.take_release_errors().len(),
            1,
            "the release did not run"
        );
        assert!(runtime.take_held().is_empty());
        Ok(())
    }

    #[test]
    fn ids_a_dropped_lease_could_not_release_are_released_by_the_next_lease(
    ) -> Result<(), std::io::Error> {
        let (_tmp, runtime) = refusing()?;
        let lease = InvocationLease::begin(Some(&runtime));
        runtime.hold(&SandboxId::new("local:u:t"));
        let shut_down = tokio::runtime::Builder::new_current_thread().build()?;
        // The release is spawned on a runtime that shuts down before running it.
        shut_down.block_on(async move { drop(lease) });
        drop(shut_down);
        assert!(runtime.take_release_errors().is_empty(), "released already");
        let next = InvocationLease::begin(Some(&runtime));
        tokio::runtime::Builder::new_current_thread()
            .build()?
            .block_on(next.end());
        assert_eq!(
            runtime.take_release_errors().len(),
            1,
            "the next lease did not release it"
        );
        Ok(())
    }
}
