//! Quickstart: a typed state with reducers, a conditional loop, an interrupt and its resume,
//! and the events the run streams.
//!
//! Run with `cargo run --release --example quickstart`.

use std::sync::Arc;

use futures::StreamExt;
use stategraph::checkpoints::MemorySaver;
use stategraph::prelude::*;
use stategraph::EventKind;

/// The thread state: each field merges writes through its reducer.
#[derive(State, Clone, Default, Debug)]
struct Draft {
    /// Every node appends its notes (append reducer).
    #[reduce(append)]
    notes: Vec<String>,
    /// The current draft (last value: one writer per step).
    text: String,
    /// Revision counter (last value).
    revision: u32,
    /// What the reviewer said.
    verdict: String,
}

async fn write(s: Arc<Draft>, ctx: NodeContext) -> Result<DraftUpdate, BoxError> {
    let revision = s.revision + 1;
    ctx.emit(serde_json::json!({ "writing": revision })).await;
    Ok(Draft::update()
        .text(format!(
            "draft v{revision}: {}",
            "lorem ipsum ".repeat(revision as usize)
        ))
        .revision(revision)
        .notes(vec![format!("wrote revision {revision}")]))
}

async fn polish(s: Arc<Draft>, _ctx: NodeContext) -> Result<DraftUpdate, BoxError> {
    Ok(Draft::update().notes(vec![format!("polished {} chars", s.text.len())]))
}

async fn review(s: Arc<Draft>, ctx: NodeContext) -> Result<DraftUpdate, BoxError> {
    // Pauses the run; the answer arrives with `Command::resume` and this node runs again from
    // the top.
    let verdict: String = ctx.interrupt(serde_json::json!({ "approve": s.text }))?;
    Ok(Draft::update()
        .verdict(verdict.clone())
        .notes(vec![format!("reviewer said {verdict}")]))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let graph = StateGraph::<Draft>::new()
        .add_node("write", write)
        .add_node("polish", polish)
        .add_node("review", review)
        .add_edge(START, "write")
        .add_edge("write", "polish")
        // Loop until the draft has three revisions, then ask a human.
        .add_conditional_edges(
            "polish",
            |s: &Draft| if s.revision < 3 { "write" } else { "review" },
            ["write", "review"],
        )
        .add_edge("review", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));

    println!("{}", graph.to_mermaid());

    let config = RunConfig::new().thread("quickstart");
    let mut run = graph.stream(Draft::update(), &config, StreamMode::default());
    while let Some(event) = run.next().await {
        match event.kind {
            EventKind::Updates { node, update } => {
                if let Some(u) = update.get::<DraftUpdate>() {
                    println!(
                        "step {:>2}  {node:<9} wrote {}",
                        event.step,
                        serde_json::to_string(u)?
                    );
                }
            }
            EventKind::Custom { node, payload } => {
                println!("step {:>2}  {node:<9} says  {payload}", event.step);
            }
            EventKind::Interrupt(list) => {
                println!("paused: {} asks {}", list[0].node, list[0].value);
            }
            _ => {}
        }
    }
    let paused = run.outcome().await?;
    assert!(paused.is_interrupted());

    let done = graph
        .invoke(Command::resume(Resume::value("approved")), &config)
        .await?;
    println!("\nfinal state after {} more steps:", done.steps);
    println!(
        "  revision {} / verdict {:?}",
        done.state.revision, done.state.verdict
    );
    for note in &done.state.notes {
        println!("  - {note}");
    }
    let history = graph
        .get_state_history("quickstart", Default::default())
        .await?;
    println!("{} checkpoints in the thread's history", history.len());
    Ok(())
}
