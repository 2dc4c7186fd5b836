//! The [`ChatModel`] trait: a request with messages and tool schemas in, an AI message out.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use stategraph::List;

use crate::media::MediaKinds;
use crate::message::{AiMessage, FinishReason, Message, ToolCall, Usage};
use crate::BoxError;

/// What a model is told about one tool: its name, description and JSON Schema of parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub parameters: serde_json::Value,
}

impl ToolSchema {
    /// The OpenAI function-calling form: `{"type":"function","function":{name,description,parameters}}`.
    pub fn to_openai(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// One call of a chat model.
///
/// The conversation is shared, not copied: it is the thread's own [`List`] of messages, whose
/// clones share their items, so a turn costs what it appended, not the length of the
/// conversation. A layer that adds to the messages only touches its own request's list.
///
/// ```
/// use stategraph_nodes::{Message, ModelRequest};
///
/// let mut request = ModelRequest::new(vec![Message::human("hi")]).with_system("Be brief.");
/// request.messages.push(Message::human("and quick"));
/// assert_eq!(request.messages.len(), 2);
/// assert_eq!(request.system.as_deref(), Some("Be brief."));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt, sent before the messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation.
    pub messages: List<Message>,
    /// The tools the model may call on this request (what it *sees*).
    pub tools: Vec<ToolSchema>,
}

impl ModelRequest {
    /// A request with `messages`, no system prompt and no tools.
    pub fn new(messages: impl Into<List<Message>>) -> Self {
        ModelRequest {
            messages: messages.into(),
            ..ModelRequest::default()
        }
    }

    /// Set the system prompt.
    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Set the tools.
    pub fn with_tools(mut self, tools: Vec<ToolSchema>) -> Self {
        self.tools = tools;
        self
    }

    /// The system prompt as a message, then the conversation: what a provider that takes the
    /// system prompt as a message receives.
    pub fn all_messages(&self) -> impl Iterator<Item = std::borrow::Cow<'_, Message>> {
        self.system
            .iter()
            .map(|s| std::borrow::Cow::Owned(Message::system(s.clone())))
            .chain(self.messages.iter().map(std::borrow::Cow::Borrowed))
    }

    /// The names of the tools offered, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }
}

/// A model's answer: one AI message with its usage and finish reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The AI message (its `usage` and `finish_reason` mirror the fields below).
    pub message: AiMessage,
}

impl ModelResponse {
    /// Why the model stopped (inferred from the tool calls when the provider did not say).
    pub fn finish_reason(&self) -> FinishReason {
        self.message.finish_reason.clone().unwrap_or({
            if self.message.tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            }
        })
    }

    /// Token usage, if the provider reported it.
    pub fn usage(&self) -> Option<Usage> {
        self.message.usage
    }
}

impl From<AiMessage> for ModelResponse {
    fn from(message: AiMessage) -> Self {
        ModelResponse { message }
    }
}

/// One piece of a streamed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelChunk {
    /// More text.
    Text {
        /// The text fragment.
        delta: String,
    },
    /// Part of a tool call: the first fragment of a call carries its id and name, later ones
    /// more argument text.
    ToolCall {
        /// Which call of the message (0-based).
        index: usize,
        /// The call id, on the first fragment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name, on the first fragment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// A fragment of the JSON argument text.
        #[serde(default)]
        args_delta: String,
    },
    /// The stream ended; the whole answer, assembled.
    Done(ModelResponse),
}

/// A failed model call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A scripted model was called more often than its script has replies.
    #[error(
        "scripted model {model:?}: call {call} has no scripted reply (the script had {scripted})"
    )]
    ScriptExhausted {
        /// The model's name.
        model: String,
        /// The 1-based number of the call that found no reply.
        call: usize,
        /// How many replies the script had.
        scripted: usize,
    },
    /// A call to a [`RecordedReplies`](crate::RecordedReplies) model that the recording
    /// cannot answer: a call past the recorded ones, or one that shows the model another
    /// conversation than the recorded call did.
    #[error("model {model:?}: call {call} does not match the recording: {detail}")]
    NotRecorded {
        /// The model's name.
        model: String,
        /// The 1-based number of the call.
        call: usize,
        /// What differs.
        detail: String,
    },
    /// The provider could not be reached or answered with a transport-level failure.
    #[error("model {model:?}: request failed: {message}")]
    Transport {
        /// The model's name.
        model: String,
        /// What went wrong.
        message: String,
    },
    /// The provider answered with an error status.
    #[error("model {model:?}: provider returned HTTP {status}: {body}")]
    Status {
        /// The model's name.
        model: String,
        /// The HTTP status.
        status: u16,
        /// The response body (cut to a readable length).
        body: String,
    },
    /// The provider's answer did not have the expected shape.
    #[error("model {model:?}: unreadable response: {message}")]
    Decode {
        /// The model's name.
        model: String,
        /// What was wrong.
        message: String,
    },
    /// The configuration is incomplete or wrong.
    #[error("model configuration: {0}")]
    Config(String),
    /// A control-flow signal (an interrupt) raised inside a model layer; never an error to
    /// handle, always propagated.
    #[error(transparent)]
    Control(BoxError),
    /// Any other failure (a layer's own error).
    #[error(transparent)]
    Other(BoxError),
}

