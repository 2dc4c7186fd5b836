//! Conversation messages: system, human, AI (with tool calls) and tool results.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::media::Attachment;

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
    /// Media the tool returned (images, audio, files), for models that take them as content
    /// parts; `content` still describes each one in text, and a client whose model does not
    /// take one tells it what was left out ([`ToolMessage::content_leaving_out`]). Stored
    /// messages whose list is named `images` decode into this field.
    #[serde(default, alias = "images", skip_serializing_if = "Vec::is_empty")]
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
        mut why: impl FnMut(&Attachment) -> Option<String>,
    ) -> Cow<'_, str> {
        let mut text = Cow::Borrowed(self.content.as_str());
        for attachment in &self.attachments {
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
            again["attachments"],
            serde_json::json!([{"mime_type": "image/png", "data": "iVBORw0KGgo="}])
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
