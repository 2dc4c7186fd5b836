//! Messages as they are generated: the [`AiMessageChunk`] the engine's `messages` stream mode
//! carries, and [`call_model`], the model call a node makes through its context so that its
//! tokens stream when someone listens.
//!
//! A call made with [`call_model`] streams only when the run streams messages
//! ([`NodeContext::streams_messages`]); otherwise it is one [`ChatModel::invoke`] and builds
//! nothing. Streaming, it emits ([`NodeContext::emit_message`]):
//!
//! 1. one [`MessagePart::Chunk`] per piece of the answer (a text delta, a tool-call fragment),
//!    each an [`AiMessageChunk`] with the message's id;
//! 2. a last chunk with the finish reason, the usage and the model's name;
//! 3. [`MessagePart::End`]: the whole [`Message`], with the same id.
//!
//! Joined in order, the chunks make the whole message ([`AiMessageChunk::join`]).

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::json;
use stategraph::{MessagePart, NodeContext, Shared, TokenUsage};

use crate::message::{AiMessage, FinishReason, Message, Usage};
use crate::model::{
    assemble_chunks, ChatModel, ModelChunk, ModelError, ModelRequest, ModelResponse,
};

/// A fragment of one tool call in a streamed answer: the first fragment of a call names it,
/// later ones add argument text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallChunk {
    /// Which call of the message (0-based).
    pub index: usize,
    /// The call's id, on its first fragment.
    pub id: Option<String>,
    /// The tool's name, on its first fragment.
    pub name: Option<String>,
    /// A piece of the JSON argument text.
    pub args: String,
}

/// A piece of an AI message being generated, as the `messages` stream mode carries it. It
/// serializes as LangChain's `AIMessageChunk` dict, which the Agent Server sends as is.
///
/// ```
/// use stategraph_nodes::tokens::AiMessageChunk;
///
/// let chunk = AiMessageChunk::text("run-1", "Hel");
/// assert_eq!(
///     serde_json::to_value(&chunk)?,
///     serde_json::json!({"type": "AIMessageChunk", "id": "run-1", "content": "Hel",
///                        "tool_call_chunks": []}),
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AiMessageChunk {
    /// The id of the message it is part of (every chunk of one message has it).
    pub id: String,
    /// A text delta.
    pub content: String,
    /// Tool-call fragments.
    pub tool_call_chunks: Vec<ToolCallChunk>,
    /// On the last chunk: why the model stopped.
    pub finish_reason: Option<FinishReason>,
    /// On the last chunk: the call's token usage, if the provider reported it.
    pub usage: Option<Usage>,
    /// On the last chunk: the model's name.
    pub model: Option<String>,
    /// Whether this is the message's last chunk.
    pub last: bool,
}

impl AiMessageChunk {
    /// A text delta of message `id`.
    pub fn text(id: impl Into<String>, delta: impl Into<String>) -> Self {
        AiMessageChunk {
            id: id.into(),
            content: delta.into(),
            ..AiMessageChunk::default()
        }
    }

    /// The chunk of message `id` a model's streamed piece is (`None` for the end of the
    /// stream, whose last chunk [`AiMessageChunk::last_of`] makes).
    pub fn of(id: &str, piece: &ModelChunk) -> Option<Self> {
        match piece {
            ModelChunk::Text { delta } => Some(AiMessageChunk::text(id, delta.clone())),
            ModelChunk::ToolCall {
                index,
                id: call,
                name,
                args_delta,
            } => Some(AiMessageChunk {
                id: id.to_owned(),
                tool_call_chunks: vec![ToolCallChunk {
                    index: *index,
                    id: call.clone(),
                    name: name.clone(),
                    args: args_delta.clone(),
                }],
                ..AiMessageChunk::default()
            }),
            ModelChunk::Done(_) => None,
        }
    }

    /// The last chunk of message `id`, answered by `model`: no text, the finish reason and
    /// the usage.
    pub fn last_of(id: &str, model: &str, response: &ModelResponse) -> Self {
        AiMessageChunk {
            id: id.to_owned(),
            finish_reason: Some(response.finish_reason()),
            usage: response.usage(),
            model: Some(model.to_owned()),
            last: true,
            ..AiMessageChunk::default()
        }
    }

