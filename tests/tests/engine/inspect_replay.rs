//! Diffs between states and checkpoints, the test kit, and replay with divergence reports.

use std::sync::Arc;

use stategraph::checkpoints::{ListOptions, MemorySaver};
use stategraph::diff::{FieldChange, ListEdit};
use stategraph::prelude::*;
use stategraph::testing::{history_snapshot, run_node, trajectory};
use stategraph::{assert_state_diff, RunError};

use crate::subgraph_checkpointing::Child;
use crate::superstep_semantics::Log;
use crate::TestResult;

fn counter(bump: i64) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("count", move |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Log::update()
                    .log(vec![format!("at {}", s.value)])
                    .value(s.value + bump),
            )
        })
        .add_edge(START, "count")
        .add_conditional_edges(
            "count",
            |s: &Log| if s.value >= 6 { END } else { "count" },
            ["count", END],
        )
        .compile()
}

#[tokio::test]
async fn a_diff_between_distant_checkpoints_lists_every_change_field_by_field() -> TestResult {
    let g = counter(1)?.with_checkpointer(Arc::new(MemorySaver::new()));
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let (newest, oldest_loop) = (
        &history[0],
        history
            .iter()
            .rev()
            .find(|h| h.values.value == 1)
            .ok_or("no step 1")?,
    );
    let d = g
        .diff("t", oldest_loop.checkpoint.id, newest.checkpoint.id)
        .await?;
    assert_eq!(
        d.field("value"),
        Some(&FieldChange::Set {
            from: serde_json::json!(1),
            to: serde_json::json!(6)
        })
    );
    match d.field("log") {
        Some(FieldChange::List { edits }) => assert_eq!(edits.len(), 1),
        other => return Err(format!("unexpected log change {other:?}").into()),
    }
    assert_eq!(d.to_string().lines().count(), 6, "{d}");
    Ok(())
}

#[tokio::test]
async fn a_step_diff_is_what_that_step_wrote() -> TestResult {
    let g = counter(1)?.with_checkpointer(Arc::new(MemorySaver::new()));
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    for pair in history.windows(2) {
        let (child, parent) = (&pair[0], &pair[1]);
        let from_writes = g.step_diff("t", child.checkpoint.id).await?;
        let computed = g
            .diff("t", parent.checkpoint.id, child.checkpoint.id)
            .await?;
        assert_eq!(from_writes, computed, "at step {}", child.checkpoint.step);
    }
    let last = g.step_diff("t", history[0].checkpoint.id).await?;
    assert_eq!(
        last.field("log"),
        Some(&FieldChange::List {
            edits: vec![ListEdit::Appended {
                index: 5,
                items: vec![serde_json::json!("at 5")]
            }]
        })
    );
    Ok(())
}

/// A state and the next one: one item appended, one value replaced.
fn one_change() -> (Log, Log) {
    let before = Log {
        log: vec![],
        value: 1,
    };
    let after = Log {
        log: vec!["x".into()],
        value: 2,
    };
    (before, after)
}

