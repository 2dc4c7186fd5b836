//! The answers a step took: the resume values each finished task consumed, known by the task
//! that asked (its interrupt id). They are recorded with the step's checkpoint when the step
//! commits (the `resumed` metadata a replay gives again), and kept as a pending write while the
//! step pauses or fails before it commits, so that the answers of a task that finished in an
//! earlier resume of the step are not lost.

use stategraph_checkpoints::sync::Unpoisoned;
use stategraph_checkpoints::{PendingWrite, TaskId, WriteKind};

use super::superstep::RunLoop;
use crate::State;

/// The node name under which an unfinished step's answers are kept pending.
pub(super) const ANSWERS_NODE: &str = "__answers__";

/// The task id under which an unfinished step's answers are kept pending.
pub(super) fn answers_task() -> TaskId {
    TaskId::derive(&[b"answers"])
}

/// The resume values one finished task consumed, and which task it was.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaskAnswers {
    /// The task's node.
    pub(crate) node: String,
    /// The id of the task's interrupts: what identifies the task to a resume.
    pub(crate) interrupt: String,
    /// The values its `interrupt` calls received, in order.
    pub(crate) values: Vec<serde_json::Value>,
}

impl TaskAnswers {
    /// The stored form: `{"node": n, "id": interrupt id, "values": [...]}`.
    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "node": self.node, "id": self.interrupt, "values": self.values })
    }

    /// An entry read back from its stored form; `None` if it is not one.
    fn from_json(v: &serde_json::Value) -> Option<Self> {
        Some(TaskAnswers {
            node: v.get("node")?.as_str()?.to_owned(),
            interrupt: v.get("id")?.as_str()?.to_owned(),
            values: v.get("values")?.as_array()?.clone(),
        })
    }
}

/// Add `entry` to `answers`, in place of what the same task had consumed before.
pub(super) fn note(answers: &mut Vec<TaskAnswers>, entry: TaskAnswers) {
    answers.retain(|a| a.interrupt != entry.interrupt);
    answers.push(entry);
}

impl<S: State> RunLoop<S> {
    /// The pending write that keeps the answers of the root's step while it pauses or fails
    /// (`None` at a subgraph level, or with no answers).
    pub(super) fn answers_write(&self) -> Option<PendingWrite> {
        if !self.level.is_root {
            return None;
        }
        let answers = self.shared.answers.lock().unpoisoned();
        if answers.is_empty() {
            return None;
        }
        Some(PendingWrite {
            task_id: answers_task(),
            node: ANSWERS_NODE.to_owned(),
            kind: WriteKind::Resume(answers.iter().map(TaskAnswers::to_json).collect()),
        })
    }

    /// Take back the answers an earlier attempt of the root's step kept pending (tasks that
    /// run again record theirs afresh). Entries that are not answers are skipped.
    pub(super) fn restore_answers(&self) {
        if !self.level.is_root {
            return;
        }
        let mut answers = self.shared.answers.lock().unpoisoned();
        for w in self.pending.iter().filter(|w| w.task_id == answers_task()) {
            if let WriteKind::Resume(values) = &w.kind {
                for entry in values.iter().filter_map(TaskAnswers::from_json) {
                    if !answers.iter().any(|a| a.interrupt == entry.interrupt) {
                        answers.push(entry);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_from_its_stored_form_and_others_are_skipped() {
        let entry = TaskAnswers {
            node: "worker".to_owned(),
            interrupt: "abc".to_owned(),
            values: vec![serde_json::json!("yes"), serde_json::json!(2)],
        };
        let stored = entry.to_json();
        assert_eq!(
            stored,
            serde_json::json!({"node": "worker", "id": "abc", "values": ["yes", 2]})
        );
        assert_eq!(TaskAnswers::from_json(&stored), Some(entry));
        assert_eq!(TaskAnswers::from_json(&serde_json::json!("yes")), None);
        assert_eq!(
            TaskAnswers::from_json(&serde_json::json!({"node": "w", "values": []})),
            None
        );
    }

    #[test]
    fn a_task_noted_again_replaces_its_earlier_answers() {
        let entry = |id: &str, v: u32| TaskAnswers {
            node: "w".to_owned(),
            interrupt: id.to_owned(),
            values: vec![serde_json::json!(v)],
        };
        let mut answers = vec![entry("a", 1), entry("b", 2)];
        note(&mut answers, entry("a", 3));
        assert_eq!(answers, vec![entry("b", 2), entry("a", 3)]);
    }
}
