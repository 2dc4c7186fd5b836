//! Memory is a capability like any other: a child reaches the runtime's store only when its
//! spec grants it, and the check made when its catalog and the model's view are assembled is
//! made again before a handler runs.

use std::sync::Arc;

use serde_json::json;
use stategraph::store::{MemoryStore, Namespace, SearchOp, Store};
use stategraph_nodes::memory::{remember, MEMORY_GRANT};
use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{Exclusion, SubagentSpec, Subagents};
use stategraph_nodes::{TraceEntry, Verdict};

use super::support::{lead, task_call, tool_names, R};

/// A child that calls `remember` once, then answers with the tool's result.
fn remembering_child() -> ScriptedModel {
    ScriptedModel::new(
        "child",
        [
            AiMessage::calls([ToolCall::new(
                "m1",
                "remember",
                json!({"fact": "prefers window seats"}),
            )]),
            AiMessage::text("done"),
        ],
    )
}

/// A lead delegating once to `subagent_type`, run for user `ana`; the child's trace.
async fn delegate_once(
    subagents: Subagents,
    subagent_type: &str,
) -> Result<Vec<TraceEntry>, Box<dyn std::error::Error + Send + Sync>> {
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", subagent_type, "remember it")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = lead(parent, subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?;
    agent.ask("go").await?;
    Ok(agent.trace().under("c1"))
}

async fn facts_of(
    store: &Arc<dyn Store>,
    user: &str,
) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
    let ns = Namespace::new(["memories", user])?;
    Ok(store.search(SearchOp::new(ns)).await?.len())
}

#[tokio::test]
async fn a_child_without_the_memory_grant_cannot_reach_the_store_even_handed_the_tool() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let child = remembering_child();
    // The spec does not grant memory but hands the child the tool as a custom tool.
    let subagents = Subagents::new(Arc::new(child.clone()))
        .store(Arc::clone(&store))
        .defer_tools(false)
        .register(SubagentSpec::new("plain", "d", "p").custom_tool(remember()));
    let spec = subagents.spec("plain").ok_or("no spec")?.clone();
    assert_eq!(
        subagents.pool_for(&spec).why_not("recall"),
        None::<Exclusion>
    );
    let under = delegate_once(subagents, "plain").await?;
    // Not Available: the admission of the grant kept it out of the catalog.
    let available = under
        .iter()
        .find(|e| e.tool == "remember" && e.stage == Stage::Available)
        .ok_or("no Available line for remember")?;
    assert!(
        matches!(&available.verdict, Verdict::Removed { by, .. } if by == MEMORY_GRANT),
        "{available}"
    );
    // Not Visible: the child's model never saw it.
    assert!(!tool_names(&child.requests()[0]).contains(&"remember".to_owned()));
    // Refused at call time: the model called it anyway; the policy denied the call.
    let denied = under
        .iter()
        .find(|e| e.tool == "remember" && e.stage == Stage::Executed)
        .ok_or("no Executed line for remember")?;
    assert!(
        matches!(&denied.verdict, Verdict::Denied { by, .. } if by == MEMORY_GRANT),
        "{denied}"
    );
    assert_eq!(facts_of(&store, "ana").await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_child_granted_memory_remembers_in_the_users_namespace() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let child = remembering_child();
    let subagents = Subagents::new(Arc::new(child.clone()))
        .store(Arc::clone(&store))
        .defer_tools(false)
        .register(
            SubagentSpec::new("keeper", "d", "p")
                .memory(true)
                .deny(["forget"]),
        );
    let spec = subagents.spec("keeper").ok_or("no spec")?.clone();
    assert_eq!(
        subagents.pool_for(&spec).why_not("forget"),
        Some(Exclusion::Denied)
    );
    let under = delegate_once(subagents, "keeper").await?;
    let seen = tool_names(&child.requests()[0]);
    assert!(seen.contains(&"remember".to_owned()), "{seen:?}");
    assert!(!seen.contains(&"forget".to_owned()), "{seen:?}");
    assert!(under
        .iter()
        .any(|e| e.tool == "remember" && e.stage == Stage::Executed && e.passed()));
    assert_eq!(facts_of(&store, "ana").await?, 1);
    Ok(())
}

#[tokio::test]
async fn a_child_granted_memory_without_a_runtime_store_has_no_memory_tools() -> R {
    let child = remembering_child();
    let subagents = Subagents::new(Arc::new(child.clone()))
        .defer_tools(false)
        .register(SubagentSpec::new("keeper", "d", "p").memory(true));
    let under = delegate_once(subagents, "keeper").await?;
    assert!(!tool_names(&child.requests()[0]).contains(&"remember".to_owned()));
    assert!(under.iter().any(|e| e.tool == "remember"
        && e.stage == Stage::Executed
        && matches!(&e.verdict, Verdict::Denied { by, .. } if by == MEMORY_GRANT)));
    Ok(())
}
