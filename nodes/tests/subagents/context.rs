//! The run context: a delegated child runs for its lead's caller and sees the lead's run
//! context (docs/decisions/0095).

use std::sync::Arc;

use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{SubagentSpec, Subagents};

use super::support::{lead, task_call, tool_messages, WorkOnce, R};

#[derive(Debug)]
struct Caller {
    user: String,
}

fn whoami() -> FnTool {
    FnTool::new(
        ToolSpec::new("whoami", "Say who asks.", ToolSource::Config),
        |call, cx| async move {
            let text = match cx.context::<Caller>() {
                Ok(c) => c.user.clone(),
                Err(e) => e.to_string(),
            };
            Ok(ToolMessage::new(call.id, "whoami", text).into())
        },
    )
}

#[tokio::test]
async fn a_subagents_tools_see_the_leads_run_context() -> R {
    let child = WorkOnce {
        tool: "whoami".to_owned(),
    };
    let subagents = Subagents::new(Arc::new(child))
        .register(SubagentSpec::new("worker", "d", "p").custom_tool(whoami()));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "who?")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = lead(parent, subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?;
    let config = agent.run_config().context(Caller { user: "ada".into() });
    let out = agent
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    let answers: Vec<&str> = tool_messages(&out.state)
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        answers.iter().any(|a| a.contains("done: ada")),
        "{answers:?}"
    );
    Ok(())
}
