//! What each step leaves in the checkpointer: one checkpoint per step with lineage, versions
//! and only the fields that changed.

use std::sync::{Arc, Mutex};

use stategraph::checkpoints::{FieldPart, ListOptions, Source};
use stategraph::prelude::*;
use stategraph_tests::RecordingSaver;

use crate::superstep_semantics::{Log, LogUpdate};
use crate::{Counter, TestResult};
use stategraph_checkpoints::sync::Unpoisoned;

fn push(s: &str) -> LogUpdate {
    Log::update().log(vec![s.to_owned()])
}

fn ab() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a"))
        })
        .add_node("b", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(push("b").value(s.value + 1))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile()
}

#[tokio::test]
async fn every_step_writes_one_checkpoint_chained_to_its_parent() -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    g.invoke(
        Log::update().value(10),
        &RunConfig::new().thread("t").durability(Durability::Sync),
    )
    .await?;
    let puts = saver.puts();
    let shape: Vec<(i64, Source)> = puts
        .iter()
        .map(|p| (p.checkpoint.step, p.checkpoint.source))
        .collect();
    assert_eq!(
        shape,
        [
            (-1, Source::Input),
            (0, Source::Loop),
            (1, Source::Loop),
            (2, Source::Loop)
        ]
    );
    assert_eq!(puts[0].checkpoint.parent, None);
    for pair in puts.windows(2) {
        assert_eq!(pair[1].checkpoint.parent, Some(pair[0].checkpoint.id));
        assert!(
            pair[1].checkpoint.id > pair[0].checkpoint.id,
            "ids are time-ordered"
        );
    }
    // The input checkpoint holds the input as the __start__ task, nothing else yet.
    assert_eq!(puts[0].checkpoint.next_nodes(), ["__start__"]);
    assert!(puts[0].writes.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_step_stores_only_changed_fields_and_only_the_appended_items() -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let puts = saver.puts();
    // Step 1: node a appended "a"; `value` untouched.
    let step1 = &puts[2].writes;
    assert_eq!(step1.len(), 1);
    assert_eq!(step1[0].field, "log");
    assert_eq!(step1[0].part, FieldPart::Tail(br#"["a"]"#.to_vec()));
    // Step 2: node b appended "b" (only "b" is stored) and set value.
    let step2: Vec<(&str, &FieldPart)> = puts[3]
        .writes
        .iter()
        .map(|w| (w.field.as_str(), &w.part))
        .collect();
    assert_eq!(
        step2,
        [
            ("log", &FieldPart::Tail(br#"["b"]"#.to_vec())),
            ("value", &FieldPart::Whole(b"1".to_vec()))
        ]
    );
    Ok(())
}

#[tokio::test]
async fn all_fields_changed_in_a_step_share_one_new_version_and_nodes_record_what_they_saw(
) -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    let last = saver.puts().pop().ok_or("no checkpoint")?.checkpoint;
    let v = &last.control.versions;
    assert_eq!(v.get("log"), v.get("value"), "{v:?}");
    assert!(v.get("log") > v.get("branch:to:b"), "{v:?}");
    let seen_b = last.control.versions_seen.get("b").ok_or("b saw nothing")?;
    assert_eq!(seen_b.get("branch:to:b"), v.get("branch:to:b"));
    Ok(())
}

#[tokio::test]
async fn state_and_history_load_back_from_the_stored_parts() -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    let first = g.invoke(Log::update(), &cfg).await?;
    let second = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(second.state.log, ["a", "b", "a", "b"]);
    // Another graph value reading the same store sees the same state.
    let reader = ab()?.with_checkpointer(saver.shared());
    let snap = reader.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(*snap.values, *second.state);
    assert!(snap.next.is_empty());
    let history = reader
        .get_state_history("t", ListOptions::default())
        .await?;
    assert_eq!(history.len(), 8);
    assert!(
        history
            .windows(2)
            .all(|w| w[0].checkpoint.id > w[1].checkpoint.id),
        "newest first"
    );
    let at_first = reader
        .get_state("t", first.checkpoint)
        .await?
        .ok_or("no state")?;
    assert_eq!(*at_first.values, *first.state);
    let limited = reader
        .get_state_history(
            "t",
            ListOptions {
                limit: Some(3),
                ..ListOptions::default()
            },
        )
        .await?;
    assert_eq!(limited.len(), 3);
    Ok(())
}

#[tokio::test]
async fn a_task_keeps_its_id_across_re_executions() -> TestResult {
    let ids = Arc::new(Mutex::new(Vec::new()));
    let attempts = Counter::default();
    let (ids2, att2) = (ids.clone(), attempts.clone());
    let g = StateGraph::<Log>::new()
        .add_node("effect", move |_s: Arc<Log>, c: NodeContext| {
            ids2.lock().unpoisoned().push(c.task_id());
            let n = att2.hit();
            async move {
                if n == 1 {
                    Err::<LogUpdate, BoxError>("crash after the side effect".into())
                } else {
                    Ok(push("done"))
                }
            }
        })
        .add_edge(START, "effect")
        .compile()?
        .with_checkpointer(RecordingSaver::new().shared());
    let cfg = RunConfig::new().thread("t");
    assert!(g.invoke(Log::update(), &cfg).await.is_err());
    g.invoke(Input::Continue, &cfg).await?;
    let ids = ids.lock().unpoisoned().clone();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "the idempotency key is stable");
    Ok(())
}

#[tokio::test]
async fn a_failed_step_records_the_finished_tasks_and_the_error_against_its_start() -> TestResult {
    let saver = RecordingSaver::new();
    let g = StateGraph::<Log>::new()
        .add_node("ok", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("ok"))
        })
        .add_node("bad", |_s: Arc<Log>, _c: NodeContext| async {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            Err::<LogUpdate, BoxError>("boom".into())
        })
        .add_edge(START, "ok")
        .add_edge(START, "bad")
        .compile()?
        .with_checkpointer(saver.shared());
    assert!(g
        .invoke(Log::update(), &RunConfig::new().thread("t"))
        .await
        .is_err());
    // `ok` is recorded as it finishes (while `bad` still runs), then the failed step records
    // what it leaves: `ok` again (replacing its write) and `bad`'s error.
    let calls = saver.pending_calls();
    assert_eq!(calls.len(), 2);
    let start = saver.puts().last().map(|p| p.checkpoint.id);
    let kinds = |writes: &[stategraph::checkpoints::PendingWrite]| -> Vec<(String, bool)> {
        writes
            .iter()
            .map(|w| {
                (
                    w.node.clone(),
                    matches!(w.kind, stategraph::checkpoints::WriteKind::Error(_)),
                )
            })
            .collect()
    };
    for (_, at, _) in &calls {
        assert_eq!(Some(*at), start, "recorded against the step's start");
    }
    assert_eq!(kinds(&calls[0].2), [("ok".to_owned(), false)]);
    assert_eq!(
        kinds(&calls[1].2),
        [("ok".to_owned(), false), ("bad".to_owned(), true)]
    );
    Ok(())
}

