//! The OpenAI-compatible client against a small HTTP server on loopback, written here: it
//! records what the client sent and answers with canned bodies, streams in several writes.
#![cfg(feature = "openai")]
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use stategraph_nodes::model::assemble_chunks;
use stategraph_nodes::{
    AiMessage, ChatModel, FinishReason, Message, ModelChunk, ModelError, ModelRequest,
    OpenAiConfig, OpenAiModel, ToolCall, ToolMessage, ToolSchema, Usage,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// The test server
// ---------------------------------------------------------------------------------------------

/// One canned answer.
struct Reply {
    status: u16,
    content_type: &'static str,
    /// The body, written as one piece each (as HTTP chunks when `chunked`).
    parts: Vec<Vec<u8>>,
    chunked: bool,
    /// Wait before answering at all.
    hold: Duration,
}

impl Reply {
    fn json(value: Value) -> Self {
        Reply::raw(200, "application/json", &value.to_string())
    }

    fn error(status: u16, value: Value) -> Self {
        Reply::raw(status, "application/json", &value.to_string())
    }

    fn raw(status: u16, content_type: &'static str, body: &str) -> Self {
        Reply {
            status,
            content_type,
            parts: vec![body.as_bytes().to_vec()],
            chunked: false,
            hold: Duration::ZERO,
        }
    }

    /// An event stream written in the given pieces, a few milliseconds apart.
    fn sse_bytes(parts: Vec<Vec<u8>>) -> Self {
        Reply {
            status: 200,
            content_type: "text/event-stream",
            parts,
            chunked: true,
            hold: Duration::ZERO,
        }
    }

    /// An event stream of `data:` events, one write per event.
    fn sse_events(events: &[Value]) -> Self {
        let mut parts: Vec<Vec<u8>> = events
            .iter()
            .map(|e| format!("data: {e}\n\n").into_bytes())
            .collect();
        parts.push(b"data: [DONE]\n\n".to_vec());
        Reply::sse_bytes(parts)
    }

    fn held_for(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }
}

/// What the client sent.
#[derive(Debug, Clone)]
struct Recorded {
    request_line: String,
    headers: HashMap<String, String>,
    body: Value,
}

struct Server {
    base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    /// A server on `127.0.0.1:0` answering one connection per reply, in order.
    async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            for reply in replies {
                let (socket, _) = listener.accept().await.unwrap();
                answer(socket, reply, &seen).await;
            }
        });
        Server { base_url, requests }
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    fn only_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "{requests:?}");
        requests.into_iter().next().unwrap()
    }
}

async fn answer(mut socket: TcpStream, reply: Reply, seen: &Mutex<Vec<Recorded>>) {
    // Read the head, then a Content-Length body.
    let mut buffer = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "client closed before sending a request");
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap().to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .map(|v| v.parse().unwrap())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "client closed in the middle of the body");
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or(Value::Null);
    seen.lock().unwrap().push(Recorded {
        request_line,
        headers,
        body,
    });

    tokio::time::sleep(reply.hold).await;
    let mut head = format!(
        "HTTP/1.1 {} Canned\r\nContent-Type: {}\r\nConnection: close\r\n",
        reply.status, reply.content_type
    );
    if reply.chunked {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for part in &reply.parts {
            let mut frame = format!("{:x}\r\n", part.len()).into_bytes();
            frame.extend_from_slice(part);
            frame.extend_from_slice(b"\r\n");
            if socket.write_all(&frame).await.is_err() {
                return;
            }
            let _ = socket.flush().await;
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        let _ = socket.write_all(b"0\r\n\r\n").await;
    } else {
        let body = reply.parts.concat();
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(&body).await;
    }
    let _ = socket.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig::new(base_url, "test-model")
        .with_proxy_env(false)
        .with_timeout(Duration::from_secs(10))
}

fn model(server: &Server) -> OpenAiModel {
    OpenAiModel::new(config(&server.base_url)).unwrap()
}

fn ask(text: &str) -> ModelRequest {
    ModelRequest::new(vec![Message::human(text)])
}

fn text_answer(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    })
}

fn chunk(delta: Value, finish_reason: Value) -> Value {
    json!({
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    })
}

async fn collect(
    model: &OpenAiModel,
    request: ModelRequest,
) -> Vec<Result<ModelChunk, ModelError>> {
    model.stream(request).collect().await
}

/// The chunks of a stream that must succeed, and its final answer.
async fn stream_ok(model: &OpenAiModel, request: ModelRequest) -> (Vec<ModelChunk>, AiMessage) {
    let mut chunks: Vec<ModelChunk> = collect(model, request)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    let Some(ModelChunk::Done(done)) = chunks.pop() else {
        panic!("the stream did not end with Done: {chunks:?}");
    };
    assert!(
        !chunks.iter().any(|c| matches!(c, ModelChunk::Done(_))),
        "Done before the end"
    );
    (chunks, done.message)
}

