//! `present_files` in an agent: all or nothing, normalised paths, no file read.

use serde_json::json;
use stategraph_nodes::delivery::PRESENT_ERROR_PREFIX;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::SandboxOptions;
use stategraph_nodes::sandbox_tools::{present_files, write_file, PRESENTED_MESSAGE};

use crate::support::*;

async fn present(
    paths: serde_json::Value,
) -> Result<(ThreadState, tempfile::TempDir), Box<dyn std::error::Error + Send + Sync>> {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call(
                "w",
                "write_file",
                json!({"path": "/mnt/user-data/outputs/report.md", "content": "# R"}),
            )]),
            AiMessage::calls([call("p", "present_files", json!({ "filepaths": paths }))]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(present_files())
        .sandbox(provider, SandboxOptions::lazy())
        .assemble(RunContext::new("t1", "ana"))
        .await?;
    // The tool's behaviour is the point here, not the run's delivery verdict (a bad path
    // presents nothing, so the report written into the outputs is then undelivered).
    let out = match agent.ask("report").await {
        Ok(out) => out,
        Err(AgentRunError::Delivery { outcome, .. }) => *outcome,
        Err(e) => return Err(e.into()),
    };
    model.verify()?;
    Ok(((*out.state).clone(), tmp))
}

#[tokio::test]
async fn presenting_outputs_adds_artifacts_and_says_so() -> R {
    let (state, _tmp) = present(json!(["/mnt/user-data/outputs/report.md"])).await?;
    assert_eq!(state.artifacts, ["/mnt/user-data/outputs/report.md"]);
    let m = answer(&state, "p").ok_or("no answer")?;
    assert_eq!(m.content, PRESENTED_MESSAGE);
    assert!(!m.is_error());
    Ok(())
}

#[tokio::test]
async fn one_bad_path_presents_nothing() -> R {
    let (state, _tmp) = present(json!([
        "/mnt/user-data/outputs/report.md",
        "/mnt/user-data/workspace/notes.md"
    ]))
    .await?;
    assert!(state.artifacts.is_empty(), "{:?}", state.artifacts);
    let m = answer(&state, "p").ok_or("no answer")?;
    assert!(m.is_error());
    assert!(m.content.starts_with(PRESENT_ERROR_PREFIX), "{}", m.content);
    Ok(())
}

#[tokio::test]
async fn files_are_not_read_and_paths_are_normalised() -> R {
    // A file that does not exist is presented as given: present_files reads nothing.
    let (state, _tmp) = present(json!(["//mnt/user-data/outputs/./later/chart.png"])).await?;
    assert_eq!(state.artifacts, ["/mnt/user-data/outputs/later/chart.png"]);
    Ok(())
}
