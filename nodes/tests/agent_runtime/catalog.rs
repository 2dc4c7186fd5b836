//! Catalog assembly: source priority, duplicates, failing sources, admission rules, deferral.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::checkpoints::MemorySaver;
use stategraph::Input;
use stategraph_nodes::prelude::*;
use stategraph_nodes::*;

use crate::support::*;

#[tokio::test]
async fn catalog_takes_sources_in_priority_order_and_reports_each_skipped_duplicate() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    // Registered in reverse priority order on purpose.
    let agent = AgentBuilder::new(model)
        .defer_tools(false)
        .tool(counted("search", ToolSource::Other, &runs))
        .tool(counted("search", ToolSource::Mcp, &runs))
        .tool(counted("fetch", ToolSource::Mcp, &runs))
        .tool(counted("present_files", ToolSource::BuiltIn, &runs))
        .tool(counted("search", ToolSource::Config, &runs))
        .assemble(RunContext::default())
        .await?;
    assert_eq!(
        agent.catalog().names(),
        ["search", "present_files", "fetch"]
    );
    let skipped: Vec<(ToolSource, ToolSource)> = agent
        .catalog()
        .skipped
        .iter()
        .map(|s| (s.skipped, s.kept))
        .collect();
    assert_eq!(
        skipped,
        [
            (ToolSource::Mcp, ToolSource::Config),
            (ToolSource::Other, ToolSource::Config)
        ]
    );
    assert!(agent.trace().entries().iter().any(|e| e.tool == "search"
        && matches!(&e.verdict, Verdict::Removed { by, .. } if by == "catalog")));
    Ok(())
}

struct Broken;
impl ToolProvider for Broken {
    fn name(&self) -> &str {
        "broken-server"
    }
    fn source(&self) -> ToolSource {
        ToolSource::Mcp
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<Arc<dyn Tool>>, BoxError>> {
        Box::pin(async { Err("connection refused".into()) })
    }
}

struct Listed(Vec<Arc<dyn Tool>>);
impl ToolProvider for Listed {
    fn name(&self) -> &str {
        "good-server"
    }
    fn source(&self) -> ToolSource {
        ToolSource::Other
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<Arc<dyn Tool>>, BoxError>> {
        let tools = self.0.clone();
        Box::pin(async move { Ok(tools) })
    }
}

#[tokio::test]
async fn a_failing_tool_source_is_reported_and_skipped_never_fatal() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
        .provider(Broken)
        .provider(Listed(vec![Arc::new(counted(
            "other_tool",
            ToolSource::Other,
            &runs,
        ))]))
        .tool(counted("config_tool", ToolSource::Config, &runs))
        .assemble(RunContext::default())
        .await?;
    assert_eq!(agent.catalog().names(), ["config_tool", "other_tool"]);
    assert_eq!(agent.catalog().failures.len(), 1);
    assert_eq!(agent.catalog().failures[0].provider, "broken-server");
    assert!(agent.catalog().failures[0]
        .error
        .contains("connection refused"));
    Ok(())
}

#[tokio::test]
async fn tool_groups_keep_only_config_tools_of_those_groups() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let web = FnTool::new(
        ToolSpec::new("web_search", "search", ToolSource::Config).group("web"),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "web_search", "").into()) },
    );
    let bash = FnTool::new(
        ToolSpec::new("bash", "shell", ToolSource::Config).group("bash"),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "bash", "").into()) },
    );
    let agent = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
        .allow_host_bash(true)
        .tool(web)
        .tool(bash)
        .tool(counted("present_files", ToolSource::BuiltIn, &runs))
        .tool_groups(["web"])
        .assemble(RunContext::default())
        .await?;
    assert_eq!(agent.tool_names(), ["web_search", "present_files"]);
    let why = agent
        .trace()
        .why_not("bash", Stage::Available)
        .map(|e| e.verdict);
    assert!(matches!(why, Some(Verdict::Removed { by, .. }) if by == "tool_groups"));
    Ok(())
}

#[tokio::test]
async fn host_bash_tools_are_dropped_unless_allowed() -> R {
    let bash = || {
        FnTool::new(
            ToolSpec::new("bash", "shell", ToolSource::Config).group("bash"),
            |call, _cx| async move { Ok(ToolMessage::new(call.id, "bash", "").into()) },
        )
    };
    let denied = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
        .tool(bash())
        .assemble(RunContext::default())
        .await?;
    assert!(denied.tool_names().is_empty());
    let why = denied
        .trace()
        .why_not("bash", Stage::Available)
        .map(|e| e.verdict);
    assert!(matches!(why, Some(Verdict::Removed { by, .. }) if by == "host_bash"));
    let allowed = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
        .tool(bash())
        .allow_host_bash(true)
        .assemble(RunContext::default())
        .await?;
    assert_eq!(allowed.tool_names(), ["bash"]);
    Ok(())
}

