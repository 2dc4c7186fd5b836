//! Streams: SSE fragments assembled into one answer, and the ways a stream can end.

use serde_json::{json, Value};
use stategraph_nodes::model::assemble_chunks;
use stategraph_nodes::{FinishReason, ModelChunk, ModelError, ToolCall, Usage};

use crate::server::*;
use crate::support::*;

#[tokio::test]
async fn streams_text_and_tool_call_fragments_into_one_answer() {
    let server = Server::start(vec![Reply::sse_events(&[
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Let me "}), Value::Null),
        chunk(json!({"content": "check."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                                   "function": {"name": "search", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"q\""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": ":\"ru"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "st\"}"}}]}),
            Value::Null,
        ),
        // A second call, without an id.
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"name": "add", "arguments": "{\"a\":1,"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": "\"b\":2}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        // The usage chunk: no choices.
        json!({"id": "chatcmpl-s", "choices": [],
               "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}}),
    ])])
    .await;
    let model = model(&server);

    let (chunks, answer) = stream_ok(&model, ask("go")).await;

    let call = |index, id: Option<&str>, name: Option<&str>, args: &str| ModelChunk::ToolCall {
        index,
        id: id.map(String::from),
        name: name.map(String::from),
        args_delta: args.into(),
    };
    assert_eq!(
        chunks,
        vec![
            ModelChunk::Text {
                delta: "Let me ".into()
            },
            ModelChunk::Text {
                delta: "check.".into()
            },
            call(0, Some("call_x"), Some("search"), ""),
            call(0, None, None, "{\"q\""),
            call(0, None, None, ":\"ru"),
            call(0, None, None, "st\"}"),
            call(1, Some("call_1"), Some("add"), "{\"a\":1,"),
            call(1, None, None, "\"b\":2}"),
        ]
    );
    assert_eq!(answer.content, "Let me check.");
    assert_eq!(
        answer.tool_calls,
        vec![
            ToolCall::new("call_x", "search", json!({"q": "rust"})),
            ToolCall::new("call_1", "add", json!({"a": 1, "b": 2})),
        ]
    );
    assert_eq!(answer.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        answer.usage,
        Some(Usage {
            input_tokens: 20,
            output_tokens: 9,
            total_tokens: 29
        })
    );
    // The fragments alone assemble to the same message.
    let assembled = assemble_chunks("test-model", chunks).unwrap();
    assert_eq!(assembled.message.content, answer.content);
    assert_eq!(assembled.message.tool_calls, answer.tool_calls);

    let sent = server.only_request();
    assert_eq!(sent.body["stream"], json!(true));
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent.headers["accept"], "text/event-stream");
}

#[tokio::test]
async fn tolerates_keepalive_comments_and_crlf_in_sse() {
    let text = concat!(
        ": keep-alive\r\n\r\n",
        "event: message\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Grüße \"}}]}\r\n\r\n",
        "\r\n",
        ": ping\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"🌍!\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n",
        ": bye\r\n",
        "data: [DONE]\r\n\r\n",
    )
    .as_bytes();
    // Cut inside "data:", inside a JSON string, inside "ü", between \r and \n, inside the
    // emoji, and inside "[DONE]".
    let at = |needle: &str, plus: usize| {
        let bytes = needle.as_bytes();
        text.windows(bytes.len()).position(|w| w == bytes).unwrap() + plus
    };
    let mut cuts = vec![
        at("data: {", 2),
        at("Gr", 1),
        at("ü", 1),
        at("}]}\r\n", 4),
        at("🌍", 2),
        at("[DONE]", 3),
    ];
    cuts.sort_unstable();
    let mut parts = Vec::new();
    let mut from = 0;
    for cut in cuts {
        parts.push(text[from..cut].to_vec());
        from = cut;
    }
    parts.push(text[from..].to_vec());
    let server = Server::start(vec![Reply::sse_bytes(parts)]).await;

    let (chunks, answer) = stream_ok(&model(&server), ask("hi")).await;

    let texts: String = chunks
        .iter()
        .map(|c| match c {
            ModelChunk::Text { delta } => delta.as_str(),
            other => panic!("unexpected chunk {other:?}"),
        })
        .collect();
    assert_eq!(texts, "Grüße 🌍!");
    assert_eq!(answer.content, "Grüße 🌍!");
    assert_eq!(answer.finish_reason, Some(FinishReason::Stop));
    assert_eq!(answer.usage, None);
}

#[tokio::test]
async fn tool_call_fragments_without_index_or_with_object_arguments_are_joined() {
    let server = Server::start(vec![Reply::sse_events(&[
        // No index: a new id starts a call, fragments without id continue the last one.
        chunk(
            json!({"tool_calls": [{"id": "a1", "function": {"name": "search", "arguments": "{\"q\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"function": {"arguments": "\"x\"}"}}]}),
            Value::Null,
        ),
        // The whole call at once, arguments as an object, the name repeated later.
        chunk(
            json!({"tool_calls": [{"id": "a2", "function": {"name": "add", "arguments": {"a": 1}}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"id": "a2", "function": {"name": "add"}}]}),
            json!("tool_calls"),
        ),
    ])])
    .await;

    let (chunks, answer) = stream_ok(&model(&server), ask("go")).await;

    assert_eq!(
        answer.tool_calls,
        vec![
            ToolCall::new("a1", "search", json!({"q": "x"})),
            ToolCall::new("a2", "add", json!({"a": 1})),
        ]
    );
    assert_eq!(chunks.len(), 3, "{chunks:?}");
}

