//! Pending writes: what a failed or interrupted step keeps of its tasks (outputs, errors,
//! interrupts, resume values) so that they do not run again, and the stored form of a task's
//! output.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use stategraph_checkpoints::{PendingWrite, TaskId, WriteKind};

use super::config::Durability;
use super::execute::TaskResult;
use super::plan::{PlannedTask, TaskTrigger};
use super::superstep::RunLoop;
use crate::command::{Goto, SendTo};
use crate::graph::TaskOutput;
use crate::{Interrupt, RunError, State};

/// The node name recorded for a resuming command's update.
pub(crate) const INPUT_NODE: &str = "__input__";

/// The node name recorded for an error applying a step.
pub(super) const APPLY_NODE: &str = "__apply__";

/// The task id under which a resuming command's update is recorded.
pub(crate) fn input_task() -> TaskId {
    TaskId::derive(&[b"input"])
}

/// The task id under which an error applying step `step` is recorded.
pub(super) fn apply_error_task(step: i64) -> TaskId {
    TaskId::derive(&[b"apply", &step.to_le_bytes()])
}

/// The stored form of a task's output, as written: `{"updates": [...], "goto": [...]}`.
#[derive(Serialize)]
struct OutputRecordRef<'a, U> {
    updates: &'a [U],
    goto: Vec<GotoRecordRef<'a>>,
    /// Present only in an error handler's output (see [`crate::HandledFailure`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    handled: Option<&'a crate::HandledFailure>,
}

/// One route of a stored output, as written: `{"node": n}`, `{"send": n, "arg": v}`, or, for
/// a `Send` whose argument could not be serialized, `{"send": n, "arg_error": e}` (so a reuse
/// fails the same way).
#[derive(Serialize)]
#[serde(untagged)]
enum GotoRecordRef<'a> {
    Node {
        node: &'a str,
    },
    Sent {
        send: &'a str,
        arg: &'a serde_json::Value,
    },
    SendFailed {
        send: &'a str,
        arg_error: &'a str,
    },
}

impl<'a> From<&'a Goto> for GotoRecordRef<'a> {
    fn from(goto: &'a Goto) -> Self {
        match goto {
            Goto::Node(node) => GotoRecordRef::Node { node },
            Goto::Send(s) => match &s.arg {
                Ok(arg) => GotoRecordRef::Sent { send: &s.node, arg },
                Err(e) => GotoRecordRef::SendFailed {
                    send: &s.node,
                    arg_error: e,
                },
            },
        }
    }
}

/// A stored output, as read back.
#[derive(Deserialize)]
#[serde(bound = "U: DeserializeOwned")]
struct OutputRecord<U> {
    updates: Vec<U>,
    /// Missing, or not a list: no routes.
    #[serde(default, deserialize_with = "goto_list")]
    goto: Vec<GotoRecord>,
    /// The failure an error handler took over (absent in other outputs).
    #[serde(default)]
    handled: Option<crate::HandledFailure>,
}

/// One route of a stored output, as read back; the first form that fits wins: a string
/// `node`, then a string `send` with a string `arg_error`, then a string `send` (with its
/// `arg`, `null` if missing).
#[derive(Deserialize)]
#[serde(untagged)]
enum GotoRecord {
    Node {
        node: String,
    },
    SendFailed {
        send: String,
        arg_error: String,
    },
    Sent {
        send: String,
        #[serde(default)]
        arg: serde_json::Value,
    },
}

/// The routes of a stored output: a list of route objects, anything else meaning none.
fn goto_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<GotoRecord>, D::Error> {
    let serde_json::Value::Array(items) = serde_json::Value::deserialize(d)? else {
        return Ok(Vec::new());
    };
    items
        .into_iter()
        .map(|item| {
            let shown = item.to_string();
            match item.is_object() {
                true => GotoRecord::deserialize(item).ok(),
                false => None,
            }
            .ok_or_else(|| D::Error::custom(format!("unreadable goto record {shown}")))
        })
        .collect()
}

