//! An interrupt raised by a tool passes through the tool node unchanged (no error message, no
//! failed node), and resuming the thread answers the tool.

use std::sync::Arc;

use serde_json::json;
use stategraph::checkpoints::MemorySaver;
use stategraph::{Command, Resume, RunConfig};
use stategraph_nodes::prelude::*;
use stategraph_nodes::toolbox::Toolbox;
use stategraph_nodes::ToolError;

use crate::support::{ask, call, research_graph, tool_messages, Research, R};

#[tokio::test]
async fn an_interrupt_from_a_tool_passes_the_tool_node_unchanged_and_resumes() -> R {
    let ask_user = FnTool::new(
        ToolSpec::new("ask_user", "asks the user", ToolSource::Config),
        |call, cx| async move {
            let answer: String = cx
                .interrupt(json!({"question": "which file?"}))
                .map_err(|e| ToolError::failed("ask_user", e))?;
            Ok(ToolMessage::new(call.id, "ask_user", answer).into())
        },
    );
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "ask_user")]),
            AiMessage::text("thanks"),
        ],
    );
    let tools = Toolbox::new().tool(ask_user);
    let graph = research_graph(&model, &tools)?.with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().thread("t-ask");

    let first = graph.invoke(ask("x", "open it"), &config).await?;
    assert!(
        first.is_interrupted(),
        "the interrupt was swallowed: {:?}",
        first.state.chat
    );
    assert_eq!(
        first.interrupts[0].value,
        json!({"question": "which file?"})
    );
    assert!(
        tool_messages(&first.state.chat).is_empty(),
        "no error message for a pause"
    );

    let done = graph
        .invoke(
            Command::<Research>::resume(Resume::value("report.md")),
            &config,
        )
        .await?;
    assert!(!done.is_interrupted());
    let replies = tool_messages(&done.state.chat);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].content, "report.md");
    assert_eq!(done.state.chat.last().map(Message::text), Some("thanks"));
    assert!(tools.trace().reached("ask_user", Stage::Returned));
    model.verify()?;
    Ok(())
}
