//! Wake-ups: a worker listens on its schema's channel (`LISTEN`), and each submission, stop
//! request and run end notifies it (`pg_notify` with the run's id, sent at commit). Behind a
//! pooler that cannot follow `LISTEN` (PgBouncer in transaction mode accepts it, and then no
//! notification arrives; `PostgresOptions::listen_url` names the server itself for it), or
//! when the listening connection drops, the worker still polls: every wait has a deadline.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Socket};

use super::super::sql::PgResult;
use super::super::tls::Connector;
use crate::{CheckpointError, RunId};

/// A receiver of the queue's notifications, each naming a run. Each clone sees every
/// notification sent after it was made (one arriving between two waits is not lost).
#[derive(Debug)]
pub struct Wakeups {
    seen: Option<broadcast::Receiver<Arc<str>>>,
    source: Option<Arc<Source>>,
}

/// The listening connection and the sender its notifications go to.
#[derive(Debug)]
struct Source {
    sender: broadcast::Sender<Arc<str>>,
    _client: Client,
}

impl Clone for Wakeups {
    fn clone(&self) -> Self {
        Wakeups {
            seen: self.source.as_ref().map(|s| s.sender.subscribe()),
            source: self.source.clone(),
        }
    }
}

impl Wakeups {
    /// Listen on `channel` over a connection of its own (not pooled: `LISTEN` is session
    /// state), made as `connector` makes the saver's. A server that refuses gives an error;
    /// [`Wakeups::polling`] is the fallback.
    pub(super) async fn listen(
        config: &Config,
        connector: &Connector,
        channel: &str,
    ) -> Result<Self, CheckpointError> {
        match connector {
            Connector::Plain => Self::listen_with(config, NoTls, channel).await,
            Connector::Tls(tls) => Self::listen_with(config, tls.clone(), channel).await,
        }
    }

    async fn listen_with<T>(config: &Config, tls: T, channel: &str) -> Result<Self, CheckpointError>
    where
        T: MakeTlsConnect<Socket>,
        T::Stream: Send + 'static,
    {
        let (client, mut connection) = config
            .connect(tls)
            .await
            .during("opening the listening connection")?;
        let (sender, seen) = broadcast::channel(1024);
        let forward = sender.clone();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let AsyncMessage::Notification(n) = message {
                    let _ = forward.send(Arc::from(n.payload()));
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN \"{channel}\""))
            .await
            .during("listening for the queue's notifications")?;
        Ok(Wakeups {
            seen: Some(seen),
            source: Some(Arc::new(Source {
                sender,
                _client: client,
            })),
        })
    }

    /// Wake-ups that only come from the clock.
    pub fn polling() -> Self {
        Wakeups {
            seen: None,
            source: None,
        }
    }

    /// Whether the server took the `LISTEN` (else only the clock wakes). Through a
    /// transaction-mode pooler such as PgBouncer it is taken, yet no notification arrives
    /// (the pooler hands the listening server connection to other clients): there too only
    /// the clock wakes.
    pub fn is_listening(&self) -> bool {
        self.source.is_some()
    }

    /// Wait until the queue notifies about any run, or `at_most` passes; whether a
    /// notification came.
    pub async fn wait(&mut self, at_most: Duration) -> bool {
        self.wait_until(at_most, |_| true).await
    }

    /// Wait until the queue notifies about `run` (or so many notifications came that some
    /// were dropped), or `at_most` passes; whether one came.
    pub async fn wait_for_run(&mut self, run: &RunId, at_most: Duration) -> bool {
        self.wait_until(at_most, |named| named == run.as_str())
            .await
    }

    /// Wait until a notification whose payload `wanted` accepts arrives (or so many came
    /// that some were dropped), or `at_most` passes; whether one came.
    pub async fn wait_until(&mut self, at_most: Duration, wanted: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + at_most;
        let Some(seen) = self.seen.as_mut() else {
            tokio::time::sleep_until(deadline).await;
            return false;
        };
        crate::queue::wait_for_notice(seen, deadline, wanted).await
    }
}
