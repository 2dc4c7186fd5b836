//! The stream modes a run was asked for, and the engine's events as the frames LangGraph's
//! clients parse: `values`, `updates`, `custom`, `tasks`, `checkpoints`, `debug`, and the
//! messages (`super::messages`), each named `mode|ns` for a subgraph's events.

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use stategraph::checkpoints::{CheckpointId, Namespace};
use stategraph::{CheckpointEvent, Event, EventKind, StreamMode, TaskStatus, TaskTrigger};

use crate::error::{ApiError, ApiResult};
use crate::graph::interrupt_json;
use crate::ids::{now_ms, rfc3339};
use crate::runs::messages::{MessageEvent, MessageFramer, MessageModes};

/// The modes a run streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Modes {
    pub(crate) values: bool,
    pub(crate) updates: bool,
    pub(crate) custom: bool,
    pub(crate) tasks: bool,
    pub(crate) checkpoints: bool,
    pub(crate) debug: bool,
    pub(crate) messages: MessageModes,
    pub(crate) subgraphs: bool,
}

impl Modes {
    /// Parse `stream_mode` (default `values`); `events` is refused.
    pub(crate) fn parse(names: &[String], subgraphs: bool) -> ApiResult<Modes> {
        let mut m = Modes {
            subgraphs,
            ..Modes::default()
        };
        if names.is_empty() {
            m.values = true;
        }
        for name in names {
            match name.as_str() {
                "values" => m.values = true,
                "updates" => m.updates = true,
                "custom" => m.custom = true,
                "tasks" => m.tasks = true,
                "checkpoints" => m.checkpoints = true,
                "debug" => m.debug = true,
                "messages" => m.messages.whole = true,
                "messages-tuple" => m.messages.tuple = true,
                other => {
                    return Err(ApiError::Invalid(format!(
                        "stream_mode {other:?}: expected values, updates, custom, tasks, \
                         checkpoints, debug, messages or messages-tuple"
                    )))
                }
            }
        }
        Ok(m)
    }

    /// What the engine must emit for these modes.
    pub(crate) fn engine(self) -> StreamMode {
        let mut mode = StreamMode::none();
        mode.values = self.values;
        mode.updates = self.updates;
        mode.custom = self.custom;
        mode.messages = self.messages.any();
        mode.tasks = self.tasks || self.debug;
        mode.checkpoints = self.checkpoints || self.debug;
        mode.subgraphs = self.subgraphs;
        mode
    }

    /// A framer of one run's events; `metadata` is the run's, which each message's
    /// metadata starts from.
    pub(crate) fn framer(self, thread: &str, metadata: Map<String, Value>) -> Framer {
        let run_metadata = if self.tasks || self.debug {
            Value::Object(metadata.clone())
        } else {
            Value::Null
        };
        Framer {
            modes: self,
            thread: thread.to_owned(),
            last_values: HashMap::new(),
            messages: MessageFramer::new(self.messages, metadata),
            run_metadata,
        }
    }
}

/// Turns one run's events into frames; keeps each graph level's last values, which an
/// interrupt's `values` frame carries along with `__interrupt__` (as LangGraph's does).
#[derive(Debug)]
pub(crate) struct Framer {
    modes: Modes,
    thread: String,
    last_values: HashMap<String, Value>,
    messages: MessageFramer,
    /// The run's metadata, which a task's `tasks`/`debug` frame carries (null otherwise).
    run_metadata: Value,
}

