//! A replay compares each step from what the two steps changed: on unchanged code it loads
//! no whole state per compared checkpoint, so its cost follows what changed, not the size of
//! the state; a difference is still reported with the whole diff.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use stategraph::checkpoints::ListOptions;
use stategraph::prelude::*;
use stategraph::replay::DivergenceKind;
use stategraph::CompileError;
use stategraph_tests::RecordingSaver;

use crate::TestResult;

#[derive(State, Clone, Default, Debug)]
struct Log {
    #[reduce(append)]
    lines: Vec<String>,
    n: u32,
}

/// Appends a line and counts, `steps` times; from step `odd_from` on, a line says "odd".
fn writer(steps: u32, odd_from: u32) -> Result<CompiledGraph<Log>, CompileError> {
    StateGraph::<Log>::new()
        .add_node("write", move |s: Arc<Log>, _ctx: NodeContext| async move {
            let n = s.n + 1;
            let line = if n >= odd_from { "odd" } else { "line" };
            Ok::<_, BoxError>(Log::update().lines(vec![format!("{line} {n}")]).n(n))
        })
        .add_edge(START, "write")
        .add_conditional_edges(
            "write",
            move |s: &Log| if s.n < steps { "write" } else { END },
            ["write", END],
        )
        .compile()
}

#[tokio::test]
async fn a_replay_on_unchanged_code_loads_no_whole_state_per_compared_step() -> TestResult {
    let saver = RecordingSaver::new();
    let steps = 60;
    let g = writer(steps, u32::MAX)?.with_checkpointer(saver.shared());
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let first = history.last().ok_or("no history")?.checkpoint.id;
    let before = saver.gets.load(Ordering::SeqCst);
    let report = g.replay("t", first, None).await?;
    let loaded = saver.gets.load(Ordering::SeqCst) - before;
    assert_eq!(report.divergence, None);
    assert_eq!(report.steps_compared, history.len() - 1);
    // The replay's own run and its scratch branch load a few; none is loaded per step.
    assert!(
        loaded < 10,
        "{loaded} whole checkpoints loaded to compare {} steps",
        report.steps_compared
    );
    Ok(())
}

#[tokio::test]
async fn a_step_that_changed_otherwise_is_still_reported_with_its_whole_diff() -> TestResult {
    let saver = RecordingSaver::new();
    let g = writer(30, u32::MAX)?.with_checkpointer(saver.shared());
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let first = history.last().ok_or("no history")?.checkpoint.id;
    let changed = writer(30, 20)?.with_checkpointer(saver.shared());
    let d = changed
        .replay("t", first, None)
        .await?
        .divergence
        .ok_or("no divergence")?;
    assert_eq!(d.kind, DivergenceKind::State);
    assert_eq!(
        (d.node.as_deref(), d.field()),
        (Some("write"), Some("lines"))
    );
    assert_eq!(
        d.diff.to_string(),
        "~ lines[19]: \"line 20\" -> \"odd 20\"\n"
    );
    Ok(())
}
