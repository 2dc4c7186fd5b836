//! What one invocation of an agent ends with: the graph's outcome and the run's
//! [`Settlement`] (status, reasons, delivery receipt, where they were stored), or an
//! [`AgentRunError`] that carries the settlement too.

use std::sync::Arc;

use stategraph::checkpoints::{CheckpointError, CheckpointId, RunId, RunStatus};
use stategraph::{Interrupt, RunError, RunOutcome};

use super::outputs::OutputsError;
use crate::delivery::{DeliveryIncomplete, DeliveryReceipt};
use crate::state::ThreadState;

/// The message of a producing success whose receipt could not be stored.
pub const RECEIPT_NOT_STORED: &str =
    "Artifact delivery verification failed: terminal delivery receipt could not be persisted";

/// Where a run's record and receipt went.
#[derive(Debug, Default)]
#[non_exhaustive]
pub enum Recorded {
    /// The agent has no checkpointer (or the run no thread): the run and its receipt exist
    /// only in this value.
    #[default]
    NotStored,
    /// The run record and its receipt are in the thread's checkpoint store.
    Stored,
    /// Storing failed; the errors in the order they happened (each receipt attempt, then the
    /// terminal status).
    Failed(Vec<CheckpointError>),
}

/// How one invocation of an agent was settled: the run's id and status with its reasons, the
/// delivery receipt, and where they were stored.
#[derive(Debug)]
pub struct Settlement {
    /// The run.
    pub run_id: RunId,
    /// Its terminal status.
    pub status: RunStatus,
    /// Why it ended as it did (an error's message), if said.
    pub reason: Option<String>,
    /// What stopped it early (`recursion_limit`, or a guard's stamp), if anything.
    pub stop_reason: Option<String>,
    /// The delivery receipt (written once per run).
    pub receipt: DeliveryReceipt,
    /// Why delivery was not verified although the agent has a sandbox: the outputs could not
    /// be captured before or after the run.
    pub outputs_error: Option<OutputsError>,
    /// Where the run and the receipt were stored.
    pub recorded: Recorded,
    /// The tokens the run's model calls used and how many calls it made (also stored in its
    /// run record): what its graph recorded, however it ended.
    pub usage: stategraph::TokenUsage,
}

/// A finished invocation: the graph's outcome and its settlement.
#[derive(Debug)]
pub struct AgentOutcome {
    /// The state at the end.
    pub state: Arc<ThreadState>,
    /// Pending interrupts, if the run paused.
    pub interrupts: Vec<Interrupt>,
    /// The last checkpoint written, if the agent has a checkpointer.
    pub checkpoint: Option<CheckpointId>,
    /// Supersteps run by this invocation.
    pub steps: usize,
    /// How the run was settled.
    pub settlement: Settlement,
}

impl AgentOutcome {
    pub(super) fn new(outcome: RunOutcome<ThreadState>, settlement: Settlement) -> Self {
        AgentOutcome {
            state: outcome.state,
            interrupts: outcome.interrupts,
            checkpoint: outcome.checkpoint,
            steps: outcome.steps,
            settlement,
        }
    }

    /// Whether the run paused on an interrupt.
    pub fn is_interrupted(&self) -> bool {
        !self.interrupts.is_empty()
    }

    /// The graph's outcome alone.
    pub fn into_run_outcome(self) -> RunOutcome<ThreadState> {
        RunOutcome {
            state: self.state,
            interrupts: self.interrupts,
            checkpoint: self.checkpoint,
            steps: self.steps,
            usage: self.settlement.usage,
        }
    }
}

/// Why a finished graph run is still not a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryFailure {
    /// Outputs were produced and none was presented.
    #[error(transparent)]
    Incomplete(#[from] DeliveryIncomplete),
    /// Outputs were produced and the receipt could not be stored.
    #[error("{RECEIPT_NOT_STORED}")]
    ReceiptNotStored,
}

/// An invocation of an agent that did not succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentRunError {
    /// The run could not start: its record could not be stored (the graph did not run).
    #[error("the run could not be recorded before it started: {0}")]
    Start(#[source] CheckpointError),
    /// The graph failed (or was cancelled); the run was settled with that status.
    #[error("{error}")]
    Run {
        /// The engine's error.
        #[source]
        error: RunError,
        /// How the run was settled.
        settlement: Box<Settlement>,
    },
    /// The graph finished, but its delivery failed: the state is committed and the run's
    /// status is `error`.
    #[error("{failure}")]
    Delivery {
        /// What failed.
        failure: DeliveryFailure,
        /// The finished run, settled as an error.
        outcome: Box<AgentOutcome>,
    },
    /// A tool handed control to the graph enclosing the agent's node
    /// ([`Command::to_parent`](stategraph::Command::to_parent)), and the run's delivery
    /// failed (the command is not applied).
    #[error("{failure}")]
    HandedOff {
        /// Why delivery failed.
        failure: DeliveryFailure,
        /// The run's settlement.
        settlement: Box<Settlement>,
    },
    /// The task running a streamed invocation ([`Agent::stream`](crate::Agent::stream))
    /// ended without an outcome: it panicked, or its runtime shut down. The run is settled
    /// as dropped when its scope goes.
    #[error("the streamed run's task ended without an outcome")]
    Lost,
}

impl AgentRunError {
    /// The engine's error, when the graph failed.
    pub fn run_error(&self) -> Option<&RunError> {
        match self {
            AgentRunError::Run { error, .. } => Some(error),
            _ => None,
        }
    }

    /// How the run was settled (absent when it could not start).
    pub fn settlement(&self) -> Option<&Settlement> {
        match self {
            AgentRunError::Start(_) | AgentRunError::Lost => None,
            AgentRunError::Run { settlement, .. } => Some(settlement),
            AgentRunError::Delivery { outcome, .. } => Some(&outcome.settlement),
            AgentRunError::HandedOff { settlement, .. } => Some(settlement),
        }
    }
}
