//! The MCP reference servers from the npm registry (`server-everything`, `server-filesystem`,
//! `server-memory`), installed at pinned versions by `.ci/mcp-servers.sh` into
//! `target/mcp-servers` (or the directory `STATEGRAPH_MCP_SERVERS` names).
//!
//! Without them a test says why it is skipped; under `CI=true` a missing server fails it.

// Helpers panic on a missing or broken server, like the tests themselves.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::mcp::{HintTrust, McpServer, McpServerConfig, ToolPrefix};
use stategraph_nodes::prelude::*;
use stategraph_nodes::{Catalog, Denial, ToolAnnotations, ToolError, ToolPolicy, ToolProvider};

use super::{call, find};

/// Where `.ci/mcp-servers.sh` installs the servers.
fn servers_dir() -> PathBuf {
    match std::env::var_os("STATEGRAPH_MCP_SERVERS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-servers"),
    }
}

/// The program of the reference server `bin` (`mcp-server-everything`, ...), or `None` (with
/// the reason on stderr) when it is not installed. Under `CI=true` a missing server is a
/// failure, never a silent skip.
pub(crate) fn reference_bin(bin: &str) -> Option<PathBuf> {
    let path = servers_dir().join("node_modules/.bin").join(bin);
    if !path.exists() {
        let why = format!(
            "MCP reference server {bin} is not installed at {}; run .ci/mcp-servers.sh",
            path.display()
        );
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("skipped: {why}");
        return None;
    }
    Some(path)
}

/// The reference server `bin` (`mcp-server-everything`, ...) as a config named `name`, or
/// `None` (with the reason on stderr) when it is not installed. Under `CI=true` a missing
/// server is a failure, never a silent skip.
fn reference(name: &str, bin: &str) -> Option<McpServerConfig> {
    let path = reference_bin(bin)?;
    Some(
        McpServerConfig::new(name, path.to_string_lossy())
            .startup_timeout(Duration::from_secs(60))
            .call_timeout(Duration::from_secs(30)),
    )
}

#[tokio::test]
async fn everything_server_keeps_every_annotation_answers_and_refuses_bad_arguments() {
    let Some(config) = reference("everything", "mcp-server-everything") else {
        return;
    };
    let server = McpServer::new(config);
    let tools = server.tools().await.expect("list");
    let echo = find(&tools, "echo").expect("echo");
    let spec = echo.spec();
    assert_eq!(spec.title.as_deref(), Some("Echo Tool"));
    assert_eq!(
        spec.annotations,
        Some(ToolAnnotations {
            read_only: Some(true),
            destructive: Some(false),
            idempotent: Some(true),
            open_world: Some(false),
        })
    );
    assert!(
        !spec.read_only,
        "an untrusted server's hint decides nothing"
    );
    let structured = find(&tools, "get-structured-content").expect("get-structured-content");
    assert!(structured.spec().output_schema.is_some());
    assert!(server.instructions().is_some_and(|i| !i.is_empty()));

    let message = call(&echo, json!({"message": "hi"})).await.expect("echo");
    assert_eq!(message.content, "Echo: hi");
    assert!(!message.is_error());

    // The TypeScript SDK answers a schema violation with an isError result: an error tool
    // message the model reads.
    let refused = call(&echo, json!({"message": 7}))
        .await
        .expect("an isError result is a message");
    assert!(refused.is_error());
    assert!(
        refused.content.contains("Input validation error"),
        "{}",
        refused.content
    );
}

#[tokio::test]
async fn everything_server_cannot_read_the_agents_secret_and_its_hints_count_when_trusted() {
    let Some(config) = reference("everything", "mcp-server-everything") else {
        return;
    };
    std::env::set_var("STATEGRAPH_TEST_REFERENCE_SECRET", "sk-do-not-leak");
    let server = McpServer::new(config.clone());
    let tools = server.tools().await.expect("list");
    let get_env = find(&tools, "get-env").expect("get-env");
    let message = call(&get_env, json!({})).await.expect("get-env");
    assert!(message.content.contains("PATH"), "{}", message.content);
    assert!(
        !message.content.contains("STATEGRAPH_TEST_REFERENCE_SECRET")
            && !message.content.contains("sk-do-not-leak"),
        "the server saw the agent's secret"
    );
    assert!(!get_env.spec().read_only);
    server.shutdown().await;

    let trusted = McpServer::new(config.trust(HintTrust::Trusted));
    let tools = trusted.tools().await.expect("list");
    assert!(find(&tools, "get-env").expect("get-env").spec().read_only);
}

