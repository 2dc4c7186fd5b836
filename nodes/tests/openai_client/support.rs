//! Shared helpers: a client for the test server, requests, canned answers, stream collection.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use stategraph_nodes::{
    AiMessage, ChatModel, Message, ModelChunk, ModelError, ModelRequest, OpenAiConfig, OpenAiModel,
    ToolSchema,
};

use crate::server::*;

pub(crate) fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig::new(base_url, "test-model")
        .with_proxy_env(false)
        .with_timeout(Duration::from_secs(10))
}

pub(crate) fn model(server: &Server) -> OpenAiModel {
    OpenAiModel::new(config(&server.base_url)).unwrap()
}

pub(crate) fn ask(text: &str) -> ModelRequest {
    ModelRequest::new(vec![Message::human(text)])
}

pub(crate) fn text_answer(text: &str) -> Value {
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

pub(crate) fn chunk(delta: Value, finish_reason: Value) -> Value {
    json!({
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    })
}

pub(crate) async fn collect(
    model: &OpenAiModel,
    request: ModelRequest,
) -> Vec<Result<ModelChunk, ModelError>> {
    model.stream(request).collect().await
}

/// The chunks of a stream that must succeed, and its final answer.
pub(crate) async fn stream_ok(
    model: &OpenAiModel,
    request: ModelRequest,
) -> (Vec<ModelChunk>, AiMessage) {
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

pub(crate) fn weather_tool() -> ToolSchema {
    ToolSchema {
        name: "weather".into(),
        description: "Weather of a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }
}
