//! Time travel: a research → draft → review → grade thread on a SQLite file, with a human's
//! answer, an edit of an older step and a fork with a changed value; its history as a tree
//! of branches, a step diff, and a replay of every branch — unchanged code reproduces each
//! one, changed code is caught at its step, node and field.
//!
//! Run with `cargo run --release --example time_travel [FOLDER]` (default:
//! `time-travel-data`); it ends with the `stategraph` commands to look at the file.

use std::path::Path;
use std::sync::Arc;

use stategraph::checkpoints::inspect::{short_suffix, short_suffix_len};
use stategraph::checkpoints::tree::BranchTree;
use stategraph::checkpoints::{CheckpointId, Saver, SqliteSaver, ThreadId};
use stategraph::prelude::*;
use stategraph::replay::ReplayReport;

type Error = Box<dyn std::error::Error + Send + Sync>;

const THREAD: &str = "review";

/// The thread state.
#[derive(State, Clone, Default, Debug)]
pub(crate) struct Review {
    /// What the report is about.
    topic: String,
    /// What research found (append reducer).
    #[reduce(append)]
    notes: Vec<String>,
    /// The draft.
    draft: String,
    /// The score a draft must reach.
    min_score: u32,
    /// The reviewer's answer.
    approved: bool,
    /// The grade.
    score: u32,
}

/// The workflow; `bonus` changes the grader (the "new code" a replay checks).
fn graph(bonus: u32, saver: Arc<SqliteSaver>) -> Result<CompiledGraph<Review>, Error> {
    let g = StateGraph::<Review>::new()
        .add_node("research", |s: Arc<Review>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Review::update().notes(vec![format!("3 sources on {}", s.topic)]))
        })
        .add_node("draft", |s: Arc<Review>, _c: NodeContext| async move {
            let text = format!("{}: {} (bar {})", s.topic, s.notes.join("; "), s.min_score);
            Ok::<_, BoxError>(Review::update().draft(text))
        })
        .add_node("review", |s: Arc<Review>, c: NodeContext| async move {
            let approved: bool = c.interrupt(serde_json::json!({ "approve": s.draft }))?;
            Ok::<_, BoxError>(Review::update().approved(approved))
        })
        .add_node("grade", move |s: Arc<Review>, _c: NodeContext| async move {
            let score = u32::try_from(s.draft.len()).unwrap_or(u32::MAX) + bonus;
            Ok::<_, BoxError>(Review::update().score(score))
        })
        .add_edge(START, "research")
        .add_edge("research", "draft")
        .add_edge("draft", "review")
        .add_edge("review", "grade")
        .add_edge("grade", END)
        .compile()?;
    Ok(g.with_checkpointer(saver))
}

/// Run until the review asks, then answer it.
async fn answer_review(
    g: &CompiledGraph<Review>,
    input: Input<Review>,
    yes: bool,
) -> Result<(), Error> {
    let config = RunConfig::new().thread(THREAD);
    let paused = g.invoke(input, &config).await?;
    if let Some(question) = paused.interrupts.first() {
        println!("   review asks {} -> {yes}", question.value);
    }
    let done = g
        .invoke(Command::resume(Resume::value(yes)), &config)
        .await?;
    println!("   score {}", done.state.score);
    Ok(())
}

/// What the example found, for its test.
#[derive(Debug)]
pub(crate) struct Summary {
    /// Branch ends of the thread.
    pub(crate) branches: usize,
    /// Replays of unchanged code that found a divergence (0 is right).
    pub(crate) unchanged_divergences: usize,
    /// Where changed code diverged: step, node, field.
    pub(crate) changed: Option<(i64, String, String)>,
}

/// The checkpoints the walk-through names.
struct Marks {
    /// The thread's first checkpoint (its input).
    first: CheckpointId,
    /// The end of the first run.
    first_end: CheckpointId,
    /// The checkpoint after research, where the edit and the fork branch off.
    after_research: CheckpointId,
    /// The edit's checkpoint.
    edit: CheckpointId,
    /// The fork's checkpoint.
    fork: CheckpointId,
}

/// Record the thread: a run answered by a human, an edit of an older step, a fork.
async fn record(g: &CompiledGraph<Review>) -> Result<Marks, Error> {
    println!("== 1. a run, answered by a human");
    let input = Review::update().topic("pricing".into()).min_score(5);
    answer_review(g, Input::Update(input), true).await?;
    let tree = g.history_tree(THREAD).await?;
    let first_end = *tree.heads().last().ok_or("no checkpoints")?;
    let path = tree.path(first_end).ok_or("no path")?;
    // path: input, __start__, research, draft, review, grade
    let (first, after_research) = (path[0], path[2]);

    println!("== 2. an edit of the step after research: the bar goes up to 8");
    let bar = Review::update().min_score(8);
    let edit = g
        .update_state(THREAD, Some(after_research), bar, "research")
        .await?;
    answer_review(g, Input::Continue, false).await?;

    println!("== 3. a fork of the same step with another topic");
    let topic = Review::update().topic("discounts".into());
    let fork = g.fork(THREAD, after_research, None, topic).await?;
    answer_review(g, Input::Continue, true).await?;
    Ok(Marks {
        first,
        first_end,
        after_research,
        edit,
        fork,
    })
}