#[tokio::test]
async fn a_call_under_a_stale_promotion_is_refused_before_the_handler() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "crm_read", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("crm_read", ToolSource::Mcp, &runs))
        .assemble(RunContext::default())
        .await?;
    // Promoted under a catalog that no longer exists (the tool set changed since).
    let input = ThreadState::human_input("go").promoted(stategraph::reducers::Promoted::new(
        "0000000000000000",
        ["crm_read"],
    ));
    let out = agent.invoke(input, &agent.run_config()).await?;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let msg = tool_messages(&out.state)[0];
    assert!(
        msg.is_error() && msg.content.contains("deferred"),
        "{}",
        msg.content
    );
    assert!(!model.requests()[0].tool_names().contains(&"crm_read"));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_replayed_call_to_a_tool_that_is_now_hidden_is_refused() -> R {
    // Run 1 made a call to a promoted deferred tool and stopped before the tool step; the
    // thread continues under a catalog whose hash differs (a tool was added), so the stored
    // promotion no longer counts and the call is refused.
    let saver = Arc::new(MemorySaver::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m", [AiMessage::calls([call("c1", "crm_read")])]);
    let first = AgentBuilder::new(model.clone())
        .tool(counted("crm_read", ToolSource::Mcp, &runs))
        .assemble(RunContext::new("t-hidden", "u"))
        .await?;
    let hash = first
        .deferred()
        .map(|d| d.catalog_hash().to_owned())
        .unwrap_or_default();
    let input = ThreadState::human_input("go")
        .promoted(stategraph::reducers::Promoted::new(hash, ["crm_read"]));
    let config = first
        .run_config()
        .thread("t-hidden")
        .interrupt_before(["tools"]);
    first
        .graph()
        .with_checkpointer(saver.clone())
        .invoke(input, &config)
        .await?;
    model.verify()?;

    let model2 = ScriptedModel::new("m", [AiMessage::text("ok")]);
    let second = AgentBuilder::new(model2.clone())
        .tool(counted("crm_read", ToolSource::Mcp, &runs))
        .tool(counted("crm_write", ToolSource::Mcp, &runs))
        .assemble(RunContext::new("t-hidden", "u"))
        .await?;
    let out = second
        .graph()
        .with_checkpointer(saver)
        .invoke(Input::Continue, &second.run_config().thread("t-hidden"))
        .await?;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(tool_messages(&out.state)[0].content.contains("deferred"));
    let why = second
        .trace()
        .why_not("crm_read", Stage::Executed)
        .map(|e| e.verdict);
    assert!(
        matches!(&why, Some(Verdict::Denied { by, .. }) if by == "deferred_tool_filter"),
        "{why:?}"
    );
    model2.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_source_tool_named_like_the_agents_tool_search_is_kept_out() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new(
                "c1",
                TOOL_SEARCH,
                json!({"query": "select:crm_read"}),
            )]),
            AiMessage::calls([call("c2", "crm_read")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .provider(Listed(vec![
            Arc::new(counted(TOOL_SEARCH, ToolSource::Mcp, &runs)),
            Arc::new(counted("crm_read", ToolSource::Mcp, &runs)),
        ]))
        .assemble(RunContext::default())
        .await?;
    assert_eq!(agent.catalog().filtered.len(), 1);
    assert_eq!(agent.tool_names(), ["crm_read", TOOL_SEARCH]);
    let out = agent.ask("go").await?;
    // The agent's own search ran (the impostor did not), and the promotion worked.
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(tool_messages(&out.state)[1].content, "crm_read ok");
    model.verify()?;
    Ok(())
}

struct ConfigSource(Vec<Arc<dyn Tool>>);
impl ToolProvider for ConfigSource {
    fn name(&self) -> &str {
        "config-file"
    }
    fn source(&self) -> ToolSource {
        ToolSource::Config
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<Arc<dyn Tool>>, BoxError>> {
        let t = self.0.clone();
        Box::pin(async move { Ok(t) })
    }
}

#[tokio::test]
async fn provider_tools_are_filtered_by_group_and_host_bash_too() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let shell = FnTool::new(
        ToolSpec::new("shell", "host shell", ToolSource::Config).group("bash"),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "shell", "").into()) },
    );
    let agent = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
        .provider(ConfigSource(vec![
            Arc::new(shell),
            Arc::new(counted("read", ToolSource::Config, &runs)),
        ]))
        .assemble(RunContext::default())
        .await?;
    assert_eq!(agent.tool_names(), ["read"]);
    assert_eq!(agent.catalog().filtered[0].by, "host_bash");
    Ok(())
}

#[tokio::test]
async fn only_the_runtimes_own_framework_tools_are_exempt_from_a_skill_policy() -> R {
    const SKILL: &str = "/mnt/skills/public/calc-only/SKILL.md";
    let runs = Arc::new(AtomicUsize::new(0));
    let skills = stategraph_nodes::skill::SkillRegistry::from_skill_mds([(
        SKILL,
        "---\nname: calc-only\ndescription: math\nallowed-tools: [calc]\n---\n",
        true,
    )]);
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new(
                "c1",
                TOOL_SEARCH,
                json!({"query": "select:read_file"}),
            )]),
            AiMessage::calls([call("c2", "read_file")]),
            AiMessage::text("ok"),
        ],
    );
    // A server tool that happens to be called like a framework tool.
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("calc", ToolSource::Config, &runs))
        .tool(counted("read_file", ToolSource::Mcp, &runs))
        .skills(skills)
        .assemble(RunContext::new("t", "u").slash_skill(SKILL))
        .await?;
    let out = agent.ask("go").await?;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(out.state.promoted.as_ref().map(|p| p.names.len()), Some(0));
    assert!(model
        .requests()
        .iter()
        .all(|r| !r.tool_names().contains(&"read_file")));
    let why = agent
        .trace()
        .why_not("read_file", Stage::Executed)
        .map(|e| e.verdict);
    assert!(
        matches!(&why, Some(Verdict::Denied { by, .. }) if by == "skill_tool_policy"),
        "{why:?}"
    );
    model.verify()?;
    Ok(())
}
