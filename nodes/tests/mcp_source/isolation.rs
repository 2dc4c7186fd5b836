//! A server starts with a minimal environment: the agent's secrets never reach it.

use serde_json::json;
use stategraph_nodes::mcp::McpServer;
use stategraph_nodes::BoxError;

use super::{call, find, fixture};

/// The value of the fixture's environment variable `name`, as its `env` tool reads it.
async fn server_env(server: &McpServer, name: &str) -> Result<String, BoxError> {
    let tools = server.tools().await?;
    let env = find(&tools, "env").ok_or("no env tool")?;
    Ok(call(&env, json!({ "name": name })).await?.content)
}

#[tokio::test]
async fn a_secret_in_the_agents_environment_is_not_readable_by_the_server() {
    // Set before the server starts; the name is this test's own.
    std::env::set_var("STATEGRAPH_TEST_AGENT_SECRET", "hunter2");
    std::env::set_var("STATEGRAPH_TEST_DECLARED", "passed-on");
    let server = McpServer::new(
        fixture("isolated")
            .inherit_env("STATEGRAPH_TEST_DECLARED")
            .env("STATEGRAPH_TEST_SET", "configured"),
    );
    assert_eq!(
        server_env(&server, "STATEGRAPH_TEST_AGENT_SECRET")
            .await
            .expect("STATEGRAPH_TEST_AGENT_SECRET"),
        "(unset)"
    );
    // What the config declares does reach it: a passed-on variable and a set one.
    assert_eq!(
        server_env(&server, "STATEGRAPH_TEST_DECLARED")
            .await
            .expect("STATEGRAPH_TEST_DECLARED"),
        "passed-on"
    );
    assert_eq!(
        server_env(&server, "STATEGRAPH_TEST_SET")
            .await
            .expect("STATEGRAPH_TEST_SET"),
        "configured"
    );
    // The default set comes along (PATH is there in any test environment).
    let path = std::env::var("PATH").expect("the test has a PATH");
    assert_eq!(server_env(&server, "PATH").await.expect("PATH"), path);
}
