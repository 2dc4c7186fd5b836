//! Authorization: what a principal may see and call, at assembly and again at call time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::checkpoints::MemorySaver;
use stategraph::Input;
use stategraph_nodes::prelude::*;
use stategraph_nodes::*;

use crate::support::*;

fn authz_agent(
    model: &ScriptedModel,
    runs: &Arc<AtomicUsize>,
    authz: Authorization,
) -> AgentBuilder {
    AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, runs))
        .tool(counted("delete", ToolSource::Config, runs))
        .authorization(authz)
}

#[tokio::test]
async fn denied_tool_is_never_shown_and_a_call_to_it_never_runs() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "delete", "ok");
    let agent = authz_agent(
        &model,
        &runs,
        Authorization::new(RoleTable::new().allow("viewer", ["read"])),
    )
    .assemble(RunContext::new("t", "u").role("viewer"))
    .await?;
    assert_eq!(agent.tool_names(), ["read"]);
    let out = agent.ask("delete everything").await?;
    assert_eq!(model.requests()[0].tool_names(), ["read"]);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let msg = tool_messages(&out.state)[0];
    assert!(msg.is_error());
    assert!(
        msg.content
            .starts_with("Guardrail denied: tool 'delete' was blocked (authz.denied)"),
        "{}",
        msg.content
    );
    let why = agent.trace().why_not("delete", Stage::Visible);
    assert_eq!(why.map(|e| e.stage), Some(Stage::Authorized));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn missing_role_uses_the_default_role() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let authz = Authorization::new(RoleTable::new().allow("guest", ["read"])).default_role("guest");
    let agent = authz_agent(&model, &runs, authz)
        .assemble(RunContext::new("t", "u").role(""))
        .await?;
    assert_eq!(agent.tool_names(), ["read"]);
    Ok(())
}

struct Failing;
impl AuthorizationProvider for Failing {
    fn allowed_tools<'a>(
        &'a self,
        _p: &'a Principal,
        _n: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, BoxError>> {
        Box::pin(async { Err("policy store offline".into()) })
    }
}

#[tokio::test]
async fn authorization_failure_fails_closed_by_default() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let agent = authz_agent(&model, &runs, Authorization::new(Failing))
        .assemble(RunContext::default())
        .await?;
    assert!(agent.tool_names().is_empty());
    let why = agent
        .trace()
        .why_not("read", Stage::Authorized)
        .map(|e| e.verdict);
    assert!(
        matches!(why, Some(Verdict::Removed { reason, .. }) if reason.contains("policy store offline"))
    );
    Ok(())
}

#[tokio::test]
async fn authorization_failure_keeps_every_tool_when_fail_open() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let agent = authz_agent(
        &model,
        &runs,
        Authorization::new(Failing).fail(FailMode::Open),
    )
    .assemble(RunContext::default())
    .await?;
    assert_eq!(agent.tool_names(), ["read", "delete"]);
    Ok(())
}

