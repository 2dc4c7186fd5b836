//! Replaying an agent thread: with the recorded model replies no model is called and
//! unchanged code reports no divergence; a changed tool is caught where it changed.

use std::sync::Arc;

use serde_json::json;
use stategraph::checkpoints::SqliteSaver;
use stategraph::replay::DivergenceKind;
use stategraph_nodes::prelude::*;
use stategraph_nodes::{Agent, AgentError, RecordedReplies};

use super::support::R;

/// `add`, whose answer is off by `skew`.
fn add(skew: i64) -> FnTool {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        a: i64,
        b: i64,
    }
    FnTool::typed(
        ToolSpec::new("add", "Add two numbers", ToolSource::Config),
        move |args: Args, _cx| async move { Ok((args.a + args.b + skew).to_string()) },
    )
}

async fn agent(
    model: impl ChatModel,
    skew: i64,
    saver: Arc<SqliteSaver>,
) -> Result<Agent, AgentError> {
    Ok(AgentBuilder::new(model)
        .tool(add(skew))
        .assemble(RunContext::new("t", "ana"))
        .await?
        .with_checkpointer(saver))
}

#[tokio::test]
async fn a_replay_with_recorded_replies_calls_no_model_and_catches_a_changed_tool() -> R {
    let dir = tempfile::tempdir()?;
    let saver = Arc::new(SqliteSaver::open(dir.path().join("threads.db"))?);
    let live = ScriptedModel::new(
        "live",
        [
            AiMessage::calls([ToolCall::new("c1", "add", json!({"a": 2, "b": 3}))]),
            AiMessage::text("2 + 3 = 5"),
        ],
    );
    let recorder = agent(live.clone(), 0, saver.clone()).await?;
    let config = recorder.run_config().thread("t");
    recorder
        .invoke(ThreadState::human_input("what is 2 + 3?"), &config)
        .await?;
    live.verify()?;
    let g = recorder.graph();
    let first = g
        .get_state_history("t", Default::default())
        .await?
        .pop()
        .ok_or("no history")?
        .checkpoint
        .id;

    // Unchanged code, recorded replies: no model call, no divergence.
    let recorded = RecordedReplies::from_thread(g, "t", first, None).await?;
    assert_eq!(recorded.recorded(), 2);
    let replayer = agent(recorded.clone(), 0, saver.clone()).await?;
    let report = replayer.graph().replay("t", first, None).await?;
    assert_eq!(report.divergence, None);
    assert_eq!(
        recorded.answered(),
        2,
        "both model turns answered from the recording"
    );

    // A tool that now answers differently is caught at its own step.
    let recorded = RecordedReplies::from_thread(g, "t", first, None).await?;
    let skewed = agent(recorded.clone(), 1, saver).await?;
    let d = skewed
        .graph()
        .replay("t", first, None)
        .await?
        .divergence
        .ok_or("expected a divergence")?;
    assert_eq!(d.kind, DivergenceKind::State);
    assert_eq!(d.field(), Some("messages"));
    assert_eq!(recorded.answered(), 1, "the second turn was never reached");
    Ok(())
}
