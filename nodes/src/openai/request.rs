//! Request building: the chat-completions body and its messages in the wire format.

use serde_json::{json, Map, Value};

use super::config::OpenAiConfig;
use super::parts;
use crate::media::{Attachment, MediaKinds};
use crate::message::{text_leaving_out, Message, ToolMessage};
use crate::model::ModelRequest;

/// The request body for `request` under `config`.
pub(super) fn request_body(config: &OpenAiConfig, request: &ModelRequest, stream: bool) -> Value {
    let mut body = config.extra_body.clone();
    body.insert("model".into(), Value::String(config.model.clone()));
    body.insert(
        "messages".into(),
        Value::Array(wire_messages(request, config.tool_media)),
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

/// The request's messages in the wire format. The `media` of each run of tool messages follow
/// it as one user message (the format accepts media parts in user messages only, and nothing
/// may come between an assistant turn's tool messages).
fn wire_messages(request: &ModelRequest, media: MediaKinds) -> Vec<Value> {
    let mut out = Vec::new();
    let mut pending: Vec<Value> = Vec::new();
    for message in request.all_messages() {
        let (wire, parts) = match &*message {
            Message::Tool(tool) => wire_tool(tool, media),
            Message::Human {
                content,
                attachments,
                ..
            } => {
                flush_media(&mut out, &mut pending);
                (wire_human(content, attachments, media), Vec::new())
            }
            other => {
                flush_media(&mut out, &mut pending);
                (wire_message(other), Vec::new())
            }
        };
        out.push(wire);
        pending.extend(parts);
    }
    flush_media(&mut out, &mut pending);
    out
}

/// A tool message in the wire format, its text naming each attachment left out and why, and
/// the parts of those sent (a text part naming the tool and call first).
fn wire_tool(tool: &ToolMessage, media: MediaKinds) -> (Value, Vec<Value>) {
    let planned: Vec<Result<Value, String>> = tool
        .attachments
        .iter()
        .map(|a| parts::part(a, media))
        .collect();
    let mut reasons = planned.iter().map(|p| p.as_ref().err().cloned());
    let content = tool.content_leaving_out(|_| reasons.next().flatten());
    let wire = json!({
        "role": "tool",
        "tool_call_id": tool.tool_call_id,
        "content": content,
    });
    let mut sent: Vec<Value> = planned.into_iter().filter_map(Result::ok).collect();
    if !sent.is_empty() {
        sent.insert(
            0,
            json!({
                "type": "text",
                "text": format!(
                    "Media returned by the tool {} (call {}):",
                    tool.name, tool.tool_call_id
                ),
            }),
        );
    }
    (wire, sent)
}

/// A human message in the wire format: its text alone, or, when it has media the model
/// takes, a text part (naming each attachment left out and why) and then those media parts.
fn wire_human(content: &str, attachments: &[Attachment], media: MediaKinds) -> Value {
    let planned: Vec<Result<Value, String>> =
        attachments.iter().map(|a| parts::part(a, media)).collect();
    let mut reasons = planned.iter().map(|p| p.as_ref().err().cloned());
    let text = text_leaving_out(content, attachments, |_| reasons.next().flatten());
    let sent: Vec<Value> = planned.into_iter().filter_map(Result::ok).collect();
    if sent.is_empty() {
        return json!({"role": "user", "content": text});
    }
    let mut parts = Vec::with_capacity(sent.len() + 1);
    if !text.is_empty() {
        parts.push(json!({"type": "text", "text": text}));
    }
    parts.extend(sent);
    json!({"role": "user", "content": parts})
}

/// Append the pending media parts as one user message.
fn flush_media(out: &mut Vec<Value>, pending: &mut Vec<Value>) {
    if !pending.is_empty() {
        out.push(json!({"role": "user", "content": std::mem::take(pending)}));
    }
}

/// One message in the chat-completions wire format.
fn wire_message(message: &Message) -> Value {
    match message {
        Message::System { content, .. } => json!({"role": "system", "content": content}),
        // `wire_messages` sends a human message with its media; alone, one is text only.
        Message::Human {
            content,
            attachments,
            ..
        } => wire_human(content, attachments, MediaKinds::NONE),
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
        // `wire_messages` sends tool messages with their media; alone, one is text only.
        Message::Tool(tool) => wire_tool(tool, MediaKinds::NONE).0,
    }
}
