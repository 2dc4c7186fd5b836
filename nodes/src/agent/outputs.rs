//! The thread's outputs watched across one run: captured before the graph starts and again
//! after it, to name the files the run produced. Hashes carry over from the previous capture
//! (of this run, or of the agent's previous run), so unchanged files are not read again.

use std::path::PathBuf;

use super::node::AgentCore;
use crate::delivery::{produced_outputs, Exclusions, Snapshot, SnapshotError};
use crate::sandbox::{SandboxError, DEFAULT_SANDBOX_USER};

/// Why a run's outputs could not be captured (delivery is then not verified).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputsError {
    /// The thread's sandbox could not be looked up.
    #[error("the thread's sandbox could not be looked up: {0}")]
    Sandbox(#[from] SandboxError),
    /// The outputs could not be read.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The blocking task capturing the outputs did not finish.
    #[error("the outputs capture task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The outputs before a run.
#[derive(Debug)]
pub(super) enum OutputsWatch {
    /// The agent has no sandbox or the run no thread: nothing to watch.
    Unwatched,
    /// The outputs directory (`None`: the sandbox does not exist yet) and what it held.
    Before {
        root: Option<PathBuf>,
        snapshot: Snapshot,
    },
    /// The capture before the run failed.
    Failed(OutputsError),
}

/// The outputs directory of the run's sandbox, if the sandbox exists.
async fn outputs_root(core: &AgentCore) -> Result<Option<Option<PathBuf>>, OutputsError> {
    let run = core.run_context();
    let (Some(runtime), Some(thread)) = (&core.sandbox, run.thread_id.as_deref()) else {
        return Ok(None);
    };
    let user = run.user_id.as_deref().unwrap_or(DEFAULT_SANDBOX_USER);
    let sandbox = runtime.provider.locate(user, thread).await?;
    Ok(Some(sandbox.map(|s| s.dirs.outputs)))
}

/// Captures `root`, reusing the hashes of `previous`, on a blocking thread; `previous` is
/// handed back (not copied).
async fn capture(root: PathBuf, previous: Snapshot) -> Result<(Snapshot, Snapshot), OutputsError> {
    let (snapshot, previous) = tokio::task::spawn_blocking(move || {
        let now = Snapshot::capture(&root, &Exclusions::default(), Some(&previous));
        (now, previous)
    })
    .await?;
    Ok((snapshot?, previous))
}

impl OutputsWatch {
    /// Captures the outputs before a run of `core`.
    pub(super) async fn before(core: &AgentCore) -> OutputsWatch {
        let root = match outputs_root(core).await {
            Ok(None) => return OutputsWatch::Unwatched,
            Ok(Some(root)) => root,
            Err(e) => return OutputsWatch::Failed(e),
        };
        let Some(dir) = root.clone() else {
            return OutputsWatch::Before {
                root,
                snapshot: Snapshot::default(),
            };
        };
        let previous = core.last_outputs(&dir).unwrap_or_default();
        match capture(dir, previous).await {
            Ok((snapshot, _)) => OutputsWatch::Before { root, snapshot },
            Err(e) => OutputsWatch::Failed(e),
        }
    }

    /// The outputs the run produced (sorted virtual paths), captured after it; or why they
    /// could not be named.
    pub(super) async fn produced(self, core: &AgentCore) -> (Vec<String>, Option<OutputsError>) {
        let (root_before, before) = match self {
            OutputsWatch::Unwatched => return (Vec::new(), None),
            OutputsWatch::Failed(e) => return (Vec::new(), Some(e)),
            OutputsWatch::Before { root, snapshot } => (root, snapshot),
        };
        let dir = match outputs_root(core).await {
            Ok(Some(Some(dir))) => dir,
            Ok(_) => return (Vec::new(), None),
            Err(e) => return (Vec::new(), Some(e)),
        };
        // The sandbox appeared during the run (lazy acquisition): it held nothing before.
        let before = if root_before.as_ref() == Some(&dir) {
            before
        } else {
            Snapshot::default()
        };
        match capture(dir.clone(), before).await {
            Ok((after, before)) => {
                let produced = produced_outputs(&before, &after);
                core.keep_outputs(dir, after);
                (produced, None)
            }
            Err(e) => (Vec::new(), Some(e)),
        }
    }

    /// Ends the watch of a run that did not complete: the capture before it is kept for the
    /// next run's hashes. Why that capture failed, if it did.
    pub(super) fn abandon(self, core: &AgentCore) -> Option<OutputsError> {
        match self {
            OutputsWatch::Failed(e) => Some(e),
            OutputsWatch::Before {
                root: Some(dir),
                snapshot,
            } => {
                core.keep_outputs(dir, snapshot);
                None
            }
            OutputsWatch::Before { root: None, .. } | OutputsWatch::Unwatched => None,
        }
    }
}
