//! Time travel end to end on a SQLite file: a research → draft → review → grade thread with
//! an answered interrupt, an `update_state` edit of an older checkpoint and a fork with a
//! changed value; each branch end replays without a difference on unchanged code, and
//! changed code is caught at the right step, node and field.

use std::sync::Arc;

use serde_json::json;
use stategraph::checkpoints::{CheckpointId, SqliteSaver};
use stategraph::prelude::*;
use stategraph::replay::DivergenceKind;
use stategraph::RunError;

use crate::TestResult;

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Doc {
    topic: String,
    #[reduce(append)]
    notes: Vec<String>,
    draft: String,
    min_score: u32,
    approved: bool,
    score: u32,
}

/// How the code under replay differs from the recorded one.
#[derive(Clone, Copy, Default)]
struct Code {
    /// Added to the grade.
    bonus: u32,
    /// The draft says "draft" instead of nothing before its text.
    wordy_draft: bool,
    /// Review approves by itself instead of asking.
    no_review: bool,
    /// Grading fails.
    grade_fails: bool,
}

fn graph(
    code: Code,
    saver: Arc<SqliteSaver>,
) -> Result<CompiledGraph<Doc>, stategraph::CompileError> {
    let g = StateGraph::<Doc>::new()
        .add_node("research", |s: Arc<Doc>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Doc::update().notes(vec![format!("notes on {}", s.topic)]))
        })
        .add_node("draft", move |s: Arc<Doc>, _c: NodeContext| async move {
            let lead = if code.wordy_draft { "draft: " } else { "" };
            let text = format!(
                "{lead}{} ({} notes, bar {})",
                s.topic,
                s.notes.len(),
                s.min_score
            );
            Ok::<_, BoxError>(Doc::update().draft(text))
        })
        .add_node("review", move |s: Arc<Doc>, c: NodeContext| async move {
            let approved = if code.no_review {
                true
            } else {
                c.interrupt::<bool>(json!({ "approve": s.draft }))?
            };
            Ok::<_, BoxError>(Doc::update().approved(approved))
        })
        .add_node("grade", move |s: Arc<Doc>, _c: NodeContext| async move {
            if code.grade_fails {
                return Err("grader unavailable".into());
            }
            let score = u32::try_from(s.draft.len()).unwrap_or(0) + code.bonus;
            Ok::<_, BoxError>(Doc::update().score(score))
        })
        .add_edge(START, "research")
        .add_edge("research", "draft")
        .add_edge("draft", "review")
        .add_edge("review", "grade")
        .add_edge("grade", END)
        .compile()?;
    Ok(g.with_checkpointer(saver))
}

/// The recorded thread and its three branch ends.
struct Recorded {
    saver: Arc<SqliteSaver>,
    first: CheckpointId,
    /// The first run, approved.
    original: CheckpointId,
    /// An edit of `min_score` after research, rejected at review.
    edited: CheckpointId,
    /// A fork after research with another topic, approved.
    forked: CheckpointId,
    _dir: tempfile::TempDir,
}

/// The checkpoint of `thread` whose step `step` was made by a step (source `loop`) on the
/// branch that ends at `head`.
async fn loop_step(
    g: &CompiledGraph<Doc>,
    head: CheckpointId,
    step: i64,
) -> Result<CheckpointId, Box<dyn std::error::Error + Send + Sync>> {
    let tree = g.history_tree("t").await?;
    let path = tree.path(head).ok_or("no path")?;
    path.into_iter()
        .find(|id| {
            tree.checkpoint(*id).is_some_and(|c| {
                c.step == step && c.source == stategraph::checkpoints::Source::Loop
            })
        })
        .ok_or_else(|| format!("no loop checkpoint at step {step}").into())
}

/// The divergence of a replay of `t` from `from` to `to` (an error if there is none).
async fn diverged(
    g: &CompiledGraph<Doc>,
    from: CheckpointId,
    to: CheckpointId,
) -> Result<stategraph::replay::Divergence, Box<dyn std::error::Error + Send + Sync>> {
    let report = g.replay("t", from, Some(to)).await?;
    Ok(report.divergence.ok_or("expected a divergence")?)
}

