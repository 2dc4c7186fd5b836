//! Reading a message from JSON in any of the forms it arrives in: LangChain's dict (chunk
//! types too), `messages_to_dict`'s `{"type", "data"}`, the role form clients send, and the
//! form stategraph stored before (decision 0081). Each mistake is named, never a panic.

use std::fmt;

use serde_json::{Map, Value};

use super::block::{read_content, Media};
use super::{AiMessage, FinishReason, Message, ToolCall, ToolMessage, ToolStatus, Usage};
use crate::media::Attachment;

/// What was wrong with a message's JSON (the text of the serde error).
#[derive(Debug)]
pub(super) struct FormError(pub(super) String);

impl fmt::Display for FormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The kind of JSON value `value` is, for an error message.
pub(super) fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The four kinds of message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    System,
    Human,
    Ai,
    Tool,
}

impl Kind {
    /// The kind named by a `type` (LangChain's, its chunk classes', `developer`).
    fn of_type(name: &str) -> Option<Kind> {
        Some(match name {
            "system" | "developer" | "SystemMessage" | "SystemMessageChunk" => Kind::System,
            "human" | "HumanMessage" | "HumanMessageChunk" => Kind::Human,
            "ai" | "AIMessage" | "AIMessageChunk" => Kind::Ai,
            "tool" | "ToolMessage" | "ToolMessageChunk" => Kind::Tool,
            _ => return None,
        })
    }

    /// The kind named by a `role` (OpenAI's and LangChain's names).
    fn of_role(name: &str) -> Option<Kind> {
        Some(match name {
            "system" | "developer" => Kind::System,
            "user" | "human" => Kind::Human,
            "assistant" | "ai" => Kind::Ai,
            "tool" => Kind::Tool,
            _ => return None,
        })
    }

    /// The kind's name in an error message.
    pub(super) fn noun(self) -> &'static str {
        match self {
            Kind::System => "system",
            Kind::Human => "human",
            Kind::Ai => "AI",
            Kind::Tool => "tool",
        }
    }
}

/// Read a message; `default` is the kind of one that names none (an [`AiMessage`] read
/// alone), `None` where a kind must be named.
pub(super) fn message(value: Value, default: Option<Kind>) -> Result<Message, FormError> {
    let Value::Object(mut map) = value else {
        return Err(FormError(format!(
            "a message must be an object, not {}",
            describe(&value)
        )));
    };
    if !map.contains_key("content") && matches!(map.get("data"), Some(Value::Object(_))) {
        // `messages_to_dict`: {"type": ..., "data": {...}}.
        let outer = map.remove("type");
        if let Some(Value::Object(mut data)) = map.remove("data") {
            if let (false, Some(outer)) = (data.contains_key("type"), outer) {
                data.insert("type".into(), outer);
            }
            map = data;
        }
    }
    let kind = kind(&mut map, default)?;
    let read = match kind {
        Kind::System => system(map),
        Kind::Human => human(map),
        Kind::Ai => ai(map).map(Message::Ai),
        Kind::Tool => tool(map).map(Message::Tool),
    };
    read.map_err(|e| FormError(format!("{} message: {}", kind.noun(), e.0)))
}

/// The kind a message's `type` or `role` names.
fn kind(map: &mut Map<String, Value>, default: Option<Kind>) -> Result<Kind, FormError> {
    match (map.remove("type"), map.remove("role")) {
        (Some(Value::String(t)), _) => Kind::of_type(&t).ok_or_else(|| {
            FormError(format!(
                "unknown message type {t:?} (expected human, system, ai or tool)"
            ))
        }),
        (Some(other), _) => Err(FormError(format!(
            "a message's `type` must be a string, not {}",
            describe(&other)
        ))),
        (None, Some(Value::String(r))) => Kind::of_role(&r).ok_or_else(|| {
            FormError(format!(
                "unknown message role {r:?} (expected user, assistant, system or tool)"
            ))
        }),
        (None, Some(other)) => Err(FormError(format!(
            "a message's `role` must be a string, not {}",
            describe(&other)
        ))),
        (None, None) => {
            default.ok_or_else(|| FormError("a message needs a `type` or a `role`".into()))
        }
    }
}

fn system(mut map: Map<String, Value>) -> Result<Message, FormError> {
    let content = read_content(map.remove("content"), "system", Media::Refuse)?;
    Ok(Message::System {
        id: string(&mut map, "id")?,
        name: string(&mut map, "name")?,
        content: content.text,
    })
}

fn human(mut map: Map<String, Value>) -> Result<Message, FormError> {
    let content = read_content(map.remove("content"), "human", Media::Keep)?;
    Ok(Message::Human {
        id: string(&mut map, "id")?,
        name: string(&mut map, "name")?,
        content: content.text,
        attachments: content.attachments,
    })
}

