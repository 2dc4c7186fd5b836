//! Handing a task's final failure to its node's error handler: which failures a handler may
//! see, the call (a panic in it is its failure), and the task result it becomes.

use std::sync::Arc;

use futures::FutureExt;

use super::execute::TaskResult;
use crate::graph::TaskOutput;
use crate::handler::ErasedHandler;
use crate::node::{NodeContext, NodeResult};
use crate::{NodeError, RunError, State};
use stategraph_checkpoints::sync::Unpoisoned;

/// Whether `e` is control flow rather than a failure: an interrupt a subgraph could not
/// keep, or a cancellation. Such errors are never retried nor handed to a handler.
pub(super) fn is_control_flow(e: &RunError) -> bool {
    matches!(
        e,
        RunError::InterruptInEphemeralSubgraph { .. }
            | RunError::InterruptWithoutCheckpointer { .. }
            | RunError::Cancelled { .. }
    )
}

/// Call `handler` for the failure `error` of the task of `ctx`, which saw `state`; the task's
/// result is the handler's output (marked as handled), its pause, or, if it fails, a
/// [`RunError::ErrorHandler`] naming both failures.
pub(super) async fn handle<S: State>(
    handler: &ErasedHandler,
    state: Arc<S>,
    ctx: &NodeContext,
    error: NodeError,
) -> TaskResult<S> {
    let record = error.record();
    let failure = error.source.clone();
    let handler_failed = |source: crate::BoxError| RunError::ErrorHandler {
        node: error.node.clone(),
        step: error.step,
        task: error.task,
        failure: failure.clone(),
        source,
    };
    let consumed = || ctx.inner.cursor.lock().unpoisoned().resume.clone();
    let Some(typed) = handler.get::<S>() else {
        // `compile` checks the handler's state type; this is only reachable if that changes.
        let error =
            handler_failed(format!("the handler is for state {}", handler.state_name()).into());
        return TaskResult::Failed {
            error,
            resumes: consumed(),
        };
    };
    ctx.inner.cursor.lock().unpoisoned().calls = 0;
    let node_error = NodeError {
        node: error.node.clone(),
        step: error.step,
        task: error.task,
        attempts: error.attempts,
        source: failure.clone(),
    };
    let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        typed.handle(state, node_error, ctx.clone())
    }));
    let result = match called {
        Ok(fut) => std::panic::AssertUnwindSafe(fut).catch_unwind().await,
        Err(panic) => Err(panic),
    };
    let result = result.unwrap_or_else(|panic| Err(super::task::panic_message(panic).into()));
    match NodeResult::from_user(result) {
        NodeResult::Output(out) => TaskResult::Done(TaskOutput {
            handled: Some(Box::new(record)),
            ..out
        }),
        NodeResult::Interrupted(interrupts) => TaskResult::Interrupted {
            interrupts,
            resumes: consumed(),
        },
        NodeResult::Child(e) => TaskResult::Failed {
            error: handler_failed(Box::new(e)),
            resumes: consumed(),
        },
        NodeResult::Failed(e) => TaskResult::Failed {
            error: handler_failed(e),
            resumes: consumed(),
        },
    }
}
