//! How a run is configured: [`RunConfig`] and its [`Durability`].

use std::collections::BTreeMap;

use stategraph_checkpoints::{CheckpointId, ThreadId};

use crate::node::CancelToken;
use crate::RunError;

/// Default recursion limit (supersteps per invocation), as in LangGraph.
pub const DEFAULT_RECURSION_LIMIT: usize = 10_007;

/// Most checkpoint writes in flight under durability `async` (buffered or handed to the
/// saver): a crash loses at most these.
pub const MAX_INFLIGHT: usize = 64;

/// When a step's checkpoint must be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Each step's checkpoint is stored before the next step starts.
    Sync,
    /// A step's checkpoint is stored while the next step runs: up to
    /// [`MAX_INFLIGHT`] checkpoints may be in flight, and a saver that groups writes commits
    /// them together. A storage error surfaces at the next step boundary. A crash loses at most
    /// the steps not yet committed, never part of one; they run again, with the same task ids.
    #[default]
    Async,
    /// Only the final checkpoint of an invocation (at its end, error or interrupt) is stored.
    Exit,
}

/// How a run is configured: thread, time travel, limits, durability, metadata, cancellation.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub(crate) thread: Option<String>,
    pub(crate) checkpoint: Option<CheckpointId>,
    pub(crate) recursion_limit: usize,
    pub(crate) durability: Durability,
    pub(crate) metadata: BTreeMap<String, serde_json::Value>,
    pub(crate) cancel: CancelToken,
    pub(crate) interrupt_before: Vec<String>,
    pub(crate) interrupt_after: Vec<String>,
    /// Replay: end the run (as done) before planning a step after this one.
    pub(crate) until_step: Option<i64>,
    /// Meters the run's token usage is also added to.
    pub(crate) usage_meters: Vec<super::UsageMeter>,
    /// The run's context (see [`crate::context`]).
    pub(crate) context: Option<crate::ContextValue>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            thread: None,
            checkpoint: None,
            recursion_limit: DEFAULT_RECURSION_LIMIT,
            durability: Durability::default(),
            metadata: BTreeMap::new(),
            cancel: CancelToken::new(),
            interrupt_before: Vec::new(),
            interrupt_after: Vec::new(),
            until_step: None,
            usage_meters: Vec::new(),
            context: None,
        }
    }
}

impl RunConfig {
    /// A config without a thread (enough for a graph without checkpointer).
    pub fn new() -> Self {
        Self::default()
    }

    /// Run on this thread (validated when the run starts).
    pub fn thread(mut self, id: impl Into<String>) -> Self {
        self.thread = Some(id.into());
        self
    }

    /// Start from this checkpoint instead of the thread's newest: a fork.
    pub fn checkpoint(mut self, id: CheckpointId) -> Self {
        self.checkpoint = Some(id);
        self
    }

    /// At most this many supersteps.
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// When checkpoints are stored.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// A metadata entry stored on every checkpoint of the run.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// For this run only, pause before any step that would run one of these nodes of the root
    /// graph (`"*"`: every node), in addition to the graph's own static interrupts.
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// For this run only, pause after any step that ran one of these nodes of the root graph
    /// (`"*"`: every node).
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Add the token usage of runs made with this config to `meter` too (beside each run's
    /// own total, [`RunOutcome::usage`](crate::RunOutcome::usage)): how a caller reads what a
    /// run used when it fails or is cancelled. Several meters may be given; each gets all.
    pub fn usage_meter(mut self, meter: super::UsageMeter) -> Self {
        self.usage_meters.push(meter);
        self
    }

    /// Cancel the run through this token.
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = token;
        self
    }

    /// The token that cancels runs made with this config (a wrapper that starts the run
    /// itself can cancel it through a [`CancelToken::child`] of it).
    pub fn cancellation(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// The thread this config runs on, as given (validated when the run starts).
    pub fn thread_name(&self) -> Option<&str> {
        self.thread.as_deref()
    }

    /// The run's thread, validated.
    pub(super) fn thread_id(&self) -> Result<Option<ThreadId>, RunError> {
        self.thread
            .clone()
            .map(ThreadId::new)
            .transpose()
            .map_err(RunError::from)
    }
}
