//! The MCP tool source against real stdio servers: the `stategraph-mcp-fixture` binary of this
//! crate (built with the `mcp` feature), and the reference servers `.ci/mcp-servers.sh`
//! installs (`reference`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use stategraph_nodes::mcp::{HintTrust, McpError, McpServer, McpServerConfig};
use stategraph_nodes::prelude::*;
use stategraph_nodes::{Catalog, ToolError, ToolProvider, ToolStatus};

mod content;
#[cfg(feature = "mcp-http")]
mod http;
mod isolation;
mod naming;
mod operations;
mod reference;
mod trust;

const FIXTURE: &str = env!("CARGO_BIN_EXE_stategraph-mcp-fixture");

/// The fixture's tools, in its order.
const FIXTURE_TOOLS: [&str; 11] = [
    "echo", "add", "fail", "slow", "picture", "media", "crash", "env", "wipe", "pid", "grow",
];

/// The fixture server under `name`, with generous timeouts (the test machine may be busy).
pub(crate) fn fixture(name: &str) -> McpServerConfig {
    McpServerConfig::new(name, FIXTURE)
        .startup_timeout(Duration::from_secs(20))
        .call_timeout(Duration::from_secs(20))
}

pub(crate) fn find(tools: &[Arc<dyn Tool>], name: &str) -> Option<Arc<dyn Tool>> {
    tools.iter().find(|t| t.spec().name == name).cloned()
}

pub(crate) fn cx() -> stategraph_nodes::ToolContext {
    stategraph_nodes::ToolContext::detached(ThreadState::default(), RunContext::new("t1", "ana"))
}

pub(crate) async fn call(
    tool: &Arc<dyn Tool>,
    args: serde_json::Value,
) -> Result<ToolMessage, ToolError> {
    let name = tool.spec().name.clone();
    let out = tool.call(ToolCall::new("c1", name, args), cx()).await?;
    Ok(out.message().cloned().unwrap_or_default())
}

#[tokio::test]
async fn lists_tools_with_schemas_and_read_only_hints_of_a_trusted_server() {
    let server = McpServer::new(fixture("fx").trust(HintTrust::Trusted));
    assert_eq!(server.name(), "fx");
    assert_eq!(server.source(), ToolSource::Mcp);
    let tools = server.list().await.expect("list");
    // The fixture serves two tools per page: all of them means the cursor was followed.
    let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
    assert_eq!(names, FIXTURE_TOOLS);

    let echo = find(&tools, "echo").expect("echo").spec().clone();
    assert_eq!(echo.description, "Repeat the text");
    assert_eq!(
        echo.parameters["properties"]["text"]["type"],
        json!("string")
    );
    assert_eq!(echo.parameters["required"], json!(["text"]));
    assert!(echo.read_only, "readOnlyHint true");
    assert!(
        !find(&tools, "add").expect("add").spec().read_only,
        "readOnlyHint false"
    );
    assert!(
        !find(&tools, "fail").expect("fail").spec().read_only,
        "no annotations"
    );
    for tool in &tools {
        let spec = tool.spec();
        assert_eq!(spec.source, ToolSource::Mcp);
        assert_eq!(spec.group.as_deref(), Some("fx"));
        assert!(spec.deferrable, "{} is deferrable", spec.name);
    }
    assert!(server.is_running());
}

#[tokio::test]
async fn calls_a_tool_and_returns_its_text() {
    let server = McpServer::new(fixture("fx").env("MCP_FIXTURE_PREFIX", "> "));
    let tools = server.list().await.expect("list");

    let add = find(&tools, "add").expect("add");
    let message = call(&add, json!({"a": 2, "b": 3})).await.expect("add");
    assert_eq!(message.tool_call_id, "c1");
    assert_eq!(message.name, "add");
    assert_eq!(message.content, "5");
    assert!(!message.is_error());
    assert_eq!(message.metadata["structured_content"], json!({"sum": 5.0}));
    assert_eq!(message.metadata["mcp_server"], json!("fx"));

    // The configured environment reaches the server.
    let echo = find(&tools, "echo").expect("echo");
    let message = call(&echo, json!({"text": "hi"})).await.expect("echo");
    assert_eq!(message.content, "> hi");

    // Non-text content is summarised.
    let picture = find(&tools, "picture").expect("picture");
    let message = call(&picture, json!({})).await.expect("picture");
    assert_eq!(
        message.content,
        "a red dot\n[image: image/png, 12 bytes of base64]"
    );

    // Calls on one connection may run concurrently.
    let (a, b) = tokio::join!(
        call(&add, json!({"a": 1, "b": 1})),
        call(&echo, json!({"text": "x"}))
    );
    assert_eq!(a.expect("add").content, "2");
    assert_eq!(b.expect("echo").content, "> x");
}

