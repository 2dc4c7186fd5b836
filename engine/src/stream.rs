//! [`RunStream`]: the events of a run, then its outcome.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::{CancelToken, Event, RunError, RunOutcome};

/// A running graph's events. Poll it as a [`Stream`]; when it ends, call
/// [`RunStream::outcome`] for the run's result.
///
/// Dropping it before the run ends cancels the run at its next step boundary.
pub struct RunStream<S> {
    rx: mpsc::Receiver<Event>,
    handle: Option<JoinHandle<Result<RunOutcome<S>, RunError>>>,
    cancel: CancelToken,
}

impl<S> std::fmt::Debug for RunStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream")
            .field("finished", &self.handle.is_none())
            .finish_non_exhaustive()
    }
}

impl<S> RunStream<S> {
    pub(crate) fn new(
        rx: mpsc::Receiver<Event>,
        handle: JoinHandle<Result<RunOutcome<S>, RunError>>,
        cancel: CancelToken,
    ) -> Self {
        RunStream {
            rx,
            handle: Some(handle),
            cancel,
        }
    }

    /// Wait for the run to end and return its outcome. Events not yet read are dropped.
    ///
    /// # Errors
    /// The run's [`RunError`].
    pub async fn outcome(mut self) -> Result<RunOutcome<S>, RunError> {
        self.rx.close();
        let Some(handle) = self.handle.take() else {
            return Err(RunError::Cancelled { step: -1 });
        };
        match handle.await {
            Ok(r) => r,
            Err(e) => Err(RunError::Node {
                node: "<runner>".to_owned(),
                step: -1,
                task: stategraph_checkpoints::TaskId::derive(&[b"runner"]),
                source: format!("the run's task failed: {e}").into(),
            }),
        }
    }
}

impl<S> Stream for RunStream<S> {
    type Item = Event;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }
}

impl<S> Unpin for RunStream<S> {}

impl<S> Drop for RunStream<S> {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.cancel.cancel();
        }
    }
}