impl Framer {
    /// The frames one engine event becomes, pushed as `(event name, data)`.
    pub(crate) fn frames(&mut self, ev: &Event, out: &mut Vec<(String, Value)>) {
        let thread = self.thread.as_str();
        let m = self.modes;
        let suffix = if ev.ns.is_root() {
            String::new()
        } else {
            format!("|{}", ev.ns)
        };
        let name = |mode: &str| format!("{mode}{suffix}");
        match &ev.kind {
            EventKind::Values(v) => self.values_frames(ev, v.to_json(), &name, out),
            EventKind::Updates {
                node,
                update,
                cached,
            } => {
                let data = update.to_json().unwrap_or(Value::Null);
                let mut frame = json!({ node.as_ref(): data });
                if *cached {
                    // LangGraph's marker of an update taken from the node cache.
                    frame["__metadata__"] = json!({ "cached": true });
                }
                out.push((name("updates"), frame));
            }
            EventKind::Custom { payload, .. } => out.push((name("custom"), payload.clone())),
            EventKind::Messages {
                node,
                task,
                part,
                message,
            } => {
                let event = MessageEvent {
                    ev,
                    node,
                    task: *task,
                    part: *part,
                    message,
                };
                self.messages.frames(event, &name, out);
            }
            EventKind::TaskStart {
                node,
                task,
                trigger,
                input,
            } => {
                let payload = json!({
                    "id": task.to_string(), "name": node.as_ref(),
                    "input": input.to_json().unwrap_or(Value::Null),
                    "triggers": [trigger_name(*trigger, node)],
                    "metadata": self.run_metadata,
                });
                m.task_frame(&name, ev.step, "task", payload, out);
            }
            // A task whose writes were reused or taken from the node cache did not run:
            // LangGraph reports no result.
            EventKind::TaskEnd {
                status: TaskStatus::Reused | TaskStatus::Cached,
                ..
            } => {}
            EventKind::TaskEnd {
                node,
                task,
                status,
                updates,
                interrupts,
            } => {
                // LangGraph's server sends the exception's class and text.
                let error = match status {
                    TaskStatus::Failed(msg) => json!({ "error": "NodeError", "message": msg }),
                    _ => Value::Null,
                };
                let payload = json!({
                    "id": task.to_string(), "name": node.as_ref(), "error": error,
                    "result": merged(updates),
                    "interrupts": interrupts.iter().map(interrupt_json).collect::<Vec<_>>(),
                });
                m.task_frame(&name, ev.step, "task_result", payload, out);
            }
            EventKind::Checkpoint(cp) if m.checkpoints || m.debug => {
                let payload = checkpoint_payload(thread, &ev.ns, ev.step, cp);
                // LangGraph's order: `checkpoints`, then `debug`.
                if m.checkpoints {
                    out.push((name("checkpoints"), payload.clone()));
                }
                if m.debug {
                    // The debug form names the checkpoint and its parent once more, flat.
                    let mut full = payload.clone();
                    let ns = ev.ns.to_string();
                    full["checkpoint"] = flat_config(thread, &ns, Some(cp.id));
                    full["parent_checkpoint"] = match cp.parent {
                        Some(p) => flat_config(thread, &ns, Some(p)),
                        None => Value::Null,
                    };
                    out.push((name("debug"), debug(ev.step, "checkpoint", full)));
                }
            }
            EventKind::Interrupt(list) => self.interrupt_frames(ev, list, &name, out),
            _ => {}
        }
    }

    /// A step's values: `values`; kept for an interrupt's frame.
    fn values_frames(
        &mut self,
        ev: &Event,
        data: Result<Value, stategraph::RunError>,
        name: &dyn Fn(&str) -> String,
        out: &mut Vec<(String, Value)>,
    ) {
        let data = data.unwrap_or(Value::Null);
        let ns = ev.ns.to_string();
        if self.modes.values {
            out.push((name("values"), data.clone()));
        }
        self.last_values.insert(ns, data);
    }

    /// A pause on interrupts: `updates` `{"__interrupt__": …}` when updates stream, else
    /// `values` with the state and `__interrupt__`. A static pause (`before:`/`after:`) is
    /// no task's interrupt and makes no frame.
    fn interrupt_frames(
        &self,
        ev: &Event,
        list: &[stategraph::Interrupt],
        name: &dyn Fn(&str) -> String,
        out: &mut Vec<(String, Value)>,
    ) {
        let list: Vec<Value> = list
            .iter()
            .filter(|i| !stategraph::run::is_static_interrupt(&i.id))
            .map(interrupt_json)
            .collect();
        if list.is_empty() {
            return;
        }
        if self.modes.updates {
            out.push((name("updates"), json!({ "__interrupt__": list })));
        } else if self.modes.values {
            let mut data = match self.last_values.get(&ev.ns.to_string()) {
                Some(Value::Object(v)) => v.clone(),
                _ => serde_json::Map::new(),
            };
            data.insert("__interrupt__".to_owned(), Value::Array(list));
            out.push((name("values"), Value::Object(data)));
        }
    }
}

impl Modes {
    fn task_frame(
        self,
        name: &dyn Fn(&str) -> String,
        step: i64,
        kind: &str,
        payload: Value,
        out: &mut Vec<(String, Value)>,
    ) {
        // LangGraph's order: `tasks`, then `debug`.
        if self.tasks {
            out.push((name("tasks"), payload.clone()));
        }
        if self.debug {
            out.push((name("debug"), debug(step, kind, payload)));
        }
    }
}

