//! Token usage: a delegated child's model calls count in the lead's run.

use std::sync::Arc;

use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{SubagentSpec, Subagents};
use stategraph_nodes::Usage;

use super::support::{lead, task_call, R};

fn used(mut reply: AiMessage, input: u64, output: u64) -> AiMessage {
    reply.usage = Some(Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
    });
    reply
}

#[tokio::test]
async fn a_delegated_childs_usage_is_added_to_the_leads_run() -> R {
    let child = ScriptedModel::new("child", [used(AiMessage::text("child answer"), 40, 4)]);
    let subagents = Subagents::new(Arc::new(child)).register(SubagentSpec::new("worker", "d", "p"));
    let parent = ScriptedModel::new(
        "lead",
        [
            used(AiMessage::calls([task_call("c1", "worker", "x")]), 100, 10),
            used(AiMessage::text("ok"), 120, 6),
        ],
    );
    let out = lead(parent, subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?
        .ask("go")
        .await?;
    assert_eq!(
        out.settlement.usage,
        stategraph::TokenUsage {
            input_tokens: 260,
            output_tokens: 20,
            total_tokens: 280,
            model_calls: 3,
        }
    );
    Ok(())
}