/// A chat model: one request in, one AI message out, optionally streamed.
///
/// ```
/// use stategraph_nodes::{AiMessage, ChatModel, ModelRequest, ScriptedModel};
///
/// # tokio_test_block(async {
/// let model = ScriptedModel::new("demo", [AiMessage::text("hello")]);
/// let reply = model.invoke(ModelRequest::default()).await?;
/// assert_eq!(reply.message.content, "hello");
/// model.verify()?;
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # });
/// # fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
pub trait ChatModel: Send + Sync + 'static {
    /// The model's name (for traces, errors and subagent reports).
    fn name(&self) -> &str;

    /// Answer `request`.
    ///
    /// # Errors
    /// A [`ModelError`] naming the model and what failed.
    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>>;

    /// The kinds of media this model takes as content parts from tool messages'
    /// [`attachments`](crate::ToolMessage::attachments). A client leaves out the rest and
    /// says so in the tool message's text
    /// ([`ToolMessage::content_leaving_out`](crate::ToolMessage::content_leaving_out)).
    ///
    /// The default is [`MediaKinds::NONE`] (text only).
    fn media(&self) -> MediaKinds {
        MediaKinds::NONE
    }

    /// Answer `request` as a stream of chunks ending with [`ModelChunk::Done`].
    ///
    /// The default calls [`ChatModel::invoke`] and streams its answer as one text chunk, one
    /// chunk per tool call, and `Done`.
    fn stream(&self, request: ModelRequest) -> BoxStream<'_, Result<ModelChunk, ModelError>> {
        let fut = self.invoke(request);
        Box::pin(futures::stream::once(fut).flat_map(|res| {
            let chunks: Vec<Result<ModelChunk, ModelError>> = match res {
                Ok(resp) => chunks_of(resp).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            futures::stream::iter(chunks)
        }))
    }
}

use futures::StreamExt;

/// The chunks a whole answer streams as (text, one fragment per call, done).
fn chunks_of(resp: ModelResponse) -> Vec<ModelChunk> {
    let mut out = Vec::new();
    if !resp.message.content.is_empty() {
        out.push(ModelChunk::Text {
            delta: resp.message.content.clone(),
        });
    }
    for (index, call) in resp.message.tool_calls.iter().enumerate() {
        out.push(ModelChunk::ToolCall {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            args_delta: call.args.to_string(),
        });
    }
    out.push(ModelChunk::Done(resp));
    out
}

/// The most tool calls one streamed answer may carry (a higher call index is a decode error,
/// not an allocation the server controls).
pub const MAX_STREAMED_CALLS: usize = 1024;

/// Assemble streamed chunks into the answer (what [`ModelChunk::Done`] carries, for streams
/// whose producer does not send one).
///
/// # Errors
/// A tool call whose argument text is not JSON or that never got a name, or a call index of
/// [`MAX_STREAMED_CALLS`] or more.
pub fn assemble_chunks(
    model: &str,
    chunks: impl IntoIterator<Item = ModelChunk>,
) -> Result<ModelResponse, ModelError> {
    let mut content = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for chunk in chunks {
        match chunk {
            ModelChunk::Done(resp) => return Ok(resp),
            ModelChunk::Text { delta } => content.push_str(&delta),
            ModelChunk::ToolCall {
                index,
                id,
                name,
                args_delta,
            } => {
                if index >= MAX_STREAMED_CALLS {
                    return Err(ModelError::Decode {
                        model: model.to_owned(),
                        message: format!(
                            "streamed tool call index {index} is beyond the limit of {MAX_STREAMED_CALLS} calls per answer"
                        ),
                    });
                }
                while calls.len() <= index {
                    calls.push(Default::default());
                }
                let slot = &mut calls[index];
                if let Some(id) = id {
                    slot.0 = id;
                }
                if let Some(name) = name {
                    slot.1.push_str(&name);
                }
                slot.2.push_str(&args_delta);
            }
        }
    }
    let mut tool_calls = Vec::with_capacity(calls.len());
    for (i, (id, name, args)) in calls.into_iter().enumerate() {
        if name.is_empty() {
            return Err(ModelError::Decode {
                model: model.to_owned(),
                message: format!("streamed tool call {i} has no name"),
            });
        }
        let args = if args.trim().is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_json::from_str(&args).map_err(|e| ModelError::Decode {
                model: model.to_owned(),
                message: format!("arguments of streamed tool call {i} ({name}) are not JSON: {e}"),
            })?
        };
        tool_calls.push(ToolCall { id, name, args });
    }
    let finish_reason = Some(if tool_calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    });
    Ok(ModelResponse {
        message: AiMessage {
            content,
            tool_calls,
            finish_reason,
            ..AiMessage::default()
        },
    })
}
