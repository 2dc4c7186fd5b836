//! One agent reused on two threads keeps two traces: neither thread's trace holds the other's
//! entries, and each run numbers its model calls from 1. The same holds for a toolbox shared by
//! two threads.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use stategraph::checkpoints::MemorySaver;
use stategraph::RunConfig;
use stategraph_nodes::prelude::*;
use stategraph_nodes::toolbox::Toolbox;
use stategraph_nodes::TraceEntry;

use super::agent_node::{paper_graph, Paper};
use crate::support::{ask, call, counted, research_graph, R};

fn tools_reaching(entries: &[TraceEntry], stage: Stage) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.stage == stage && e.passed())
        .map(|e| e.tool.clone())
        .collect()
}

#[tokio::test]
async fn one_agent_reused_on_two_threads_keeps_two_separate_traces() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    // Thread A's run calls `alpha`, thread B's calls `beta`; each then answers.
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("a1", "alpha")]),
            AiMessage::text("summary A"),
            AiMessage::calls([call("b1", "beta")]),
            AiMessage::text("summary B"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("alpha", true, &runs))
        .tool(counted("beta", true, &runs))
        .assemble(RunContext::new("assembly", "ana"))
        .await?;
    let graph = paper_graph(&agent)?.with_checkpointer(Arc::new(MemorySaver::new()));
    for thread in ["thread-a", "thread-b"] {
        graph
            .invoke(
                Paper::update().topic(thread.into()),
                &RunConfig::new().thread(thread),
            )
            .await?;
    }

    let a = agent.thread_trace("thread-a");
    let b = agent.thread_trace("thread-b");
    assert_eq!(tools_reaching(&a, Stage::Executed), ["alpha"]);
    assert_eq!(tools_reaching(&b, Stage::Executed), ["beta"]);
    for (entries, thread) in [(&a, "thread-a"), (&b, "thread-b")] {
        assert!(
            entries
                .iter()
                .all(|e| e.run_id.is_none() || e.thread_id.as_deref() == Some(thread)),
            "{thread}'s trace holds another thread's entry: {entries:#?}"
        );
        // Each run's model calls are numbered from 1: two calls, not calls 3 and 4.
        let calls: std::collections::BTreeSet<u32> =
            entries.iter().filter_map(|e| e.model_call).collect();
        assert_eq!(calls.into_iter().collect::<Vec<_>>(), [1, 2], "{thread}");
        assert_eq!(
            CapabilityTrace::of(entries.iter().cloned()).visible_on(1),
            ["alpha", "beta"]
        );
    }

    // The same through `invoke`: a third run on thread A joins A's trace only.
    model.push(AiMessage::text("again"));
    let out = agent
        .invoke(
            ThreadState::human_input("again"),
            &agent.run_config().thread("thread-a"),
        )
        .await?;
    let again = agent.run_trace(&out.settlement.run_id);
    assert!(again
        .iter()
        .all(|e| e.run_id.is_none() || e.thread_id.as_deref() == Some("thread-a")));
    assert!(agent.thread_trace("thread-a").len() > a.len());
    assert_eq!(agent.thread_trace("thread-b"), b);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_toolbox_shared_by_two_threads_records_each_entry_under_its_thread() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("a1", "alpha")]),
            AiMessage::text("done A"),
            AiMessage::calls([call("b1", "beta")]),
            AiMessage::text("done B"),
        ],
    );
    let tools = Toolbox::new()
        .tool(counted("alpha", true, &runs))
        .tool(counted("beta", true, &runs));
    let graph = research_graph(&model, &tools)?.with_checkpointer(Arc::new(MemorySaver::new()));
    for thread in ["thread-a", "thread-b"] {
        graph
            .invoke(ask(thread, "go"), &RunConfig::new().thread(thread))
            .await?;
    }
    let a = tools.trace().for_thread("thread-a");
    let b = tools.trace().for_thread("thread-b");
    assert_eq!(tools_reaching(&a, Stage::Executed), ["alpha"]);
    assert_eq!(tools_reaching(&b, Stage::Executed), ["beta"]);
    assert!(b
        .iter()
        .all(|e| e.thread_id.is_none() || e.thread_id.as_deref() == Some("thread-b")));
    model.verify()?;
    Ok(())
}