/// A checkpoint as LangGraph's `checkpoints` payload (and `debug`'s checkpoint payload).
fn checkpoint_payload(thread: &str, ns: &Namespace, step: i64, cp: &CheckpointEvent) -> Value {
    let ns_text = ns.to_string();
    let mut metadata: Map<String, Value> = cp
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.insert("source".to_owned(), json!(cp.source.as_str()));
    metadata.insert("step".to_owned(), json!(step));
    metadata.entry("parents").or_insert_with(|| json!({}));
    let tasks: Vec<Value> = cp
        .next
        .iter()
        .map(|t| {
            let state = if t.subgraph {
                let child = ns.child(&format!("{}:{}", t.node, t.id));
                config(thread, child.as_str(), None)
            } else {
                Value::Null
            };
            let mut task = json!({
                "id": t.id.to_string(), "name": t.node.as_ref(),
                "interrupts": t.interrupts.iter().map(interrupt_json).collect::<Vec<_>>(),
                "state": state,
            });
            if !t.updates.is_empty() {
                task["result"] = merged(&t.updates);
            }
            if let Some(error) = &t.error {
                task["error"] = json!(error);
            }
            task
        })
        .collect();
    json!({
        "config": config(thread, &ns_text, Some(&cp.id.to_string())),
        "parent_config": cp.parent.map(|p| config(thread, &ns_text, Some(&p.to_string()))),
        "values": cp.values.to_json().unwrap_or(Value::Null),
        "metadata": metadata,
        "next": cp.next.iter().map(|t| t.node.as_ref()).collect::<Vec<_>>(),
        "tasks": tasks,
    })
}

/// A task's updates as one result object: later writes of a field win, as they merge.
fn merged(updates: &[stategraph::Shared]) -> Value {
    let mut result = Map::new();
    for u in updates {
        if let Ok(Value::Object(fields)) = u.to_json() {
            result.extend(fields);
        }
    }
    Value::Object(result)
}

/// LangGraph's name for what scheduled a task.
fn trigger_name(trigger: TaskTrigger, node: &str) -> String {
    match trigger {
        TaskTrigger::Start => "__start__".to_owned(),
        TaskTrigger::Sent(_) => "__pregel_push".to_owned(),
        _ => format!("branch:to:{node}"),
    }
}

fn flat_config(thread: &str, ns: &str, checkpoint: Option<CheckpointId>) -> Value {
    json!({
        "checkpoint_id": checkpoint.map(|c| c.to_string()),
        "thread_id": thread,
        "checkpoint_ns": ns,
    })
}

fn config(thread: &str, ns: &str, checkpoint: Option<&str>) -> Value {
    json!({ "configurable": {
        "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint,
    }})
}

fn debug(step: i64, kind: &str, payload: Value) -> Value {
    json!({ "step": step, "timestamp": rfc3339(now_ms()), "type": kind, "payload": payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_mode_means_values_and_an_unknown_mode_is_refused() {
        let m = Modes::parse(&[], false).ok();
        assert_eq!(m.map(|m| m.values), Some(true));
        let bad = Modes::parse(&["everything".to_owned()], false);
        assert!(matches!(bad, Err(ApiError::Invalid(msg)) if msg.contains("everything")));
    }

    #[test]
    fn a_cached_update_carries_langgraphs_marker_and_no_task_result() -> ApiResult<()> {
        let modes = Modes::parse(&["updates".to_owned(), "tasks".to_owned()], false)?;
        let mut framer = modes.framer("t", Map::new());
        let event = |kind| stategraph::Event {
            ns: stategraph::checkpoints::Namespace::root(),
            step: 1,
            kind,
        };
        let mut out = Vec::new();
        let update = |cached| EventKind::Updates {
            node: "double".into(),
            update: stategraph::Shared::new(json!({"n": 2})),
            cached,
        };
        framer.frames(&event(update(true)), &mut out);
        framer.frames(&event(update(false)), &mut out);
        let end = EventKind::TaskEnd {
            node: "double".into(),
            task: stategraph::checkpoints::TaskId::derive(&[b"t"]),
            status: TaskStatus::Cached,
            updates: vec![stategraph::Shared::new(json!({"n": 2}))],
            interrupts: Vec::new(),
        };
        framer.frames(&event(end), &mut out);
        assert_eq!(
            out,
            [
                (
                    "updates".to_owned(),
                    json!({"double": {"n": 2}, "__metadata__": {"cached": true}})
                ),
                ("updates".to_owned(), json!({"double": {"n": 2}})),
            ]
        );
        Ok(())
    }
}