#[tokio::test]
async fn a_thread_id_with_control_characters_is_rejected_before_anything_runs() -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    let err = g
        .invoke(Log::update(), &RunConfig::new().thread("bad\nid"))
        .await
        .err()
        .ok_or("expected error")?;
    assert!(err.to_string().contains("invalid thread id"), "{err}");
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected error")?;
    assert!(matches!(err, stategraph::RunError::MissingThread), "{err}");
    assert!(saver.puts().is_empty());
    Ok(())
}

#[tokio::test]
async fn a_command_update_on_an_idle_thread_is_checkpointed() -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let out = g
        .invoke(Command::new().update(Log::update().value(41)), &cfg)
        .await?;
    assert_eq!(out.state.value, 41);
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.values.value, 41);
    assert_eq!(snap.checkpoint.source, Source::Input);
    Ok(())
}

#[tokio::test]
async fn running_from_an_older_checkpoint_forks_and_keeps_the_old_branch() -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let old_ids: Vec<_> = history.iter().map(|h| h.checkpoint.id).collect();
    // The checkpoint after `a` ran: next is `b`.
    let mid = history
        .iter()
        .find(|h| h.next == ["b"])
        .ok_or("no mid checkpoint")?;
    let forked = g
        .invoke(Input::Continue, &cfg.clone().checkpoint(mid.checkpoint.id))
        .await?;
    assert_eq!(forked.state.log, ["a", "b"]);
    let after = g.get_state_history("t", ListOptions::default()).await?;
    // The old branch is intact; the new one starts with a fork checkpoint whose parent is mid.
    for id in &old_ids {
        assert!(after.iter().any(|h| h.checkpoint.id == *id));
    }
    let fork = after
        .iter()
        .find(|h| h.checkpoint.source == Source::Fork)
        .ok_or("no fork checkpoint")?;
    assert_eq!(fork.checkpoint.parent, Some(mid.checkpoint.id));
    assert_eq!(
        after[0].checkpoint.parent,
        Some(fork.checkpoint.id),
        "the new branch is the head"
    );
    Ok(())
}