fn ai(mut map: Map<String, Value>) -> Result<AiMessage, FormError> {
    let content = read_content(map.remove("content"), "AI", Media::Skip)?;
    let tool_calls = match map.remove("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| tool_call(call, &format!("tool call {i}")))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(FormError(format!(
                "`tool_calls` must be a list, not {}",
                describe(&other)
            )))
        }
    };
    let mut response_metadata = object(&mut map, "response_metadata")?;
    // Stored before: `finish_reason` at the top (the role form has it there too).
    let finish = match response_metadata.remove("finish_reason") {
        None | Some(Value::Null) => map.remove("finish_reason"),
        found => found,
    };
    // Stored before: `usage`.
    let usage = match map.remove("usage_metadata") {
        None | Some(Value::Null) => map.remove("usage"),
        found => found,
    };
    Ok(AiMessage {
        id: string(&mut map, "id")?,
        name: string(&mut map, "name")?,
        content: content.text,
        tool_calls,
        finish_reason: finish_reason(finish)?,
        usage: self::usage(usage)?,
        response_metadata,
        metadata: object(&mut map, "additional_kwargs")?,
    })
}

fn tool(mut map: Map<String, Value>) -> Result<ToolMessage, FormError> {
    let content = read_content(map.remove("content"), "tool", Media::Keep)?;
    let Some(tool_call_id) = string(&mut map, "tool_call_id")? else {
        return Err(FormError("it has no `tool_call_id`".into()));
    };
    let status = match string(&mut map, "status")?.as_deref() {
        None | Some("success") => ToolStatus::Success,
        Some("error") => ToolStatus::Error,
        Some(other) => {
            return Err(FormError(format!(
                "unknown `status` {other:?} (expected success or error)"
            )))
        }
    };
    let mut metadata = object(&mut map, "additional_kwargs")?;
    if metadata.is_empty() {
        // Stored before: `metadata`.
        metadata = object(&mut map, "metadata")?;
    }
    let mut attachments = content.attachments;
    // Stored before: an `attachments` (or older `images`) list beside a string content.
    for key in ["attachments", "images"] {
        if let Some(list) = map.remove(key).filter(|v| !v.is_null()) {
            let stored: Vec<Attachment> =
                serde_json::from_value(list).map_err(|e| FormError(format!("`{key}`: {e}")))?;
            attachments.extend(stored);
        }
    }
    Ok(ToolMessage {
        id: string(&mut map, "id")?,
        tool_call_id,
        name: string(&mut map, "name")?.unwrap_or_default(),
        content: content.text,
        status,
        metadata,
        attachments,
    })
}

/// A tool call in LangChain's form (`name`, `args`, `id`) or OpenAI's (`id`,
/// `function: {name, arguments}`); `which` names it in errors.
pub(super) fn tool_call(value: Value, which: &str) -> Result<ToolCall, FormError> {
    let Value::Object(mut map) = value else {
        return Err(FormError(format!(
            "{which} must be an object, not {}",
            describe(&value)
        )));
    };
    let fail = |e: FormError| FormError(format!("{which}: {}", e.0));
    let id = string(&mut map, "id").map_err(fail)?.unwrap_or_default();
    if let Some(Value::Object(mut function)) = map.remove("function") {
        let name = string(&mut function, "name")
            .map_err(fail)?
            .ok_or_else(|| FormError(format!("{which} has no `function.name`")))?;
        let args = match function.remove("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::String(text)) if text.trim().is_empty() => Value::Object(Map::new()),
            Some(Value::String(text)) => serde_json::from_str(&text).map_err(|e| {
                FormError(format!(
                    "{which} ({name}): `function.arguments` is not JSON ({e})"
                ))
            })?,
            Some(args) => args,
        };
        return Ok(ToolCall { id, name, args });
    }
    let name = string(&mut map, "name")
        .map_err(fail)?
        .ok_or_else(|| FormError(format!("{which} has no `name`")))?;
    let args = map.remove("args").unwrap_or(Value::Null);
    Ok(ToolCall { id, name, args })
}

/// A finish reason: a name, or (stored before) `{"other": name}`.
fn finish_reason(value: Option<Value>) -> Result<Option<FinishReason>, FormError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Ok(Some(FinishReason::from_name(name))),
        Some(Value::Object(mut map)) if map.len() == 1 => match map.remove("other") {
            Some(Value::String(name)) => Ok(Some(FinishReason::Other(name))),
            _ => Err(FormError(
                "`finish_reason` must be a string (or, stored before, {\"other\": name})".into(),
            )),
        },
        Some(other) => Err(FormError(format!(
            "`finish_reason` must be a string, not {}",
            describe(&other)
        ))),
    }
}

/// Token usage: `usage_metadata` (or, stored before, `usage`).
fn usage(value: Option<Value>) -> Result<Option<Usage>, FormError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| FormError(format!("`usage_metadata`: {e}"))),
    }
}

/// The string field `key` (absent or null: `None`).
fn string(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, FormError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(FormError(format!(
            "`{key}` must be a string, not {}",
            describe(&other)
        ))),
    }
}

/// The object field `key` (absent or null: empty).
fn object(map: &mut Map<String, Value>, key: &str) -> Result<Map<String, Value>, FormError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(inner)) => Ok(inner),
        Some(other) => Err(FormError(format!(
            "`{key}` must be an object, not {}",
            describe(&other)
        ))),
    }
}