async fn record() -> Result<Recorded, Box<dyn std::error::Error + Send + Sync>> {
    let dir = tempfile::tempdir()?;
    let saver = Arc::new(SqliteSaver::open(dir.path().join("threads.db"))?);
    let g = graph(Code::default(), saver.clone())?;
    let cfg = RunConfig::new().thread("t");
    let yes = || Command::<Doc>::resume(Resume::Value(json!(true)));
    let paused = g
        .invoke(Doc::update().topic("rust".to_owned()).min_score(5), &cfg)
        .await?;
    assert!(paused.is_interrupted());
    g.invoke(yes(), &cfg).await?;
    let original = g
        .get_state("t", None)
        .await?
        .ok_or("no state")?
        .checkpoint
        .id;
    let first = *g
        .history_tree("t")
        .await?
        .path(original)
        .ok_or("path")?
        .first()
        .ok_or("empty")?;
    // Step 1 is research's: edit the bar there, as if research had written it.
    let after_research = loop_step(&g, original, 1).await?;
    g.update_state(
        "t",
        Some(after_research),
        Doc::update().min_score(8),
        "research",
    )
    .await?;
    g.invoke(Input::Continue, &cfg).await?;
    g.invoke(Command::<Doc>::resume(Resume::Value(json!(false))), &cfg)
        .await?;
    let edited = g
        .get_state("t", None)
        .await?
        .ok_or("no state")?
        .checkpoint
        .id;
    // A fork of the same checkpoint with another topic.
    g.fork(
        "t",
        after_research,
        None,
        Doc::update().topic("go".to_owned()),
    )
    .await?;
    g.invoke(Input::Continue, &cfg).await?;
    g.invoke(yes(), &cfg).await?;
    let forked = g
        .get_state("t", None)
        .await?
        .ok_or("no state")?
        .checkpoint
        .id;
    Ok(Recorded {
        saver,
        first,
        original,
        edited,
        forked,
        _dir: dir,
    })
}

#[tokio::test]
async fn the_recorded_thread_has_three_branches_with_their_own_answers_and_edits() -> TestResult {
    let r = record().await?;
    let g = graph(Code::default(), r.saver.clone())?;
    let tree = g.history_tree("t").await?;
    assert_eq!(tree.heads(), [r.original, r.edited, r.forked]);
    let state = |id| g.get_state("t", Some(id));
    let (o, e, f) = (
        state(r.original).await?.ok_or("o")?.values,
        state(r.edited).await?.ok_or("e")?.values,
        state(r.forked).await?.ok_or("f")?.values,
    );
    assert_eq!(
        (o.approved, o.min_score, o.draft.as_str()),
        (true, 5, "rust (1 notes, bar 5)")
    );
    assert_eq!(
        (e.approved, e.min_score, e.draft.as_str()),
        (false, 8, "rust (1 notes, bar 8)")
    );
    assert_eq!(
        (f.approved, f.topic.as_str(), f.draft.as_str()),
        (true, "go", "go (1 notes, bar 5)")
    );
    Ok(())
}

#[tokio::test]
async fn every_branch_end_replays_without_a_divergence_on_unchanged_code() -> TestResult {
    let r = record().await?;
    let g = graph(Code::default(), r.saver.clone())?;
    let before = g.history_tree("t").await?.len();
    for (end, inputs) in [(r.original, 0), (r.edited, 1), (r.forked, 1)] {
        let report = g.replay("t", r.first, Some(end)).await?;
        assert_eq!(report.divergence, None, "branch ending at {end}");
        assert_eq!(report.to, end);
        assert_eq!(report.inputs_applied, inputs, "edits and forks re-applied");
        assert_eq!(
            report.answers_given, 1,
            "the review's answer was given again"
        );
        let path = g.history_tree("t").await?.path(end).ok_or("path")?;
        assert_eq!(report.steps_compared, path.len() - 1);
    }
    // The newest branch is the default end; the thread itself is untouched.
    assert_eq!(g.replay("t", r.first, None).await?.to, r.forked);
    assert_eq!(g.history_tree("t").await?.len(), before);
    Ok(())
}

#[tokio::test]
async fn changed_code_is_reported_at_the_step_node_and_field_it_changed() -> TestResult {
    let r = record().await?;
    let bonus = graph(
        Code {
            bonus: 1,
            ..Code::default()
        },
        r.saver.clone(),
    )?;
    let tree = bonus.history_tree("t").await?;
    let step_of = |id| tree.checkpoint(id).map_or(-9, |c| c.step);
    for end in [r.original, r.edited, r.forked] {
        let grade_step = step_of(end);
        let d = diverged(&bonus, r.first, end).await?;
        assert_eq!(d.kind, DivergenceKind::State);
        assert_eq!(
            (d.step, d.node.as_deref(), d.field()),
            (grade_step, Some("grade"), Some("score"))
        );
    }
    let wordy = graph(
        Code {
            wordy_draft: true,
            ..Code::default()
        },
        r.saver.clone(),
    )?;
    let d = diverged(&wordy, r.first, r.edited).await?;
    let draft_step = step_of(r.edited) - 2;
    assert_eq!(
        (d.step, d.node.as_deref(), d.field()),
        (draft_step, Some("draft"), Some("draft"))
    );
    Ok(())
}

