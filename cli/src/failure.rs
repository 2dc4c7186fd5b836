//! Why a command failed: the exit code (1 a run-time problem, 2 a usage error) and the
//! message for stderr.

use stategraph_checkpoints::CheckpointError;

/// Why a command failed: exit code (1 run-time problem, 2 usage) and the message for stderr
/// (empty when everything was already printed).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    /// A usage error (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            message: message.into(),
        }
    }

    /// A run-time problem (exit code 1).
    pub(crate) fn runtime(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<CheckpointError> for Failure {
    fn from(e: CheckpointError) -> Self {
        Failure::runtime(e.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::runtime(format!("cannot write the output: {e}"))
    }
}

/// What a command returns.
pub(crate) type Outcome = Result<(), Failure>;
