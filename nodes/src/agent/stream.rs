//! [`AgentStream`]: an agent's run as the engine's events, settled when it ends, for a
//! consumer that shows the run as it goes (the Agent Server's streams).

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use stategraph::checkpoints::RunId;
use stategraph::{CancelToken, Event, Input, RunConfig, StreamMode};
use tokio::sync::{mpsc, oneshot};

use super::run::RunScope;
use super::{Agent, AgentOutcome, AgentRunError};
use crate::state::ThreadState;

/// A running agent's events. Poll it as a [`Stream`]; when it ends, call
/// [`AgentStream::outcome`] for the settled run. Dropping it before the run ends cancels the
/// run at its next step boundary (the run is still settled, as a cancelled one).
#[derive(Debug)]
pub struct AgentStream {
    rx: mpsc::Receiver<Event>,
    done: Option<oneshot::Receiver<Result<AgentOutcome, AgentRunError>>>,
    cancel: CancelToken,
}

impl Agent {
    /// Run the agent on `input` with `config` as [`Agent::invoke`] does — one invocation at a
    /// time, recorded, its sandbox released, settled with a receipt — streaming the graph's
    /// events in `mode` as it goes.
    pub fn stream(
        &self,
        input: impl Into<Input<ThreadState>>,
        config: &RunConfig,
        mode: StreamMode,
    ) -> AgentStream {
        self.stream_run(None, input.into(), config, mode)
    }

    /// [`Agent::stream`] as run `run` (instead of the run context's id, or a generated one):
    /// a server that gave the run its id records it under that id.
    pub fn stream_as(
        &self,
        run: RunId,
        input: impl Into<Input<ThreadState>>,
        config: &RunConfig,
        mode: StreamMode,
    ) -> AgentStream {
        self.stream_run(Some(run), input.into(), config, mode)
    }

    fn stream_run(
        &self,
        run: Option<RunId>,
        input: Input<ThreadState>,
        config: &RunConfig,
        mode: StreamMode,
    ) -> AgentStream {
        let (tx, rx) = mpsc::channel(1024);
        let (done_tx, done) = oneshot::channel();
        let cancel = config.cancellation().child();
        let config = config.clone().cancel_token(cancel.clone());
        let (core, graph) = (self.core.clone(), self.graph.clone());
        tokio::spawn(async move {
            let scope = match RunScope::begin_run(&core, &graph, &config, run).await {
                Ok(scope) => scope,
                Err(e) => {
                    let _ = done_tx.send(Err(e));
                    return;
                }
            };
            let mut events = graph.stream(input, &scope.metered(&config), mode);
            let mut forwarding = true;
            while let Some(ev) = events.next().await {
                // A reader that stopped reading (it asked for the outcome) misses the rest.
                forwarding = forwarding && tx.send(ev).await.is_ok();
            }
            drop(tx);
            let result = events.outcome().await;
            let _ = done_tx.send(scope.finish(result).await);
        });
        AgentStream {
            rx,
            done: Some(done),
            cancel,
        }
    }
}

impl AgentStream {
    /// Wait for the run to end and be settled. Events not yet read are dropped.
    ///
    /// # Errors
    /// As [`Agent::invoke`].
    pub async fn outcome(mut self) -> Result<AgentOutcome, AgentRunError> {
        self.rx.close();
        let Some(done) = self.done.take() else {
            unreachable!("only this consuming call takes the outcome's receiver")
        };
        done.await.unwrap_or(Err(AgentRunError::Lost))
    }
}

impl Stream for AgentStream {
    type Item = Event;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for AgentStream {
    fn drop(&mut self) {
        if self.done.is_some() {
            self.cancel.cancel();
        }
    }
}
