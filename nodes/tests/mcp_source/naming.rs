//! Two instances of one server: without prefixes the second one's tools are reported as
//! duplicates naming both servers; with prefixes both coexist and each call reaches its own
//! server under the tool's own name.

use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::mcp::{McpServer, ToolPrefix};
use stategraph_nodes::{Catalog, ToolProvider, ToolSource};

use super::{call, find, fixture, FIXTURE_TOOLS};

fn provider(server: McpServer) -> Arc<dyn ToolProvider> {
    Arc::new(server)
}

#[tokio::test]
async fn a_second_instance_without_prefixes_is_reported_naming_both_servers() {
    let catalog = Catalog::assemble(
        Vec::new(),
        &[
            provider(McpServer::new(fixture("first"))),
            provider(McpServer::new(fixture("second"))),
        ],
    )
    .await;
    assert_eq!(catalog.names(), FIXTURE_TOOLS);
    assert_eq!(catalog.skipped.len(), FIXTURE_TOOLS.len());
    let echo = &catalog.skipped[0];
    assert_eq!(echo.name, "echo");
    assert_eq!(echo.kept_provider.as_deref(), Some("first"));
    assert_eq!(echo.skipped_provider.as_deref(), Some("second"));
    assert_eq!(
        echo.to_string(),
        r#"duplicate name: the mcp tool of "first" was kept, this mcp one of "second" skipped"#
    );
}

#[tokio::test]
async fn prefixed_instances_coexist_and_each_call_reaches_its_own_server() {
    let catalog = Catalog::assemble(
        Vec::new(),
        &[
            provider(McpServer::new(
                fixture("left")
                    .prefix(ToolPrefix::Server)
                    .env("MCP_FIXTURE_PREFIX", "L:"),
            )),
            provider(McpServer::new(
                fixture("right")
                    .prefix(ToolPrefix::Server)
                    .env("MCP_FIXTURE_PREFIX", "R:"),
            )),
        ],
    )
    .await;
    assert!(catalog.skipped.is_empty(), "{:?}", catalog.skipped);
    assert_eq!(catalog.tools.len(), 2 * FIXTURE_TOOLS.len());
    assert_eq!(catalog.names()[0], "left__echo");
    assert_eq!(catalog.names()[FIXTURE_TOOLS.len()], "right__echo");

    for (name, expected) in [("left__echo", "L:hi"), ("right__echo", "R:hi")] {
        let tool = find(&catalog.tools, name).expect(name);
        assert_eq!(tool.spec().source, ToolSource::Mcp);
        let message = call(&tool, json!({"text": "hi"})).await.expect(name);
        // The server saw `echo`; the model sees the answer under the name it called.
        assert_eq!(message.content, expected);
        assert_eq!(message.name, name);
    }
}
