//! A message that does not read is a serde error naming what was wrong, never a panic.

use serde_json::{json, Value};
use stategraph_nodes::{AiMessage, Message, ToolMessage};

/// The error reading `value` as a message (a panic would fail the test).
fn error_of(value: Value) -> String {
    match serde_json::from_value::<Message>(value.clone()) {
        Ok(m) => panic!("{value} read as {m:?}"),
        Err(e) => e.to_string(),
    }
}

fn assert_names(value: Value, words: &[&str]) {
    let error = error_of(value);
    for word in words {
        assert!(error.contains(word), "{error:?} does not name {word:?}");
    }
}

#[test]
fn an_unknown_type_or_role_is_named() {
    assert_names(
        json!({"type": "robot", "content": "x"}),
        &["unknown message type", "robot"],
    );
    assert_names(
        json!({"role": "narrator", "content": "x"}),
        &["unknown message role", "narrator"],
    );
    assert_names(json!({"content": "x"}), &["`type` or a `role`"]);
    assert_names(json!({"type": 3, "content": "x"}), &["`type`", "a number"]);
    assert_names(json!("hi"), &["must be an object", "a string"]);
}

#[test]
fn content_of_a_wrong_type_is_named_with_the_kind_of_message() {
    assert_names(
        json!({"type": "human", "content": 42}),
        &["human message", "`content`", "a number"],
    );
    assert_names(
        json!({"type": "ai", "content": {"text": "x"}}),
        &["AI message", "`content`", "an object"],
    );
    assert_names(
        json!({"type": "human", "content": [true]}),
        &["content block 0", "a boolean"],
    );
}

#[test]
fn a_block_without_what_it_needs_is_named_with_its_index() {
    assert_names(
        json!({"type": "human", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}),
        &["content block 1", "has no `text`"],
    );
    assert_names(
        json!({"type": "ai", "content": [{"type": "text", "text": 5}]}),
        &["content block 0", "`text` must be a string"],
    );
    assert_names(
        json!({"type": "human", "content": [{"text": "a"}]}),
        &["has no `type`"],
    );
    assert_names(
        json!({"type": "human", "content": [{"type": "image", "base64": "AAAA"}]}),
        &["`image` block", "no `mime_type`"],
    );
    assert_names(
        json!({"type": "human", "content": [{"type": "image", "mime_type": "image/png"}]}),
        &["`image` block", "no `base64`"],
    );
    assert_names(
        json!({"type": "human", "content": [{"type": "hologram"}]}),
        &["hologram"],
    );
}

#[test]
fn an_image_given_by_url_is_refused_naming_the_url() {
    assert_names(
        json!({"type": "human", "content": [{"type": "image", "url": "https://example.com/cat.png"}]}),
        &["by URL", "https://example.com/cat.png", "base64"],
    );
    assert_names(
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}),
        &["by URL", "https://example.com/a.png"],
    );
    assert_names(
        json!({"type": "human", "content": [{"type": "image", "source_type": "url", "url": "http://x/y.png"}]}),
        &["by URL", "http://x/y.png"],
    );
}

#[test]
fn a_system_message_takes_text_blocks_only() {
    assert_names(
        json!({"type": "system", "content": [{"type": "image", "base64": "AA", "mime_type": "image/png"}]}),
        &["system message", "text blocks only", "`image`"],
    );
}

#[test]
fn a_tool_message_needs_its_call_id_and_a_known_status() {
    assert_names(
        json!({"type": "tool", "content": "x", "name": "t"}),
        &["tool message", "`tool_call_id`"],
    );
    assert_names(
        json!({"type": "tool", "content": "x", "tool_call_id": "c", "status": "maybe"}),
        &["`status`", "maybe"],
    );
}

#[test]
fn bad_tool_calls_are_named_with_their_index() {
    assert_names(
        json!({"type": "ai", "content": "", "tool_calls": [{"name": "a", "args": {}, "id": "1"}, {"args": {}}]}),
        &["tool call 1", "no `name`"],
    );
    assert_names(
        json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{nope"}}]}),
        &["tool call 0", "(f)", "not JSON"],
    );
    assert_names(
        json!({"type": "ai", "content": "", "tool_calls": {}}),
        &["`tool_calls` must be a list"],
    );
}

#[test]
fn reading_one_kind_as_another_names_both() {
    let human = json!({"type": "human", "content": "x"});
    let error = serde_json::from_value::<AiMessage>(human.clone())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("expected an AI message, found a human message")
    );
    let error = serde_json::from_value::<ToolMessage>(human)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("expected a tool message, found a human message")
    );
}
