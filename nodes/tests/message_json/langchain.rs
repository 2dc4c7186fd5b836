//! Fixtures recorded from langchain-core (`tests/fixtures/langchain/record.sh`): every
//! `model_dump()` and `messages_to_dict` entry reads into the expected typed message, and
//! writes back as the fixture less LangChain's defaults.

use serde_json::{json, Map, Value};
use stategraph_nodes::media::Attachment;
use stategraph_nodes::{AiMessage, FinishReason, Message, ToolCall, ToolMessage, Usage};

use crate::{fixture, R};

const PNG: &str = "iVBORw0KGgo=";

fn with_id(mut m: Message, id: &str) -> Message {
    stategraph::reducers::Message::set_id(&mut m, id.to_owned());
    m
}

fn usage() -> Option<Usage> {
    Some(Usage {
        input_tokens: 42,
        output_tokens: 7,
        total_tokens: 49,
    })
}

fn map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The typed message each recorded fixture must read into.
fn expected(name: &str) -> Option<Message> {
    let png = || Attachment::new("image/png", PNG);
    let weather = || ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}));
    Some(match name {
        "human_text" => with_id(Message::human("What is the weather in Paris?"), "h-1"),
        "human_named" => Message::Human {
            id: Some("h-2".into()),
            name: Some("ada".into()),
            content: "Hello".into(),
            attachments: Vec::new(),
        },
        "human_text_and_image" => with_id(
            Message::human_with_attachments("What is in this picture?", [png()]),
            "h-3",
        ),
        "human_image_v03" => with_id(
            Message::human_with_attachments("And this one?", [png()]),
            "h-4",
        ),
        "human_image_url_data" => with_id(
            Message::human_with_attachments("Describe it.", [png()]),
            "h-5",
        ),
        "human_file_and_audio" => with_id(
            Message::human_with_attachments(
                "Summarise the report and the memo.",
                [
                    Attachment::new("application/pdf", "JVBERi0xLjQ=").named("report.pdf"),
                    Attachment::new("audio/wav", "UklGRiQA"),
                ],
            ),
            "h-6",
        ),
        "system" => with_id(Message::system("You are terse."), "s-1"),
        "ai_text" => AiMessage {
            id: Some("a-1".into()),
            usage: usage(),
            response_metadata: map(json!({"model_name": "gpt-4o-mini"})),
            ..AiMessage::text("It is 18°C and sunny.")
        }
        .into(),
        "ai_tool_calls" => AiMessage {
            id: Some("a-2".into()),
            usage: usage(),
            metadata: map(json!({"reasoning_content": "Two tools are needed."})),
            ..AiMessage::calls([weather(), ToolCall::new("call_2", "get_time", json!({}))])
        }
        .into(),
        "ai_length" => AiMessage {
            id: Some("a-3".into()),
            content: "The long".into(),
            finish_reason: Some(FinishReason::Length),
            ..AiMessage::default()
        }
        .into(),
        "ai_chunk_tool_call_chunks" => AiMessage {
            id: Some("a-4".into()),
            tool_calls: vec![weather()],
            ..AiMessage::default()
        }
        .into(),
        "tool_success" => ToolMessage {
            id: Some("t-1".into()),
            ..ToolMessage::new("call_1", "get_weather", "18°C and sunny")
        }
        .into(),
        "tool_error" => ToolMessage {
            id: Some("t-2".into()),
            ..ToolMessage::error("call_2", "get_weather", "error: city not found")
        }
        .into(),
        "tool_with_image" => ToolMessage {
            id: Some("t-3".into()),
            metadata: map(json!({"rows": 7})),
            ..ToolMessage::new("call_3", "chart", "[image: image/png]").with_attachment(png())
        }
        .into(),
        _ => return None,
    })
}

/// The recorded entries of a fixture file, without its `_recorded_with` header.
fn entries(file: &str) -> Result<Vec<(String, Value)>, Box<dyn std::error::Error + Send + Sync>> {
    let Value::Object(all) = fixture(file)? else {
        return Err(format!("{file} is not an object").into());
    };
    Ok(all
        .into_iter()
        .filter(|(name, _)| !name.starts_with('_'))
        .collect())
}

