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

/// Counts to `end` one step at a time, through node `mid` once `n` reaches `end / 2`.
fn long_count(
    saver: Arc<MemorySaver>,
    end: u32,
) -> Result<CompiledGraph<Count>, crate::CompileError> {
    let graph = StateGraph::<Count>::new()
        .add_node("inc", |s: Arc<Count>, _ctx: NodeContext| async move {
            Ok::<_, BoxError>(Count::update().n(s.n + 1))
        })
        .add_node("mid", |s: Arc<Count>, _ctx: NodeContext| async move {
            Ok::<_, BoxError>(Count::update().n(s.n + 1))
        })
        .add_edge(START, "inc")
        .add_conditional_edges(
            "inc",
            move |s: &Count| match s.n {
                n if n == end / 2 => "mid",
                n if n < end => "inc",
                _ => END,
            },
            ["inc", "mid", END],
        )
        .add_edge("mid", "inc")
        .compile()?;
    Ok(graph.with_checkpointer(saver))
}

#[tokio::test]
async fn a_thread_longer_than_one_run_split_by_a_run_s_own_pause_replays_without_a_divergence(
) -> TestResult {
    let saver = Arc::new(MemorySaver::new());
    // Each run stays within the recursion limit; the two together do not.
    let end = u32::try_from(crate::run::DEFAULT_RECURSION_LIMIT)? + 10;
    let g = long_count(saver.clone(), end)?;
    let cfg = RunConfig::new().thread("t");
    let paused = g
        .invoke(Count::update(), &cfg.clone().interrupt_before(["mid"]))
        .await?;
    assert!(paused.is_interrupted(), "paused before mid");
    let out = g.invoke(crate::Input::Continue, &cfg).await?;
    assert_eq!(out.state.n, end);
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let oldest = history.last().ok_or("no history")?;
    let report = g.replay("t", oldest.checkpoint.id, None).await?;
    assert_eq!(report.divergence, None);
    assert_eq!(report.steps_compared, history.len() - 1);
    Ok(())
}

#[tokio::test]
async fn a_run_s_own_interrupts_are_recorded_on_its_checkpoints_only() -> TestResult {
    let saver = Arc::new(MemorySaver::new());
    let g = counter(saver.clone())?;
    let cfg = RunConfig::new().thread("t");
    let paused = g
        .invoke(Count::update(), &cfg.clone().interrupt_after(["inc"]))
        .await?;
    assert!(paused.is_interrupted(), "paused after the first inc");
    g.invoke(crate::Input::Continue, &cfg).await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let recorded: Vec<Option<&serde_json::Value>> = history
        .iter()
        .rev()
        .map(|h| h.checkpoint.metadata.get(RUN_INTERRUPTS_KEY))
        .collect();
    let own = serde_json::json!({"before": [], "after": ["inc"]});
    // The first run made the input, `__start__` and first `inc` checkpoints; the second run
    // (without interrupts of its own) the rest.
    assert_eq!(recorded, [Some(&own), Some(&own), Some(&own), None, None]);
    Ok(())
}