#[tokio::test]
async fn a_call_replayed_from_a_checkpoint_is_checked_again_under_the_new_assembly() -> R {
    // Run 1 (role admin) stops before the tool step with a pending call to `delete`. Run 2
    // continues the same thread, assembled for a viewer: the stored call is refused.
    let saver = Arc::new(MemorySaver::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let table = RoleTable::new()
        .allow("admin", ["read", "delete"])
        .allow("viewer", ["read"]);
    let model = ScriptedModel::new("m", [AiMessage::calls([call("c1", "delete")])]);
    let admin = authz_agent(&model, &runs, Authorization::new(table.clone()))
        .assemble(RunContext::new("t-replay", "u").role("admin"))
        .await?;
    let config = admin
        .run_config()
        .thread("t-replay")
        .interrupt_before(["tools"]);
    let paused = admin
        .graph()
        .with_checkpointer(saver.clone())
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    assert!(paused.is_interrupted());
    model.verify()?;

    let model2 = ScriptedModel::new("m", [AiMessage::text("ok")]);
    let viewer = authz_agent(&model2, &runs, Authorization::new(table))
        .assemble(RunContext::new("t-replay", "u").role("viewer"))
        .await?;
    let out = viewer
        .graph()
        .with_checkpointer(saver)
        .invoke(Input::Continue, &viewer.run_config().thread("t-replay"))
        .await?;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "the replayed call reached its handler"
    );
    assert!(tool_messages(&out.state)[0].is_error());
    // Refused by the authorization re-check (outermost), not merely as an unknown name.
    let why = viewer
        .trace()
        .why_not("delete", Stage::Executed)
        .map(|e| e.verdict);
    assert!(
        matches!(&why, Some(Verdict::Denied { by, .. }) if by == "guardrail:authorization"),
        "{why:?}"
    );
    model2.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_tool_denied_by_authorization_never_comes_back_through_tool_search() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new(
                "c1",
                TOOL_SEARCH,
                json!({"query": "select:crm_delete,crm_read"}),
            )]),
            AiMessage::calls([call("c2", "crm_delete")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("crm_read", ToolSource::Mcp, &runs))
        .tool(counted("crm_delete", ToolSource::Mcp, &runs))
        .authorization(Authorization::new(
            RoleTable::new().allow("viewer", ["crm_read"]),
        ))
        .assemble(RunContext::new("t", "u").role("viewer"))
        .await?;
    assert_eq!(
        agent.deferred().map(|d| d.names()),
        Some(vec!["crm_read".to_owned()])
    );
    let out = agent.ask("go").await?;
    assert_eq!(
        out.state.promoted.as_ref().map(|p| p.names.clone()),
        Some(vec!["crm_read".to_owned()])
    );
    for req in model.requests() {
        assert!(!req.tool_names().contains(&"crm_delete"));
        assert!(req
            .messages
            .iter()
            .all(|m| !m.text().contains("\"name\": \"crm_delete\"")));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(tool_messages(&out.state)[1].is_error());
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn authorization_is_asked_again_before_the_configured_guardrails() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "delete", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("delete", ToolSource::Config, &runs))
        .authorization(Authorization::new(
            RoleTable::new().allow("admin", ["delete"]),
        ))
        .guardrail(Guardrail::new(
            AllowlistProvider::allow_all().deny(["delete"]),
        ))
        .assemble(RunContext::new("t", "u").role("viewer"))
        .await?;
    agent.ask("go").await?;
    let denials: Vec<String> = agent
        .trace()
        .for_tool("delete")
        .into_iter()
        .filter_map(|e| match e.verdict {
            Verdict::Denied { by, .. } => Some(by),
            _ => None,
        })
        .collect();
    assert_eq!(denials, ["guardrail:authorization"]);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    model.verify()?;
    Ok(())
}

#[test]
fn the_principal_keeps_an_unknown_role_and_defaults_only_an_empty_one() {
    let run = RunContext::new("t", "u").role("auditor");
    assert_eq!(run.principal("user").role, "auditor");
    assert_eq!(
        RunContext::new("t", "u").role("").principal("user").role,
        "user"
    );
    assert_eq!(RunContext::new("t", "u").principal("guest").role, "guest");
    assert_eq!(run.principal("user").user_id.as_deref(), Some("u"));
}

/// Answers with the allowed names reversed.
struct Reversed;
impl AuthorizationProvider for Reversed {
    fn allowed_tools<'a>(
        &'a self,
        _p: &'a Principal,
        names: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, BoxError>> {
        let mut out: Vec<String> = names.iter().filter(|n| *n != "b").cloned().collect();
        out.reverse();
        Box::pin(async move { Ok(out) })
    }
}

#[tokio::test]
async fn authorization_keeps_the_catalog_order_whatever_order_the_provider_answers_in() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
        .tool(counted("a", ToolSource::Config, &runs))
        .tool(counted("b", ToolSource::Config, &runs))
        .tool(counted("c", ToolSource::Config, &runs))
        .tool(counted("d", ToolSource::Config, &runs))
        .authorization(Authorization::new(Reversed))
        .assemble(RunContext::default())
        .await?;
    assert_eq!(agent.tool_names(), ["a", "c", "d"]);
    Ok(())
}

#[tokio::test]
async fn without_authorization_every_available_tool_is_authorized() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
        .tool(counted("a", ToolSource::Config, &runs))
        .assemble(RunContext::default())
        .await?;
    assert!(agent.trace().reached("a", Stage::Authorized));
    assert_eq!(agent.tool_names(), ["a"]);
    Ok(())
}
