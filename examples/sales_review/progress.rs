//! One progress line per step as the run goes: the engine step, the node, the tool with the
//! virtual path it names (or the model's turn), and the time since the run began.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use stategraph_nodes::prelude::*;
use stategraph_nodes::{
    CapabilityTrace, ModelCall, ModelError, ModelLayer, ModelNext, ModelResponse, Stage, ToolError,
    ToolInvocation, ToolLayer, ToolNext, Verdict,
};

/// Prints each model turn and each tool call of the lead, timed from `start`. Calls refused
/// before any layer of the user runs (the guardrail is outermost) are printed from the trace
/// at the next model turn.
#[derive(Clone, Debug)]
pub(crate) struct Progress {
    start: Instant,
    /// Trace entries already looked at for refusals.
    seen: Arc<AtomicUsize>,
}

impl Progress {
    /// Lines timed from now.
    pub(crate) fn new() -> Self {
        Progress {
            start: Instant::now(),
            seen: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn line(&self, step: Option<i64>, node: &str, what: &str) {
        let ms = self.start.elapsed().as_secs_f64() * 1000.0;
        let step = step.map_or("-".into(), |s| s.to_string());
        // A closed stdout (`| head`) must not fail the node that reports progress.
        let _ = writeln!(
            std::io::stdout().lock(),
            "{ms:>8.1} ms  step {step:>3}  {node:<6} {what}"
        );
    }
}

/// The virtual path (or paths, or query) a call names, as printed.
fn shown_args(args: &serde_json::Value) -> String {
    ["path", "filepaths", "query", "command", "subagent_type"]
        .iter()
        .filter_map(|key| args.get(key).map(|v| v.to_string()))
        .collect::<Vec<_>>()
        .join(" ")
}

impl ToolLayer for Progress {
    fn name(&self) -> &str {
        "progress"
    }

    fn call<'a>(
        &'a self,
        invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let step = invocation.cx.node.as_ref().map(|n| n.step());
            let name = invocation.call.name.clone();
            let args = shown_args(&invocation.call.args);
            let out = next.run(invocation).await;
            let result = match &out {
                Ok(o) => match o.message() {
                    Some(m) if m.is_error() => format!("ERROR {}", first_line(&m.content)),
                    Some(m) => format!("ok ({} bytes)", m.content.len()),
                    None => "ok".into(),
                },
                Err(e) => format!("FAILED {e}"),
            };
            self.line(step, "tools", &format!("{name:<14} {args}  -> {result}"));
            out
        })
    }
}

impl ModelLayer for Progress {
    fn name(&self) -> &str {
        "progress"
    }

    fn call<'a>(
        &'a self,
        call: ModelCall,
        next: ModelNext<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let step = call.node.as_ref().map(|n| n.step());
            self.refusals(&call.trace, step.map(|s| s - 1));
            let turn = call.number;
            let visible = call.request.tools.len();
            let out = next.run(call).await;
            if let Ok(response) = &out {
                let ai = &response.message;
                let what = if ai.tool_calls.is_empty() {
                    format!("answer: {}", first_line(&ai.content))
                } else {
                    let names: Vec<&str> = ai.tool_calls.iter().map(|c| c.name.as_str()).collect();
                    format!("calls {}", names.join(", "))
                };
                self.line(
                    step,
                    "model",
                    &format!("turn {turn} ({visible} tools visible) -> {what}"),
                );
            }
            out
        })
    }
}

impl Progress {
    /// Prints the calls refused at `Executed` since the last look, as run in `step`.
    fn refusals(&self, trace: &CapabilityTrace, step: Option<i64>) {
        let entries = trace.entries();
        let from = self.seen.swap(entries.len(), Ordering::Relaxed);
        for e in entries.iter().skip(from).filter(|e| e.is_own()) {
            if let (Stage::Executed, Verdict::Denied { by, reason }) = (e.stage, &e.verdict) {
                self.line(
                    step,
                    "tools",
                    &format!("{:<14} DENIED by {by}: {reason}", e.tool),
                );
            }
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}
