//! Conversation messages: system, human, AI (with tool calls) and tool results.
//!
//! Their serde form is LangChain's message dict (what `message.model_dump()` gives, `type`
//! inside), compact: empty and default fields are left out. Reading also takes LangChain's
//! `messages_to_dict` form, the role form clients send (`{"role": "user", ...}`, OpenAI-style
//! tool calls), content as a string or a list of content blocks, and the form stategraph
//! stored before (decision 0081).

mod block;
mod read;
mod write;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::media::Attachment;

/// One tool call an AI message asks for.
///
/// Its serde form is LangChain's `{"name", "args", "id", "type": "tool_call"}`; reading also
/// takes OpenAI's `{"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}`.
///
/// ```
/// use stategraph_nodes::ToolCall;
///
/// let call = ToolCall::new("c1", "search", serde_json::json!({"q": "x"}));
/// let json = serde_json::json!({"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call"});
/// assert_eq!(serde_json::to_value(&call)?, json);
/// let openai = serde_json::json!({"id": "c1", "type": "function",
///     "function": {"name": "search", "arguments": "{\"q\": \"x\"}"}});
/// assert_eq!(serde_json::from_value::<ToolCall>(openai)?, call);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call's id, chosen by the model; the tool message answering it carries it back.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model wrote them (a JSON object, normally).
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
///
/// Its serde form is the provider's string: `stop`, `tool_calls`, `length`,
/// `content_filter`, or any other name as given.
#[derive(Debug, Clone, PartialEq, Eq)]
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

impl FinishReason {
    /// The reason's name: `stop`, `tool_calls`, `length`, `content_filter`, or the other
    /// name as the provider gave it.
    pub fn name(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(name) => name,
        }
    }

    /// The reason named `name` (an unknown name is [`FinishReason::Other`]).
    ///
    /// ```
    /// use stategraph_nodes::FinishReason;
    ///
    /// assert_eq!(FinishReason::from_name("length".into()), FinishReason::Length);
    /// assert_eq!(FinishReason::from_name("end_turn".into()).name(), "end_turn");
    /// ```
    pub fn from_name(name: String) -> Self {
        match name.as_str() {
            "stop" => FinishReason::Stop,
            "tool_calls" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            _ => FinishReason::Other(name),
        }
    }
}

/// Token counts of one model call (LangChain's `usage_metadata`; its token details are not
/// kept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the request.
    #[serde(default)]
    pub input_tokens: u64,
    /// Tokens of the response.
    #[serde(default)]
    pub output_tokens: u64,
    /// Their sum as the provider reported it.
    #[serde(default)]
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
///
/// Its serde form is LangChain's AI message dict (see [`Message`]); `finish_reason` is
/// `response_metadata.finish_reason`, `usage` is `usage_metadata`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AiMessage {
    /// Message id (assigned by the messages reducer when absent).
    pub id: Option<String>,
    /// A name for the speaker, if one was given.
    pub name: Option<String>,
    /// The text (of a list of content blocks: the text blocks joined).
    pub content: String,
    /// The tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub finish_reason: Option<FinishReason>,
    /// Token usage of the call that produced this message.
    pub usage: Option<Usage>,
    /// The provider's other response metadata (`model_name`, ...), `finish_reason` aside.
    pub response_metadata: serde_json::Map<String, serde_json::Value>,
    /// LangChain's `additional_kwargs`: provider data kept with the message.
    pub metadata: serde_json::Map<String, serde_json::Value>,
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
///
/// Its serde form is LangChain's tool message dict (see [`Message`]): `metadata` is
/// `additional_kwargs`, the attachments are content blocks after a text block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolMessage {
    /// Message id (assigned by the messages reducer when absent).
    pub id: Option<String>,
    /// The id of the call this answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the model reads.
    pub content: String,
    /// Success or error.
    pub status: ToolStatus,
    /// Structured data for programs, not for the model (DeerFlow's `additional_kwargs`).
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Media the tool returned (images, audio, files), for models that take them as content
    /// parts; `content` still describes each one in text, and a client whose model does not
    /// take one tells it what was left out ([`ToolMessage::content_leaving_out`]). Stored
    /// messages of the earlier form (an `attachments` or `images` list) decode into this field.
    pub attachments: Vec<Attachment>,
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

    /// The same message with `attachment` attached.
    pub fn with_attachment(mut self, attachment: Attachment) -> Self {
        self.attachments.push(attachment);
        self
    }

    /// The text for a model given only some of the attachments: `content`, then, for each
    /// attachment `why` gives a reason for leaving out, a line saying so
    /// ([`Attachment::left_out_note`]). Borrowed when nothing is left out.
    ///
    /// ```
    /// use stategraph_nodes::media::{Attachment, MediaKind};
    /// use stategraph_nodes::ToolMessage;
    ///
    /// let m = ToolMessage::new("c1", "record", "[audio: audio/wav, 4 bytes of base64]")
    ///     .with_attachment(Attachment::new("audio/wav", "AAAA"));
    /// let text = m.content_leaving_out(|a| {
    ///     (a.kind() == MediaKind::Audio).then(|| "this model takes no audio".to_owned())
    /// });
    /// assert_eq!(
    ///     text,
    ///     "[audio: audio/wav, 4 bytes of base64]\n\
    ///      [left out: audio audio/wav, about 3 bytes: this model takes no audio]"
    /// );
    /// ```
    pub fn content_leaving_out(
        &self,
        why: impl FnMut(&Attachment) -> Option<String>,
    ) -> Cow<'_, str> {
        text_leaving_out(&self.content, &self.attachments, why)
    }

    /// Whether this reports an error.
    pub fn is_error(&self) -> bool {
        self.status == ToolStatus::Error
    }
}

