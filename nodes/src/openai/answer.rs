//! Answer decoding, shared by whole answers and streams: choices, content, tool calls,
//! finish reasons and usage, tolerant of the ways compatible servers differ.

use serde_json::{Map, Value};

use super::error_text::{error_object, snippet};
use crate::message::{AiMessage, FinishReason, ToolCall, Usage};
use crate::model::{ModelChunk, ModelError, ModelResponse};

/// Parse a whole chat-completions answer.
pub(super) fn parse_completion(
    model: &str,
    status: u16,
    value: &Value,
) -> Result<ModelResponse, ModelError> {
    let decode = |message: String| ModelError::Decode {
        model: model.to_owned(),
        message,
    };
    let Some(choice) = first_choice(value) else {
        if let Some(error) = error_object(value) {
            return Err(ModelError::Status {
                model: model.to_owned(),
                status,
                body: error,
            });
        }
        return Err(decode(format!(
            "the answer has no choices: {}",
            snippet(&value.to_string())
        )));
    };
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| decode("the answer's first choice has no message".to_owned()))?;
    let content = text_of(message.get("content")).map_err(|what| decode(what.to_owned()))?;
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (index, call) in calls.iter().enumerate() {
            let function = call.get("function");
            let name = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| decode(format!("tool call {index} has no function name")))?;
            let args = parse_arguments(model, name, function.and_then(|f| f.get("arguments")))?;
            tool_calls.push(ToolCall {
                id: id_of(call.get("id")).unwrap_or_else(|| generated_id(index)),
                name: name.to_owned(),
                args,
            });
        }
    }
    // The legacy single `function_call`, still sent by some servers.
    if tool_calls.is_empty() {
        if let Some(function) = message.get("function_call").filter(|f| f.is_object()) {
            if let Some(name) = function
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                let args = parse_arguments(model, name, function.get("arguments"))?;
                tool_calls.push(ToolCall {
                    id: generated_id(0),
                    name: name.to_owned(),
                    args,
                });
            }
        }
    }
    Ok(ModelResponse {
        message: AiMessage {
            content,
            tool_calls,
            finish_reason: finish_reason_of(choice.get("finish_reason")),
            usage: usage_of(value.get("usage")),
            ..AiMessage::default()
        },
    })
}

/// The first choice (the one with index 0, or the first listed).
pub(super) fn first_choice(value: &Value) -> Option<&Value> {
    let choices = value.get("choices")?.as_array()?;
    choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
        .or_else(|| choices.first())
}

/// The id of a call generated when the server sent none.
pub(super) fn generated_id(index: usize) -> String {
    format!("call_{index}")
}

/// A call id: a non-empty string (or a number, written out).
pub(super) fn id_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Message content: a string, `null`/absent (no text), or an array of text parts.
pub(super) fn text_of(value: Option<&Value>) -> Result<String, &'static str> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect()),
        Some(_) => Err("the message content is neither text, null nor a list of parts"),
    }
}

/// Tool-call arguments: a JSON string (the standard), an object (some servers), or nothing.
pub(super) fn parse_arguments(
    model: &str,
    tool: &str,
    value: Option<&Value>,
) -> Result<Value, ModelError> {
    match value {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(Value::String(text)) => parse_argument_text(model, tool, text),
        Some(other) => Ok(other.clone()),
    }
}

pub(super) fn parse_argument_text(
    model: &str,
    tool: &str,
    text: &str,
) -> Result<Value, ModelError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(text).map_err(|e| ModelError::Decode {
        model: model.to_owned(),
        message: format!(
            "the arguments of the call of tool {tool:?} are not JSON ({e}): {}",
            snippet(text)
        ),
    })
}

/// The finish reason a server named (`None` when it named none).
pub(super) fn finish_reason_of(value: Option<&Value>) -> Option<FinishReason> {
    let reason = value?.as_str()?;
    Some(match reason {
        "" => return None,
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    })
}

/// Token usage (`prompt_tokens`/`completion_tokens`/`total_tokens`, or the
/// `input_tokens`/`output_tokens` spelling); `None` when absent.
pub(super) fn usage_of(value: Option<&Value>) -> Option<Usage> {
    let usage = value?.as_object()?;
    let count = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| usage.get(*n).and_then(Value::as_u64))
    };
    let input = count(&["prompt_tokens", "input_tokens"]);
    let output = count(&["completion_tokens", "output_tokens"]);
    let total = count(&["total_tokens"]);
    if input.is_none() && output.is_none() && total.is_none() {
        return None;
    }
    let input_tokens = input.unwrap_or(0);
    let output_tokens = output.unwrap_or(0);
    Some(Usage {
        input_tokens,
        output_tokens,
        total_tokens: total.unwrap_or(input_tokens.saturating_add(output_tokens)),
    })
}

/// The chunks a whole answer streams as (when a server answers a stream request whole).
pub(super) fn answer_chunks(response: ModelResponse) -> Vec<ModelChunk> {
    let mut out = Vec::new();
    if !response.message.content.is_empty() {
        out.push(ModelChunk::Text {
            delta: response.message.content.clone(),
        });
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        out.push(ModelChunk::ToolCall {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            args_delta: call.args.to_string(),
        });
    }
    out.push(ModelChunk::Done(response));
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn usage_total_is_summed_when_missing() {
        let usage = usage_of(Some(&json!({"prompt_tokens": 3, "completion_tokens": 4})));
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 3,
                output_tokens: 4,
                total_tokens: 7
            })
        );
        assert_eq!(usage_of(Some(&Value::Null)), None);
        assert_eq!(usage_of(Some(&json!({}))), None);
    }
}
