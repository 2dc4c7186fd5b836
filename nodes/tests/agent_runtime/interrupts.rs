//! Interrupts raised by tools, guardrails and model layers: pause and resume.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::checkpoints::MemorySaver;
use stategraph::Resume;
use stategraph_nodes::prelude::*;
use stategraph_nodes::*;

use crate::support::*;

#[tokio::test]
async fn interrupt_in_a_tool_passes_every_error_handling_layer_and_resumes() -> R {
    let ask = FnTool::new(
        ToolSpec::new("ask_user", "asks", ToolSource::BuiltIn),
        |call, cx| async move {
            let answer: String = cx
                .interrupt(json!({"question": "which file?"}))
                .map_err(|e| ToolError::failed("ask_user", e))?;
            Ok(ToolMessage::new(call.id, "ask_user", answer).into())
        },
    );
    let model = call_then("c1", "ask_user", "thanks");
    let agent = AgentBuilder::new(model.clone())
        .tool(ask)
        .guardrail(Guardrail::new(AllowlistProvider::allow_all()))
        .assemble(RunContext::new("t-int", "u"))
        .await?;
    let graph = agent
        .graph()
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = agent.run_config().thread("t-int");
    let first = graph
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    assert!(
        first.is_interrupted(),
        "the interrupt was swallowed: {:?}",
        first.state.messages
    );
    assert!(first.state.messages.iter().all(|m| m.as_tool().is_none()));
    let done = graph
        .invoke(
            stategraph::Command::<ThreadState>::resume(Resume::value("report.md")),
            &config,
        )
        .await?;
    assert_eq!(tool_messages(&done.state)[0].content, "report.md");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn tools_that_finished_before_a_sibling_interrupted_do_not_run_again_on_resume() -> R {
    // Each tool call is its own task: when one call pauses, the others' results are kept as
    // pending writes and reused, so a side effect is not repeated.
    let runs = Arc::new(AtomicUsize::new(0));
    let ask = FnTool::new(
        ToolSpec::new("ask_user", "asks", ToolSource::BuiltIn),
        |call, cx| async move {
            let answer: String = cx
                .interrupt(json!({"question": "ok?"}))
                .map_err(|e| ToolError::failed("ask_user", e))?;
            Ok(ToolMessage::new(call.id, "ask_user", answer).into())
        },
    );
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "send_mail"), call("c2", "ask_user")]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("send_mail", ToolSource::Config, &runs))
        .tool(ask)
        .assemble(RunContext::new("t-pw", "u"))
        .await?;
    let graph = agent
        .graph()
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = agent.run_config().thread("t-pw");
    let paused = graph
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    assert!(paused.is_interrupted());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let done = graph
        .invoke(
            stategraph::Command::<ThreadState>::resume(Resume::value("yes")),
            &config,
        )
        .await?;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "send_mail ran again on resume"
    );
    let contents: Vec<&str> = tool_messages(&done.state)
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(contents, ["send_mail ok", "yes"]);
    model.verify()?;
    Ok(())
}

/// A guardrail that pauses the run to ask a human.
struct AskHuman;
impl GuardrailProvider for AskHuman {
    fn name(&self) -> &str {
        "ask-human"
    }
    fn evaluate<'a>(
        &'a self,
        r: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>> {
        let signal = stategraph::Interrupted {
            interrupts: vec![stategraph::Interrupt {
                id: format!("approve-{}", r.tool_call_id),
                value: json!({"approve": r.tool_name}),
                node: "tools".into(),
            }],
        };
        Box::pin(async move { Err(Box::new(signal) as BoxError) })
    }
}

#[tokio::test]
async fn an_interrupt_raised_by_a_guardrail_provider_pauses_the_run() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m", [AiMessage::calls([call("c1", "read")])]);
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .guardrail(Guardrail::new(AskHuman))
        .assemble(RunContext::new("t-g", "u"))
        .await?;
    let graph = agent
        .graph()
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let out = graph
        .invoke(
            ThreadState::human_input("go"),
            &agent.run_config().thread("t-g"),
        )
        .await?;
    assert!(out.is_interrupted());
    assert!(
        tool_messages(&out.state).is_empty(),
        "the interrupt became an error message"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    model.verify()?;
    Ok(())
}

/// A model layer that pauses before the model is called, raising the signal as its own error.
struct PauseFirst;
impl ModelLayer for PauseFirst {
    fn name(&self) -> &str {
        "pause"
    }
    fn call<'a>(
        &'a self,
        call: ModelCall,
        next: ModelNext<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let node = call
                .node
                .clone()
                .ok_or_else(|| ModelError::Config("no task".into()))?;
            let _ok: bool = node
                .interrupt("may I call the model?")
                .map_err(ModelError::Other)?;
            next.run(call).await
        })
    }
}

#[tokio::test]
async fn an_interrupt_raised_in_a_model_layer_pauses_and_resumes() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("hello")]);
    let agent = AgentBuilder::new(model.clone())
        .model_layer(PauseFirst)
        .assemble(RunContext::new("t-m", "u"))
        .await?;
    let graph = agent
        .graph()
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = agent.run_config().thread("t-m");
    let paused = graph
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    assert!(paused.is_interrupted());
    assert_eq!(model.requests().len(), 0);
    let done = graph
        .invoke(
            stategraph::Command::<ThreadState>::resume(Resume::value(true)),
            &config,
        )
        .await?;
    assert_eq!(
        done.state.last_ai().map(|m| m.content.as_str()),
        Some("hello")
    );
    model.verify()?;
    Ok(())
}