#[tokio::test]
async fn filesystem_server_reports_a_refused_path_as_an_error_result() {
    let Some(config) = reference("files", "mcp-server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), "hello").expect("write");
    let root = dir.path().canonicalize().expect("canonical");
    let server = McpServer::new(config.arg(root.to_string_lossy()));
    let tools = server.tools().await.expect("list");
    let read = find(&tools, "read_text_file").expect("read_text_file");
    let inside = root.join("notes.txt");
    let message = call(&read, json!({"path": inside})).await.expect("read");
    assert_eq!(message.content, "hello");
    let message = call(&read, json!({"path": "/etc/hostname"}))
        .await
        .expect("an isError result is a message");
    assert!(message.is_error(), "{message:?}");
}

#[tokio::test]
async fn two_memory_servers_with_prefixes_coexist_each_with_its_own_graph() {
    let Some(config) = reference("memory", "mcp-server-memory") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let instance = |name: &str| -> Arc<dyn ToolProvider> {
        let mut config = config.clone().prefix(ToolPrefix::Server).env(
            "MEMORY_FILE_PATH",
            dir.path().join(format!("{name}.jsonl")).to_string_lossy(),
        );
        config.name = name.to_owned();
        Arc::new(McpServer::new(config))
    };
    let catalog = Catalog::assemble(Vec::new(), &[instance("left"), instance("right")]).await;
    assert!(catalog.failures.is_empty(), "{:?}", catalog.failures);
    assert!(catalog.skipped.is_empty(), "{:?}", catalog.skipped);
    let create = find(&catalog.tools, "left__create_entities").expect("left__create_entities");
    let entity =
        json!({"entities": [{"name": "ACME", "entityType": "customer", "observations": []}]});
    call(&create, entity).await.expect("create");
    let read = |name: &str| find(&catalog.tools, name).expect(name);
    let left = call(&read("left__read_graph"), json!({}))
        .await
        .expect("read");
    let right = call(&read("right__read_graph"), json!({}))
        .await
        .expect("read");
    assert!(left.content.contains("ACME"), "{}", left.content);
    assert!(!right.content.contains("ACME"), "{}", right.content);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_reference_server_behind_sh_c_is_gone_after_shutdown() {
    let Some(config) = reference("wrapped", "mcp-server-memory") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let script = format!("'{}'; true", config.command);
    let mut config = config
        .env(
            "MEMORY_FILE_PATH",
            dir.path().join("m.jsonl").to_string_lossy(),
        )
        .args(["-c", &script]);
    config.command = "sh".to_owned();
    let server = McpServer::new(config);
    server.tools().await.expect("list");
    let shell = server.process_id().expect("running");
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .expect("the shell's children");
    let node: u32 = children
        .split_whitespace()
        .next()
        .expect("the server runs under the shell")
        .parse()
        .expect("a pid");
    server.shutdown().await;
    assert!(
        super::operations::gone(node).await,
        "the server {node} outlived its wrapper"
    );
}

/// Hides and refuses the filesystem server's tools that write.
struct NoWrites;

fn writes(name: &str) -> bool {
    ["write_file", "edit_file", "create_directory", "move_file"].contains(&name)
}

impl ToolPolicy for NoWrites {
    fn name(&self) -> &str {
        "no_writes"
    }

    fn visible(&self, tools: &[&ToolSpec], _: &ThreadState, _: &RunContext) -> Vec<Option<String>> {
        tools
            .iter()
            .map(|t| writes(&t.name).then(|| "writes files".to_owned()))
            .collect()
    }

    fn check_call(
        &self,
        call: &ToolCall,
        _: Option<&ToolSpec>,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<(), Denial> {
        match writes(&call.name) {
            true => Err(Denial::new("writes files", "Error: writing is not allowed")),
            false => Ok(()),
        }
    }
}

#[tokio::test]
async fn tool_search_on_the_filesystem_server_returns_and_promotes_no_hidden_tool() {
    let Some(config) = reference("files", "mcp-server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new("s1", TOOL_SEARCH, json!({"query": "file"}))]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .provider(McpServer::new(config.arg(root.to_string_lossy())))
        .policy(NoWrites)
        .assemble(RunContext::new("t", "u"))
        .await
        .expect("assemble");
    assert!(agent.catalog().failures.is_empty(), "{:?}", agent.catalog());
    let out = agent.ask("find the file tools").await.expect("run");
    let answer = out
        .state
        .messages
        .iter()
        .find_map(Message::as_tool)
        .expect("the search's answer");
    assert!(
        answer.content.contains("read_text_file"),
        "{}",
        answer.content
    );
    for hidden in ["write_file", "edit_file", "move_file"] {
        assert!(!answer.content.contains(hidden), "{hidden} was revealed");
    }
    let promoted = out.state.promoted.clone().expect("promoted").names;
    assert!(!promoted.is_empty());
    assert!(promoted.iter().all(|n| !writes(n)), "{promoted:?}");
    let requests = model.requests();
    let shown = requests[1].tool_names();
    assert!(shown.iter().all(|n| !writes(n)), "{shown:?}");
}

#[tokio::test]
async fn a_tool_that_requires_task_augmentation_is_left_out() {
    let Some(config) = reference("everything", "mcp-server-everything") else {
        return;
    };
    let server = McpServer::new(config);
    // The server registers its task tool once the session is initialized, and says its list
    // changed; the next lists see it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let tools = loop {
        let tools = server.tools().await.expect("list");
        if server
            .task_only_tools()
            .contains(&"simulate-research-query".to_owned())
        {
            break tools;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the task tool was never listed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(find(&tools, "simulate-research-query").is_none());
    assert!(find(&tools, "echo").is_some());
}

#[tokio::test]
async fn everything_servers_tiny_image_is_passed_on_as_an_image() {
    let Some(config) = reference("everything", "mcp-server-everything") else {
        return;
    };
    let server = McpServer::new(config);
    let tools = server.tools().await.expect("list");
    let image = find(&tools, "get-tiny-image").expect("get-tiny-image");
    let message = call(&image, json!({})).await.expect("get-tiny-image");
    assert_eq!(message.attachments.len(), 1, "{message:?}");
    assert_eq!(message.attachments[0].mime_type, "image/png");
    assert!(
        message.attachments[0].data.starts_with("iVBORw0KGgo"),
        "a PNG"
    );
    assert!(
        message.content.contains("[image: image/png"),
        "{}",
        message.content
    );
}

#[tokio::test]
async fn a_resource_a_tool_links_to_is_read_on_request() {
    let Some(config) = reference("everything", "mcp-server-everything") else {
        return;
    };
    let plain = McpServer::new(config.clone());
    let tools = plain.tools().await.expect("list");
    assert!(find(&tools, "read_resource").is_none(), "off by default");
    plain.shutdown().await;

    let server = McpServer::new(config.read_resources(true));
    let tools = server.tools().await.expect("list");
    let links = call(
        &find(&tools, "get-resource-links").expect("get-resource-links"),
        json!({"count": 2}),
    )
    .await
    .expect("links");
    // Resource 2 is a text resource.
    let uri = "demo://resource/dynamic/text/2";
    assert!(links.content.contains(uri), "{}", links.content);
    let read = find(&tools, "read_resource").expect("read_resource");
    assert!(read.spec().read_only);
    let message = call(&read, json!({ "uri": uri })).await.expect("read");
    assert!(!message.is_error());
    assert!(
        message.content.starts_with(&format!(
            "[resource {uri}]\nResource 2: This is a plaintext resource"
        )),
        "{}",
        message.content
    );
    // An unknown resource is refused as an invalid argument, naming the server and the URI.
    match call(&read, json!({"uri": "demo://no/such/resource"})).await {
        Err(ToolError::InvalidArgs { tool, message }) => {
            assert_eq!(tool, "read_resource");
            assert!(
                message.contains("\"everything\"") && message.contains("demo://no/such/resource"),
                "{message}"
            );
        }
        other => panic!("expected a refused URI, got {other:?}"),
    }
}