#[tokio::test]
async fn a_replay_that_stops_asking_or_fails_is_a_divergence_not_an_error() -> TestResult {
    let r = record().await?;
    let silent = graph(
        Code {
            no_review: true,
            ..Code::default()
        },
        r.saver.clone(),
    )?;
    let d = diverged(&silent, r.first, r.original).await?;
    match &d.kind {
        DivergenceKind::Interrupts { recorded, replayed } => {
            assert_eq!(recorded.len(), 1);
            assert_eq!(recorded[0].0, "review");
            assert!(replayed.is_empty());
        }
        other => panic!("expected different interrupts, got {other:?}"),
    }
    assert_eq!((d.step, d.node.as_deref()), (2, Some("review")));
    let failing = graph(
        Code {
            grade_fails: true,
            ..Code::default()
        },
        r.saver.clone(),
    )?;
    let d = diverged(&failing, r.first, r.original).await?;
    assert_eq!((d.step, d.node.as_deref()), (4, Some("grade")));
    assert!(
        matches!(&d.kind, DivergenceKind::Failed { error } if error.contains("grader unavailable")),
        "{d:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_replay_from_a_checkpoint_off_the_chosen_branch_is_not_found() -> TestResult {
    let r = record().await?;
    let g = graph(Code::default(), r.saver.clone())?;
    // The edit's checkpoint is on the edited branch only.
    let path = g.history_tree("t").await?.path(r.edited).ok_or("path")?;
    let edit = path[path.len() - 4];
    match g.replay("t", edit, Some(r.original)).await {
        Err(RunError::Checkpoint(stategraph::checkpoints::CheckpointError::NotFound {
            id,
            ..
        })) => assert_eq!(id, edit),
        other => panic!("expected NotFound, got {other:?}"),
    }
    // From the edit itself, along its own branch, there is nothing to report.
    assert_eq!(g.replay("t", edit, Some(r.edited)).await?.divergence, None);
    Ok(())
}

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Log {
    #[reduce(append)]
    log: Vec<String>,
}

/// `ask` asks twice in one task; the subgraph `sub` asks once inside. `flip` swaps `ask`'s
/// two answers (the changed code).
fn asking(
    flip: bool,
    saver: Arc<SqliteSaver>,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let inner = StateGraph::<Log>::new()
        .add_node("inner", |_s: Arc<Log>, c: NodeContext| async move {
            let b: String = c.interrupt("third?")?;
            Ok::<_, BoxError>(Log::update().log(vec![b]))
        })
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()?;
    let g = StateGraph::<Log>::new()
        .add_node("ask", move |_s: Arc<Log>, c: NodeContext| async move {
            let a1: String = c.interrupt("first?")?;
            let a2: String = c.interrupt("second?")?;
            let answers = if flip { vec![a2, a1] } else { vec![a1, a2] };
            Ok::<_, BoxError>(Log::update().log(answers))
        })
        .add_subgraph(
            "sub",
            inner,
            stategraph::Checkpointing::Inherit,
            |_p: &Log| Log::update(),
            |c: &Log| Log::update().log(c.log.clone()),
        )
        .add_edge(START, "ask")
        .add_edge("ask", "sub")
        .add_edge("sub", END)
        .compile()?;
    Ok(g.with_checkpointer(saver))
}

#[tokio::test]
async fn answers_given_inside_a_subgraph_and_several_per_task_are_given_again() -> TestResult {
    let dir = tempfile::tempdir()?;
    let saver = Arc::new(SqliteSaver::open(dir.path().join("threads.db"))?);
    let g = asking(false, saver.clone())?;
    let cfg = RunConfig::new().thread("t");
    let answer = |v: &str| Command::<Log>::resume(Resume::value(v));
    assert!(g.invoke(Log::update(), &cfg).await?.is_interrupted());
    assert!(g.invoke(answer("A1"), &cfg).await?.is_interrupted());
    assert!(g.invoke(answer("A2"), &cfg).await?.is_interrupted());
    // The subgraph's question, answered with a command that also writes.
    let last = answer("B").update(Log::update().log(vec!["cmd".to_owned()]));
    let done = g.invoke(last, &cfg).await?;
    assert_eq!(done.state.log, ["A1", "A2", "cmd", "B"]);
    let tree = g.history_tree("t").await?;
    let first = tree.rows().first().ok_or("empty")?.id;

    let report = g.replay("t", first, None).await?;
    assert_eq!(report.divergence, None);
    assert_eq!(
        report.answers_given, 3,
        "A1, A2 (one task, asked twice), then B"
    );

    let flipped = asking(true, saver)?.replay("t", first, None).await?;
    let d = flipped.divergence.ok_or("expected a divergence")?;
    assert_eq!((d.node.as_deref(), d.field()), (Some("ask"), Some("log")));
    Ok(())
}