/// `content`, then, for each of `attachments` that `why` gives a reason for leaving out, a
/// line saying so ([`Attachment::left_out_note`]). Borrowed when nothing is left out.
pub(crate) fn text_leaving_out<'a>(
    content: &'a str,
    attachments: &[Attachment],
    mut why: impl FnMut(&Attachment) -> Option<String>,
) -> Cow<'a, str> {
    let mut text = Cow::Borrowed(content);
    for attachment in attachments {
        if let Some(reason) = why(attachment) {
            let text = text.to_mut();
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&attachment.left_out_note(&reason));
        }
    }
    text
}

/// One message of a conversation.
///
/// Its serde form is LangChain's message dict, compact (empty and default fields left out):
///
/// ```
/// use serde_json::json;
/// use stategraph_nodes::media::Attachment;
/// use stategraph_nodes::{AiMessage, Message, ToolCall, ToolMessage, Usage};
///
/// assert_eq!(
///     serde_json::to_value(Message::human("hi"))?,
///     json!({"type": "human", "content": "hi"})
/// );
/// let photo = Message::human_with_attachments("What is this?", [Attachment::new("image/png", "iVBORw0KGgo=")]);
/// assert_eq!(
///     serde_json::to_value(&photo)?,
///     json!({"type": "human", "content": [
///         {"type": "text", "text": "What is this?"},
///         {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
///     ]})
/// );
/// let ai = AiMessage {
///     usage: Some(Usage { input_tokens: 10, output_tokens: 2, total_tokens: 12 }),
///     ..AiMessage::calls([ToolCall::new("c1", "search", json!({"q": "x"}))])
/// };
/// assert_eq!(
///     serde_json::to_value(Message::Ai(ai))?,
///     json!({"type": "ai", "content": "",
///            "tool_calls": [{"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call"}],
///            "usage_metadata": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
///            "response_metadata": {"finish_reason": "tool_calls"}})
/// );
/// assert_eq!(
///     serde_json::to_value(Message::Tool(ToolMessage::error("c1", "search", "timed out")))?,
///     json!({"type": "tool", "content": "timed out", "tool_call_id": "c1", "name": "search",
///            "status": "error"})
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// Reading takes that form with LangChain's defaults present, `messages_to_dict`'s
/// `{"type", "data"}`, chunk types (`AIMessageChunk`), the role form clients send, content as
/// a list of blocks, and the form stategraph stored before:
///
/// ```
/// use stategraph_nodes::Message;
///
/// let sent: Message = serde_json::from_value(serde_json::json!({
///     "role": "assistant", "content": null,
///     "tool_calls": [{"id": "c1", "type": "function",
///                     "function": {"name": "search", "arguments": "{\"q\": \"x\"}"}}]
/// }))?;
/// assert_eq!(sent.tool_calls()[0].args["q"], "x");
/// let dumped: Message = serde_json::from_value(serde_json::json!({
///     "type": "human", "content": [{"type": "text", "text": "hi"}],
///     "additional_kwargs": {}, "response_metadata": {}, "name": null, "id": null
/// }))?;
/// assert_eq!(dumped, Message::human("hi"));
/// let wrong = serde_json::from_value::<Message>(serde_json::json!({"role": "robot", "content": "x"}));
/// assert!(wrong.unwrap_err().to_string().contains("robot"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Instructions for the model.
    System {
        /// Message id.
        id: Option<String>,
        /// A name for the speaker, if one was given.
        name: Option<String>,
        /// The text.
        content: String,
    },
    /// What the user said.
    Human {
        /// Message id.
        id: Option<String>,
        /// A name for the speaker, if one was given.
        name: Option<String>,
        /// The text (of a list of content blocks: the text blocks joined).
        content: String,
        /// Media the user sent (images, audio, files): content blocks after the text.
        attachments: Vec<Attachment>,
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
            name: None,
            content: content.into(),
        }
    }

    /// A human message.
    pub fn human(content: impl Into<String>) -> Self {
        Message::human_with_attachments(content, [])
    }

    /// A human message with media (images, audio, files) after its text.
    pub fn human_with_attachments(
        content: impl Into<String>,
        attachments: impl IntoIterator<Item = Attachment>,
    ) -> Self {
        Message::Human {
            id: None,
            name: None,
            content: content.into(),
            attachments: attachments.into_iter().collect(),
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

    /// The media of a human or tool message (empty for the other kinds).
    pub fn attachments(&self) -> &[Attachment] {
        match self {
            Message::Human { attachments, .. } => attachments,
            Message::Tool(m) => &m.attachments,
            _ => &[],
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_tool_message_with_images_decodes_into_attachments() {
        // As stored before audio and files were kept: the list was named `images`.
        let old = serde_json::json!({
            "type": "tool", "tool_call_id": "c1", "name": "chart", "content": "[image]",
            "images": [{"mime_type": "image/png", "data": "iVBORw0KGgo="}]
        });
        let message: Message = serde_json::from_value(old).unwrap();
        let tool = message.as_tool().unwrap();
        assert_eq!(
            tool.attachments,
            [Attachment::new("image/png", "iVBORw0KGgo=")]
        );
        let again = serde_json::to_value(&message).unwrap();
        assert_eq!(
            again["content"],
            serde_json::json!([
                {"type": "text", "text": "[image]"},
                {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
            ])
        );
        assert_eq!(serde_json::from_value::<Message>(again).unwrap(), message);
    }

    #[test]
    fn nothing_left_out_keeps_the_content_borrowed() {
        let m = ToolMessage::new("c1", "t", "text").with_attachment(Attachment::new("a/b", ""));
        assert!(matches!(
            m.content_leaving_out(|_| None),
            Cow::Borrowed("text")
        ));
    }
}
