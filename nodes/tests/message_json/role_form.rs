//! The role form clients send (`{"role": ..., "content": ...}`, OpenAI-style tool calls)
//! reads into the message LangChain's `convert_to_messages` makes of it (recorded in
//! `fixtures/langchain/role_form.json`).

use serde_json::{json, Value};
use stategraph_nodes::{Message, ToolCall};

use crate::{fixture, R};

#[test]
fn every_recorded_role_form_reads_like_langchains_conversion_of_it() -> R {
    let Value::Object(all) = fixture("langchain/role_form.json")? else {
        return Err("role_form.json is not an object".into());
    };
    let mut checked = 0;
    for (name, case) in all.iter().filter(|(name, _)| !name.starts_with('_')) {
        let input: Message = serde_json::from_value(case["input"].clone())
            .map_err(|e| format!("{name}: the role form does not read: {e}"))?;
        let converted: Message = serde_json::from_value(case["langchain"].clone())
            .map_err(|e| format!("{name}: LangChain's conversion does not read: {e}"))?;
        assert_eq!(input, converted, "{name}");
        checked += 1;
    }
    assert_eq!(checked, 6);
    Ok(())
}

#[test]
fn openai_style_tool_calls_read_with_their_arguments_parsed() -> R {
    let m: Message = serde_json::from_value(json!({
        "role": "assistant", "content": null,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"rust\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "now", "arguments": ""}},
            {"id": "c3", "type": "function", "function": {"name": "now"}}
        ]
    }))?;
    assert_eq!(
        m.tool_calls(),
        [
            ToolCall::new("c1", "search", json!({"q": "rust"})),
            ToolCall::new("c2", "now", json!({})),
            ToolCall::new("c3", "now", json!({}))
        ]
    );
    Ok(())
}

#[test]
fn langchain_style_tool_calls_in_the_role_form_read_too() -> R {
    let m: Message = serde_json::from_value(json!({
        "role": "ai", "content": "",
        "tool_calls": [{"name": "search", "args": {"q": "x"}, "id": "c1"}]
    }))?;
    assert_eq!(
        m.tool_calls(),
        [ToolCall::new("c1", "search", json!({"q": "x"}))]
    );
    Ok(())
}

#[test]
fn the_roles_user_human_developer_and_tool_read_as_their_kinds() -> R {
    let read = |v: Value| serde_json::from_value::<Message>(v);
    assert_eq!(
        read(json!({"role": "user", "content": "a"}))?,
        Message::human("a")
    );
    assert_eq!(
        read(json!({"role": "human", "content": "a"}))?,
        Message::human("a")
    );
    assert_eq!(
        read(json!({"role": "developer", "content": "s"}))?,
        Message::system("s")
    );
    assert_eq!(
        read(json!({"type": "developer", "content": "s"}))?,
        Message::system("s")
    );
    let tool = read(json!({"role": "tool", "content": "ok", "tool_call_id": "c1"}))?;
    assert_eq!(tool.as_tool().map(|t| t.tool_call_id.as_str()), Some("c1"));
    Ok(())
}
