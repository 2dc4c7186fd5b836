//! The streamed answer: content and tool-call fragments put together as they arrive.

use serde_json::Value;

use super::answer::{
    finish_reason_of, first_choice, generated_id, id_of, parse_argument_text, text_of, usage_of,
};
use super::error_text::{error_object, snippet};
use super::sse::SseEvent;
use crate::message::{AiMessage, FinishReason, ToolCall, Usage};
use crate::model::{ModelChunk, ModelError, ModelResponse};

/// One tool call being streamed.
#[derive(Default)]
struct PartialCall {
    /// The server's index for it, when it gave one.
    key: Option<u64>,
    id: Option<String>,
    name: String,
    args: String,
}

/// The answer a stream has told so far.
#[derive(Default)]
pub(super) struct StreamedAnswer {
    content: String,
    calls: Vec<PartialCall>,
    pub(super) finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
}

impl StreamedAnswer {
    /// Take in one event: the chunks it yields, or `None` at `[DONE]`.
    pub(super) fn apply(
        &mut self,
        model: &str,
        status: u16,
        event: SseEvent,
    ) -> Result<Option<Vec<ModelChunk>>, ModelError> {
        let value = match event {
            SseEvent::Done => return Ok(None),
            SseEvent::Json(value) => value,
            SseEvent::Invalid(data) => {
                return Err(ModelError::Decode {
                    model: model.to_owned(),
                    message: format!("a stream event is not JSON: {}", snippet(&data)),
                })
            }
        };
        if let Some(usage) = usage_of(value.get("usage")) {
            self.usage = Some(usage);
        }
        let mut chunks = Vec::new();
        let Some(choice) = first_choice(&value) else {
            // An error object instead of choices: the server gave up mid-stream.
            if let Some(error) = error_object(&value) {
                return Err(ModelError::Status {
                    model: model.to_owned(),
                    status,
                    body: error,
                });
            }
            return Ok(Some(chunks));
        };
        if let Some(reason) = finish_reason_of(choice.get("finish_reason")) {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice
            .get("delta")
            .or_else(|| choice.get("message"))
            .filter(|d| d.is_object())
        else {
            return Ok(Some(chunks));
        };
        let text = text_of(delta.get("content")).map_err(|what| ModelError::Decode {
            model: model.to_owned(),
            message: what.to_owned(),
        })?;
        if !text.is_empty() {
            self.content.push_str(&text);
            chunks.push(ModelChunk::Text { delta: text });
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let function = call.get("function");
                if let Some(chunk) = self.call_fragment(
                    call.get("index").and_then(Value::as_u64),
                    id_of(call.get("id")),
                    function.and_then(|f| f.get("name")),
                    function.and_then(|f| f.get("arguments")),
                ) {
                    chunks.push(chunk);
                }
            }
        } else if let Some(function) = delta.get("function_call").filter(|f| f.is_object()) {
            if let Some(chunk) = self.call_fragment(
                Some(0),
                None,
                function.get("name"),
                function.get("arguments"),
            ) {
                chunks.push(chunk);
            }
        }
        Ok(Some(chunks))
    }

    /// Take in a fragment of a tool call; the chunk announcing what it added, if anything.
    pub(super) fn call_fragment(
        &mut self,
        key: Option<u64>,
        id: Option<String>,
        name: Option<&Value>,
        arguments: Option<&Value>,
    ) -> Option<ModelChunk> {
        let name = name.and_then(Value::as_str).filter(|n| !n.is_empty());
        let position = match key {
            // The latest call with this index, unless a different id says a new call begins
            // (a few servers give every call index 0).
            Some(key) => self
                .calls
                .iter()
                .rposition(|c| c.key == Some(key))
                .filter(|&i| match (&id, &self.calls[i].id) {
                    (Some(new), Some(old)) => new == old,
                    _ => true,
                }),
            // No index: the call with this id, or the last call unless this starts a new one.
            None => match &id {
                Some(id) => self
                    .calls
                    .iter()
                    .position(|c| c.id.as_deref() == Some(id.as_str())),
                None if name.is_some() => None,
                None => self.calls.len().checked_sub(1),
            },
        };
        let (index, fresh) = match position {
            Some(index) => (index, false),
            None => {
                self.calls.push(PartialCall {
                    key,
                    ..PartialCall::default()
                });
                (self.calls.len() - 1, true)
            }
        };
        let call = &mut self.calls[index];
        let mut id_delta = None;
        match id {
            Some(id) if call.id.as_deref() != Some(id.as_str()) => {
                call.id = Some(id.clone());
                id_delta = Some(id);
            }
            Some(_) => {}
            None if fresh => id_delta = Some(generated_id(index)),
            None => {}
        }
        let mut name_delta = None;
        if let Some(name) = name {
            // Most servers send the name once; some repeat it whole, a few split it.
            if call.name != name {
                call.name.push_str(name);
                name_delta = Some(name.to_owned());
            }
        }
        let args_delta = match arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        call.args.push_str(&args_delta);
        if !fresh && id_delta.is_none() && name_delta.is_none() && args_delta.is_empty() {
            return None;
        }
        Some(ModelChunk::ToolCall {
            index,
            id: id_delta,
            name: name_delta,
            args_delta,
        })
    }

    /// The whole answer.
    pub(super) fn finish(&mut self, model: &str) -> Result<ModelChunk, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in std::mem::take(&mut self.calls).into_iter().enumerate() {
            if call.name.is_empty() {
                return Err(ModelError::Decode {
                    model: model.to_owned(),
                    message: format!("streamed tool call {index} has no function name"),
                });
            }
            let args = parse_argument_text(model, &call.name, &call.args)?;
            tool_calls.push(ToolCall {
                id: call.id.unwrap_or_else(|| generated_id(index)),
                name: call.name,
                args,
            });
        }
        Ok(ModelChunk::Done(ModelResponse {
            message: AiMessage {
                content: std::mem::take(&mut self.content),
                tool_calls,
                finish_reason: self.finish_reason.take(),
                usage: self.usage,
                ..AiMessage::default()
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn calls_sharing_an_index_are_told_apart_by_id() {
        let mut answer = StreamedAnswer::default();
        let name = json!("f");
        for (id, args) in [(Some("a"), "{\"x\":"), (None, "1}"), (Some("b"), "{}")] {
            answer.call_fragment(
                Some(0),
                id.map(String::from),
                Some(&name),
                Some(&json!(args)),
            );
        }
        let Ok(ModelChunk::Done(done)) = answer.finish("m") else {
            panic!("not done");
        };
        assert_eq!(
            done.message.tool_calls,
            vec![
                ToolCall::new("a", "f", json!({"x": 1})),
                ToolCall::new("b", "f", json!({})),
            ]
        );
    }
}
