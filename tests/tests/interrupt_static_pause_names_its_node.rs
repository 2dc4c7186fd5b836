//! Static interrupts: a run that pauses before (or after) a node reports it as an interrupt
//! `before:<node>` (`after:<node>`) with no value, so `is_interrupted()` tells a pause from an
//! end; the thread itself shows no question to answer, as in LangGraph (decision 0030).
//! Compared with `fixtures/langgraph/static_interrupt_result.json`.
#![allow(missing_docs)]

use std::sync::Arc;

use futures::StreamExt;
use stategraph::prelude::*;
use stategraph::{EventKind, Interrupt, RunError};
use stategraph_tests::langgraph::{recorded, strings, update_nodes};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    #[reduce(append)]
    pub log: Vec<String>,
}

/// START -> a -> b -> END, paused before b.
fn paused_before_b() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let mut g = StateGraph::<Log>::new();
    for name in ["a", "b"] {
        g = g.add_node(name, move |_s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Log::update().log(vec![name.to_owned()]))
        });
    }
    Ok(g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .interrupt_before(["b"])
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new())))
}

fn before_b() -> Interrupt {
    Interrupt {
        id: "before:b".to_owned(),
        value: serde_json::Value::Null,
        node: "b".to_owned(),
    }
}

#[tokio::test]
async fn a_static_pause_reports_its_node_while_the_thread_holds_no_question() -> TestResult {
    let lg = recorded("static_interrupt_result")?;
    let g = paused_before_b()?;
    let paused = g
        .invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    assert_eq!(
        paused.state.log,
        strings(&lg, "/result/log")?,
        "as LangGraph"
    );

    // Ours differs here (decision 0030): LangGraph's result has no `__interrupt__` key.
    assert_eq!(lg["result_has_interrupt_key"], false);
    assert_eq!(paused.interrupts, [before_b()], "the pause names its node");
    assert!(paused.is_interrupted());

    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.next, strings(&lg, "/get_state_next")?, "as LangGraph");
    assert_eq!(
        snap.interrupts.len(),
        strings(&lg, "/get_state_interrupts")?.len(),
        "as LangGraph: no pending question on the thread"
    );
    assert!(snap.interrupts.is_empty());

    // The marker is no question: a resume value is refused, `Continue` goes on.
    let cfg = RunConfig::new().thread("t");
    let refused = g.invoke(Command::resume(Resume::value("x")), &cfg).await;
    assert!(
        matches!(refused, Err(RunError::NoPendingInterrupt { .. })),
        "{refused:?}"
    );
    let done = g.invoke(Input::Continue, &cfg).await?;
    assert!(!done.is_interrupted());
    assert_eq!(done.state.log, ["a", "b"]);
    Ok(())
}

#[tokio::test]
async fn a_static_pause_streams_the_updates_then_one_interrupt_event() -> TestResult {
    let lg = recorded("static_interrupt_result")?;
    let g = paused_before_b()?;
    let mut run = g.stream(
        Log::update(),
        &RunConfig::new().thread("t"),
        StreamMode::updates(),
    );
    let mut events = Vec::new();
    while let Some(ev) = run.next().await {
        match ev.kind {
            EventKind::Updates { node, .. } => events.push(node.to_string()),
            EventKind::Interrupt(list) => {
                assert_eq!(list, [before_b()]);
                events.push("__interrupt__".to_owned());
            }
            _ => {}
        }
    }
    run.outcome().await?;
    // LangGraph streams `{"__interrupt__": []}`; ours carries the `before:b` marker.
    assert_eq!(events, update_nodes(&lg, "/stream_updates")?);
    Ok(())
}
