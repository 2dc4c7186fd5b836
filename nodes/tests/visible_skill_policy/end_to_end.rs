//! The skill policy inside an assembled agent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::{SkillRegistry, NO_PERMITTED_MATCH};

use crate::support::*;

#[tokio::test]
async fn denied_deferred_tool_is_never_promoted_shown_or_run_under_an_active_skill() -> TestResult {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let secret = FnTool::new(
        ToolSpec::new("secret_db", "Query the secret database", ToolSource::Mcp),
        move |call, _cx| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ToolMessage::new(call.id, "secret_db", "rows").into()) }
        },
    );
    let calc = FnTool::new(
        ToolSpec::new("calc", "Arithmetic", ToolSource::Config),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "calc", "4").into()) },
    );
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new(
                "s1",
                TOOL_SEARCH,
                json!({"query": "select:secret_db"}),
            )]),
            AiMessage::calls([ToolCall::new("x1", "secret_db", json!({}))]),
            AiMessage::text("done"),
        ],
    );
    let registry = SkillRegistry::from_skill_mds([(
        path("calc"),
        skill_md("calc", "allowed-tools: [calc]\n"),
        true,
    )]);
    let agent = AgentBuilder::new(model.clone())
        .tool(calc)
        .tool(secret)
        .skills(registry)
        .assemble(RunContext::new("t", "u").slash_skill(path("calc")))
        .await?;
    let out = agent.ask("query the secret db").await?;

    let promoted = out
        .state
        .promoted
        .clone()
        .expect("tool_search wrote promoted");
    assert!(promoted.names.is_empty());
    for (i, request) in model.requests().iter().enumerate() {
        assert_eq!(request.tool_names(), ["calc", TOOL_SEARCH], "request {i}");
        for m in request.messages.iter() {
            if let Message::Tool(t) = m {
                assert!(
                    !t.content.contains("Query the secret database"),
                    "schema leaked: {}",
                    t.content
                );
            }
        }
    }
    let search_answer = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .find(|m| m.tool_call_id == "s1")
        .expect("s1");
    assert_eq!(search_answer.content, NO_PERMITTED_MATCH);
    let blocked = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .find(|m| m.tool_call_id == "x1")
        .expect("x1");
    assert!(blocked.is_error());
    assert_eq!(
        blocked.content,
        "Error: Tool 'secret_db' is not allowed by the active skill policy."
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the body never ran");
    model.verify()?;
    Ok(())
}