#[test]
fn assert_state_diff_failure_shows_expected_and_actual_changes() {
    let (before, after) = one_change();
    assert_state_diff!(before, after, "+ log[0]: \"x\"\n~ value: 1 -> 2");
    let caught = std::panic::catch_unwind(|| {
        assert_state_diff!(before, after, "~ value: 1 -> 3");
    });
    let message = caught
        .err()
        .and_then(|p| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(
        message.contains("--- expected change ---\n~ value: 1 -> 3"),
        "{message}"
    );
    assert!(
        message.contains("--- actual change ---\n+ log[0]: \"x\"\n~ value: 1 -> 2"),
        "{message}"
    );
}

/// The panic message of `f`, or "" if it did not panic.
fn panic_text(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    std::panic::catch_unwind(f)
        .err()
        .and_then(|p| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

#[test]
fn assert_state_diff_ignores_the_order_of_the_expected_lines() {
    let (before, after) = one_change();
    // Declaration order, name order, any order: the same change.
    assert_state_diff!(before, after, "~ value: 1 -> 2\n+ log[0]: \"x\"");
    let message = panic_text(|| assert_state_diff!(before, after, "~ value: 1 -> 2"));
    assert!(
        message.contains("state diff mismatch"),
        "an extra change passed"
    );
}

#[test]
fn a_partial_diff_assertion_checks_only_the_named_fields_or_the_listed_changes() {
    let (before, after) = one_change();
    assert_state_diff!(before, after, fields = ["value"], "~ value: 1 -> 2");
    assert_state_diff!(before, after, fields = ["log"], "+ log[0]: \"x\"");
    assert_state_diff!(before, after, includes "~ value: 1 -> 2");
    let wrong =
        panic_text(|| assert_state_diff!(before, after, fields = ["value"], "~ value: 1 -> 3"));
    assert!(
        wrong.contains("--- expected, not seen ---\n~ value: 1 -> 3"),
        "{wrong}"
    );
    let unseen = panic_text(|| assert_state_diff!(before, after, includes "- log[0]: \"x\""));
    assert!(
        unseen.contains("state diff mismatch"),
        "a change that did not happen passed"
    );
    // A field that did not change, restricted to: no change.
    let same = Log {
        log: vec!["x".into()],
        value: 1,
    };
    assert_state_diff!(after, same, fields = ["log"], "");
}

#[tokio::test]
async fn run_node_runs_one_node_against_a_state_and_applies_its_update() -> TestResult {
    let g = counter(5)?;
    let ran = run_node(
        &g,
        "count",
        Log {
            log: vec!["seed".into()],
            value: 2,
        },
    )
    .await?;
    assert_eq!(ran.state.log, ["seed", "at 2"]);
    assert_eq!(ran.state.value, 7);
    assert!(matches!(
        run_node(&g, "nope", Log::default()).await,
        Err(RunError::UnknownNode { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn a_trajectory_lists_the_nodes_a_run_ran_subgraphs_included() -> TestResult {
    let child = StateGraph::<Child>::new()
        .add_node("inner", |_s: Arc<Child>, _c: NodeContext| async {
            Ok::<_, BoxError>(Child::update())
        })
        .add_edge(START, "inner")
        .compile()?;
    let g = StateGraph::<Log>::new()
        .add_node("first", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update())
        })
        .add_subgraph(
            "sub",
            child,
            Checkpointing::Disabled,
            |_p: &Log| Child::update(),
            |_c: &Child| Log::update(),
        )
        .add_edge(START, "first")
        .add_edge("first", "sub")
        .compile()?;
    let (_, nodes) = trajectory(&g, Log::update(), &RunConfig::new()).await?;
    assert_eq!(nodes, ["first", "sub", "sub/inner"]);
    Ok(())
}

#[tokio::test]
async fn a_resumed_runs_trajectory_leaves_out_the_tasks_whose_writes_were_reused() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("done", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().log(vec!["done".into()]))
        })
        .add_node("ask", |_s: Arc<Log>, cx: NodeContext| async move {
            let answer: String = cx.interrupt("ok?")?;
            Ok::<_, BoxError>(Log::update().log(vec![answer]))
        })
        .add_edge(START, "done")
        .add_edge(START, "ask")
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().thread("t");
    let (_, first) = trajectory(&g, Log::update(), &config).await?;
    assert_eq!(first, ["done", "ask"]);
    let resume = Command::resume(stategraph::Resume::value("yes"));
    let (out, second) = trajectory(&g, resume, &config).await?;
    assert_eq!(second, ["ask"], "done's writes were reused, not run again");
    assert_eq!(out.state.log, ["done", "yes"]);
    Ok(())
}

#[tokio::test]
async fn a_run_can_stop_after_a_chosen_node_and_be_seeded_as_a_node() -> TestResult {
    let g = counter(1)?.with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let paused = g
        .invoke(Log::update(), &cfg.clone().interrupt_after(["count"]))
        .await?;
    assert_eq!(
        paused.state.value, 1,
        "stopped after the first run of count"
    );
    // Seed a state as if `count` wrote it, then let the graph go on from there.
    g.update_state("t", None, Log::update().value(5), "count")
        .await?;
    let out = g.invoke(Input::Continue, &cfg).await?;
    assert_eq!(out.state.value, 6);
    Ok(())
}

#[tokio::test]
async fn history_snapshots_are_deterministic() -> TestResult {
    let g = counter(2)?.with_checkpointer(Arc::new(MemorySaver::new()));
    g.invoke(Log::update(), &RunConfig::new().thread("one"))
        .await?;
    g.invoke(Log::update(), &RunConfig::new().thread("two"))
        .await?;
    let (a, b) = (
        history_snapshot(&g, "one").await?,
        history_snapshot(&g, "two").await?,
    );
    assert_eq!(a, b);
    assert_eq!(a[0]["id"], "cp0");
    assert_eq!(a[1]["parent"], "cp0");
    Ok(())
}

#[tokio::test]
async fn replay_with_the_same_code_reaches_the_recorded_states() -> TestResult {
    let store = Arc::new(MemorySaver::new());
    let g = counter(1)?.with_checkpointer(store);
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let from = history
        .iter()
        .rev()
        .find(|h| h.values.value == 2)
        .ok_or("no step")?;
    let report = g.replay("t", from.checkpoint.id, None).await?;
    assert_eq!(report.divergence, None);
    assert_eq!(report.steps_compared, 4);
    let after = g.get_state_history("t", ListOptions::default()).await?;
    assert_eq!(after.len(), history.len(), "the thread itself is untouched");
    Ok(())
}

#[tokio::test]
async fn replay_with_changed_code_reports_the_first_step_and_field_that_diverged() -> TestResult {
    let store = Arc::new(MemorySaver::new());
    let recorded = counter(1)?.with_checkpointer(store.clone());
    recorded
        .invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = recorded
        .get_state_history("t", ListOptions::default())
        .await?;
    let from = history
        .iter()
        .rev()
        .find(|h| h.values.value == 2)
        .ok_or("no step")?;
    // The new code counts by two.
    let changed = counter(2)?.with_checkpointer(store);
    let report = changed.replay("t", from.checkpoint.id, None).await?;
    let d = report.divergence.ok_or("expected a divergence")?;
    assert_eq!(d.step, from.checkpoint.step + 1);
    assert_eq!(d.field(), Some("value"));
    assert_eq!(
        d.diff.field("value"),
        Some(&FieldChange::Set {
            from: serde_json::json!(3),
            to: serde_json::json!(4)
        })
    );
    Ok(())
}

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Pair {
    alpha: i64,
    zeta: i64,
}

/// `first` writes `zeta` and `second` writes `alpha`, in one step: the engine applies the
/// tasks' writes in node order, so `zeta` changes first although `alpha` comes first by name
/// and by declaration. `first` finishes last (it waits for `second`), so its update also
/// streams last: the order reported must be the merge order, not the finish order.
fn pair(bump: i64) -> Result<CompiledGraph<Pair>, stategraph::CompileError> {
    let done = Arc::new(tokio::sync::Notify::new());
    let wait = done.clone();
    StateGraph::<Pair>::new()
        .add_node("first", move |_s: Arc<Pair>, _c: NodeContext| {
            let wait = wait.clone();
            async move {
                wait.notified().await;
                Ok::<_, BoxError>(Pair::update().zeta(bump))
            }
        })
        .add_node("second", move |_s: Arc<Pair>, _c: NodeContext| {
            let done = done.clone();
            async move {
                done.notify_one();
                Ok::<_, BoxError>(Pair::update().alpha(bump))
            }
        })
        .add_edge(START, "first")
        .add_edge(START, "second")
        .add_edge("first", END)
        .add_edge("second", END)
        .compile()
}

#[tokio::test]
async fn a_divergence_names_the_field_its_step_changed_first_not_the_first_by_name() -> TestResult {
    let store = Arc::new(MemorySaver::new());
    let recorded = pair(1)?.with_checkpointer(store.clone());
    recorded
        .invoke(Pair::update(), &RunConfig::new().thread("t"))
        .await?;
    let history = recorded
        .get_state_history("t", ListOptions::default())
        .await?;
    let input = history.last().ok_or("no history")?;
    let report = pair(2)?
        .with_checkpointer(store)
        .replay("t", input.checkpoint.id, None)
        .await?;
    let d = report.divergence.ok_or("expected a divergence")?;
    let fields: Vec<&str> = d.diff.fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        ["zeta", "alpha"],
        "in the order the step changed them"
    );
    assert_eq!(d.field(), Some("zeta"));
    Ok(())
}
