//! The lead's capability trace shows each delegation: the child's pool as resolved (why each
//! tool did not come along) and the child's own lines, under the lead's `task` call.

use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{SubagentSpec, Subagents};
use stategraph_nodes::subagent_tools::POOL_RESOLUTION;
use stategraph_nodes::Verdict;

use super::support::{lead, ok_tool, task_call, R};

#[tokio::test]
async fn the_leads_trace_holds_the_childs_pool_and_lines_under_the_task_call() -> R {
    let child = ScriptedModel::new(
        "child",
        [
            AiMessage::calls([ToolCall::new("r1", "read_file", json!({}))]),
            AiMessage::text("read it"),
        ],
    );
    let subagents = Subagents::new(Arc::new(child.clone()))
        .builtin(Arc::new(ok_tool("write_file", ToolSource::BuiltIn, false)))
        .builtin(Arc::new(ok_tool("read_file", ToolSource::BuiltIn, true)))
        .register(SubagentSpec::new("explorer", "d", "p").exploring(true));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "explorer", "look")]),
            AiMessage::text("done"),
        ],
    );
    let agent = lead(parent.clone(), subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?;
    agent.ask("go").await?;
    let trace = agent.trace();
    let under = trace.under("c1");
    let removed = under
        .iter()
        .find(|e| e.tool == "write_file" && e.stage == Stage::Available)
        .ok_or("the excluded write tool is not in the trace")?;
    assert!(
        matches!(&removed.verdict, Verdict::Removed { by, reason }
            if by == POOL_RESOLUTION && reason.contains("read-only")),
        "{removed}"
    );
    for stage in [
        Stage::Available,
        Stage::Visible,
        Stage::Executed,
        Stage::Returned,
    ] {
        assert!(
            under
                .iter()
                .any(|e| e.tool == "read_file" && e.stage == stage && e.passed()),
            "the child's read_file has no {stage} line under c1"
        );
    }
    // The child's lines are not the lead's own: the lead never executed read_file.
    assert!(!trace.reached("read_file", Stage::Executed));
    assert!(trace.reached("task", Stage::Returned));
    assert!(trace.render().contains("[c1] executed"));
    parent.verify()?;
    child.verify()?;
    Ok(())
}