fn weather_tool() -> ToolSchema {
    ToolSchema {
        name: "weather".into(),
        description: "Weather of a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn sends_tools_and_tool_results_in_openai_wire_format() {
    let server = Server::start(vec![Reply::json(text_answer("Sunny."))]).await;
    // A trailing slash on the base URL must not double the slash.
    let config = config(&format!("{}/", server.base_url))
        .with_api_key("sk-test-123")
        .with_header("OpenAI-Organization", "org-7")
        .with_body_field("temperature", json!(0));
    let model = OpenAiModel::new(config).unwrap();
    let request = ModelRequest {
        system: None,
        messages: vec![
            Message::system("Be brief."),
            Message::human("Weather in Oslo and Rome?"),
            Message::Ai(AiMessage {
                content: "Checking.".into(),
                ..AiMessage::calls([
                    ToolCall::new("call_1", "weather", json!({"city": "Oslo"})),
                    ToolCall::new("call_2", "weather", Value::Null),
                ])
            }),
            ToolMessage::new("call_1", "weather", "rain").into(),
            ToolMessage::error("call_2", "weather", "no city given").into(),
            Message::Ai(AiMessage::calls([ToolCall::new(
                "call_3",
                "weather",
                json!({"city": "Rome"}),
            )])),
            ToolMessage::new("call_3", "weather", "sun").into(),
        ]
        .into(),
        tools: vec![weather_tool()],
    };

    let reply = model.invoke(request).await.unwrap();

    assert_eq!(reply.message.content, "Sunny.");
    let sent = server.only_request();
    assert_eq!(sent.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(sent.headers["authorization"], "Bearer sk-test-123");
    assert_eq!(sent.headers["openai-organization"], "org-7");
    assert!(sent.headers["content-type"].starts_with("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "model": "test-model",
            "temperature": 0,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Oslo and Rome?"},
                {"role": "assistant", "content": "Checking.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "weather", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
                {"role": "tool", "tool_call_id": "call_2", "content": "no city given"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_3", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_3", "content": "sun"}
            ],
            "tools": [{
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "Weather of a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}
                }
            }]
        })
    );
}

#[tokio::test]
async fn omits_tools_and_authorization_when_there_are_none() {
    let server = Server::start(vec![Reply::json(text_answer("hi"))]).await;
    let model = model(&server);

    model.invoke(ask("hello")).await.unwrap();

    let sent = server.only_request();
    assert!(!sent.headers.contains_key("authorization"));
    assert_eq!(
        sent.body,
        json!({"model": "test-model", "messages": [{"role": "user", "content": "hello"}]})
    );
}

#[tokio::test]
async fn the_system_prompt_is_sent_as_the_first_message() {
    let server = Server::start(vec![Reply::json(text_answer("hi"))]).await;
    let model = model(&server);

    model
        .invoke(ask("hello").with_system("Be brief."))
        .await
        .unwrap();

    assert_eq!(
        server.only_request().body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"}
        ])
    );
}

#[tokio::test]
async fn a_base_url_ending_in_the_endpoint_is_used_as_is() {
    let server = Server::start(vec![Reply::json(text_answer("hi"))]).await;
    let config = config(&format!("{}/chat/completions", server.base_url));
    OpenAiModel::new(config)
        .unwrap()
        .invoke(ask("x"))
        .await
        .unwrap();
    assert_eq!(
        server.only_request().request_line,
        "POST /v1/chat/completions HTTP/1.1"
    );
}