#[tokio::test]
async fn update_state_as_a_node_writes_an_update_checkpoint_whose_next_follows_that_nodes_edges(
) -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let history = g.get_state_history("t", ListOptions::default()).await?;
    let start = history
        .iter()
        .find(|h| h.next == ["a"])
        .ok_or("no checkpoint before a")?;
    let id = g
        .update_state(
            "t",
            Some(start.checkpoint.id),
            push("by hand").value(7),
            "a",
        )
        .await?;
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.checkpoint.id, id);
    assert_eq!(snap.checkpoint.source, Source::Update);
    assert_eq!(snap.checkpoint.parent, Some(start.checkpoint.id));
    assert_eq!(snap.next, ["b"]);
    assert_eq!(snap.values.log, ["by hand"]);
    let out = g.invoke(Input::Continue, &cfg).await?;
    assert_eq!(out.state.log, ["by hand", "b"]);
    assert_eq!(out.state.value, 8);
    let err = g
        .update_state("t", None, Log::update(), "ghost")
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, stategraph::RunError::UnknownNode { ref name, .. } if name == "ghost"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_graph_sees_what_another_graph_wrote_to_the_thread_since_its_last_run() -> TestResult {
    let saver = RecordingSaver::new();
    // Two separately compiled graphs (each keeps the state it left) on one store.
    let first = ab()?.with_checkpointer(saver.shared());
    let second = ab()?.with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    first.invoke(Log::update(), &cfg).await?;
    second.invoke(Log::update(), &cfg).await?;
    let out = first.invoke(Log::update(), &cfg).await?;
    assert_eq!(out.state.log, ["a", "b", "a", "b", "a", "b"]);
    assert_eq!(out.state.value, 3);
    // And an update from outside the run.
    second
        .update_state("t", None, Log::update().value(100), "b")
        .await?;
    let out = first.invoke(Log::update(), &cfg).await?;
    assert_eq!(out.state.value, 101);
    Ok(())
}

#[tokio::test]
async fn amend_state_writes_an_update_checkpoint_that_keeps_what_runs_next() -> TestResult {
    let saver = RecordingSaver::new();
    let g = ab()?.with_checkpointer(saver.shared());
    let paused = RunConfig::new().thread("t").interrupt_before(["b"]);
    g.invoke(Log::update().value(1), &paused).await?;
    let before = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(before.next, ["b"]);
    let id = g.amend_state("t", push("amended").value(5)).await?;
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.checkpoint.id, id);
    assert_eq!(snap.checkpoint.source, Source::Update);
    assert_eq!(snap.checkpoint.parent, Some(before.checkpoint.id));
    assert_eq!(snap.next, ["b"]);
    assert_eq!(snap.values.log, ["a", "amended"]);
    let out = g
        .invoke(Input::Continue, &RunConfig::new().thread("t"))
        .await?;
    assert_eq!(out.state.log, ["a", "amended", "b"]);
    assert_eq!(out.state.value, 6);
    Ok(())
}

#[tokio::test]
async fn amend_state_refuses_a_head_holding_an_unfinished_steps_writes() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("ok", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("ok"))
        })
        .add_node("fails", |_s: Arc<Log>, _c: NodeContext| async {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Err::<LogUpdate, BoxError>("boom".into())
        })
        .add_edge(START, "ok")
        .add_edge(START, "fails")
        .add_edge("ok", END)
        .add_edge("fails", END)
        .compile()?
        .with_checkpointer(RecordingSaver::new().shared());
    let cfg = RunConfig::new().thread("t");
    assert!(g.invoke(Log::update(), &cfg).await.is_err());
    let head = g.get_state("t", None).await?.ok_or("no state")?;
    let err = g
        .amend_state("t", push("late"))
        .await
        .err()
        .ok_or("expected a refusal")?;
    assert!(
        matches!(err, stategraph::RunError::RecordedWrites { writes: 2, checkpoint, .. } if checkpoint == head.checkpoint.id),
        "{err}"
    );
    let after = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(after.checkpoint.id, head.checkpoint.id);
    assert!(after.values.log.is_empty());
    Ok(())
}
