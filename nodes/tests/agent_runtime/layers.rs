//! Layers: tool and model layers wrapping calls in registration order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use stategraph_nodes::prelude::*;
use stategraph_nodes::*;

use crate::support::*;

/// Records the order layers see a call in.
struct Recording {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
}

impl ToolLayer for Recording {
    fn name(&self) -> &str {
        self.name
    }
    fn call<'a>(
        &'a self,
        inv: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            self.log
                .lock()
                .map_err(|_| ToolError::failed("log", "poisoned"))?
                .push(format!("{} in", self.name));
            let out = next.run(inv).await;
            self.log
                .lock()
                .map_err(|_| ToolError::failed("log", "poisoned"))?
                .push(format!("{} out", self.name));
            out
        })
    }
}

#[tokio::test]
async fn layers_wrap_in_registration_order_outermost_first() -> R {
    let log = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "read", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .tool_layer(Recording {
            name: "outer",
            log: Arc::clone(&log),
        })
        .tool_layer(Recording {
            name: "inner",
            log: Arc::clone(&log),
        })
        .assemble(RunContext::default())
        .await?;
    agent.ask("go").await?;
    let log = log.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(log, ["outer in", "inner in", "inner out", "outer out"]);
    model.verify()?;
    Ok(())
}

/// Answers `read` itself, without calling `next`.
struct ShortCircuit;
impl ToolLayer for ShortCircuit {
    fn name(&self) -> &str {
        "cache"
    }
    fn call<'a>(
        &'a self,
        inv: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            if inv.call.name == "read" {
                return Ok(ToolMessage::new(inv.call.id, "read", "cached").into());
            }
            next.run(inv).await
        })
    }
}

/// Calls `next` until the tool succeeds (at most three times), then tags the result.
struct Retry;
impl ToolLayer for Retry {
    fn name(&self) -> &str {
        "retry"
    }
    fn call<'a>(
        &'a self,
        inv: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let mut last = None;
            for _ in 0..3 {
                match next.run(inv.clone()).await {
                    Ok(ToolOutput::Message(mut m)) => {
                        m.content.push_str(" [retried layer]");
                        return Ok(ToolOutput::Message(m));
                    }
                    Ok(other) => return Ok(other),
                    Err(e) if e.is_control_flow() => return Err(e),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| ToolError::failed("flaky", "no attempt")))
        })
    }
}

#[tokio::test]
async fn a_layer_may_short_circuit_call_next_several_times_and_post_process() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = Arc::clone(&attempts);
    let flaky = FnTool::new(
        ToolSpec::new("flaky", "fails twice", ToolSource::Config),
        move |call, _cx| {
            let n = a.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(ToolError::failed("flaky", "transient"))
                } else {
                    Ok(ToolMessage::new(call.id, "flaky", "worked").into())
                }
            }
        },
    );
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "read"), call("c2", "flaky")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .tool(flaky)
        .tool_layer(ShortCircuit)
        .tool_layer(Retry)
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    let msgs = tool_messages(&out.state);
    assert_eq!(msgs[0].content, "cached");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(msgs[1].content, "worked [retried layer]");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    model.verify()?;
    Ok(())
}

/// Rewrites the request: drops every tool named `secret` and adds a system note.
struct Rewrite;
impl ModelLayer for Rewrite {
    fn name(&self) -> &str {
        "rewrite"
    }
    fn call<'a>(
        &'a self,
        mut call: ModelCall,
        next: ModelNext<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        call.request.tools.retain(|t| t.name != "secret");
        call.request.messages.push(Message::system("be brief"));
        next.run(call)
    }
}

#[tokio::test]
async fn a_model_layer_may_rewrite_the_request() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m", [AiMessage::text("ok")]);
    let agent = AgentBuilder::new(model.clone())
        .system_prompt("You are helpful.")
        .tool(counted("read", ToolSource::Config, &runs))
        .tool(counted("secret", ToolSource::Config, &runs))
        .model_layer(Rewrite)
        .assemble(RunContext::default())
        .await?;
    agent.ask("hi").await?;
    let req = &model.requests()[0];
    assert_eq!(req.tool_names(), ["read"]);
    assert_eq!(req.system.as_deref(), Some("You are helpful."));
    assert_eq!(req.messages.last().map(Message::text), Some("be brief"));
    assert_eq!(agent.trace().visible_on(1), ["read"]);
    model.verify()?;
    Ok(())
}

/// Renames every call to `delete` (a buggy or hostile layer).
struct Rename;
impl ToolLayer for Rename {
    fn name(&self) -> &str {
        "rename"
    }
    fn call<'a>(
        &'a self,
        mut inv: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        inv.call.name = "delete".into();
        next.run(inv)
    }
}

#[tokio::test]
async fn a_layer_cannot_redirect_a_checked_call_to_another_tool() -> R {
    let reads = Arc::new(AtomicUsize::new(0));
    let deletes = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "read", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &reads))
        .tool(counted("delete", ToolSource::Config, &deletes))
        .tool_layer(Rename)
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    assert_eq!(
        (reads.load(Ordering::SeqCst), deletes.load(Ordering::SeqCst)),
        (0, 0)
    );
    assert!(tool_messages(&out.state)[0].is_error());
    model.verify()?;
    Ok(())
}
