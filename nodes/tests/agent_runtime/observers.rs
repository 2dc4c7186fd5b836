//! Observers and the capability trace as stream events.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use stategraph::{EventKind, StreamMode};
use stategraph_nodes::prelude::*;
use stategraph_nodes::*;

use crate::support::*;

struct Watch {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
}
impl Watch {
    fn push(&self, what: &str) {
        if let Ok(mut l) = self.log.lock() {
            l.push(format!("{} {what}", self.name));
        }
    }
}
impl Observer for Watch {
    fn before_agent(&self, _s: &ThreadState, _r: &RunContext) {
        self.push("before_agent");
    }
    fn after_agent(&self, _s: &ThreadState, _r: &RunContext) {
        self.push("after_agent");
    }
    fn before_model(&self, _q: &ModelRequest, _r: &RunContext) {
        self.push("before_model");
    }
    fn after_model(&self, _a: &ModelResponse, _r: &RunContext) {
        self.push("after_model");
    }
}

#[tokio::test]
async fn observers_see_before_hooks_in_order_and_after_hooks_in_reverse() -> R {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new("m", [AiMessage::text("ok")]);
    let agent = AgentBuilder::new(model.clone())
        .observer(Watch {
            name: "a",
            log: Arc::clone(&log),
        })
        .observer(Watch {
            name: "b",
            log: Arc::clone(&log),
        })
        .assemble(RunContext::default())
        .await?;
    agent.ask("hi").await?;
    let log = log.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(
        log,
        [
            "a before_agent",
            "b before_agent",
            "a before_model",
            "b before_model",
            "b after_model",
            "a after_model",
            "b after_agent",
            "a after_agent"
        ]
    );
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn capability_trace_is_emitted_as_stream_events() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "read", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .assemble(RunContext::default())
        .await?;
    let mut stream = agent.graph().stream(
        ThreadState::human_input("go"),
        &agent.run_config(),
        StreamMode::default(),
    );
    let mut stages = Vec::new();
    while let Some(event) = stream.next().await {
        if let EventKind::Custom { payload, .. } = event.kind {
            let entry: TraceEntry = serde_json::from_value(payload["capability"].clone())?;
            stages.push((entry.tool, entry.stage));
        }
    }
    assert_eq!(
        stages,
        [
            ("read".to_owned(), Stage::Visible),
            ("read".to_owned(), Stage::Executed),
            ("read".to_owned(), Stage::Returned),
            ("read".to_owned(), Stage::Visible),
        ]
    );
    model.verify()?;
    Ok(())
}
