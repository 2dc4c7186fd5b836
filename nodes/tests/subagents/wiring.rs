//! One builder call wires delegation: the `task` and `multi_task` tools, one log, the
//! per-run limit, and the built-in general-purpose and bash types.

use std::sync::Arc;

use stategraph_nodes::prelude::*;
use stategraph_nodes::state::DelegationStatus;
use stategraph_nodes::subagent::{Subagents, BASH, GENERAL_PURPOSE, LIMIT_NOTICE};

use super::support::{ok_tool, task_call, tool_messages, tool_names, R};

#[tokio::test]
async fn one_builder_call_wires_the_delegation_tools_the_log_the_limit_and_the_builtin_types() -> R
{
    let child = ScriptedModel::new("child", [AiMessage::text("researched")]);
    let subagents = Subagents::new(Arc::new(child.clone()))
        .builtin(Arc::new(ok_tool("read_file", ToolSource::BuiltIn, true)))
        .builtin(Arc::new(ok_tool(
            "present_files",
            ToolSource::BuiltIn,
            false,
        )))
        .builtin_types()
        .delegation_limit(3, 1);
    let lead = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", GENERAL_PURPOSE, "research")]),
            AiMessage::calls([task_call("c2", GENERAL_PURPOSE, "more")]),
        ],
    );
    let agent = AgentBuilder::new(lead.clone())
        .subagents(subagents)
        .assemble(RunContext::new("t", "ana").run("r1"))
        .await?;
    let out = agent.ask("go").await?;
    // The lead's model is offered both delegation tools.
    let offered = tool_names(&lead.requests()[0]);
    assert!(offered.contains(&"task".to_owned()) && offered.contains(&"multi_task".to_owned()));
    // The limit layer is wired: the second delegation is cut with the notice.
    assert_eq!(
        out.state.last_ai().map(|a| a.content.as_str()),
        Some(LIMIT_NOTICE)
    );
    assert_eq!(
        out.settlement.stop_reason.as_deref(),
        Some("subagent_limit_capped")
    );
    // The log is wired and reachable from the agent.
    let reports = agent.delegation_log().ok_or("no log")?.reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].outcome.result.as_deref(), Some("researched"));
    // The general-purpose type is DeerFlow's: present_files is denied, read_file granted.
    let pool = reports[0].pool.as_ref().ok_or("no pool")?;
    assert!(pool.granted.iter().any(|g| g.name == "read_file"));
    assert!(pool.excluded.iter().any(|e| e.name == "present_files"));
    assert_eq!(out.state.delegations.len(), 1);
    lead.verify()?;
    child.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_bash_type_fails_saying_why_unless_host_bash_is_allowed() -> R {
    let child = ScriptedModel::new("child", Vec::<AiMessage>::new());
    let lead = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", BASH, "run ls")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(lead.clone())
        .subagents(Subagents::new(Arc::new(child.clone())).builtin_types())
        .assemble(RunContext::new("t", "ana"))
        .await?;
    let out = agent.ask("go").await?;
    let answer = tool_messages(&out.state)
        .first()
        .map(|m| m.content.clone())
        .ok_or("no tool message")?;
    assert!(
        answer.starts_with("Task failed. Error: Subagent type 'bash' is disabled"),
        "{answer}"
    );
    assert_eq!(out.state.delegations[0].status, DelegationStatus::Failed);
    lead.verify()?;
    child.verify()?;
    Ok(())
}