impl From<GotoRecord> for Goto {
    fn from(record: GotoRecord) -> Self {
        match record {
            GotoRecord::Node { node } => Goto::Node(node),
            GotoRecord::Sent { send, arg } => Goto::Send(SendTo {
                node: send,
                arg: Ok(arg),
            }),
            GotoRecord::SendFailed { send, arg_error } => Goto::Send(SendTo {
                node: send,
                arg: Err(arg_error),
            }),
        }
    }
}

/// The stored form of a task's output: its updates and routing.
pub(super) fn output_to_json<S: State>(out: &TaskOutput<S>) -> Result<serde_json::Value, RunError> {
    let record = OutputRecordRef {
        updates: &out.updates,
        goto: out.goto.iter().map(GotoRecordRef::from).collect(),
        handled: out.handled.as_deref(),
    };
    serde_json::to_value(record).map_err(|source| RunError::Encode {
        field: "task output",
        source,
    })
}

/// A task's output read back from its stored form (commands for a parent graph are never
/// stored: they end the level's run instead).
pub(super) fn output_from_json<S: State>(
    v: &serde_json::Value,
) -> Result<TaskOutput<S>, serde_json::Error> {
    let record = OutputRecord::<S::Update>::deserialize(v)?;
    Ok(TaskOutput {
        updates: record.updates,
        goto: record.goto.into_iter().map(Goto::from).collect(),
        parents: Vec::new(),
        handled: record.handled.map(Box::new),
    })
}

impl<S: State> RunLoop<S> {
    /// Whether failed or interrupted steps keep pending writes (a stored thread, and a
    /// durability that stores before the end of the run).
    pub(super) fn keeps_pending(&self) -> bool {
        self.level.saver.is_some()
            && self.shared.thread.is_some()
            && self.shared.durability != Durability::Exit
    }

    /// The pending write task `t`'s output becomes (recorded as it finishes, or when its
    /// step fails, pauses or cannot be applied).
    pub(super) fn output_write(
        &self,
        t: &PlannedTask,
        out: &TaskOutput<S>,
    ) -> Result<PendingWrite, RunError> {
        Ok(PendingWrite {
            task_id: t.id,
            node: self.node_name(t).to_string(),
            kind: WriteKind::Output(output_to_json(out)?),
        })
    }

