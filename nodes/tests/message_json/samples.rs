//! The sample conversation the old-form goldens hold: every message kind, with ids, usage,
//! finish reasons, tool metadata and attachments.

use serde_json::json;
use stategraph_nodes::media::Attachment;
use stategraph_nodes::{AiMessage, FinishReason, Message, ToolCall, ToolMessage, Usage};

/// Every message kind as the runtime makes them, each with an id.
pub(crate) fn every_kind() -> Vec<Message> {
    let mut system = Message::system("You are terse.");
    set_id(&mut system, "m-system");
    let mut human = Message::human("Chart last week's sales.");
    set_id(&mut human, "m-human");
    let calls = AiMessage {
        id: Some("m-ai-calls".into()),
        content: "Looking it up.".into(),
        usage: Some(Usage {
            input_tokens: 120,
            output_tokens: 30,
            total_tokens: 150,
        }),
        ..AiMessage::calls([
            ToolCall::new("call_1", "query", json!({"table": "sales", "days": 7})),
            ToolCall::new("call_2", "chart", json!({})),
        ])
    };
    let rows = ToolMessage {
        id: Some("m-tool-rows".into()),
        metadata: serde_json::Map::from_iter([("rows".to_owned(), json!(7))]),
        ..ToolMessage::new("call_1", "query", "7 rows")
    };
    let chart = ToolMessage {
        id: Some("m-tool-chart".into()),
        ..ToolMessage::new("call_2", "chart", "[image: image/png]\n[file: report.pdf]")
            .with_attachment(Attachment::new("image/png", "iVBORw0KGgo="))
            .with_attachment(Attachment::new("application/pdf", "JVBERi0=").named("report.pdf"))
    };
    let failed = ToolMessage {
        id: Some("m-tool-error".into()),
        ..ToolMessage::error("call_3", "mail", "mail: refused by policy")
    };
    let answer = AiMessage {
        id: Some("m-ai-answer".into()),
        usage: Some(Usage {
            input_tokens: 300,
            output_tokens: 12,
            total_tokens: 312,
        }),
        ..AiMessage::text("Sales rose 4%.")
    };
    let cut = AiMessage {
        id: Some("m-ai-cut".into()),
        content: "The long version".into(),
        finish_reason: Some(FinishReason::Length),
        ..AiMessage::default()
    };
    let other = AiMessage {
        id: Some("m-ai-other".into()),
        finish_reason: Some(FinishReason::Other("end_turn".into())),
        ..AiMessage::default()
    };
    vec![
        system,
        human,
        calls.into(),
        rows.into(),
        chart.into(),
        failed.into(),
        answer.into(),
        cut.into(),
        other.into(),
    ]
}

fn set_id(m: &mut Message, new: &str) {
    stategraph::reducers::Message::set_id(m, new.to_owned());
}

/// A plain text conversation of `n` messages (alternating human and AI, ids as the messages
/// reducer gives them), for the stored-size measurement.
pub(crate) fn plain_conversation(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            let mut m = if i % 2 == 0 {
                Message::human(format!("Question number {i}: what about the weather?"))
            } else {
                AiMessage::text(format!("Answer number {i}: sunny, with a light breeze.")).into()
            };
            set_id(&mut m, &format!("{:08x}-0000-4000-8000-{:012x}", i, i));
            m
        })
        .collect()
}