#[tokio::test]
async fn tool_error_result_becomes_error_tool_message() {
    let server = McpServer::new(fixture("fx"));
    let tools = server.list().await.expect("list");
    let fail = find(&tools, "fail").expect("fail");
    let message = call(&fail, json!({"message": "no such file"}))
        .await
        .expect("an isError result is a message, not a call failure");
    assert!(message.is_error());
    assert_eq!(message.status, ToolStatus::Error);
    assert_eq!(message.content, "no such file");

    // Arguments the server rejects as invalid parameters are invalid arguments.
    let add = find(&tools, "add").expect("add");
    match call(&add, json!({"a": "two"})).await {
        Err(ToolError::InvalidArgs { tool, message }) => {
            assert_eq!(tool, "add");
            assert!(message.contains("fx"), "{message}");
        }
        other => panic!("expected invalid arguments, got {other:?}"),
    }
    // Arguments that are not an object never reach the server.
    assert!(matches!(
        call(&add, json!([1, 2])).await,
        Err(ToolError::InvalidArgs { .. })
    ));
}

#[tokio::test]
async fn list_is_cached_per_server() {
    let server = McpServer::new(fixture("fx"));
    let first = server.list().await.expect("first list");
    let pid = server.process_id().expect("running");
    let second = server.list().await.expect("second list");
    assert_eq!(first.len(), second.len());
    for (a, b) in first.iter().zip(&second) {
        assert!(Arc::ptr_eq(a, b), "{} comes from the cache", a.spec().name);
    }
    assert_eq!(server.process_id(), Some(pid), "not started again");

    // A refresh lists again, on the same server.
    let refreshed = server.refresh().await.expect("refresh");
    assert_eq!(refreshed.len(), first.len());
    assert!(!Arc::ptr_eq(&first[0], &refreshed[0]), "listed anew");
    assert_eq!(server.process_id(), Some(pid));
    let third = server.list().await.expect("third list");
    assert!(
        Arc::ptr_eq(&refreshed[0], &third[0]),
        "the refresh is the new cache"
    );

    // Tools listed before the refresh still work.
    let echo = find(&first, "echo").expect("echo");
    assert_eq!(
        call(&echo, json!({"text": "old"}))
            .await
            .expect("echo")
            .content,
        "old"
    );

    // Another server has its own process and cache.
    let other = McpServer::new(fixture("fx2"));
    let _ = other.list().await.expect("other list");
    assert_ne!(other.process_id(), Some(pid));
}

#[tokio::test]
async fn server_that_fails_to_start_is_reported_and_skipped() {
    let good: Arc<dyn ToolProvider> = Arc::new(McpServer::new(fixture("good")));
    let missing: Arc<dyn ToolProvider> = Arc::new(McpServer::new(McpServerConfig::new(
        "missing",
        "/nonexistent/stategraph-no-such-mcp-server",
    )));
    let exits: Arc<dyn ToolProvider> =
        Arc::new(McpServer::new(fixture("exits").arg("--exit-at-start")));
    let local = FnTool::new(
        ToolSpec::new("local", "A config tool", ToolSource::Config),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "local", "ok").into()) },
    );

    let catalog = Catalog::assemble(vec![Arc::new(local)], &[good, missing, exits]).await;
    let mut expected = vec!["local"];
    expected.extend(FIXTURE_TOOLS);
    assert_eq!(catalog.names(), expected);
    let failed: Vec<&str> = catalog
        .failures
        .iter()
        .map(|f| f.provider.as_str())
        .collect();
    assert_eq!(failed, ["missing", "exits"]);
    for failure in &catalog.failures {
        assert!(
            failure.error.contains(&format!("{:?}", failure.provider)),
            "the error names the server: {}",
            failure.error
        );
    }
    assert!(catalog.failures[0].error.contains("cannot start"));
    assert!(catalog.failures[1].error.contains("initialization failed"));
}

#[tokio::test]
async fn hanging_server_times_out_at_startup() {
    let timeout = Duration::from_millis(500);
    let sleeper = McpServer::new(
        McpServerConfig::new("sleeper", "sleep")
            .arg("30")
            .startup_timeout(timeout),
    );
    let started = Instant::now();
    let Err(error) = sleeper.tools().await else {
        panic!("a server that never answers cannot list");
    };
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&error, McpError::StartupTimeout { server, timeout: t, .. } if server == "sleeper" && *t == timeout),
        "{error}"
    );
    assert!(!sleeper.is_running());

    // A server that reads the handshake and never answers, through the provider interface.
    let staller = McpServer::new(
        fixture("staller")
            .arg("--stall-at-start")
            .startup_timeout(timeout),
    );
    let Err(error) = staller.list().await else {
        panic!("a server that never answers cannot list");
    };
    let error = error.to_string();
    assert!(
        error.contains("\"staller\"") && error.contains("startup timeout"),
        "{error}"
    );
}

