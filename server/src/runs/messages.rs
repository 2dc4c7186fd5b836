//! The `messages` events of a run as LangGraph's clients read them.
//!
//! - `messages-tuple`: each chunk, and each whole message that was not streamed, as
//!   `event: messages` with data `[message, metadata]` (what `useStream` asks for). The whole
//!   message that ends a streamed one is not sent again: a client joins the chunks.
//! - `messages`: per message, `messages/metadata` `{id: {"metadata": …}}` the first time it
//!   is seen, then `messages/partial` `[the message so far]` for each chunk, and
//!   `messages/complete` `[the message]` at its end.

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use stategraph::checkpoints::TaskId;
use stategraph::{Event, MessagePart, Shared};

/// Which of the two forms a run streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MessageModes {
    /// `messages-tuple`.
    pub(crate) tuple: bool,
    /// `messages`.
    pub(crate) whole: bool,
}

impl MessageModes {
    pub(crate) fn any(self) -> bool {
        self.tuple || self.whole
    }
}

/// One `messages` event, as the framer passes it on.
pub(crate) struct MessageEvent<'a> {
    pub(crate) ev: &'a Event,
    pub(crate) node: &'a str,
    pub(crate) task: TaskId,
    pub(crate) part: MessagePart,
    pub(crate) message: &'a Shared,
}

/// A run's messages framing: the run's own metadata, and each message streamed so far
/// (for `messages/partial`).
#[derive(Debug, Default)]
pub(crate) struct MessageFramer {
    modes: MessageModes,
    base: Map<String, Value>,
    partial: HashMap<String, Value>,
}

impl MessageFramer {
    /// A framer for `modes`; `base` is the metadata every message's metadata starts from
    /// (the run's: thread, run, assistant and graph ids, the client's metadata).
    pub(crate) fn new(modes: MessageModes, base: Map<String, Value>) -> Self {
        MessageFramer {
            modes,
            base,
            partial: HashMap::new(),
        }
    }

    /// The frames of one message event, pushed as `(event name, data)`.
    pub(crate) fn frames(
        &mut self,
        m: MessageEvent<'_>,
        name: &dyn Fn(&str) -> String,
        out: &mut Vec<(String, Value)>,
    ) {
        if !self.modes.any() {
            return;
        }
        let message = m.message.to_json().unwrap_or(Value::Null);
        let metadata = self.metadata(&m, &message);
        if self.modes.tuple && m.part != MessagePart::End {
            out.push((name("messages"), json!([message, metadata])));
        }
        if !self.modes.whole {
            return;
        }
        let id = message
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let seen = self.partial.contains_key(&id);
        if !seen && m.part != MessagePart::End {
            out.push((
                name("messages/metadata"),
                json!({ id.as_str(): { "metadata": metadata } }),
            ));
        }
        match m.part {
            MessagePart::Chunk => {
                let so_far = self.partial.entry(id).or_insert_with(|| json!({}));
                add_chunk(so_far, &message);
                out.push((name("messages/partial"), json!([as_message(so_far)])));
            }
            MessagePart::End | MessagePart::Whole => {
                self.partial.remove(&id);
                out.push((name("messages/complete"), json!([message])));
            }
        }
    }

    /// A message's metadata, as LangGraph's: the run's, then the node, step, namespace and
    /// task it came from.
    fn metadata(&self, m: &MessageEvent<'_>, message: &Value) -> Value {
        let mut meta = self.base.clone();
        let ns = m.ev.ns.to_string();
        let task_ns = if ns.is_empty() {
            format!("{}:{}", m.node, m.task)
        } else {
            format!("{ns}|{}:{}", m.node, m.task)
        };
        meta.insert("langgraph_node".into(), json!(m.node));
        meta.insert("langgraph_step".into(), json!(m.ev.step));
        meta.insert(
            "langgraph_triggers".into(),
            json!([format!("branch:to:{}", m.node)]),
        );
        meta.insert("langgraph_path".into(), json!(["__pregel_pull", m.node]));
        meta.insert("langgraph_checkpoint_ns".into(), json!(task_ns));
        meta.insert("checkpoint_ns".into(), json!(task_ns));
        meta.insert("langgraph_task_id".into(), json!(m.task.to_string()));
        if let Some(model) = message.pointer("/response_metadata/model_name").cloned() {
            meta.insert("ls_model_name".into(), model);
        }
        Value::Object(meta)
    }
}

