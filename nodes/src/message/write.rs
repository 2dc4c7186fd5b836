//! Writing messages as LangChain's message dicts, compact, and the serde impls that read
//! them back (through [`super::read`]).

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::block::ContentOut;
use super::read::{self, Kind};
use super::{AiMessage, FinishReason, Message, ToolCall, ToolMessage, ToolStatus, Usage};

/// A system or human message.
#[derive(Serialize)]
struct PlainOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    content: ContentOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

/// An AI message.
#[derive(Serialize)]
struct AiOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tool_calls: &'a [ToolCall],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage_metadata: Option<&'a Usage>,
    #[serde(skip_serializing_if = "ResponseMetadata::is_empty")]
    response_metadata: ResponseMetadata<'a>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    additional_kwargs: &'a Map<String, Value>,
}

/// `response_metadata`: the finish reason, then the provider's other keys.
struct ResponseMetadata<'a> {
    finish_reason: Option<&'a FinishReason>,
    rest: &'a Map<String, Value>,
}

impl ResponseMetadata<'_> {
    fn others(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.rest.iter().filter(|(k, _)| *k != "finish_reason")
    }

    fn is_empty(&self) -> bool {
        self.finish_reason.is_none() && self.others().next().is_none()
    }
}

impl Serialize for ResponseMetadata<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(reason) = self.finish_reason {
            map.serialize_entry("finish_reason", reason)?;
        }
        for (key, value) in self.others() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A tool message.
#[derive(Serialize)]
struct ToolOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    content: ContentOut<'a>,
    tool_call_id: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "is_success")]
    status: ToolStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    additional_kwargs: &'a Map<String, Value>,
}

fn is_success(status: &ToolStatus) -> bool {
    *status == ToolStatus::Success
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::System { id, name, content } => PlainOut {
                kind: "system",
                content: ContentOut {
                    text: content,
                    attachments: &[],
                },
                id: id.as_deref(),
                name: name.as_deref(),
            }
            .serialize(s),
            Message::Human {
                id,
                name,
                content,
                attachments,
            } => PlainOut {
                kind: "human",
                content: ContentOut {
                    text: content,
                    attachments,
                },
                id: id.as_deref(),
                name: name.as_deref(),
            }
            .serialize(s),
            Message::Ai(m) => m.serialize(s),
            Message::Tool(m) => m.serialize(s),
        }
    }
}

impl Serialize for AiMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        AiOut {
            kind: "ai",
            content: &self.content,
            id: self.id.as_deref(),
            name: self.name.as_deref(),
            tool_calls: &self.tool_calls,
            usage_metadata: self.usage.as_ref(),
            response_metadata: ResponseMetadata {
                finish_reason: self.finish_reason.as_ref(),
                rest: &self.response_metadata,
            },
            additional_kwargs: &self.metadata,
        }
        .serialize(s)
    }
}

impl Serialize for ToolMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ToolOut {
            kind: "tool",
            content: ContentOut {
                text: &self.content,
                attachments: &self.attachments,
            },
            tool_call_id: &self.tool_call_id,
            name: &self.name,
            status: self.status,
            id: self.id.as_deref(),
            additional_kwargs: &self.metadata,
        }
        .serialize(s)
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("args", &self.args)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("type", "tool_call")?;
        map.end()
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        read::message(Value::deserialize(d)?, None).map_err(D::Error::custom)
    }
}

/// An AI message read alone: a message of another kind is an error; one naming no kind is
/// taken as AI.
impl<'de> Deserialize<'de> for AiMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match read::message(Value::deserialize(d)?, Some(Kind::Ai)) {
            Ok(Message::Ai(m)) => Ok(m),
            Ok(other) => Err(D::Error::custom(format!(
                "expected an AI message, found a {} message",
                kind_noun(&other)
            ))),
            Err(e) => Err(D::Error::custom(e)),
        }
    }
}

/// A tool message read alone: a message of another kind is an error; one naming no kind is
/// taken as a tool message.
impl<'de> Deserialize<'de> for ToolMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match read::message(Value::deserialize(d)?, Some(Kind::Tool)) {
            Ok(Message::Tool(m)) => Ok(m),
            Ok(other) => Err(D::Error::custom(format!(
                "expected a tool message, found a {} message",
                kind_noun(&other)
            ))),
            Err(e) => Err(D::Error::custom(e)),
        }
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        read::tool_call(Value::deserialize(d)?, "the tool call").map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(FinishReason::from_name)
    }
}

fn kind_noun(m: &Message) -> &'static str {
    match m {
        Message::System { .. } => Kind::System.noun(),
        Message::Human { .. } => Kind::Human.noun(),
        Message::Ai(_) => Kind::Ai.noun(),
        Message::Tool(_) => Kind::Tool.noun(),
    }
}
