//! Capability resolution for a child: runtime-global built-ins, agent-local capabilities with
//! no inheritance, the resolution order, and each agent's own deferred registry.

use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{Exclusion, PoolOrigin, SubagentSpec, Subagents};
use stategraph_nodes::subagent_tools::{DelegationLog, MultiTaskTool, TaskTool};

use super::support::{lead, ok_tool, task_call, tool_messages, tool_names, R};

fn shared(tool: FnTool) -> Arc<dyn Tool> {
    Arc::new(tool)
}

/// A runtime with a write tool, a read tool and the shell as built-ins.
fn runtime(model: ScriptedModel) -> Subagents {
    Subagents::new(Arc::new(model))
        .builtin(shared(ok_tool("write_file", ToolSource::BuiltIn, false)))
        .builtin(shared(ok_tool("read_file", ToolSource::BuiltIn, true)))
        .builtin(shared(
            ok_tool("bash", ToolSource::Config, false).into_group("bash"),
        ))
        .allow_host_bash(true)
}

trait IntoGroup {
    fn into_group(self, group: &str) -> FnTool;
}

impl IntoGroup for FnTool {
    fn into_group(self, group: &str) -> FnTool {
        let spec = self.spec().clone().group(group);
        FnTool::new(spec, move |call, cx| self.call(call, cx))
    }
}

#[tokio::test]
async fn a_childs_pool_never_contains_task_or_multi_task() -> R {
    let child = ScriptedModel::new("child", [AiMessage::text("ok")]);
    let inner = Arc::new(
        Subagents::new(Arc::new(child.clone())).register(SubagentSpec::new("w", "d", "p")),
    );
    let log = DelegationLog::new();
    let subagents = runtime(child.clone())
        .builtin(Arc::new(TaskTool::new(Arc::clone(&inner), log.clone())))
        .builtin(Arc::new(MultiTaskTool::new(inner, log)))
        .register(SubagentSpec::new("worker", "d", "p"));
    let spec = subagents.spec("worker").ok_or("no spec")?.clone();
    let pool = subagents.pool_for(&spec);
    assert_eq!(pool.why_not("task"), Some(Exclusion::NoRecursion));
    assert_eq!(pool.why_not("multi_task"), Some(Exclusion::NoRecursion));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "x")]),
            AiMessage::text("ok"),
        ],
    );
    lead(parent, subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?
        .ask("go")
        .await?;
    let seen = tool_names(&child.requests()[0]);
    assert!(
        !seen.iter().any(|n| n == "task" || n == "multi_task"),
        "{seen:?}"
    );
    // The catalog lists config tools (the shell) first.
    assert_eq!(seen, ["bash", "write_file", "read_file"]);
    Ok(())
}

#[tokio::test]
async fn a_child_given_no_custom_tools_has_none_and_siblings_do_not_see_each_others() -> R {
    let child = ScriptedModel::new(
        "child",
        [
            AiMessage::text("a"),
            AiMessage::text("b"),
            AiMessage::text("c"),
        ],
    );
    let subagents = runtime(child.clone())
        .parent_tool(ToolSpec::new(
            "lead_notes",
            "the lead's own",
            ToolSource::Config,
        ))
        .register(SubagentSpec::new("plain", "d", "p"))
        .register(SubagentSpec::new("alpha", "d", "p").custom_tool(ok_tool(
            "alpha_only",
            ToolSource::Other,
            false,
        )))
        .register(SubagentSpec::new("beta", "d", "p").custom_tool(ok_tool(
            "beta_only",
            ToolSource::Other,
            false,
        )));
    let plain = subagents.pool_for(subagents.spec("plain").ok_or("no spec")?);
    assert_eq!(plain.names(), ["write_file", "read_file", "bash"]);
    assert_eq!(plain.why_not("lead_notes"), Some(Exclusion::AgentLocal));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "plain", "x")]),
            AiMessage::calls([task_call("c2", "alpha", "x")]),
            AiMessage::calls([task_call("c3", "beta", "x")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = lead(parent, subagents)
        .0
        .tool(ok_tool("lead_notes", ToolSource::Config, false))
        .assemble(RunContext::new("t", "ana"))
        .await?;
    agent.ask("go").await?;
    let seen: Vec<Vec<String>> = child.requests().iter().map(tool_names).collect();
    assert_eq!(seen[0], ["bash", "write_file", "read_file"]);
    assert_eq!(seen[1], ["bash", "write_file", "read_file", "alpha_only"]);
    assert_eq!(seen[2], ["bash", "write_file", "read_file", "beta_only"]);
    Ok(())
}

#[tokio::test]
async fn an_exploring_child_sees_read_only_tools_a_read_only_mcp_tool_and_the_shell_only() -> R {
    let mcp_read = ok_tool("mcp_lookup", ToolSource::Mcp, true);
    let mcp_write = ok_tool("mcp_update", ToolSource::Mcp, false);
    let child = ScriptedModel::new("child", [AiMessage::text("looked")]);
    let subagents = runtime(child.clone()).defer_tools(false).register(
        SubagentSpec::new("explorer", "d", "p")
            .exploring(true)
            .connection_tool(shared(mcp_read))
            .connection_tool(shared(mcp_write)),
    );
    let pool = subagents.pool_for(subagents.spec("explorer").ok_or("no spec")?);
    assert_eq!(pool.names(), ["read_file", "bash", "mcp_lookup"]);
    assert_eq!(pool.why_not("write_file"), Some(Exclusion::NotReadOnly));
    assert_eq!(pool.why_not("mcp_update"), Some(Exclusion::NotReadOnly));
    assert_eq!(pool.granted[2].origin, PoolOrigin::Connection);
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "explorer", "look")]),
            AiMessage::text("ok"),
        ],
    );
    lead(parent, subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?
        .ask("go")
        .await?;
    assert_eq!(
        tool_names(&child.requests()[0]),
        ["bash", "read_file", "mcp_lookup"]
    );
    Ok(())
}