// ---------------------------------------------------------------------------------------------
// Whole answers
// ---------------------------------------------------------------------------------------------

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
            assert!(message.contains("\"lookup\""), "{message}")
        }
        other => panic!("expected a decode error last, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn http_error_status_becomes_typed_error_with_message() {
    let long_page = format!("<html>{}</html>", "Bad gateway. ".repeat(400));
    let server = Server::start(vec![
        Reply::error(
            401,
            json!({"error": {"message": "Incorrect API key provided: sk-***", "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ),
        Reply::raw(502, "text/html", &long_page),
        Reply::error(429, json!({"error": {"message": "Rate limit reached"}})),
        Reply::raw(503, "text/plain", ""),
    ])
    .await;
    let model = model(&server);

    match model.invoke(ask("x")).await {
        Err(ModelError::Status {
            model,
            status,
            body,
        }) => {
            assert_eq!((model.as_str(), status), ("test-model", 401));
            assert_eq!(
                body,
                "Incorrect API key provided: sk-*** (type: invalid_request_error, code: invalid_api_key)"
            );
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    match model.invoke(ask("x")).await {
        Err(ModelError::Status { status, body, .. }) => {
            assert_eq!(status, 502);
            assert!(body.starts_with("<html>Bad gateway."), "{body}");
            assert!(body.chars().count() < 600, "not cut: {} chars", body.len());
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    let items = collect(&model, ask("x")).await;
    match items.as_slice() {
        [Err(ModelError::Status { status, body, .. })] => {
            assert_eq!((*status, body.as_str()), (429, "Rate limit reached"));
        }
        other => panic!("expected one status error, got {other:?}"),
    }
    match model.invoke(ask("x")).await {
        Err(ModelError::Status { status, body, .. }) => {
            assert_eq!((status, body.as_str()), (503, "Service Unavailable"));
        }
        other => panic!("expected a status error, got {other:?}"),
    }
}

#[tokio::test]
async fn non_json_body_is_a_decode_error() {
    let server = Server::start(vec![
        Reply::raw(200, "text/html", "<html>captive portal</html>"),
        Reply::json(json!({"object": "list", "data": []})),
    ])
    .await;
    let model = model(&server);

    match model.invoke(ask("x")).await {
        Err(ModelError::Decode { message, .. }) => {
            assert!(message.contains("<html>captive portal</html>"), "{message}")
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    match model.invoke(ask("x")).await {
        Err(ModelError::Decode { message, .. }) => {
            assert!(message.contains("no choices"), "{message}")
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = OpenAiModel::new(config(&format!("http://{addr}/v1"))).unwrap();

    match model.invoke(ask("x")).await {
        Err(ModelError::Transport { model, message }) => {
            assert_eq!(model, "test-model");
            assert!(!message.is_empty());
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    let items = collect(&model, ask("x")).await;
    assert!(
        matches!(items.as_slice(), [Err(ModelError::Transport { .. })]),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_silent_server_is_a_transport_timeout() {
    let server = Server::start(vec![
        Reply::json(text_answer("late")).held_for(Duration::from_secs(5)),
        Reply::json(text_answer("late")).held_for(Duration::from_secs(5)),
    ])
    .await;
    let model = OpenAiModel::new(config(&server.base_url).with_timeout(Duration::from_millis(300)))
        .unwrap();

    match model.invoke(ask("x")).await {
        Err(ModelError::Transport { message, .. }) => {
            assert!(message.contains("timed out"), "{message}")
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    let items = collect(&model, ask("x")).await;
    match items.as_slice() {
        [Err(ModelError::Transport { message, .. })] => {
            assert!(message.contains("300ms"), "{message}")
        }
        other => panic!("expected one transport error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| vars.get(name).cloned()
}

#[test]
fn missing_model_variable_is_a_config_error() {
    for vars in [
        &[("OPENAI_API_KEY", "sk-x")][..],
        &[("OPENAI_MODEL", "  ")][..],
    ] {
        match OpenAiConfig::from_lookup(env(vars)) {
            Err(ModelError::Config(message)) => {
                assert!(message.contains("OPENAI_MODEL"), "{message}");
                assert!(!message.contains("sk-x"));
            }
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}

#[test]
fn environment_gives_the_default_url_and_an_optional_key() {
    let config = OpenAiConfig::from_lookup(env(&[("OPENAI_MODEL", "gpt-test")])).unwrap();
    assert_eq!(config.base_url, "https://api.openai.com/v1");
    assert_eq!(config.api_key, None);
    assert_eq!(config.model, "gpt-test");
    assert_eq!(
        config.endpoint(),
        "https://api.openai.com/v1/chat/completions"
    );

    let config = OpenAiConfig::from_lookup(env(&[
        ("OPENAI_MODEL", "llama"),
        ("OPENAI_BASE_URL", "http://localhost:11434/v1/"),
        ("OPENAI_API_KEY", "sk-local"),
        ("OPENAI_TIMEOUT_SECS", "2.5"),
    ]))
    .unwrap();
    assert_eq!(
        config.endpoint(),
        "http://localhost:11434/v1/chat/completions"
    );
    assert_eq!(config.api_key.as_deref(), Some("sk-local"));
    assert_eq!(config.timeout, Duration::from_millis(2500));
    assert!(OpenAiModel::new(config).is_ok());

    match OpenAiConfig::from_lookup(env(&[
        ("OPENAI_MODEL", "m"),
        ("OPENAI_TIMEOUT_SECS", "soon"),
    ])) {
        Err(ModelError::Config(message)) => assert!(message.contains("OPENAI_TIMEOUT_SECS")),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn debug_output_never_shows_the_api_key() {
    let config = OpenAiConfig::new("http://localhost:1/v1", "m")
        .with_api_key("sk-very-secret")
        .with_header("x-gateway-key", "gw-secret");
    let model = OpenAiModel::new(config.clone()).unwrap();
    for shown in [format!("{config:?}"), format!("{model:?}")] {
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(!shown.contains("gw-secret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(shown.contains("x-gateway-key"), "{shown}");
    }
}

#[test]
fn invalid_configuration_is_a_config_error() {
    let bad = [
        OpenAiConfig::new("http://localhost:1/v1", " "),
        OpenAiConfig::new("not a url", "m"),
        OpenAiConfig::new("ftp://localhost/v1", "m"),
        OpenAiConfig::new("http://localhost:1/v1", "m").with_header("bad header", "x"),
        OpenAiConfig::new("http://localhost:1/v1", "m").with_api_key("line\nbreak"),
    ];
    for config in bad {
        let shown = format!("{config:?}");
        assert!(
            matches!(OpenAiModel::new(config), Err(ModelError::Config(_))),
            "{shown}"
        );
    }
}