    /// The pending writes a failed or interrupted step leaves, and its interrupts.
    pub(super) fn pending_writes_of(
        &self,
        tasks: &[PlannedTask],
        results: &[Option<TaskResult<S>>],
    ) -> Result<(Vec<PendingWrite>, Vec<Interrupt>), RunError> {
        let mut writes = Vec::new();
        let mut interrupts = Vec::new();
        for (t, r) in tasks.iter().zip(results) {
            let node = self.node_name(t).to_string();
            let task_id = t.id;
            let resumes = match r {
                Some(TaskResult::Done(out)) if t.trigger != TaskTrigger::Start => {
                    writes.push(self.output_write(t, out)?);
                    continue;
                }
                Some(TaskResult::Failed { error, resumes }) => {
                    writes.push(PendingWrite {
                        task_id,
                        node: node.clone(),
                        kind: WriteKind::Error(error.to_string()),
                    });
                    resumes
                }
                Some(TaskResult::Interrupted {
                    interrupts: list,
                    resumes,
                }) => {
                    writes.extend(list.iter().map(|i| PendingWrite {
                        task_id,
                        node: i.node.clone(),
                        kind: WriteKind::Interrupt {
                            id: i.id.clone(),
                            value: i.value.clone(),
                        },
                    }));
                    interrupts.extend(list.iter().cloned());
                    resumes
                }
                _ => continue,
            };
            if !resumes.is_empty() {
                writes.push(PendingWrite {
                    task_id,
                    node,
                    kind: WriteKind::Resume(resumes.clone()),
                });
            }
        }
        // A resuming command's update and routing, and the answers finished tasks consumed,
        // stay pending until the step commits.
        writes.extend(self.input_writes.iter().cloned());
        writes.extend(self.answers_write());
        Ok((writes, interrupts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(crate::State, Clone, Default, Debug, PartialEq)]
    struct Counter {
        n: u32,
        #[reduce(append)]
        log: Vec<String>,
    }

    type Error = Box<dyn std::error::Error>;

    fn sample() -> TaskOutput<Counter> {
        TaskOutput {
            updates: vec![Counter::update().n(3).log(vec!["a".to_owned()])],
            goto: vec![
                Goto::Node("next".to_owned()),
                Goto::Send(SendTo::new("worker", 7_u32)),
                Goto::Send(SendTo {
                    node: "worker".to_owned(),
                    arg: Err("no JSON".to_owned()),
                }),
            ],
            parents: Vec::new(),
            handled: None,
        }
    }

    #[test]
    fn the_stored_form_is_pinned() -> Result<(), Error> {
        let stored = output_to_json(&sample())?;
        let updates = serde_json::to_value(&sample().updates)?;
        let expected = serde_json::json!({
            "updates": updates,
            "goto": [
                {"node": "next"},
                {"send": "worker", "arg": 7},
                {"send": "worker", "arg_error": "no JSON"},
            ],
        });
        assert_eq!(stored, expected);
        assert_eq!(
            serde_json::to_string(&stored)?,
            format!(
                r#"{{"goto":[{{"node":"next"}},{{"arg":7,"send":"worker"}},{{"arg_error":"no JSON","send":"worker"}}],"updates":{}}}"#,
                serde_json::to_string(&updates)?
            )
        );
        Ok(())
    }

    #[test]
    fn a_stored_output_reads_back() -> Result<(), Error> {
        let out = output_from_json::<Counter>(&output_to_json(&sample())?)?;
        assert_eq!(out.goto, sample().goto);
        assert_eq!(
            serde_json::to_value(&out.updates)?,
            serde_json::to_value(&sample().updates)?
        );
        assert!(out.parents.is_empty());
        Ok(())
    }

    #[test]
    fn a_handlers_output_keeps_its_failure_record_and_others_write_none() -> Result<(), Error> {
        let plain = output_to_json(&sample())?;
        assert!(plain.get("handled").is_none(), "{plain}");
        let record: crate::HandledFailure = serde_json::from_value(serde_json::json!({
            "node": "fetch", "step": 1, "task": "t", "attempts": 2,
            "kind": {"timeout": "idle"}, "error": "slow",
        }))?;
        let handled = TaskOutput {
            handled: Some(Box::new(record.clone())),
            ..sample()
        };
        let back = output_from_json::<Counter>(&output_to_json(&handled)?)?;
        assert_eq!(back.handled.as_deref(), Some(&record));
        Ok(())
    }

    #[test]
    fn lenient_and_strict_forms_read_as_before() -> Result<(), Error> {
        // No goto, a goto that is not a list, a send without arg, a node beside a send.
        let out = output_from_json::<Counter>(&serde_json::json!({"updates": []}))?;
        assert!(out.goto.is_empty() && out.updates.is_empty());
        let out = output_from_json::<Counter>(&serde_json::json!({"updates": [], "goto": "x"}))?;
        assert!(out.goto.is_empty());
        let out = output_from_json::<Counter>(&serde_json::json!({
            "updates": [],
            "goto": [{"send": "w"}, {"node": "a", "send": "b"}, {"send": "w", "arg_error": 5, "arg": 1}],
        }))?;
        assert_eq!(
            out.goto,
            vec![
                Goto::Send(SendTo {
                    node: "w".to_owned(),
                    arg: Ok(serde_json::Value::Null)
                }),
                Goto::Node("a".to_owned()),
                Goto::Send(SendTo {
                    node: "w".to_owned(),
                    arg: Ok(serde_json::json!(1))
                }),
            ]
        );
        // Unreadable: no updates, a route of neither form, a route that is not an object.
        assert!(output_from_json::<Counter>(&serde_json::json!({"goto": []})).is_err());
        let bad = serde_json::json!({"updates": [], "goto": [{"node": 5}]});
        let e = output_from_json::<Counter>(&bad).err().ok_or("accepted")?;
        assert!(e.to_string().contains("unreadable goto record"), "{e}");
        let bad = serde_json::json!({"updates": [], "goto": [["a"]]});
        assert!(output_from_json::<Counter>(&bad).is_err());
        Ok(())
    }
}