#[test]
fn the_allow_list_constrains_built_ins_only_and_the_deny_list_the_whole_pool() -> R {
    let child = ScriptedModel::new("child", Vec::<AiMessage>::new());
    let subagents = runtime(child)
        .register(
            SubagentSpec::new("narrow", "d", "p")
                .allow(["read_file"])
                .custom_tool(ok_tool("own", ToolSource::Other, false)),
        )
        .register(
            SubagentSpec::new("denied", "d", "p")
                .deny(["read_file", "own"])
                .custom_tool(ok_tool("own", ToolSource::Other, false)),
        );
    let narrow = subagents.pool_for(subagents.spec("narrow").ok_or("no spec")?);
    assert_eq!(narrow.names(), ["read_file", "own"]);
    assert_eq!(narrow.why_not("write_file"), Some(Exclusion::NotAllowed));
    assert_eq!(narrow.why_not("bash"), Some(Exclusion::NotAllowed));
    let denied = subagents.pool_for(subagents.spec("denied").ok_or("no spec")?);
    assert_eq!(denied.names(), ["write_file", "bash"]);
    assert_eq!(denied.why_not("read_file"), Some(Exclusion::Denied));
    assert_eq!(denied.why_not("own"), Some(Exclusion::Denied));
    Ok(())
}

#[tokio::test]
async fn a_childs_tool_search_does_not_change_the_parents_promotions() -> R {
    let child = ScriptedModel::new(
        "child",
        [
            AiMessage::calls([ToolCall::new(
                "s1",
                "tool_search",
                json!({"query": "select:child_mcp"}),
            )]),
            AiMessage::calls([ToolCall::new("m1", "child_mcp", json!({}))]),
            AiMessage::text("found it"),
        ],
    );
    let subagents = Subagents::new(Arc::new(child.clone())).register(
        SubagentSpec::new("finder", "d", "p").connection_tool(shared(ok_tool(
            "child_mcp",
            ToolSource::Mcp,
            true,
        ))),
    );
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([ToolCall::new(
                "s0",
                "tool_search",
                json!({"query": "select:parent_mcp"}),
            )]),
            AiMessage::calls([task_call("c1", "finder", "find")]),
            AiMessage::text("ok"),
        ],
    );
    let (builder, log) = lead(parent, subagents);
    let agent = builder
        .tool(ok_tool("parent_mcp", ToolSource::Mcp, true))
        .assemble(RunContext::new("t", "ana"))
        .await?;
    let out = agent.ask("go").await?;
    assert_eq!(
        tool_messages(&out.state)[1].content,
        "Task Succeeded. Result: found it"
    );
    let promoted = out
        .state
        .promoted
        .as_ref()
        .ok_or("the parent promoted nothing")?;
    assert_eq!(promoted.names, ["parent_mcp"]);
    let report = &log.reports()[0];
    let returned: Vec<&str> = report
        .trace
        .iter()
        .filter(|e| e.stage == Stage::Returned)
        .map(|e| e.tool.as_str())
        .collect();
    assert_eq!(returned, ["tool_search", "child_mcp"]);
    assert!(tool_names(&child.requests()[0]).contains(&"tool_search".to_owned()));
    assert!(!tool_names(&child.requests()[0]).contains(&"child_mcp".to_owned()));
    Ok(())
}

#[tokio::test]
async fn the_runtimes_authorization_filters_a_childs_pool_for_the_parents_identity() -> R {
    use stategraph_nodes::{Authorization, RoleTable, Verdict};
    let child = ScriptedModel::new("child", [AiMessage::text("ok")]);
    let subagents = runtime(child.clone())
        .authorization(Authorization::new(
            RoleTable::new().allow("analyst", ["read_file"]),
        ))
        .register(SubagentSpec::new("worker", "d", "p"));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "x")]),
            AiMessage::text("ok"),
        ],
    );
    let (builder, log) = lead(parent, subagents);
    builder
        .assemble(RunContext::new("t", "ana").role("analyst"))
        .await?
        .ask("go")
        .await?;
    assert_eq!(tool_names(&child.requests()[0]), ["read_file"]);
    let report = &log.reports()[0];
    let removed = report
        .trace
        .iter()
        .find(|e| e.tool == "write_file" && e.stage == Stage::Authorized)
        .ok_or("write_file was not removed at Authorized")?;
    assert!(matches!(&removed.verdict, Verdict::Removed { by, .. } if by == "authorization"));
    assert_eq!(
        report.trace.first().map(|e| e.stage),
        Some(Stage::Available)
    );
    Ok(())
}
