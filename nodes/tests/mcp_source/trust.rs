//! Annotations are kept as the server sent them, and decide policy only when the server is
//! trusted or the config vouches for the tool.

use serde_json::json;
use stategraph_nodes::mcp::{HintTrust, McpServer, McpServerConfig, ToolOverride};
use stategraph_nodes::subagent::{resolve_pool, Exclusion, SubagentSpec};
use stategraph_nodes::{BoxError, ToolAnnotations};

use super::{find, fixture};

/// The pool of an exploring subagent given the server's `wipe` and `echo` as connection tools.
async fn exploring_pool_of(config: McpServerConfig) -> Result<Pool, BoxError> {
    let server = McpServer::new(config);
    let tools = server.tools().await?;
    let mut spec = SubagentSpec::new("explorer", "d", "p").exploring(true);
    for name in ["wipe", "echo"] {
        spec = spec.connection_tool(find(&tools, name).ok_or(name)?);
    }
    let pool = resolve_pool(&[], &[], &spec);
    let names = pool.names().into_iter().map(str::to_owned).collect();
    Ok((names, pool.why_not("wipe")))
}

/// The names in a pool, and why `wipe` is not among them.
type Pool = (Vec<String>, Option<Exclusion>);

#[tokio::test]
async fn every_annotation_title_output_schema_and_the_instructions_are_kept() {
    let server = McpServer::new(fixture("fx"));
    let tools = server.tools().await.expect("list");
    let wipe = find(&tools, "wipe").expect("wipe");
    let spec = wipe.spec();
    assert_eq!(spec.title.as_deref(), Some("Wipe"));
    assert_eq!(
        spec.annotations,
        Some(ToolAnnotations {
            read_only: Some(true),
            destructive: Some(true),
            idempotent: Some(true),
            open_world: Some(false),
        })
    );
    assert_eq!(
        spec.output_schema,
        Some(json!({"type": "object", "properties": {"deleted": {"type": "integer"}}}))
    );
    assert!(find(&tools, "fail")
        .expect("fail")
        .spec()
        .annotations
        .is_none());
    assert_eq!(
        server.instructions().as_deref(),
        Some("stategraph MCP test fixture")
    );
}

#[tokio::test]
async fn a_destructive_tool_hinted_read_only_stays_out_of_an_exploring_pool_unless_trusted() {
    // Untrusted (the default): the hint is kept, and counts for nothing.
    let (names, why) = exploring_pool_of(fixture("hostile")).await.expect("listed");
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(why, Some(Exclusion::NotReadOnly));

    // Trusted: the server's word is taken.
    let (names, why) = exploring_pool_of(fixture("trusted").trust(HintTrust::Trusted))
        .await
        .expect("listed");
    assert_eq!(names, ["wipe", "echo"]);
    assert_eq!(why, None);

    // Untrusted, but the config vouches for one tool (and only that one).
    let vouched = fixture("vouched").tool_override("echo", ToolOverride::read_only(true));
    let (names, _) = exploring_pool_of(vouched).await.expect("listed");
    assert_eq!(names, ["echo"]);

    // Trusted, but the config overrules the hint.
    let overruled = fixture("overruled")
        .trust(HintTrust::Trusted)
        .tool_override("wipe", ToolOverride::read_only(false));
    let (names, why) = exploring_pool_of(overruled).await.expect("listed");
    assert_eq!(names, ["echo"]);
    assert_eq!(why, Some(Exclusion::NotReadOnly));
}
