//! Deferral inside an assembled agent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::stategraph::reducers::Promoted;

use crate::support::*;

fn counting_tool(name: &str, runs: &Arc<AtomicUsize>) -> FnTool {
    let runs = Arc::clone(runs);
    let tool_name = name.to_owned();
    FnTool::new(mcp(name, &format!("The {name} tool")), move |call, _cx| {
        runs.fetch_add(1, Ordering::SeqCst);
        let name = tool_name.clone();
        async move { Ok(ToolMessage::new(call.id, name, "ran").into()) }
    })
}

#[tokio::test]
async fn promotion_takes_effect_on_the_next_model_call() -> TestResult {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new(
                "s1",
                TOOL_SEARCH,
                json!({"query": "select:mcp_weather"}),
            )]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(ToolSpec::new("calc", "math", ToolSource::Config).pipe_tool())
        .tool(counting_tool("mcp_weather", &runs))
        .tool(counting_tool("mcp_stocks", &runs))
        .assemble(RunContext::new("t", "u"))
        .await?;
    let out = agent.ask("weather?").await?;
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].tool_names(), ["calc", TOOL_SEARCH]);
    assert_eq!(
        requests[1].tool_names(),
        ["calc", "mcp_weather", TOOL_SEARCH]
    );
    assert_eq!(agent.trace().visible_on(1), ["calc", TOOL_SEARCH]);
    assert_eq!(
        agent.trace().visible_on(2),
        ["calc", "mcp_weather", TOOL_SEARCH]
    );
    let hash = agent.deferred().expect("setup").catalog_hash().to_owned();
    assert_eq!(
        out.state.promoted,
        Some(Promoted::new(hash, ["mcp_weather"]))
    );
    // The system prompt lists both deferred tools.
    let system = requests[0].system.as_deref().unwrap_or_default();
    assert!(
        system.contains("<available-deferred-tools>\nmcp_stocks\nmcp_weather\n"),
        "{system}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn deferred_call_in_same_message_as_its_promotion_is_blocked() -> TestResult {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([
                ToolCall::new("s1", TOOL_SEARCH, json!({"query": "select:mcp_weather"})),
                ToolCall::new("w1", "mcp_weather", json!({})),
            ]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counting_tool("mcp_weather", &runs))
        .tool(counting_tool("mcp_stocks", &runs))
        .assemble(RunContext::new("t", "u"))
        .await?;
    let out = agent.ask("weather?").await?;
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");
    let answer = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .find(|m| m.tool_call_id == "w1")
        .expect("the blocked call is answered");
    assert!(answer.is_error());
    assert!(answer.content.contains(TOOL_SEARCH), "{}", answer.content);
    assert!(agent.trace().for_tool("mcp_weather").iter().any(|e| e.stage == Stage::Executed
        && matches!(&e.verdict, stategraph_nodes::Verdict::Denied { by, .. } if by == "deferred_tool_filter")));
    assert!(!agent.trace().reached("mcp_weather", Stage::Returned));
    // ... but it is promoted for the next model call.
    assert_eq!(
        model.requests()[1].tool_names(),
        ["mcp_weather", TOOL_SEARCH]
    );
    model.verify()?;
    Ok(())
}

/// A config tool that answers "ok" (helper for the end-to-end tests).
trait PipeTool {
    fn pipe_tool(self) -> FnTool;
}

impl PipeTool for ToolSpec {
    fn pipe_tool(self) -> FnTool {
        let name = self.name.clone();
        FnTool::new(self, move |call, _cx| {
            let name = name.clone();
            async move { Ok(ToolMessage::new(call.id, name, "ok").into()) }
        })
    }
}
