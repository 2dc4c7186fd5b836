//! A tool of an agent running as a node of a parent graph that presents a file by handing a
//! command to the parent (`Command::to_parent`): settlement sees the artifact, and the parent
//! gets the command.

use std::sync::Arc;

use serde_json::json;
use stategraph::{BoxError, Command, NodeContext, StateGraph, END, START};
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::SandboxOptions;
use stategraph_nodes::sandbox_tools::write_file;
use stategraph_nodes::Stage;

use crate::support::*;

const REPORT: &str = "/mnt/user-data/outputs/report.md";

/// `present_files` as a hand-off: the artifacts go to the parent graph, which takes over.
fn present_to_parent() -> FnTool {
    FnTool::new(
        ToolSpec::new(
            "present_files",
            "Present files and hand back",
            ToolSource::Config,
        ),
        |_call, _cx| async move {
            let to_parent = Command::<ThreadState>::new()
                .update(ThreadState::update().artifacts(vec![REPORT.to_owned()]));
            Ok(ToolOutput::Command(Command::to_parent(to_parent)))
        },
    )
}

#[tokio::test]
async fn artifacts_a_tool_hands_to_the_parent_graph_count_as_presented() -> R {
    let tmp = tempfile::tempdir()?;
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call(
                "w1",
                "write_file",
                json!({"path": REPORT, "content": "# report"}),
            )]),
            AiMessage::calls([call("p1", "present_files", json!({}))]),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(present_to_parent())
        .sandbox(
            Counting::new(&tmp.path().join("sandboxes")),
            SandboxOptions::lazy(),
        )
        .assemble(RunContext::new("t1", "ana"))
        .await?;
    let parent = StateGraph::<ThreadState>::new()
        .add_node(
            "agent",
            agent.as_node(
                |_s: &ThreadState| ThreadState::human_input("write and present the report"),
                |_s: &ThreadState| ThreadState::update(),
            ),
        )
        .add_node(
            "after",
            |_s: Arc<ThreadState>, _cx: NodeContext| async move {
                Ok::<_, BoxError>(ThreadState::update().title(Some("handed back".into())))
            },
        )
        .add_edge(START, "agent")
        .add_edge("agent", "after")
        .add_edge("after", END)
        .compile()?;
    let out = parent
        .invoke(ThreadState::update(), &Default::default())
        .await?;
    // The parent applied the handed command, then went on.
    assert_eq!(out.state.artifacts, [REPORT]);
    assert_eq!(out.state.title.as_deref(), Some("handed back"));
    // Settlement counted the artifact as presented: the file it produced was delivered.
    assert!(agent
        .trace()
        .entries()
        .iter()
        .any(|e| e.stage == Stage::Delivered && e.tool == "present_files"));
    model.verify()?;
    Ok(())
}
