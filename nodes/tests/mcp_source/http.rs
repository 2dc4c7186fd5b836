//! The Streamable HTTP transport (feature `mcp-http`) against the reference server
//! `server-everything` in its `streamableHttp` mode on loopback, and against a bare listener
//! that shows what the client sends.

// Helpers panic on a server that does not start, like the tests themselves.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use stategraph_nodes::mcp::{McpError, McpServer, McpServerConfig};
use stategraph_nodes::ToolError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::reference::reference_bin;
use super::{call, find};

/// `server-everything` serving Streamable HTTP on a free port; killed when dropped.
struct HttpServer {
    process: tokio::process::Child,
    url: String,
}

/// Start `server-everything` over HTTP and wait until it accepts connections (`None` when it
/// is not installed, as `reference_bin` says).
async fn everything_over_http() -> Option<HttpServer> {
    let bin = reference_bin("mcp-server-everything")?;
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        probe.local_addr().expect("its address").port()
    };
    let process = tokio::process::Command::new(bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start server-everything");
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the HTTP server never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Some(HttpServer {
        process,
        url: format!("http://127.0.0.1:{port}/mcp"),
    })
}

fn remote(url: &str) -> McpServerConfig {
    McpServerConfig::http("remote", url)
        .startup_timeout(Duration::from_secs(30))
        .call_timeout(Duration::from_secs(30))
}

#[tokio::test]
async fn an_http_server_lists_its_tools_and_answers_a_call_over_loopback() {
    let Some(http) = everything_over_http().await else {
        return;
    };
    let server = McpServer::new(remote(&http.url));
    let tools = server.tools().await.expect("list over HTTP");
    let echo = find(&tools, "echo").expect("echo");
    assert_eq!(echo.spec().title.as_deref(), Some("Echo Tool"));
    assert_eq!(echo.spec().group.as_deref(), Some("remote"));
    let message = call(&echo, json!({"message": "over http"}))
        .await
        .expect("echo");
    assert_eq!(message.content, "Echo: over http");
    assert!(server.process_id().is_none(), "no local process");
    assert!(server.is_running());
}

#[tokio::test]
async fn a_connection_dropped_mid_call_fails_the_call_instead_of_hanging() {
    let Some(mut http) = everything_over_http().await else {
        return;
    };
    let server = McpServer::new(remote(&http.url));
    let tools = server.tools().await.expect("list over HTTP");
    let long = find(&tools, "trigger-long-running-operation").expect("long-running tool");
    let started = Instant::now();
    let pending =
        tokio::spawn(async move { call(&long, json!({"duration": 20, "steps": 20})).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    http.process.kill().await.expect("kill the server");
    let outcome = tokio::time::timeout(Duration::from_secs(25), pending)
        .await
        .expect("the call ends before its timeout")
        .expect("the call's task");
    match outcome {
        Err(ToolError::Failed { tool, .. }) => assert_eq!(tool, "trigger-long-running-operation"),
        other => panic!("expected a failed call, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn configured_headers_are_sent_with_every_request() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let seen = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("a request");
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        let _ = socket
            .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
            .await;
        String::from_utf8_lossy(&request).to_lowercase()
    });
    let server = McpServer::new(
        remote(&url)
            .header("Authorization", "Bearer t0ken")
            .header("X-Tenant", "acme")
            .startup_timeout(Duration::from_secs(5)),
    );
    let error = server
        .tools()
        .await
        .err()
        .expect("the listener is no MCP server");
    assert!(
        matches!(
            error,
            McpError::Initialize { .. } | McpError::StartupTimeout { .. }
        ),
        "{error}"
    );
    let request = seen.await.expect("the listener");
    assert!(request.starts_with("post /mcp "), "{request}");
    assert!(request.contains("authorization: bearer t0ken"), "{request}");
    assert!(request.contains("x-tenant: acme"), "{request}");
    // The headers never show in the config's debug form.
    assert!(!format!("{:?}", server.config()).contains("t0ken"));
}
