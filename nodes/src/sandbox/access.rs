//! A tool call's way to its thread's sandbox: [`SandboxAccess`] (what
//! [`ToolContext::sandbox`](crate::ToolContext::sandbox) uses), the [`OpenSandbox`] it
//! returns, and the id the call acquired, which [`attach_sandbox`] puts into the call's update.

use std::sync::{Arc, OnceLock};

use super::fs::SandboxFs;
use super::lifecycle::SandboxRuntime;
use super::path::{MountTable, PathError};
use super::provider::{Sandbox, SandboxError, SandboxId};
use crate::context::RunContext;
use crate::state::ThreadState;

/// The user id a run context without one acquires its sandbox for.
pub const DEFAULT_SANDBOX_USER: &str = "default";

/// Why a tool could not reach its sandbox.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxAccessError {
    /// The agent has no sandbox configured.
    #[error("this agent has no sandbox")]
    NotConfigured,
    /// The run context names no thread, so there is no sandbox to acquire.
    #[error("the run has no thread, so it has no sandbox")]
    NoThread,
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] SandboxError),
    /// The id in the state names a sandbox the provider does not have.
    #[error("sandbox {id} does not exist")]
    Missing {
        /// The id.
        id: SandboxId,
    },
    /// A skill mount is not a clean path under `/mnt/skills`.
    #[error(transparent)]
    Mounts(#[from] PathError),
}

/// An opened sandbox: its id and directories, and file operations over its virtual paths.
#[derive(Debug)]
pub struct OpenSandbox {
    /// The sandbox.
    pub sandbox: Sandbox,
    /// File operations over its mounts.
    pub fs: SandboxFs,
}

/// One tool call's access to the agent's sandbox: it remembers the id the call acquired.
#[derive(Debug)]
pub struct SandboxAccess {
    runtime: Arc<SandboxRuntime>,
    acquired: OnceLock<SandboxId>,
}

impl SandboxAccess {
    pub(crate) fn new(runtime: Arc<SandboxRuntime>) -> Self {
        SandboxAccess {
            runtime,
            acquired: OnceLock::new(),
        }
    }

    /// The id this call acquired, if it acquired one.
    pub fn acquired(&self) -> Option<&SandboxId> {
        self.acquired.get()
    }

    /// The sandbox of the call's thread: the id in `state` if there is one (not acquired
    /// again), otherwise acquired for the run's user and thread and remembered.
    pub(crate) async fn open(
        &self,
        state: &ThreadState,
        run: &RunContext,
    ) -> Result<OpenSandbox, SandboxAccessError> {
        let provider = &self.runtime.provider;
        let stored = stored_id(state).or_else(|| self.acquired.get().cloned());
        let id = match stored {
            Some(id) => id,
            None => {
                let id = acquire(&self.runtime, run).await?;
                let _ = self.acquired.set(id.clone());
                id
            }
        };
        let sandbox = provider
            .get(&id)
            .await?
            .ok_or(SandboxAccessError::Missing { id })?;
        let mounts = MountTable::new(&sandbox.dirs, &self.runtime.options.skills)?;
        Ok(OpenSandbox {
            sandbox,
            fs: SandboxFs::new(mounts),
        })
    }
}

/// The sandbox id the state holds.
pub(crate) fn stored_id(state: &ThreadState) -> Option<SandboxId> {
    state
        .sandbox
        .as_ref()
        .and_then(|s| s.sandbox_id.as_deref())
        .map(SandboxId::new)
}

/// Acquires the sandbox of the run's thread and records it as held by the invocation.
pub(crate) async fn acquire(
    runtime: &SandboxRuntime,
    run: &RunContext,
) -> Result<SandboxId, SandboxAccessError> {
    let thread = run
        .thread_id
        .as_deref()
        .ok_or(SandboxAccessError::NoThread)?;
    let user = run.user_id.as_deref().unwrap_or(DEFAULT_SANDBOX_USER);
    let id = runtime.provider.acquire(user, thread).await?;
    runtime.hold(&id);
    Ok(id)
}
