//! Unit tests of the replay: scratch threads, lookup errors.

use std::sync::Arc;

use stategraph_checkpoints::{ListOptions, MemorySaver};

use super::drive::scratch_thread;
use super::*;
use crate::{BoxError, NodeContext, RunConfig, StateGraph, END, START};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[derive(crate::State, Clone, Default, Debug)]
struct Count {
    n: u32,
}

/// Counts to 3, one step at a time.
fn counter(saver: Arc<MemorySaver>) -> Result<CompiledGraph<Count>, crate::CompileError> {
    let graph = StateGraph::<Count>::new()
        .add_node("inc", |s: Arc<Count>, _ctx: NodeContext| async move {
            Ok::<_, BoxError>(Count::update().n(s.n + 1))
        })
        .add_edge(START, "inc")
        .add_conditional_edges(
            "inc",
            |s: &Count| if s.n < 3 { "inc" } else { END },
            ["inc", END],
        )
        .compile()?;
    Ok(graph.with_checkpointer(saver))
}

async fn thread_names(saver: &MemorySaver) -> Result<Vec<String>, CheckpointError> {
    let threads = saver.list_threads().await?;
    Ok(threads.into_iter().map(|t| t.thread.to_string()).collect())
}

#[tokio::test]
async fn a_replay_leaves_no_scratch_thread_behind() -> TestResult {
    let saver = Arc::new(MemorySaver::new());
    let g = counter(saver.clone())?;
    g.invoke(Count::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let oldest = history.last().ok_or("no history")?;
    let report = g.replay("t", oldest.checkpoint.id, None).await?;
    assert_eq!(report.divergence, None);
    assert_eq!(report.steps_compared, history.len() - 1);
    assert_eq!(thread_names(&saver).await?, ["t"]);
    Ok(())
}

#[tokio::test]
async fn a_checkpoint_of_another_thread_is_not_found() -> TestResult {
    let saver = Arc::new(MemorySaver::new());
    let g = counter(saver.clone())?;
    for thread in ["t", "u"] {
        g.invoke(Count::update(), &RunConfig::new().thread(thread))
            .await?;
    }
    let other = g.get_state("u", None).await?.ok_or("no state")?;
    match g.replay("t", other.checkpoint.id, None).await {
        Err(RunError::Checkpoint(CheckpointError::NotFound { thread, id, .. })) => {
            assert_eq!((thread.as_str(), id), ("t", other.checkpoint.id));
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(thread_names(&saver).await?, ["t", "u"]);
    Ok(())
}

#[tokio::test]
async fn a_graph_without_a_checkpointer_cannot_replay() -> TestResult {
    let saver = Arc::new(MemorySaver::new());
    let g = counter(saver.clone())?;
    g.invoke(Count::update(), &RunConfig::new().thread("t"))
        .await?;
    let head = g.get_state("t", None).await?.ok_or("no state")?;
    let result = g
        .without_checkpointer()
        .replay("t", head.checkpoint.id, None)
        .await;
    assert!(matches!(result, Err(RunError::MissingThread)), "{result:?}");
    Ok(())
}

#[test]
fn the_scratch_thread_is_named_after_thread_and_checkpoint() -> TestResult {
    let (a, b) = (CheckpointId::from_u128(1), CheckpointId::from_u128(2));
    let scratch = scratch_thread("t", a, b)?;
    assert!(scratch.as_str().starts_with("replay-"), "{scratch}");
    assert_eq!(scratch, scratch_thread("t", a, b)?);
    assert_ne!(scratch, scratch_thread("t", b, b)?);
    assert_ne!(scratch, scratch_thread("t", a, a)?);
    assert_ne!(scratch, scratch_thread("u", a, b)?);
    Ok(())
}
