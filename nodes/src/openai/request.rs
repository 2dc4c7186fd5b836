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
        Value::Array(request.all_messages().map(|m| wire_message(&m)).collect()),
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
