//! Request building: the chat-completions body and its messages in the wire format.

use serde_json::{json, Map, Value};

use super::config::OpenAiConfig;
use crate::message::Message;
use crate::model::ModelRequest;

/// The request body for `request` under `config`.
pub(super) fn request_body(config: &OpenAiConfig, request: &ModelRequest, stream: bool) -> Value {
    let mut body = config.extra_body.clone();
    body.insert("model".into(), Value::String(config.model.clone()));
    body.insert(
        "messages".into(),
        Value::Array(wire_messages(request, config.tool_images)),
    );
    if request.tools.is_empty() {
        body.remove("tools");
    } else {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(|t| t.to_openai()).collect()),
        );
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
        if config.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    } else {
        body.remove("stream");
        body.remove("stream_options");
    }
    Value::Object(body)
}

/// The request's messages in the wire format. With `images`, the images of each run of tool
/// messages follow it as one user message (the format accepts image parts in user messages
/// only, and nothing may come between an assistant turn's tool messages).
fn wire_messages(request: &ModelRequest, images: bool) -> Vec<Value> {
    let mut out = Vec::new();
    let mut pending: Vec<Value> = Vec::new();
    for message in request.all_messages() {
        if !matches!(*message, Message::Tool(_)) {
            flush_images(&mut out, &mut pending);
        }
        out.push(wire_message(&message));
        if let (Message::Tool(tool), true) = (&*message, images) {
            if !tool.images.is_empty() {
                pending.push(json!({
                    "type": "text",
                    "text": format!(
                        "Images returned by the tool {} (call {}):",
                        tool.name, tool.tool_call_id
                    ),
                }));
                pending.extend(tool.images.iter().map(
                    |image| json!({"type": "image_url", "image_url": {"url": image.data_url()}}),
                ));
            }
        }
    }
    flush_images(&mut out, &mut pending);
    out
}

/// Append the pending image parts as one user message.
fn flush_images(out: &mut Vec<Value>, pending: &mut Vec<Value>) {
    if !pending.is_empty() {
        out.push(json!({"role": "user", "content": std::mem::take(pending)}));
    }
}

/// One message in the chat-completions wire format.
fn wire_message(message: &Message) -> Value {
    match message {
        Message::System { content, .. } => json!({"role": "system", "content": content}),
        Message::Human { content, .. } => json!({"role": "user", "content": content}),
        Message::Ai(ai) => {
            let mut out = Map::new();
            out.insert("role".into(), json!("assistant"));
            if ai.tool_calls.is_empty() {
                out.insert("content".into(), json!(ai.content));
            } else {
                let content = if ai.content.is_empty() {
                    Value::Null
                } else {
                    json!(ai.content)
                };
                out.insert("content".into(), content);
                let calls: Vec<Value> = ai
                    .tool_calls
                    .iter()
                    .map(|call| {
                        let arguments = match &call.args {
                            Value::Null => "{}".to_owned(),
                            args => args.to_string(),
                        };
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": arguments},
                        })
                    })
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(out)
        }
        Message::Tool(tool) => json!({
            "role": "tool",
            "tool_call_id": tool.tool_call_id,
            "content": tool.content,
        }),
    }
}