    /// The message `chunks` make, joined in order: text appended, tool-call fragments
    /// gathered by index, the last chunk's finish reason and usage.
    ///
    /// # Errors
    /// A tool call whose arguments are not JSON or that has no name.
    pub fn join<'a>(
        model: &str,
        chunks: impl IntoIterator<Item = &'a AiMessageChunk>,
    ) -> Result<AiMessage, ModelError> {
        let mut id = None;
        let mut pieces = Vec::new();
        let mut tail = None;
        for chunk in chunks {
            id.get_or_insert_with(|| chunk.id.clone());
            if !chunk.content.is_empty() {
                pieces.push(ModelChunk::Text {
                    delta: chunk.content.clone(),
                });
            }
            pieces.extend(chunk.tool_call_chunks.iter().map(|c| ModelChunk::ToolCall {
                index: c.index,
                id: c.id.clone(),
                name: c.name.clone(),
                args_delta: c.args.clone(),
            }));
            if chunk.last {
                tail = Some((chunk.finish_reason.clone(), chunk.usage));
            }
        }
        let mut message = assemble_chunks(model, pieces)?.message;
        message.id = id;
        if let Some((finish, usage)) = tail {
            message.finish_reason = finish.or(message.finish_reason);
            message.usage = usage;
        }
        Ok(message)
    }
}

impl Serialize for ToolCallChunk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("type", "tool_call_chunk")?;
        map.serialize_entry("index", &self.index)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("args", &self.args)?;
        map.end()
    }
}

impl Serialize for AiMessageChunk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", "AIMessageChunk")?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("content", &self.content)?;
        map.serialize_entry("tool_call_chunks", &self.tool_call_chunks)?;
        if self.finish_reason.is_some() || self.model.is_some() {
            let mut meta = serde_json::Map::new();
            if let Some(reason) = &self.finish_reason {
                meta.insert("finish_reason".into(), finish_reason_json(reason));
            }
            if let Some(model) = &self.model {
                meta.insert("model_name".into(), json!(model));
            }
            map.serialize_entry("response_metadata", &meta)?;
        }
        if let Some(u) = &self.usage {
            map.serialize_entry(
                "usage_metadata",
                &json!({
                    "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens,
                    "total_tokens": u.total_tokens,
                }),
            )?;
        }
        if self.last {
            map.serialize_entry("chunk_position", "last")?;
        }
        map.end()
    }
}

/// A finish reason as LangChain's `response_metadata` names it.
fn finish_reason_json(reason: &FinishReason) -> serde_json::Value {
    match reason {
        FinishReason::Other(other) => json!(other),
        known => serde_json::to_value(known).unwrap_or(serde_json::Value::Null),
    }
}

/// Call `model` from a node: streamed as `messages` events when the run streams messages
/// (see the [module docs](self)), one plain call otherwise. The answer's usage is added to
/// the run's ([`NodeContext::record_usage`], [`call_usage`]); a call that fails adds
/// nothing. A streamed answer carries the id its chunks had, from the node's context
/// ([`NodeContext::message_id`]); an answer not streamed keeps the model's id or none, and the
/// messages reducer gives it one, as it always has.
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use stategraph::prelude::*;
/// use stategraph::{EventKind, MessagePart};
/// use stategraph_nodes::tokens::{call_model, AiMessageChunk};
/// use stategraph_nodes::{AiMessage, ModelRequest, Message, ScriptedModel};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct S {
///     answer: String,
/// }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let model = ScriptedModel::new("m", [AiMessage::text("Hello there, friend")]);
/// let graph = StateGraph::<S>::new()
///     .add_node("ask", move |_s: Arc<S>, cx: NodeContext| {
///         let model = model.clone();
///         async move {
///             let request = ModelRequest::new(vec![Message::human("hi")]);
///             let reply = call_model(&cx, &model, request).await?;
///             Ok::<_, BoxError>(S::update().answer(reply.message.content))
///         }
///     })
///     .add_edge(START, "ask")
///     .add_edge("ask", END)
///     .compile()?;
/// let mut stream = graph.stream(S::update(), &RunConfig::new(), StreamMode::messages());
/// let mut chunks = Vec::new();
/// while let Some(ev) = stream.next().await {
///     if let EventKind::Messages { part: MessagePart::Chunk, message, .. } = ev.kind {
///         chunks.push(message.get::<AiMessageChunk>().cloned().unwrap());
///     }
/// }
/// assert!(chunks.len() > 2); // the scripted reply streams word by word
/// assert_eq!(AiMessageChunk::join("m", &chunks)?.content, "Hello there, friend");
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// What the model's call or stream fails with.
pub async fn call_model(
    cx: &NodeContext,
    model: &dyn ChatModel,
    request: ModelRequest,
) -> Result<ModelResponse, ModelError> {
    call_in_node(cx, model, request, false).await
}

