//! Conversation messages: system, human, AI (with tool calls) and tool results.

use serde::{Deserialize, Serialize};

/// One tool call an AI message asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, chosen by the model; the tool message answering it carries it back.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model wrote them (a JSON object, normally).
    #[serde(default)]
    pub args: serde_json::Value,
}

impl ToolCall {
    /// The id a tool message answering this call carries: the call's id, or
    /// `missing_tool_call_id` when the model sent none.
    pub fn reply_id(&self) -> &str {
        if self.id.is_empty() {
            "missing_tool_call_id"
        } else {
            &self.id
        }
    }

    /// A call of `name` with `args`, identified by `id`.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: serde_json::Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            args,
        }
    }
}

/// Why a model stopped producing output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model asks for tool calls.
    ToolCalls,
    /// The output hit the length limit.
    Length,
    /// A provider's safety filter stopped the output.
    ContentFilter,
    /// Any other reason, as the provider named it.
    Other(String),
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the request.
    pub input_tokens: u64,
    /// Tokens of the response.
    pub output_tokens: u64,
    /// Their sum as the provider reported it.
    pub total_tokens: u64,
}

/// The outcome a tool message reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool did its work.
    #[default]
    Success,
    /// The call failed or was refused; the content says why.
    Error,
}

/// A model's turn: text and/or tool calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AiMessage {
    /// Message id (assigned by the messages reducer when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The text.
    #[serde(default)]
    pub content: String,
    /// The tool calls, in the order the model made them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Token usage of the call that produced this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl AiMessage {
    /// A text answer with no tool calls.
    pub fn text(content: impl Into<String>) -> Self {
        AiMessage {
            content: content.into(),
            finish_reason: Some(FinishReason::Stop),
            ..AiMessage::default()
        }
    }

    /// A turn that calls tools.
    pub fn calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        AiMessage {
            tool_calls: calls.into_iter().collect(),
            finish_reason: Some(FinishReason::ToolCalls),
            ..AiMessage::default()
        }
    }

    /// Add a tool call.
    pub fn with_call(mut self, call: ToolCall) -> Self {
        self.tool_calls.push(call);
        self.finish_reason = Some(FinishReason::ToolCalls);
        self
    }
}

/// The result of one tool call, answering the AI message's call with the same id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolMessage {
    /// Message id (assigned by the messages reducer when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The id of the call this answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the model reads.
    pub content: String,
    /// Success or error.
    #[serde(default)]
    pub status: ToolStatus,
    /// Structured data for programs, not for the model (DeerFlow's `additional_kwargs`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Images the tool returned, for models that accept them (`content` still describes each
    /// one in text, for models that do not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePart>,
}

/// An image in a message: its media type and its bytes, base64-encoded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePart {
    /// The media type (`image/png`, `image/jpeg`, ...).
    pub mime_type: String,
    /// The bytes, base64-encoded (standard alphabet, padded).
    pub data: String,
}

impl ImagePart {
    /// An image of type `mime_type` whose base64-encoded bytes are `data`.
    pub fn new(mime_type: impl Into<String>, data: impl Into<String>) -> Self {
        ImagePart {
            mime_type: mime_type.into(),
            data: data.into(),
        }
    }

    /// The image as a `data:` URL (`data:image/png;base64,...`).
    ///
    /// ```
    /// use stategraph_nodes::ImagePart;
    ///
    /// let dot = ImagePart::new("image/png", "iVBORw0KGgo=");
    /// assert_eq!(dot.data_url(), "data:image/png;base64,iVBORw0KGgo=");
    /// ```
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime_type, self.data)
    }
}

impl ToolMessage {
    /// A successful result of call `tool_call_id` of tool `name`.
    pub fn new(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ToolMessage {
            tool_call_id: tool_call_id.into(),
            name: name.into(),
            content: content.into(),
            ..ToolMessage::default()
        }
    }

    /// An error result of call `tool_call_id` of tool `name`.
    pub fn error(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ToolMessage {
            status: ToolStatus::Error,
            ..ToolMessage::new(tool_call_id, name, content)
        }
    }

    /// The same message with `image` attached.
    pub fn with_image(mut self, image: ImagePart) -> Self {
        self.images.push(image);
        self
    }

    /// Whether this reports an error.
    pub fn is_error(&self) -> bool {
        self.status == ToolStatus::Error
    }
}

/// One message of a conversation.
///
/// ```
/// use stategraph_nodes::{Message, ToolCall, AiMessage};
///
/// let ai = Message::Ai(AiMessage::calls([ToolCall::new("c1", "search", serde_json::json!({"q": "x"}))]));
/// assert_eq!(ai.tool_calls().len(), 1);
/// assert_eq!(Message::human("hi").text(), "hi");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Instructions for the model.
    System {
        /// Message id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The text.
        content: String,
    },
    /// What the user said.
    Human {
        /// Message id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The text.
        content: String,
    },
    /// The model's turn.
    Ai(AiMessage),
    /// A tool's result.
    Tool(ToolMessage),
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            id: None,
            content: content.into(),
        }
    }

    /// A human message.
    pub fn human(content: impl Into<String>) -> Self {
        Message::Human {
            id: None,
            content: content.into(),
        }
    }

    /// The message's text.
    pub fn text(&self) -> &str {
        match self {
            Message::System { content, .. } | Message::Human { content, .. } => content,
            Message::Ai(m) => &m.content,
            Message::Tool(m) => &m.content,
        }
    }

    /// The tool calls of an AI message (empty for the other kinds).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Message::Ai(m) => &m.tool_calls,
            _ => &[],
        }
    }

    /// The AI message inside, if this is one.
    pub fn as_ai(&self) -> Option<&AiMessage> {
        match self {
            Message::Ai(m) => Some(m),
            _ => None,
        }
    }

    /// The tool message inside, if this is one.
    pub fn as_tool(&self) -> Option<&ToolMessage> {
        match self {
            Message::Tool(m) => Some(m),
            _ => None,
        }
    }
}

impl From<AiMessage> for Message {
    fn from(m: AiMessage) -> Self {
        Message::Ai(m)
    }
}

impl From<ToolMessage> for Message {
    fn from(m: ToolMessage) -> Self {
        Message::Tool(m)
    }
}

impl stategraph::reducers::Message for Message {
    fn id(&self) -> Option<&str> {
        match self {
            Message::System { id, .. } | Message::Human { id, .. } => id.as_deref(),
            Message::Ai(m) => m.id.as_deref(),
            Message::Tool(m) => m.id.as_deref(),
        }
    }

    fn set_id(&mut self, new: String) {
        match self {
            Message::System { id, .. } | Message::Human { id, .. } => *id = Some(new),
            Message::Ai(m) => m.id = Some(new),
            Message::Tool(m) => m.id = Some(new),
        }
    }
}