#[tokio::test]
async fn call_timeout_is_enforced() {
    let server = McpServer::new(fixture("fx").call_timeout(Duration::from_millis(300)));
    let tools = server.list().await.expect("list");
    let slow = find(&tools, "slow").expect("slow");

    let started = Instant::now();
    let error = call(&slow, json!({"ms": 10_000}))
        .await
        .expect_err("times out");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(error, ToolError::Failed { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("\"slow\"") && text.contains("\"fx\"") && text.contains("call timeout"),
        "{text}"
    );

    // The connection survives a timed-out call.
    let message = call(&slow, json!({"ms": 1})).await.expect("a quick call");
    assert_eq!(message.content, "slept 1 ms");
}

#[tokio::test]
async fn call_on_a_dead_server_fails_naming_tool_and_server() {
    let server = McpServer::new(fixture("fx"));
    let tools = server.list().await.expect("list");
    let pid = server.process_id().expect("running");
    let crash = find(&tools, "crash").expect("crash");
    let error = call(&crash, json!({})).await.expect_err("the server exits");
    assert!(matches!(error, ToolError::Failed { .. }), "{error:?}");

    let echo = find(&tools, "echo").expect("echo");
    let error = call(&echo, json!({"text": "anyone?"}))
        .await
        .expect_err("the server is gone");
    assert!(matches!(error, ToolError::Failed { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("\"echo\"") && text.contains("\"fx\""),
        "{text}"
    );
    assert!(!server.is_running());

    // The next list starts the server again; the old tools use the new connection.
    let relisted = server.list().await.expect("list again");
    assert_eq!(relisted.len(), tools.len());
    assert_ne!(server.process_id(), Some(pid));
    assert_eq!(
        call(&echo, json!({"text": "back"}))
            .await
            .expect("echo")
            .content,
        "back"
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn dropping_the_provider_and_its_tools_stops_the_server() {
    /// Whether `pid` is a live (not zombie) process.
    fn alive(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the parenthesised command name.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
            Err(_) => false,
        }
    }

    let server = McpServer::new(fixture("fx"));
    let tools = server.list().await.expect("list");
    let pid = server.process_id().expect("running");
    assert!(alive(pid));

    drop(server);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(alive(pid), "the tools still hold the connection");
    let echo = find(&tools, "echo").expect("echo");
    assert_eq!(
        call(&echo, json!({"text": "still"}))
            .await
            .expect("echo")
            .content,
        "still"
    );

    drop(echo);
    drop(tools);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(pid), "server {pid} still runs");

    // An explicit shutdown stops it too.
    let server = McpServer::new(fixture("fx"));
    let _ = server.list().await.expect("list");
    let pid = server.process_id().expect("running");
    server.shutdown().await;
    assert!(!server.is_running());
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(pid), "server {pid} still runs after shutdown");
}

#[tokio::test]
async fn agent_calls_an_mcp_tool_end_to_end() {
    let model = ScriptedModel::new(
        "demo",
        [
            AiMessage::calls([ToolCall::new("c1", "add", json!({"a": 2, "b": 3}))]),
            AiMessage::text("2 + 3 = 5"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .provider(McpServer::new(fixture("calc")))
        .defer_tools(false)
        .assemble(RunContext::new("t1", "ana"))
        .await
        .expect("assemble");
    assert!(agent.catalog().failures.is_empty(), "{:?}", agent.catalog());
    assert!(agent.tool_names().contains(&"add".to_owned()));

    let out = agent.ask("what is 2 + 3?").await.expect("run");
    let result = out
        .state
        .messages
        .iter()
        .find_map(Message::as_tool)
        .expect("a tool message in state");
    assert_eq!(result.tool_call_id, "c1");
    assert_eq!(result.name, "add");
    assert_eq!(result.content, "5");
    assert!(!result.is_error());
    assert_eq!(result.metadata["structured_content"], json!({"sum": 5.0}));
    assert_eq!(
        out.state.messages.last().map(|m| m.text()),
        Some("2 + 3 = 5")
    );
    assert!(agent.trace().reached("add", Stage::Returned));
    model.verify().expect("script used up");
}