#[tokio::test]
async fn a_stream_without_done_marker_ends_when_the_server_closes() {
    let server = Server::start(vec![Reply::sse_bytes(vec![
        format!("data: {}\n\n", chunk(json!({"content": "ok"}), Value::Null)).into_bytes(),
        format!("data: {}\n\n", chunk(json!({}), json!("length"))).into_bytes(),
    ])])
    .await;

    let (_, answer) = stream_ok(&model(&server), ask("hi")).await;

    assert_eq!(answer.content, "ok");
    assert_eq!(answer.finish_reason, Some(FinishReason::Length));
}

#[tokio::test]
async fn a_stream_cut_before_the_finish_is_a_transport_error() {
    let server = Server::start(vec![Reply::sse_bytes(vec![format!(
        "data: {}\n\n",
        chunk(json!({"content": "half an ans"}), Value::Null)
    )
    .into_bytes()])])
    .await;

    let items = collect(&model(&server), ask("hi")).await;

    assert!(matches!(&items[0], Ok(ModelChunk::Text { delta }) if delta == "half an ans"));
    assert!(
        matches!(items.last(), Some(Err(ModelError::Transport { .. }))),
        "{items:?}"
    );
}

#[tokio::test]
async fn an_error_event_inside_a_stream_is_a_status_error() {
    let server = Server::start(vec![Reply::sse_events(&[
        chunk(json!({"content": "par"}), Value::Null),
        json!({"error": {"message": "model overloaded", "type": "server_error"}}),
    ])])
    .await;

    let items = collect(&model(&server), ask("hi")).await;

    match items.last() {
        Some(Err(ModelError::Status { status, body, .. })) => {
            assert_eq!(*status, 200);
            assert!(body.contains("model overloaded"), "{body}");
        }
        other => panic!("expected a status error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_streamed_whole() {
    let server = Server::start(vec![Reply::json(json!({
        "choices": [{"index": 0, "message": {"content": "whole", "tool_calls": [
            {"id": "c9", "function": {"name": "search", "arguments": "{}"}}
        ]}, "finish_reason": "tool_calls"}]
    }))])
    .await;

    let (chunks, answer) = stream_ok(&model(&server), ask("hi")).await;

    assert_eq!(chunks.len(), 2, "{chunks:?}");
    assert_eq!(answer.content, "whole");
    assert_eq!(
        answer.tool_calls,
        vec![ToolCall::new("c9", "search", json!({}))]
    );
}

#[tokio::test]
async fn a_non_json_stream_event_is_a_decode_error() {
    let server = Server::start(vec![Reply::sse_bytes(vec![
        b"data: <html>proxy error</html>\n\n".to_vec(),
    ])])
    .await;

    let items = collect(&model(&server), ask("hi")).await;

    match items.as_slice() {
        [Err(ModelError::Decode { message, .. })] => assert!(message.contains("proxy error")),
        other => panic!("expected one decode error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_answers_usage_chunk_lands_on_the_message_and_in_the_runs_usage() {
    use std::sync::Arc;

    use futures::StreamExt;
    use stategraph::prelude::*;
    use stategraph::TokenUsage;
    use stategraph_nodes::tokens::call_model;

    #[derive(State, Clone, Default, Debug)]
    struct S {
        usage: Option<Usage>,
    }

    let server = Server::start(vec![Reply::sse_events(&[
        chunk(json!({"role": "assistant", "content": "Hi"}), Value::Null),
        chunk(json!({}), json!("stop")),
        json!({"id": "chatcmpl-s", "choices": [],
               "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}}),
    ])])
    .await;
    let model = Arc::new(model(&server));
    let graph = StateGraph::<S>::new()
        .add_node("ask", move |_s: Arc<S>, cx: NodeContext| {
            let model = Arc::clone(&model);
            async move {
                let reply = call_model(&cx, model.as_ref(), ask("hi")).await?;
                Ok::<_, BoxError>(S::update().usage(reply.message.usage))
            }
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .compile()
        .unwrap();
    // Streamed: the node's model call streams its tokens.
    let mut stream = graph.stream(S::update(), &RunConfig::new(), StreamMode::messages());
    while stream.next().await.is_some() {}
    let outcome = stream.outcome().await.unwrap();
    let usage = Usage {
        input_tokens: 20,
        output_tokens: 9,
        total_tokens: 29,
    };
    assert_eq!(outcome.state.usage, Some(usage));
    assert_eq!(outcome.usage, TokenUsage::of_call(20, 9, 29));
    assert_eq!(server.only_request().body["stream"], json!(true));
}
