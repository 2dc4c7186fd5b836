//! A subagent's tokens in the lead's `messages` stream: under the lead's tools task's
//! namespace, only when subgraphs stream.

use std::sync::Arc;

use futures::StreamExt;
use stategraph::{EventKind, MessagePart, StreamMode};
use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{SubagentSpec, Subagents};
use stategraph_nodes::tokens::AiMessageChunk;

use crate::support::*;

/// Each chunk the lead's stream carries (its namespace, node and chunk) when the lead makes
/// `calls` (`task` calls to `worker`) and the children answer `replies` in turn.
async fn delegate(
    calls: Vec<ToolCall>,
    replies: Vec<AiMessage>,
    subgraphs: bool,
) -> Result<Vec<(String, String, AiMessageChunk)>, Box<dyn std::error::Error + Send + Sync>> {
    let parent = ScriptedModel::new("lead", [AiMessage::calls(calls), AiMessage::text("ok")]);
    let child = ScriptedModel::new("child", replies);
    let subagents = Subagents::new(Arc::new(child)).register(SubagentSpec::new(
        "worker",
        "d",
        "You are the worker.",
    ));
    let agent = lead(parent, subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?;
    let mut mode = StreamMode::messages();
    mode.subgraphs = subgraphs;
    let mut stream =
        agent
            .graph()
            .stream(ThreadState::human_input("go"), &agent.run_config(), mode);
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        if let EventKind::Messages {
            node,
            part: MessagePart::Chunk,
            message,
            ..
        } = &ev.kind
        {
            if let Some(c) = message.get::<AiMessageChunk>() {
                out.push((ev.ns.to_string(), node.to_string(), c.clone()));
            }
        }
    }
    stream.outcome().await?;
    Ok(out)
}

/// One delegation whose child answers slowly.
async fn one_delegation(
    subgraphs: bool,
) -> Result<Vec<(String, String, AiMessageChunk)>, Box<dyn std::error::Error + Send + Sync>> {
    delegate(
        vec![task_call("c1", "worker", "the task")],
        vec![AiMessage::text("the child answers slowly")],
        subgraphs,
    )
    .await
}

#[tokio::test]
async fn a_subagents_tokens_stream_under_the_leads_tools_task_with_subgraphs() -> R {
    let chunks = one_delegation(true).await?;
    let child: Vec<&(String, String, AiMessageChunk)> =
        chunks.iter().filter(|(ns, _, _)| !ns.is_empty()).collect();
    assert!(child.len() >= 4, "{chunks:?}");
    for (ns, node, _) in &child {
        assert!(ns.starts_with("tools:"), "{ns}");
        assert_eq!(node, "model", "the child's own node");
    }
    let joined = AiMessageChunk::join("child", child.iter().map(|(_, _, c)| c))?;
    assert_eq!(joined.content, "the child answers slowly");
    let lead_text: Vec<&AiMessageChunk> = chunks
        .iter()
        .filter(|(ns, _, _)| ns.is_empty())
        .map(|(_, _, c)| c)
        .collect();
    assert!(
        !lead_text.is_empty(),
        "the lead's own tokens stream at the root"
    );
    Ok(())
}

#[tokio::test]
async fn without_subgraphs_only_the_leads_tokens_stream() -> R {
    let chunks = one_delegation(false).await?;
    assert!(!chunks.is_empty());
    assert!(chunks.iter().all(|(ns, _, _)| ns.is_empty()), "{chunks:?}");
    Ok(())
}

#[tokio::test]
async fn two_delegations_stream_their_tokens_under_ids_of_their_own() -> R {
    let chunks = delegate(
        vec![
            task_call("c1", "worker", "first"),
            task_call("c2", "worker", "second"),
        ],
        vec![AiMessage::text("one child"), AiMessage::text("one child")],
        true,
    )
    .await?;
    let mut by_id: std::collections::BTreeMap<String, Vec<AiMessageChunk>> = Default::default();
    for (_, _, c) in chunks.into_iter().filter(|(ns, _, _)| !ns.is_empty()) {
        by_id.entry(c.id.clone()).or_default().push(c);
    }
    assert_eq!(by_id.len(), 2, "one id per child: {:?}", by_id.keys());
    for chunks in by_id.values() {
        assert_eq!(AiMessageChunk::join("child", chunks)?.content, "one child");
    }
    Ok(())
}
