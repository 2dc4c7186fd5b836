//! Quickstart: a typed state with reducers, a conditional loop, an interrupt and its resume,
//! and the events the run streams — on a SQLite file, then a step diff, a fork with a changed
//! value that runs on, and the `stategraph` commands to look at the file.
//!
//! Run with `cargo run --release --example quickstart [FOLDER]` (default `quickstart-data`).

use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use stategraph::checkpoints::inspect::{short_suffix, short_suffix_len};
use stategraph::checkpoints::{Saver, SqliteSaver, ThreadId};
use stategraph::prelude::*;
use stategraph::EventKind;

type Error = Box<dyn std::error::Error + Send + Sync>;

const THREAD: &str = "quickstart";

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

/// The graph: write and polish until three revisions, then a human reviews.
fn graph(saver: Arc<SqliteSaver>) -> Result<CompiledGraph<Draft>, Error> {
    Ok(StateGraph::<Draft>::new()
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
        .with_checkpointer(saver))
}

/// Stream a run to its pause, printing what each node wrote and said.
async fn stream_to_pause(graph: &CompiledGraph<Draft>, config: &RunConfig) -> Result<(), Error> {
    let mut run = graph.stream(Draft::update(), config, StreamMode::default());
    while let Some(event) = run.next().await {
        match event.kind {
            EventKind::Updates { node, update, .. } => {
                if let Some(u) = update.get::<DraftUpdate>() {
                    let wrote = serde_json::to_string(u)?;
                    println!("step {:>2}  {node:<9} wrote {wrote}", event.step);
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
    if !paused.is_interrupted() {
        return Err("the review did not ask".into());
    }
    Ok(())
}

/// What the quickstart ended with, for its test.
#[derive(Debug)]
pub(crate) struct Summary {
    /// The revision the approved draft reached.
    pub(crate) revision: u32,
    /// The revision the fork's draft reached.
    pub(crate) forked_revision: u32,
    /// The thread's branch ends.
    pub(crate) branches: usize,
}

/// Run the quickstart on `folder/threads.db`.
pub(crate) async fn quickstart(folder: &Path) -> Result<Summary, Error> {
    std::fs::create_dir_all(folder)?;
    let db = folder.join("threads.db");
    let saver = Arc::new(SqliteSaver::open(&db)?);
    saver.delete_thread(&ThreadId::new(THREAD)?).await?;
    let graph = graph(saver.clone())?;
    let config = RunConfig::new().thread(THREAD);
    stream_to_pause(&graph, &config).await?;
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

    // What the last step changed, from what it stored.
    let head = graph.get_state(THREAD, None).await?.ok_or("no state")?;
    println!(
        "\nthe last step's diff:\n{}",
        graph.step_diff(THREAD, head.checkpoint.id).await?
    );

    // A fork of the step after the first write, as if it were the second revision: it runs
    // on from there (one loop fewer) and asks again.
    let history = graph.get_state_history(THREAD, Default::default()).await?;
    let first_write = history
        .iter()
        .rev()
        .find(|s| s.values.revision == 1)
        .ok_or("no first write")?;
    graph
        .fork(
            THREAD,
            first_write.checkpoint.id,
            None,
            Draft::update().revision(2),
        )
        .await?;
    graph.invoke(Input::Continue, &config).await?;
    let forked = graph
        .invoke(Command::resume(Resume::value("approved again")), &config)
        .await?;
    println!(
        "fork at step {} with revision 2: ran on to revision {} ({:?})",
        first_write.checkpoint.step, forked.state.revision, forked.state.verdict
    );
    let tree = graph.history_tree(THREAD).await?;
    println!(
        "{} checkpoints on {} branches",
        tree.len(),
        tree.heads().len()
    );

    let file = db.display();
    println!("\nlook at the file (`cargo install --path cli` installs `stategraph`):");
    println!("  stategraph history {file} -t {THREAD} --tree");
    println!("  stategraph show {file} -t {THREAD} --field notes");
    let ids: Vec<_> = tree.rows().iter().map(|r| r.id).collect();
    let approved = short_suffix(head.checkpoint.id, short_suffix_len(&ids));
    println!("  stategraph diff {file} -t {THREAD} --since-parent {approved}");
    saver.close()?;
    Ok(Summary {
        revision: done.state.revision,
        forked_revision: forked.state.revision,
        branches: tree.heads().len(),
    })
}

#[allow(dead_code)] // a test includes this file as a module and calls `quickstart`
#[tokio::main]
async fn main() -> Result<(), Error> {
    let folder = std::env::args()
        .nth(1)
        .map_or_else(|| "quickstart-data".into(), std::path::PathBuf::from);
    let summary = quickstart(&folder).await?;
    println!(
        "approved at revision {}; the fork reached revision {}; {} branches",
        summary.revision, summary.forked_revision, summary.branches
    );
    Ok(())
}