/// A LangChain dict less what LangChain writes by default: empty or null fields, a
/// `success` status, the streaming-only `tool_call_chunks`/`chunk_position`, chunk types
/// (`AIMessageChunk` is `ai`), and a content list of text blocks only (the joined text).
fn less_defaults(dict: &Value) -> Value {
    let Value::Object(map) = dict else {
        return dict.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let default = match (key.as_str(), value) {
            (_, Value::Null) => true,
            ("additional_kwargs" | "response_metadata", Value::Object(m)) => m.is_empty(),
            ("tool_calls" | "invalid_tool_calls", Value::Array(a)) => a.is_empty(),
            ("example", Value::Bool(false)) => true,
            ("status", Value::String(s)) => s == "success",
            ("tool_call_chunks" | "chunk_position", _) => true,
            _ => false,
        };
        if !default {
            out.insert(key.clone(), value.clone());
        }
    }
    if let Some(Value::String(kind)) = out.get("type") {
        let plain = match kind.as_str() {
            "AIMessageChunk" => Some("ai"),
            "HumanMessageChunk" => Some("human"),
            "SystemMessageChunk" => Some("system"),
            "ToolMessageChunk" => Some("tool"),
            _ => None,
        };
        if let Some(plain) = plain {
            out.insert("type".into(), json!(plain));
        }
    }
    if let Some(Value::Array(blocks)) = out.get("content") {
        let texts: Option<Vec<&str>> = blocks
            .iter()
            .map(|b| (b["type"] == "text").then(|| b["text"].as_str()).flatten())
            .collect();
        if let Some(texts) = texts {
            out.insert("content".into(), json!(texts.concat()));
        }
    }
    Value::Object(out)
}

/// Fixtures whose blocks are in a form other than langchain-core 1.x's standard one: they
/// read into the same value, and write back in the standard form.
const OTHER_BLOCK_FORMS: [&str; 2] = ["human_image_v03", "human_image_url_data"];

fn check_file(file: &str, unwrap: fn(&Value) -> &Value) -> R {
    let entries = entries(file)?;
    assert_eq!(
        entries.len(),
        14,
        "{file}: every recorded message is checked"
    );
    for (name, recorded) in entries {
        let want = expected(&name).ok_or(format!("{file}: no expectation for {name}"))?;
        let read: Message = serde_json::from_value(recorded.clone())
            .map_err(|e| format!("{file}: {name} does not read: {e}"))?;
        assert_eq!(read, want, "{file}: {name} reads field by field");
        if OTHER_BLOCK_FORMS.contains(&name.as_str()) {
            continue;
        }
        let written = serde_json::to_value(&read)?;
        assert_eq!(
            written,
            less_defaults(unwrap(&recorded)),
            "{file}: {name} writes back as the recorded dict less LangChain's defaults"
        );
    }
    Ok(())
}

#[test]
fn every_recorded_model_dump_reads_typed_and_writes_back_less_defaults() -> R {
    check_file("langchain/model_dump.json", |v| v)
}

#[test]
fn every_recorded_messages_to_dict_entry_reads_like_its_model_dump() -> R {
    check_file("langchain/messages_to_dict.json", |v| &v["data"])
}

#[test]
fn images_in_the_0_3_and_openai_forms_write_back_in_the_standard_form() -> R {
    for name in OTHER_BLOCK_FORMS {
        let m = expected(name).ok_or("no expectation")?;
        let written = serde_json::to_value(&m)?;
        assert_eq!(
            written["content"][1],
            json!({"type": "image", "base64": PNG, "mime_type": "image/png"})
        );
    }
    Ok(())
}

#[test]
fn a_chunk_reads_as_the_plain_kind_with_its_parsed_tool_calls() -> R {
    let recorded = fixture("langchain/model_dump.json")?;
    let chunk = &recorded["ai_chunk_tool_call_chunks"];
    assert_eq!(chunk["type"], "AIMessageChunk");
    let read: Message = serde_json::from_value(chunk.clone())?;
    assert_eq!(serde_json::to_value(&read)?["type"], "ai");
    assert_eq!(read.tool_calls()[0].args, json!({"city": "Paris"}));
    Ok(())
}
