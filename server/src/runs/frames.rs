//! The stream modes a run was asked for, and the engine's events as the frames LangGraph's
//! clients parse: `values`, `updates`, `custom`, `tasks`, `checkpoints`, `debug`, and the
//! messages (`super::messages`), each named `mode|ns` for a subgraph's events.

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use stategraph::{Event, EventKind, StreamMode, TaskStatus};

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
        mode.values = self.values || self.debug;
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
        Framer {
            modes: self,
            thread: thread.to_owned(),
            last_values: HashMap::new(),
            messages: MessageFramer::new(self.messages, metadata),
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
            EventKind::TaskStart { node, task } => {
                let payload = json!({
                    "id": task.to_string(), "name": node.as_ref(), "input": null, "triggers": [],
                });
                m.task_frame(&name, ev.step, "task", payload, out);
            }
            // LangGraph sends no task result for a task taken from the node cache.
            EventKind::TaskEnd {
                status: TaskStatus::Cached,
                ..
            } => {}
            EventKind::TaskEnd { node, task, status } => {
                let error = match status {
                    TaskStatus::Failed(msg) => json!(msg),
                    _ => Value::Null,
                };
                let payload = json!({
                    "id": task.to_string(), "name": node.as_ref(), "error": error,
                    "result": [], "interrupts": [],
                });
                m.task_frame(&name, ev.step, "task_result", payload, out);
            }
            EventKind::Checkpoint { id, source } if m.checkpoints => {
                let payload = json!({
                    "config": config(thread, &ev.ns.to_string(), Some(&id.to_string())),
                    "metadata": { "source": source.as_str(), "step": ev.step },
                });
                out.push((name("checkpoints"), payload));
            }
            EventKind::Interrupt(list) => self.interrupt_frames(ev, list, &name, out),
            _ => {}
        }
    }

    /// A step's values: `values` (and `debug`'s checkpoint); kept for an interrupt's frame.
    fn values_frames(
        &mut self,
        ev: &Event,
        data: Result<Value, stategraph::RunError>,
        name: &dyn Fn(&str) -> String,
        out: &mut Vec<(String, Value)>,
    ) {
        let data = data.unwrap_or(Value::Null);
        let ns = ev.ns.to_string();
        if self.modes.debug {
            let payload = json!({ "values": data, "config": config(&self.thread, &ns, None) });
            out.push((name("debug"), debug(ev.step, "checkpoint", payload)));
        }
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
        if self.debug {
            out.push((name("debug"), debug(step, kind, payload.clone())));
        }
        if self.tasks {
            out.push((name("tasks"), payload));
        }
    }
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