/// Print the thread's branches as a tree.
fn print_tree(tree: &BranchTree, short: &dyn Fn(CheckpointId) -> String) {
    println!("== the history as a tree (`stategraph history --tree`)");
    for row in tree.rows() {
        let Some(cp) = tree.checkpoint(row.id) else {
            continue;
        };
        let mark = if row.head {
            format!("   <- end of branch {}", row.branch)
        } else {
            String::new()
        };
        println!(
            "   {}{}  step {:>2}  {:<6} next: {:?}{mark}",
            row.prefix,
            short(row.id),
            cp.step,
            cp.source.as_str(),
            cp.next_nodes()
        );
    }
}

/// Record the thread in `folder/threads.db`, look at it and replay it.
pub(crate) async fn time_travel(folder: &Path) -> Result<Summary, Error> {
    std::fs::create_dir_all(folder)?;
    let db = folder.join("threads.db");
    let saver = Arc::new(SqliteSaver::open(&db)?);
    saver.delete_thread(&ThreadId::new(THREAD)?).await?;
    let g = graph(0, saver.clone())?;
    let m = record(&g).await?;

    let tree = g.history_tree(THREAD).await?;
    let ids: Vec<CheckpointId> = tree.rows().iter().map(|r| r.id).collect();
    let len = short_suffix_len(&ids);
    let short = |id: CheckpointId| short_suffix(id, len);
    print_tree(&tree, &short);

    println!("== what the edit changed (`stategraph diff --since-parent`)");
    print!(
        "{}",
        indent(&g.step_diff(THREAD, m.edit).await?.to_string())
    );

    println!("== replay every branch with unchanged code");
    let mut unchanged_divergences = 0;
    for end in tree.heads() {
        let report = g.replay(THREAD, m.first, Some(end)).await?;
        unchanged_divergences += usize::from(report.divergence.is_some());
        println!("   branch ending {}: {}", short(end), describe(&report));
    }

    println!("== replay the fork's branch with a changed grader (+1)");
    let changed = graph(1, saver.clone())?
        .replay(THREAD, m.first, None)
        .await?;
    println!("   {}", describe(&changed));
    let d = changed.divergence.as_ref();
    if let Some(d) = d {
        print!("{}", indent(&d.diff.to_string()));
    }

    let file = db.display();
    println!("== look at the file (`cargo install --path cli` installs `stategraph`)");
    println!("   stategraph history {file} -t {THREAD} --tree");
    let (edit, fork) = (short(m.edit), short(m.fork));
    println!("   stategraph diff {file} -t {THREAD} {edit} {fork}");
    let end = short(m.first_end);
    println!("   stategraph show {file} -t {THREAD} -c {end} --field draft");
    let at = short(m.after_research);
    println!("   stategraph fork {file} -t {THREAD} -c {at} --set /min_score=3");
    saver.close()?;
    Ok(Summary {
        branches: tree.heads().len(),
        unchanged_divergences,
        changed: d.map(|d| {
            let field = d.field().unwrap_or_default().to_owned();
            (d.step, d.node.clone().unwrap_or_default(), field)
        }),
    })
}

/// One line about a replay.
fn describe(r: &ReplayReport) -> String {
    match &r.divergence {
        None => format!(
            "no divergence ({} checkpoints compared; edits and forks re-applied: {}; answers given again: {})",
            r.steps_compared, r.inputs_applied, r.answers_given
        ),
        Some(d) => format!(
            "diverged at step {} in node {} on field {} ({:?})",
            d.step,
            d.node.as_deref().unwrap_or("?"),
            d.field().unwrap_or("-"),
            d.kind
        ),
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}

#[allow(dead_code)] // a test includes this file as a module and calls `time_travel`
#[tokio::main]
async fn main() -> Result<(), Error> {
    let folder = std::env::args()
        .nth(1)
        .map_or_else(|| "time-travel-data".into(), std::path::PathBuf::from);
    let summary = time_travel(&folder).await?;
    if summary.unchanged_divergences > 0 {
        return Err(format!(
            "{} of {} branches did not replay on unchanged code",
            summary.unchanged_divergences, summary.branches
        )
        .into());
    }
    if let Some((step, node, field)) = summary.changed {
        println!("== the changed grader was caught at step {step}, node {node}, field {field}");
    }
    Ok(())
}
