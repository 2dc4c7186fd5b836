//! [`QueuedCommand`]: what a queued run does to its thread in place of an input — the
//! `Command` of an invoke, as JSON, since the queue does not know the graph's types.

use serde::{Deserialize, Serialize};

use crate::Resume;

/// A command for a queued run ([`RunQueue::submit_command`](crate::RunQueue::submit_command)):
/// it answers the thread's pending interrupts, updates its state and routes, as
/// `Command::resume(..).update(..).goto(..)` does as an invoke's input. The worker that takes
/// the run turns it into the graph's `Command`; an update that does not fit the graph's state,
/// or a resume the thread cannot take, ends the run as `error` with the reason.
///
/// Stored as JSON with the keys that are set: `{"resume": {"value": v}, "update": {..},
/// "goto": [{"node": "n"}, {"send": {"node": "n", "arg": a}}]}`.
///
/// ```
/// use stategraph_checkpoints::{QueuedCommand, QueuedGoto, Resume};
/// let command = QueuedCommand::resume(Resume::value("approved"))
///     .with_update(serde_json::json!({"note": "checked by a reviewer"}))
///     .with_goto(QueuedGoto::node("publish"));
/// let json = serde_json::to_value(&command).unwrap();
/// assert_eq!(json["goto"][0]["node"], "publish");
/// assert_eq!(serde_json::from_value::<QueuedCommand>(json).unwrap(), command);
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedCommand {
    /// Answers to the thread's pending interrupts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
    /// A state update, as the graph's update type reads it from JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<serde_json::Value>,
    /// Where the run goes next, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goto: Vec<QueuedGoto>,
}

impl QueuedCommand {
    /// A command that only answers the thread's pending interrupts.
    pub fn resume(resume: Resume) -> Self {
        QueuedCommand {
            resume: Some(resume),
            ..QueuedCommand::default()
        }
    }

    /// A command that only updates the state (`update`: the graph's update as JSON).
    pub fn update(update: serde_json::Value) -> Self {
        QueuedCommand {
            update: Some(update),
            ..QueuedCommand::default()
        }
    }

    /// This command with `update` as its state update.
    #[must_use]
    pub fn with_update(mut self, update: serde_json::Value) -> Self {
        self.update = Some(update);
        self
    }

    /// This command also routing to `goto`.
    #[must_use]
    pub fn with_goto(mut self, goto: QueuedGoto) -> Self {
        self.goto.push(goto);
        self
    }

    /// Whether the command only answers interrupts: what workers of every build since the
    /// queue took resumes read (it is stored where they look for one).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn is_resume_only(&self) -> bool {
        self.resume.is_some() && self.update.is_none() && self.goto.is_empty()
    }
}

/// Where a [`QueuedCommand`] routes: a node by name (or `__end__`), or a node run with its
/// own argument (the engine's `SendTo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum QueuedGoto {
    /// Trigger the node in the next step.
    Node(String),
    /// Run the node with `arg` as its input in the next step.
    Send {
        /// The node.
        node: String,
        /// Its argument, as JSON.
        arg: serde_json::Value,
    },
}

impl QueuedGoto {
    /// Route to `node`.
    pub fn node(node: impl Into<String>) -> Self {
        QueuedGoto::Node(node.into())
    }

    /// Run `node` with `arg`.
    pub fn send(node: impl Into<String>, arg: serde_json::Value) -> Self {
        QueuedGoto::Send {
            node: node.into(),
            arg,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_command_stores_only_the_keys_it_sets_and_reads_back_equal() {
        let only = QueuedCommand::update(json!({"n": 1}));
        assert_eq!(
            serde_json::to_value(&only).ok(),
            Some(json!({"update": {"n": 1}}))
        );
        let full = QueuedCommand::resume(Resume::value(3))
            .with_update(json!({"n": 2}))
            .with_goto(QueuedGoto::node("a"))
            .with_goto(QueuedGoto::send("b", json!([1])));
        let stored = serde_json::to_value(&full).ok();
        assert_eq!(
            stored,
            Some(json!({
                "resume": {"value": 3},
                "update": {"n": 2},
                "goto": [{"node": "a"}, {"send": {"node": "b", "arg": [1]}}]
            }))
        );
        let back = stored.map(serde_json::from_value::<QueuedCommand>);
        assert!(matches!(back, Some(Ok(c)) if c == full));
    }

    #[test]
    fn unknown_keys_are_refused_not_dropped() {
        for bad in [json!({"updates": {}}), json!({"goto": [{"edge": "a"}]})] {
            assert!(
                serde_json::from_value::<QueuedCommand>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn only_a_bare_resume_is_resume_only() {
        assert!(QueuedCommand::resume(Resume::value(1)).is_resume_only());
        let routed = QueuedCommand::resume(Resume::value(1)).with_goto(QueuedGoto::node("a"));
        assert!(!routed.is_resume_only());
        assert!(!QueuedCommand::default().is_resume_only());
    }
}
