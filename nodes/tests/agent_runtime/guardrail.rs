//! Guardrails: call-time denials, fallback messages, provider failures, concurrent calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use stategraph::{EventKind, StreamMode};
use stategraph_nodes::prelude::*;
use stategraph_nodes::*;

use crate::support::*;

#[tokio::test]
async fn guardrail_denial_has_the_documented_message_and_the_handler_never_runs() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "delete"), call("c2", "read")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .tool(counted("delete", ToolSource::Config, &runs))
        .guardrail(Guardrail::new(
            AllowlistProvider::allow_all().deny(["delete"]),
        ))
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    let msgs = tool_messages(&out.state);
    assert_eq!(
        msgs[0].content,
        "Guardrail denied: tool 'delete' was blocked (oap.tool_denied). Reason: tool 'delete' is in the denylist. Choose an alternative approach."
    );
    assert!(msgs[0].is_error());
    assert_eq!(msgs[1].content, "read ok");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let denied = agent
        .trace()
        .why_not("delete", Stage::Executed)
        .map(|e| e.verdict);
    assert!(matches!(denied, Some(Verdict::Denied { by, .. }) if by == "guardrail:allowlist"));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn explicit_empty_allowlist_denies_everything() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "read", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .guardrail(Guardrail::new(
            AllowlistProvider::only(Vec::<String>::new()),
        ))
        .assemble(RunContext::default())
        .await?;
    agent.ask("go").await?;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    model.verify()?;
    Ok(())
}

struct NoReasons;
impl GuardrailProvider for NoReasons {
    fn name(&self) -> &str {
        "silent"
    }
    fn evaluate<'a>(
        &'a self,
        _r: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>> {
        Box::pin(async { Ok(GuardrailDecision::default()) })
    }
}

struct Crashing;
impl GuardrailProvider for Crashing {
    fn name(&self) -> &str {
        "crashing"
    }
    fn evaluate<'a>(
        &'a self,
        _r: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>> {
        Box::pin(async { Err("evaluator timeout".into()) })
    }
}

async fn one_call_with(
    guardrail: Guardrail,
) -> Result<(ThreadState, usize), Box<dyn std::error::Error + Send + Sync>> {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "read", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .guardrail(guardrail)
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    model.verify()?;
    Ok(((*out.state).clone(), runs.load(Ordering::SeqCst)))
}

#[tokio::test]
async fn denial_without_reasons_uses_the_fallback_code_and_message() -> R {
    let (state, runs) = one_call_with(Guardrail::new(NoReasons)).await?;
    assert_eq!(runs, 0);
    assert_eq!(
        tool_messages(&state)[0].content,
        "Guardrail denied: tool 'read' was blocked (oap.denied). Reason: blocked by guardrail policy. Choose an alternative approach."
    );
    Ok(())
}

#[tokio::test]
async fn guardrail_provider_error_fails_closed_with_evaluator_error() -> R {
    let (state, runs) = one_call_with(Guardrail::new(Crashing)).await?;
    assert_eq!(runs, 0);
    assert!(tool_messages(&state)[0]
        .content
        .contains("(oap.evaluator_error)"));
    Ok(())
}

#[tokio::test]
async fn guardrail_provider_error_runs_the_handler_when_fail_open() -> R {
    let (state, runs) = one_call_with(Guardrail::new(Crashing).fail(FailMode::Open)).await?;
    assert_eq!(runs, 1);
    assert_eq!(tool_messages(&state)[0].content, "read ok");
    Ok(())
}

/// Denies `delete` after a delay, so a sibling call records its entries meanwhile.
struct SlowDeny;
impl GuardrailProvider for SlowDeny {
    fn name(&self) -> &str {
        "slow"
    }
    fn evaluate<'a>(
        &'a self,
        r: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>> {
        Box::pin(async move {
            if r.tool_name == "delete" {
                tokio::time::sleep(Duration::from_millis(40)).await;
                return Ok(GuardrailDecision::deny("no", "not now"));
            }
            Ok(GuardrailDecision::allow())
        })
    }
}

#[tokio::test]
async fn concurrent_calls_keep_their_own_trace_entries() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "delete"), call("c2", "read")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .tool(counted("delete", ToolSource::Config, &runs))
        .guardrail(Guardrail::new(SlowDeny))
        .assemble(RunContext::default())
        .await?;
    let mut stream = agent.graph().stream(
        ThreadState::human_input("go"),
        &agent.run_config(),
        StreamMode::default(),
    );
    let mut streamed: Vec<TraceEntry> = Vec::new();
    while let Some(event) = stream.next().await {
        if let EventKind::Custom { payload, .. } = event.kind {
            if let Some(entry) = payload.get("capability") {
                streamed.push(serde_json::from_value(entry.clone())?);
            }
        }
    }
    assert!(agent.trace().reached("read", Stage::Returned));
    assert!(
        !agent.trace().reached("delete", Stage::Returned),
        "{}",
        agent.trace().render()
    );
    // Each entry of the run's steps is streamed exactly once.
    let recorded: Vec<TraceEntry> = agent
        .trace()
        .entries()
        .into_iter()
        .filter(|e| matches!(e.stage, Stage::Visible | Stage::Executed | Stage::Returned))
        .collect();
    assert_eq!(streamed.len(), recorded.len());
    for e in &recorded {
        assert_eq!(
            streamed.iter().filter(|x| *x == e).count(),
            recorded.iter().filter(|x| *x == e).count(),
            "{e}"
        );
    }
    model.verify()?;
    Ok(())
}

/// A provider that reports a cancellation instead of a decision.
struct Cancelling;
impl GuardrailProvider for Cancelling {
    fn name(&self) -> &str {
        "cancelling"
    }
    fn evaluate<'a>(
        &'a self,
        request: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>> {
        let tool = request.tool_name.clone();
        Box::pin(async move { Err(Box::new(ToolError::Cancelled { tool }) as BoxError) })
    }
}

#[tokio::test]
async fn a_cancellation_from_a_guardrail_provider_cancels_the_run_in_either_fail_mode() -> R {
    for mode in [FailMode::Open, FailMode::Closed] {
        let runs = Arc::new(AtomicUsize::new(0));
        let model = ScriptedModel::new(
            "m",
            [
                AiMessage::calls([call("c1", "read")]),
                AiMessage::text("never"),
            ],
        );
        let agent = AgentBuilder::new(model.clone())
            .tool(counted("read", ToolSource::Config, &runs))
            .guardrail(Guardrail::new(Cancelling).fail(mode))
            .assemble(RunContext::default())
            .await?;
        let err = agent.ask("go").await.err().ok_or("the run went on")?;
        assert!(
            matches!(
                err.run_error(),
                Some(stategraph::RunError::Cancelled { .. })
            ),
            "{mode:?}: {err}"
        );
        assert_eq!(
            err.settlement().map(|s| s.status),
            Some(stategraph::checkpoints::RunStatus::Cancelled)
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0, "{mode:?}: the handler ran");
        assert_eq!(
            model.remaining(),
            1,
            "{mode:?}: the run went on to the model"
        );
        model.clear();
    }
    Ok(())
}
