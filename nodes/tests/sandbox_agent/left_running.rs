//! A run record always reaches a terminal status: an invocation dropped with no runtime
//! current is settled before the drop returns.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph::checkpoints::{RunRecord, RunStatus, Saver, SqliteSaver, ThreadId};
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::SandboxOptions;
use stategraph_nodes::sandbox_tools::write_file;
use stategraph_nodes::{Agent, DROPPED_REASON};

use crate::support::*;

const THREAD: &str = "t1";

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A tool that never finishes.
fn hanging() -> FnTool {
    FnTool::new(
        ToolSpec::new("hang", "waits forever", ToolSource::Config),
        |_call: ToolCall, _cx| async move {
            std::future::pending::<()>().await;
            Ok(ToolOutput::Message(ToolMessage::new("x", "hang", "never")))
        },
    )
}

/// A model that writes a file (acquiring the sandbox), then hangs in a tool.
fn writes_then_hangs() -> ScriptedModel {
    ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call(
                "w",
                "write_file",
                json!({"path": "/mnt/user-data/workspace/a.md", "content": "a"}),
            )]),
            AiMessage::calls([call("h", "hang", json!({}))]),
        ],
    )
}

async fn agent(
    model: &ScriptedModel,
    provider: &Counting,
    saver: Arc<dyn Saver>,
) -> Result<Agent, Box<dyn std::error::Error + Send + Sync>> {
    Ok(AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(hanging())
        .sandbox(provider.clone(), SandboxOptions::lazy())
        .assemble(RunContext::new(THREAD, "ana"))
        .await?
        .with_checkpointer(saver))
}

/// The thread's runs as stored, read on a runtime of its own.
fn stored_runs(
    saver: &Arc<dyn Saver>,
) -> Result<Vec<RunRecord>, Box<dyn std::error::Error + Send + Sync>> {
    let thread = ThreadId::new(THREAD)?;
    Ok(runtime()?.block_on(saver.list_runs(&thread))?)
}

#[test]
fn an_invocation_dropped_outside_any_runtime_is_cancelled_in_the_file_and_released() -> R {
    let tmp = tempfile::tempdir()?;
    let saver: Arc<dyn Saver> = Arc::new(SqliteSaver::open(tmp.path().join("threads.db"))?);
    let provider = Counting::new(&tmp.path().join("sandboxes"));
    let model = writes_then_hangs();
    let started = runtime()?;
    let agent = started.block_on(agent(&model, &provider, saver.clone()))?;
    let mut run = Box::pin(agent.ask("go"));
    let hung = started.block_on(async {
        tokio::time::timeout(Duration::from_millis(300), &mut run)
            .await
            .is_err()
    });
    assert!(hung, "the hanging run finished");
    assert_eq!(stored_runs(&saver)?[0].status, RunStatus::Running);
    drop(started);
    assert!(tokio::runtime::Handle::try_current().is_err());
    drop(run);
    // Settled before the drop returned: no runtime ran anything since.
    let runs = stored_runs(&saver)?;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Cancelled);
    assert_eq!(runs[0].reason.as_deref(), Some(DROPPED_REASON));
    let receipt = runtime()?.block_on(saver.get_receipt(&runs[0].run_id))?;
    assert!(receipt.is_some(), "no receipt");
    assert_eq!(provider.acquired(), 1);
    assert_eq!(provider.released(), 1, "the sandbox was not released");
    model.clear();
    Ok(())
}