/// [`call_model`], also emitting each piece as a custom event `{"chunk": ModelChunk}` when
/// `custom_chunks` (the agent's `stream_tokens`).
pub(crate) async fn call_in_node(
    cx: &NodeContext,
    model: &dyn ChatModel,
    request: ModelRequest,
    custom_chunks: bool,
) -> Result<ModelResponse, ModelError> {
    let messages = cx.streams_messages();
    if !messages && !custom_chunks {
        let response = model.invoke(request).await?;
        cx.record_usage(call_usage(&response));
        return Ok(response);
    }
    let id = cx.message_id();
    use futures::StreamExt;
    let mut pieces = Vec::new();
    let mut stream = model.stream(request);
    while let Some(piece) = stream.next().await {
        let piece = piece?;
        if messages {
            if let Some(chunk) = AiMessageChunk::of(&id, &piece) {
                cx.emit_message(MessagePart::Chunk, Shared::new(chunk))
                    .await;
            }
        }
        if custom_chunks && !matches!(piece, ModelChunk::Done(_)) {
            cx.emit(json!({ "chunk": &piece })).await;
        }
        pieces.push(piece);
    }
    drop(stream);
    let mut response = assemble_chunks(model.name(), pieces)?;
    cx.record_usage(call_usage(&response));
    if messages {
        response.message.id = Some(id.clone());
        let last = AiMessageChunk::last_of(&id, model.name(), &response);
        cx.emit_message(MessagePart::Chunk, Shared::new(last)).await;
        let whole = Message::Ai(response.message.clone());
        cx.emit_message(MessagePart::End, Shared::new(whole)).await;
    }
    Ok(response)
}

/// What one answered call adds to its run's usage: one model call, with the tokens its
/// provider reported (none if it reported no usage).
pub fn call_usage(response: &ModelResponse) -> TokenUsage {
    match response.usage() {
        Some(u) => TokenUsage::of_call(u.input_tokens, u.output_tokens, u.total_tokens),
        None => TokenUsage::of_call(0, 0, 0),
    }
}

/// When the run streams messages, stream `message` whole ([`MessagePart::Whole`]), first giving
/// it an id from the node's context if it has none ([`NodeContext::message_id`]): what a
/// tool's result goes through, so a client watching the `messages` modes sees it under the id
/// the thread keeps. Otherwise it does nothing, and the messages reducer gives the id.
pub async fn emit_whole(cx: &NodeContext, message: &mut Message) {
    if !cx.streams_messages() {
        return;
    }
    if stategraph::reducers::Message::id(message).is_none() {
        stategraph::reducers::Message::set_id(message, cx.message_id());
    }
    cx.emit_message(MessagePart::Whole, Shared::new(message.clone()))
        .await;
}

