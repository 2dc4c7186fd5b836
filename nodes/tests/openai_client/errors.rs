//! Errors: HTTP statuses, bodies that are not JSON, refused and silent servers.

use std::time::Duration;

use serde_json::json;
use stategraph_nodes::{ChatModel, ModelError, OpenAiModel};

use crate::server::*;
use crate::support::*;

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
            assert!(message.contains("<html>captive portal</html>"), "{message}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    match model.invoke(ask("x")).await {
        Err(ModelError::Decode { message, .. }) => {
            assert!(message.contains("no choices"), "{message}");
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
            assert!(message.contains("timed out"), "{message}");
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    let items = collect(&model, ask("x")).await;
    match items.as_slice() {
        [Err(ModelError::Transport { message, .. })] => {
            assert!(message.contains("300ms"), "{message}");
        }
        other => panic!("expected one transport error, got {other:?}"),
    }
}
