//! The tool_search tool: its answers and promotions.

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::stategraph::reducers::Promoted;
use stategraph_nodes::{ToolContext, ToolError};

use crate::support::*;

#[test]
fn tool_search_is_a_builtin_read_only_tool_taking_a_required_query() {
    let tool = five_plus().tool_search();
    let spec = tool.spec();
    assert_eq!(spec.name, TOOL_SEARCH);
    assert_eq!(spec.source, ToolSource::BuiltIn);
    assert!(spec.read_only);
    assert!(!spec.deferrable);
    assert_eq!(spec.parameters["properties"]["query"]["type"], "string");
    assert_eq!(spec.parameters["required"], json!(["query"]));
}

#[tokio::test]
async fn tool_search_promotes_matches_in_result_order_with_pretty_schemas() -> TestResult {
    let s = five_plus();
    let out = run_tool_search(&s, json!({"query": "issue"})).await;
    let (promoted, message) = promotion_of(&out);
    assert_eq!(promoted.catalog_hash, s.catalog_hash());
    assert_eq!(
        promoted.names,
        ["github_issues", "issue_tracker", "jira_search"]
    );
    assert_eq!(message.name, TOOL_SEARCH);
    assert_eq!(message.tool_call_id, "c1");
    assert!(!message.is_error());
    let expected: Vec<serde_json::Value> = s
        .search("issue")
        .iter()
        .map(|t| t.schema().to_openai())
        .collect();
    assert_eq!(message.content, serde_json::to_string_pretty(&expected)?);
    assert!(message.content.contains("\n  {\n    \"function\""));
    Ok(())
}

#[tokio::test]
async fn tool_search_without_match_still_writes_promotion() -> TestResult {
    let s = five_plus();
    let out = run_tool_search(&s, json!({"query": "zzz"})).await;
    let (promoted, message) = promotion_of(&out);
    assert_eq!(
        promoted,
        Promoted::new(s.catalog_hash(), Vec::<String>::new())
    );
    assert_eq!(message.content, "No tools found matching: zzz");
    Ok(())
}

#[tokio::test]
async fn tool_search_does_not_recap_select() -> TestResult {
    let s = five_plus();
    let out = run_tool_search(
        &s,
        json!({"query": format!("select:{}", s.names().join(","))}),
    )
    .await;
    assert_eq!(promotion_of(&out).0.names.len(), 7);
    Ok(())
}

#[tokio::test]
async fn tool_search_without_query_string_is_invalid_args() {
    let s = five_plus();
    for args in [json!({}), json!({"query": 3}), json!("issue")] {
        let err = s
            .tool_search()
            .call(
                ToolCall::new("c1", TOOL_SEARCH, args),
                ToolContext::detached(ThreadState::default(), RunContext::default()),
            )
            .await
            .expect_err("bad args");
        assert!(matches!(err, ToolError::InvalidArgs { .. }), "{err:?}");
    }
}
