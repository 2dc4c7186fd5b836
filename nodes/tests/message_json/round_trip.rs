//! The round-trip law: writing any message and reading it back gives the same message.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use stategraph_nodes::media::Attachment;
use stategraph_nodes::{
    AiMessage, FinishReason, Message, ToolCall, ToolMessage, ToolStatus, Usage,
};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z ]{1,12}", "\\PC{0,8}"]
}

fn maybe_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        text().prop_map(Value::String),
        proptest::collection::btree_map("[a-z]{1,4}", "[a-z]{0,4}", 0..3).prop_map(|m| json!(m)),
    ]
}

fn json_map() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::btree_map("[a-z_]{1,6}", json_value(), 0..3)
        .prop_map(|m| m.into_iter().collect())
}

fn attachment() -> impl Strategy<Value = Attachment> {
    (
        prop_oneof![
            Just("image/png".to_owned()),
            Just("audio/wav".to_owned()),
            Just("application/pdf".to_owned()),
            "[a-z]{0,5}/[a-z]{0,5}",
        ],
        "[A-Za-z0-9+/]{0,12}",
        maybe_text(),
    )
        .prop_map(|(mime, data, name)| Attachment {
            name,
            ..Attachment::new(mime, data)
        })
}

fn attachments() -> impl Strategy<Value = Vec<Attachment>> {
    proptest::collection::vec(attachment(), 0..3)
}

fn finish_reason() -> impl Strategy<Value = FinishReason> {
    prop_oneof![
        Just(FinishReason::Stop),
        Just(FinishReason::ToolCalls),
        Just(FinishReason::Length),
        Just(FinishReason::ContentFilter),
        // Another name than the four (`Other("stop")` is not a value the runtime makes).
        "[a-z_]{1,10}".prop_map(FinishReason::from_name),
    ]
}

fn ai() -> impl Strategy<Value = AiMessage> {
    let call =
        (text(), text(), json_value()).prop_map(|(id, name, args)| ToolCall { id, name, args });
    let usage = (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(i, o, t)| Usage {
        input_tokens: i.into(),
        output_tokens: o.into(),
        total_tokens: t.into(),
    });
    let response_metadata = json_map().prop_map(|mut m| {
        m.remove("finish_reason");
        m
    });
    (
        (maybe_text(), maybe_text(), text()),
        proptest::collection::vec(call, 0..3),
        proptest::option::of(finish_reason()),
        proptest::option::of(usage),
        response_metadata,
        json_map(),
    )
        .prop_map(
            |(
                (id, name, content),
                tool_calls,
                finish_reason,
                usage,
                response_metadata,
                metadata,
            )| {
                AiMessage {
                    id,
                    name,
                    content,
                    tool_calls,
                    finish_reason,
                    usage,
                    response_metadata,
                    metadata,
                }
            },
        )
}

fn tool() -> impl Strategy<Value = ToolMessage> {
    (
        (maybe_text(), text(), text(), text()),
        any::<bool>(),
        json_map(),
        attachments(),
    )
        .prop_map(
            |((id, tool_call_id, name, content), error, metadata, attachments)| ToolMessage {
                id,
                tool_call_id,
                name,
                content,
                status: if error {
                    ToolStatus::Error
                } else {
                    ToolStatus::Success
                },
                metadata,
                attachments,
            },
        )
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (maybe_text(), maybe_text(), text()).prop_map(|(id, name, content)| Message::System {
            id,
            name,
            content
        }),
        (maybe_text(), maybe_text(), text(), attachments()).prop_map(
            |(id, name, content, attachments)| Message::Human {
                id,
                name,
                content,
                attachments,
            }
        ),
        ai().prop_map(Message::Ai),
        tool().prop_map(Message::Tool),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_message_written_and_read_back_is_the_same_message(m in message()) {
        let written = serde_json::to_value(&m).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let read: Message = serde_json::from_value(written.clone())
            .map_err(|e| TestCaseError::fail(format!("{written} does not read: {e}")))?;
        prop_assert_eq!(read, m);
    }

    #[test]
    fn any_message_written_as_text_reads_back_the_same(m in message()) {
        let text = serde_json::to_string(&m).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let read: Message = serde_json::from_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{text} does not read: {e}")))?;
        prop_assert_eq!(read, m);
    }
}