/// Add `chunk` (an `AIMessageChunk` dict) to the message so far: text appended, tool-call
/// fragments gathered by index, the rest of its fields taken as they come.
fn add_chunk(so_far: &mut Value, chunk: &Value) {
    let (Value::Object(acc), Value::Object(chunk)) = (so_far, chunk) else {
        return;
    };
    for (key, value) in chunk {
        match key.as_str() {
            "content" => {
                let text = acc.entry("content").or_insert_with(|| json!(""));
                if let (Value::String(t), Some(more)) = (text, value.as_str()) {
                    t.push_str(more);
                }
            }
            "tool_call_chunks" => {
                let calls = acc.entry("tool_call_chunks").or_insert_with(|| json!([]));
                if let (Value::Array(calls), Value::Array(more)) = (calls, value) {
                    more.iter().for_each(|c| add_call_chunk(calls, c));
                }
            }
            _ => {
                acc.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Merge one tool-call fragment into the calls so far, by its index.
fn add_call_chunk(calls: &mut Vec<Value>, fragment: &Value) {
    let index = fragment.get("index").and_then(Value::as_u64);
    let found = calls
        .iter_mut()
        .find(|c| index.is_some() && c.get("index").and_then(Value::as_u64) == index);
    let Some(Value::Object(call)) = found else {
        calls.push(fragment.clone());
        return;
    };
    for key in ["id", "name"] {
        if let Some(v) = fragment.get(key).filter(|v| !v.is_null()) {
            call.insert(key.to_owned(), v.clone());
        }
    }
    let more = fragment
        .get("args")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(Value::String(args)) = call.get_mut("args") {
        args.push_str(more);
    }
}

/// The message a chunk so far stands for: an `ai` message whose tool calls are the
/// fragments whose arguments parse so far.
fn as_message(so_far: &Value) -> Value {
    let mut message = so_far.clone();
    if let Value::Object(m) = &mut message {
        m.insert("type".into(), json!("ai"));
        m.remove("chunk_position");
        let calls: Vec<Value> = m
            .get("tool_call_chunks")
            .and_then(Value::as_array)
            .map(|chunks| {
                chunks
                    .iter()
                    .map(|c| {
                        let args = c.get("args").and_then(Value::as_str).unwrap_or_default();
                        json!({
                            "name": c.get("name").cloned().unwrap_or(Value::Null),
                            "args": serde_json::from_str::<Value>(args).unwrap_or(json!({})),
                            "id": c.get("id").cloned().unwrap_or(Value::Null),
                            "type": "tool_call",
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_add_up_to_the_message_so_far() {
        let mut acc = json!({});
        add_chunk(
            &mut acc,
            &json!({"type": "AIMessageChunk", "id": "m", "content": "Hel", "tool_call_chunks": [
                {"type": "tool_call_chunk", "index": 0, "id": "c1", "name": "search", "args": "{\"q\":"}
            ]}),
        );
        add_chunk(
            &mut acc,
            &json!({"type": "AIMessageChunk", "id": "m", "content": "lo", "tool_call_chunks": [
                {"type": "tool_call_chunk", "index": 0, "id": null, "name": null, "args": "\"x\"}"}
            ]}),
        );
        let message = as_message(&acc);
        assert_eq!(message["content"], "Hello");
        assert_eq!(message["type"], "ai");
        assert_eq!(
            message["tool_calls"],
            json!([{"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call"}])
        );
    }
}
