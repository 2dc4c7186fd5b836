//! Requests: the body, headers and URL the client sends.

use serde_json::{json, Value};
use stategraph_nodes::media::{Attachment, MediaKind, MediaKinds};
use stategraph_nodes::{
    AiMessage, ChatModel, Message, ModelRequest, OpenAiModel, ToolCall, ToolMessage,
};

use crate::server::*;
use crate::support::*;

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

#[tokio::test]
async fn images_of_tool_messages_follow_the_turns_tool_messages_as_one_user_message() {
    let request = || ModelRequest {
        system: None,
        messages: vec![
            Message::human("Show me both charts."),
            Message::Ai(AiMessage::calls([
                ToolCall::new("call_1", "chart", json!({"n": 1})),
                ToolCall::new("call_2", "chart", json!({"n": 2})),
            ])),
            ToolMessage::new("call_1", "chart", "[image: image/png]")
                .with_attachment(Attachment::new("image/png", "iVBORw0KGgo="))
                .into(),
            ToolMessage::new("call_2", "chart", "[image: image/jpeg]")
                .with_attachment(Attachment::new("image/jpeg", "/9j/4AAQ"))
                .into(),
            Message::Ai(AiMessage::text("Here they are.")),
        ]
        .into(),
        tools: Vec::new(),
    };
    let sent = sent_with_and_without_media(request).await;
    let roles = |body: &Value| -> Vec<String> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_owned())
            .collect()
    };
    // Nothing comes between the turn's tool messages; the images follow them.
    assert_eq!(
        roles(&sent[0].body),
        ["user", "assistant", "tool", "tool", "user", "assistant"]
    );
    assert_eq!(
        sent[0].body["messages"][4]["content"],
        json!([
            {"type": "text", "text": "Media returned by the tool chart (call call_1):"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": "Media returned by the tool chart (call call_2):"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}
        ])
    );
    assert_eq!(
        sent[0].body["messages"][2]["content"],
        json!("[image: image/png]")
    );
    // Turned off, only the text goes, saying what was left out and why.
    assert_eq!(
        roles(&sent[1].body),
        ["user", "assistant", "tool", "tool", "assistant"]
    );
    assert_eq!(
        sent[1].body["messages"][2]["content"],
        json!(
            "[image: image/png]\n\
             [left out: image image/png, about 9 bytes: this model does not take image input]"
        )
    );
}

/// The bodies a model sends for `request`: first with the default media, then with none.
async fn sent_with_and_without_media(request: impl Fn() -> ModelRequest) -> Vec<Recorded> {
    let server = Server::start(vec![
        Reply::json(text_answer("ok")),
        Reply::json(text_answer("ok")),
    ])
    .await;
    OpenAiModel::new(config(&server.base_url))
        .unwrap()
        .invoke(request())
        .await
        .unwrap();
    OpenAiModel::new(config(&server.base_url).with_tool_media(MediaKinds::NONE))
        .unwrap()
        .invoke(request())
        .await
        .unwrap();
    server.requests()
}

#[tokio::test]
async fn a_human_image_reaches_the_model_as_an_image_part_after_the_text() {
    let request = || {
        ModelRequest::new(vec![Message::human_with_attachments(
            "What is in this picture?",
            [
                Attachment::new("image/png", "iVBORw0KGgo="),
                Attachment::new("audio/wav", "UklGRiQA"),
            ],
        )])
    };
    let sent = sent_with_and_without_media(request).await;
    // Images are sent by default; the audio is named as left out in the text part.
    assert_eq!(
        sent[0].body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?\n\
                [left out: audio audio/wav, about 6 bytes: this model does not take audio input]"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        ]}])
    );
    // A text-only model gets the text, saying what was left out and why.
    assert_eq!(
        sent[1].body["messages"],
        json!([{"role": "user", "content":
            "What is in this picture?\n\
             [left out: image image/png, about 9 bytes: this model does not take image input]\n\
             [left out: audio audio/wav, about 6 bytes: this model does not take audio input]"}])
    );
}

/// A turn whose one tool result carries an image, WAV and Ogg audio, a PDF and an archive.
fn media_request() -> ModelRequest {
    let result = ToolMessage::new("call_1", "fetch", "five things")
        .with_attachment(Attachment::new("image/png", "iVBORw0KGgo="))
        .with_attachment(Attachment::new("audio/wav", "UklGRiQA"))
        .with_attachment(Attachment::new("audio/ogg", "T2dnUwAC"))
        .with_attachment(Attachment::new("application/pdf", "JVBERi0x").named("q3.pdf"))
        .with_attachment(Attachment::new("application/gzip", "H4sIAAAA").named("all.gz"));
    ModelRequest::new(vec![
        Message::human("Fetch them."),
        Message::Ai(AiMessage::calls([ToolCall::new(
            "call_1",
            "fetch",
            json!({}),
        )])),
        result.into(),
    ])
}

#[tokio::test]
async fn audio_and_pdf_files_a_model_takes_are_sent_as_parts_and_the_rest_named_with_why() {
    let server = Server::start(vec![Reply::json(text_answer("ok"))]).await;
    let model =
        OpenAiModel::new(config(&server.base_url).with_tool_media(MediaKinds::ALL)).unwrap();
    assert_eq!(model.media(), MediaKinds::ALL);
    model.invoke(media_request()).await.unwrap();
    let body = &server.only_request().body;
    assert_eq!(
        body["messages"][3]["content"],
        json!([
            {"type": "text", "text": "Media returned by the tool fetch (call call_1):"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "input_audio", "input_audio": {"data": "UklGRiQA", "format": "wav"}},
            {"type": "file", "file": {
                "filename": "q3.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"
            }}
        ])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!(
            "five things\n\
             [left out: audio audio/ogg, about 6 bytes: this model takes audio as WAV or MP3 only, not audio/ogg]\n\
             [left out: file application/gzip \"all.gz\", about 6 bytes: this model takes files as PDF only, not application/gzip]"
        )
    );
}

#[tokio::test]
async fn by_default_only_images_are_sent_and_audio_and_files_are_named_as_left_out() {
    let server = Server::start(vec![Reply::json(text_answer("ok"))]).await;
    let model = OpenAiModel::new(config(&server.base_url)).unwrap();
    assert_eq!(model.media(), MediaKinds::NONE.with(MediaKind::Image));
    model.invoke(media_request()).await.unwrap();
    let body = &server.only_request().body;
    assert_eq!(
        body["messages"][3]["content"],
        json!([
            {"type": "text", "text": "Media returned by the tool fetch (call call_1):"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        ])
    );
    let text = body["messages"][2]["content"].as_str().unwrap();
    for line in [
        "[left out: audio audio/wav, about 6 bytes: this model does not take audio input]",
        "[left out: audio audio/ogg, about 6 bytes: this model does not take audio input]",
        "[left out: file application/pdf \"q3.pdf\", about 6 bytes: this model does not take file input]",
        "[left out: file application/gzip \"all.gz\", about 6 bytes: this model does not take file input]",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing from {text}");
    }
}