/// How a whole answer streams when its model has no stream of its own but should show one
/// (the scripted and recorded models): its text word by word, each tool call in two
/// fragments (its id and name with the first half of its arguments, then the rest), then
/// [`ModelChunk::Done`].
pub fn word_chunks(response: ModelResponse) -> Vec<ModelChunk> {
    let mut out = Vec::new();
    let text = &response.message.content;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() && i + c.len_utf8() < text.len() {
            let end = i + c.len_utf8();
            if !text[start..end].trim().is_empty() {
                out.push(ModelChunk::Text {
                    delta: text[start..end].to_owned(),
                });
                start = end;
            }
        }
    }
    if start < text.len() {
        out.push(ModelChunk::Text {
            delta: text[start..].to_owned(),
        });
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        let args = call.args.to_string();
        let mut half = args.len() / 2;
        while !args.is_char_boundary(half) {
            half -= 1;
        }
        out.push(ModelChunk::ToolCall {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            args_delta: args[..half].to_owned(),
        });
        out.push(ModelChunk::ToolCall {
            index,
            id: None,
            name: None,
            args_delta: args[half..].to_owned(),
        });
    }
    out.push(ModelChunk::Done(response));
    out
}

/// A whole answer's future as a stream of its [`word_chunks`]: what a model without a stream
/// of its own returns from [`ChatModel::stream`] to show one.
///
/// ```
/// use futures::future::BoxFuture;
/// use futures::stream::BoxStream;
/// use stategraph_nodes::tokens::stream_words;
/// use stategraph_nodes::{AiMessage, ChatModel, ModelChunk, ModelError, ModelRequest, ModelResponse};
///
/// /// Answers "You said: <the last message>".
/// struct Echo;
///
/// impl ChatModel for Echo {
///     fn name(&self) -> &str {
///         "echo"
///     }
///     fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
///         let last = request.messages.last().map(|m| m.text().to_owned()).unwrap_or_default();
///         Box::pin(async move { Ok(AiMessage::text(format!("You said: {last}")).into()) })
///     }
///     fn stream(&self, request: ModelRequest) -> BoxStream<'_, Result<ModelChunk, ModelError>> {
///         stream_words(self.invoke(request))
///     }
/// }
/// ```
pub fn stream_words(
    answer: futures::future::BoxFuture<'_, Result<ModelResponse, ModelError>>,
) -> futures::stream::BoxStream<'_, Result<ModelChunk, ModelError>> {
    use futures::StreamExt;
    Box::pin(futures::stream::once(answer).flat_map(|res| {
        let pieces: Vec<_> = match res {
            Ok(resp) => word_chunks(resp).into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        futures::stream::iter(pieces)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn word_chunks_join_to_the_whole_answer() {
        let answer = AiMessage::text("Hello  wide world ").with_call(ToolCall::new(
            "c1",
            "search",
            json!({"q": "naïve café"}),
        ));
        let pieces = word_chunks(ModelResponse::from(answer.clone()));
        let texts = pieces
            .iter()
            .filter(|p| matches!(p, ModelChunk::Text { .. }))
            .count();
        assert_eq!(texts, 3, "{pieces:?}");
        let chunks: Vec<AiMessageChunk> = pieces
            .iter()
            .filter_map(|p| AiMessageChunk::of("m1", p))
            .collect();
        let joined = AiMessageChunk::join("m", &chunks).unwrap();
        assert_eq!(joined.content, answer.content);
        assert_eq!(joined.tool_calls, answer.tool_calls);
        assert_eq!(joined.id.as_deref(), Some("m1"));
    }

    #[test]
    fn the_last_chunk_carries_the_finish_reason_usage_and_model() {
        let mut answer = AiMessage::text("ok");
        answer.usage = Some(Usage {
            input_tokens: 3,
            output_tokens: 1,
            total_tokens: 4,
        });
        let last = AiMessageChunk::last_of("m1", "gpt", &ModelResponse::from(answer));
        assert_eq!(
            serde_json::to_value(&last).unwrap(),
            json!({
                "type": "AIMessageChunk", "id": "m1", "content": "", "tool_call_chunks": [],
                "response_metadata": {"finish_reason": "stop", "model_name": "gpt"},
                "usage_metadata": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
                "chunk_position": "last",
            })
        );
    }
}
