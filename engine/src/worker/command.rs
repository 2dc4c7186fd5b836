//! A queued run's command as the graph's [`Command`], and a [`Command`] as one to queue.

use stategraph_checkpoints::{QueuedCommand, QueuedGoto};

use crate::command::{Goto, SendTo};
use crate::{Command, State};

/// Why a [`Command`] cannot be queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandNotQueueable {
    /// It is for a parent graph: a subgraph's node returns those; a run cannot start with one.
    #[error("a command for a parent graph cannot be queued: only a subgraph's node returns one")]
    ForParent,
    /// A `SendTo` whose argument did not serialize.
    #[error("the send to node {node} cannot be queued: its argument did not serialize: {detail}")]
    SendArg {
        /// The send's node.
        node: String,
        /// What the serializer said.
        detail: String,
    },
    /// The update did not serialize.
    #[error("the command's update did not serialize: {0}")]
    Update(String),
}

impl<S: State> Command<S> {
    /// This command as a [`QueuedCommand`], for
    /// [`RunQueue::submit_command`](stategraph_checkpoints::RunQueue::submit_command): the
    /// worker that takes the run turns it back into this command.
    ///
    /// # Errors
    /// [`CommandNotQueueable`] for a command for a parent graph, or an update or send
    /// argument that does not serialize.
    pub fn to_queued(&self) -> Result<QueuedCommand, CommandNotQueueable> {
        if self.parent.is_some() {
            return Err(CommandNotQueueable::ForParent);
        }
        let update = match &self.update {
            Some(u) => Some(
                serde_json::to_value(u).map_err(|e| CommandNotQueueable::Update(e.to_string()))?,
            ),
            None => None,
        };
        let goto = self
            .goto
            .iter()
            .map(|g| match g {
                Goto::Node(node) => Ok(QueuedGoto::Node(node.clone())),
                Goto::Send(send) => match &send.arg {
                    Ok(arg) => Ok(QueuedGoto::send(send.node.clone(), arg.clone())),
                    Err(detail) => Err(CommandNotQueueable::SendArg {
                        node: send.node.clone(),
                        detail: detail.clone(),
                    }),
                },
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(QueuedCommand {
            resume: self.resume.clone(),
            update,
            goto,
        })
    }
}

/// The graph's command for a queued one; the reason the run fails when its update does not
/// fit the graph's state.
pub(super) fn command_of<S: State>(queued: &QueuedCommand) -> Result<Command<S>, String> {
    let update = match &queued.update {
        Some(u) => Some(
            serde_json::from_value::<S::Update>(u.clone())
                .map_err(|e| format!("the run's update does not fit the graph's state: {e}"))?,
        ),
        None => None,
    };
    let goto = queued
        .goto
        .iter()
        .map(|g| match g {
            QueuedGoto::Node(node) => Goto::Node(node.clone()),
            QueuedGoto::Send { node, arg } => Goto::Send(SendTo {
                node: node.clone(),
                arg: Ok(arg.clone()),
            }),
        })
        .collect();
    Ok(Command {
        update,
        goto,
        parent: None,
        resume: queued.resume.clone(),
    })
}
