//! Whole answers: tool calls, tolerated omissions, finish reasons, bad arguments.

use serde_json::{json, Value};
use stategraph_nodes::{ChatModel, FinishReason, ModelError, ToolCall, Usage};

use crate::server::*;
use crate::support::*;

#[tokio::test]
async fn parses_tool_calls_with_string_or_object_arguments() {
    let server = Server::start(vec![Reply::json(json!({
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "search", "arguments": "{\"q\": \"rust\"}"}},
                    // An object instead of a string, and no id.
                    {"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}},
                    // An empty id and no arguments at all.
                    {"id": "", "function": {"name": "now"}}
                ]
            },
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))])
    .await;

    let reply = model(&server).invoke(ask("go")).await.unwrap();

    assert_eq!(reply.message.content, "");
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall::new("call_a", "search", json!({"q": "rust"})),
            ToolCall::new("call_1", "add", json!({"a": 1, "b": 2})),
            ToolCall::new("call_2", "now", json!({})),
        ]
    );
    assert_eq!(reply.message.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        reply.usage(),
        Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15
        })
    );
}

#[tokio::test]
async fn tolerates_null_content_missing_usage_and_missing_finish_reason() {
    let server = Server::start(vec![
        Reply::json(json!({"choices": [{"message": {"role": "assistant", "content": null}}]})),
        // Content as a list of parts; usage without a total.
        Reply::json(json!({
            "choices": [{"index": 0, "message": {"content": [
                {"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}
            ]}, "finish_reason": null}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 2}
        })),
    ])
    .await;
    let model = model(&server);

    let first = model.invoke(ask("a")).await.unwrap();
    assert_eq!(first.message.content, "");
    assert_eq!(first.message.finish_reason, None);
    assert_eq!(first.finish_reason(), FinishReason::Stop);
    assert_eq!(first.usage(), None);

    let second = model.invoke(ask("b")).await.unwrap();
    assert_eq!(second.message.content, "Hello, world");
    assert_eq!(second.message.finish_reason, None);
    assert_eq!(second.usage().map(|u| u.total_tokens), Some(6));
}

#[tokio::test]
async fn maps_every_finish_reason() {
    let with_reason = |reason: &str| {
        let mut answer = text_answer("x");
        answer["choices"][0]["finish_reason"] = json!(reason);
        Reply::json(answer)
    };
    let legacy_function_call = Reply::json(json!({
        "choices": [{"index": 0, "message": {
            "role": "assistant", "content": null,
            "function_call": {"name": "search", "arguments": "{\"q\":\"x\"}"}
        }, "finish_reason": "function_call"}]
    }));
    let server = Server::start(vec![
        with_reason("stop"),
        with_reason("tool_calls"),
        legacy_function_call,
        with_reason("length"),
        with_reason("content_filter"),
        with_reason("eos_token"),
    ])
    .await;
    let model = model(&server);

    let mut reasons = Vec::new();
    for _ in 0..6 {
        reasons.push(model.invoke(ask("x")).await.unwrap());
    }

    let got: Vec<_> = reasons
        .iter()
        .map(|r| r.message.finish_reason.clone())
        .collect();
    assert_eq!(
        got,
        vec![
            Some(FinishReason::Stop),
            Some(FinishReason::ToolCalls),
            Some(FinishReason::ToolCalls),
            Some(FinishReason::Length),
            Some(FinishReason::ContentFilter),
            Some(FinishReason::Other("eos_token".into())),
        ]
    );
    assert_eq!(
        reasons[2].message.tool_calls,
        vec![ToolCall::new("call_0", "search", json!({"q": "x"}))]
    );
}

#[tokio::test]
async fn invalid_tool_arguments_are_a_decode_error_naming_the_tool() {
    let server = Server::start(vec![
        Reply::json(json!({"choices": [{"message": {"tool_calls": [
            {"id": "c1", "function": {"name": "search", "arguments": "{\"q\": "}}
        ]}, "finish_reason": "tool_calls"}]})),
        Reply::sse_events(&[
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "lookup", "arguments": "{\"q\":"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": " tru"}}]}),
                json!("tool_calls"),
            ),
        ]),
    ])
    .await;
    let model = model(&server);

    match model.invoke(ask("x")).await {
        Err(ModelError::Decode { model, message }) => {
            assert_eq!(model, "test-model");
            assert!(message.contains("\"search\""), "{message}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }

    let items = collect(&model, ask("x")).await;
    match items.last() {
        Some(Err(ModelError::Decode { message, .. })) => {
            assert!(message.contains("\"lookup\""), "{message}");
        }
        other => panic!("expected a decode error last, got {other:?}"),
    }
}
