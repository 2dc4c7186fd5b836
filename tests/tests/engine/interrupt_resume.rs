//! Interrupts: dynamic `interrupt()`, resume by position and by id, static interrupts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use stategraph::checkpoints::MemorySaver;
use stategraph::prelude::*;
use stategraph::RunError;

use crate::superstep_semantics::{Log, LogUpdate};
use crate::{Counter, TestResult};
use stategraph_checkpoints::sync::Unpoisoned;

fn saver() -> Arc<dyn stategraph::checkpoints::Saver> {
    Arc::new(MemorySaver::new())
}

fn push(s: &str) -> LogUpdate {
    Log::update().log(vec![s.to_owned()])
}

#[tokio::test]
async fn a_node_reruns_from_the_top_and_its_kth_interrupt_gets_the_kth_resume_value() -> TestResult
{
    let runs = Counter::default();
    let r2 = runs.clone();
    let g = StateGraph::<Log>::new()
        .add_node("ask", move |_s: Arc<Log>, c: NodeContext| {
            r2.hit();
            async move {
                let a1: String = c.interrupt("first?")?;
                let a2: String = c.interrupt("second?")?;
                Ok::<_, BoxError>(Log::update().log(vec![a1, a2]))
            }
        })
        .add_edge(START, "ask")
        .compile()?
        .with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    let first = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(first.interrupts.len(), 1);
    assert_eq!(first.interrupts[0].value, serde_json::json!("first?"));
    let second = g.invoke(Command::resume(Resume::value("A1")), &cfg).await?;
    assert_eq!(second.interrupts[0].value, serde_json::json!("second?"));
    assert_eq!(
        second.interrupts[0].id, first.interrupts[0].id,
        "the id is stable across re-executions"
    );
    let done = g.invoke(Command::resume(Resume::value("A2")), &cfg).await?;
    assert!(!done.is_interrupted());
    assert_eq!(done.state.log, ["A1", "A2"]);
    assert_eq!(runs.get(), 3, "one execution per pause plus the final one");
    Ok(())
}

fn two_askers() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("left", |_s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("left?")?;
            Ok::<_, BoxError>(push(&format!("left={a}")))
        })
        .add_node("right", |_s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("right?")?;
            Ok::<_, BoxError>(push(&format!("right={a}")))
        })
        .add_edge(START, "left")
        .add_edge(START, "right")
        .compile()
}

#[tokio::test]
async fn several_pending_interrupts_need_a_map_by_interrupt_id() -> TestResult {
    let g = two_askers()?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(paused.interrupts.len(), 2);

    let err = g
        .invoke(Command::resume(Resume::value("x")), &cfg)
        .await
        .err()
        .ok_or("expected ambiguity")?;
    assert!(
        matches!(err, RunError::AmbiguousResume { ref pending } if pending.len() == 2),
        "{err}"
    );

    let map: BTreeMap<String, serde_json::Value> = paused
        .interrupts
        .iter()
        .map(|i| {
            (
                i.id.clone(),
                serde_json::json!(if i.node == "left" { "L" } else { "R" }),
            )
        })
        .collect();
    let done = g.invoke(Command::resume(Resume::Map(map)), &cfg).await?;
    assert_eq!(done.state.log, ["left=L", "right=R"]);
    Ok(())
}

#[tokio::test]
async fn a_resume_map_can_answer_one_interrupt_and_leave_the_other_pending() -> TestResult {
    let g = two_askers()?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    let left = paused
        .interrupts
        .iter()
        .find(|i| i.node == "left")
        .ok_or("no left")?;
    let map = BTreeMap::from([(left.id.clone(), serde_json::json!("L"))]);
    let still = g.invoke(Command::resume(Resume::Map(map)), &cfg).await?;
    assert_eq!(still.interrupts.len(), 1);
    assert_eq!(still.interrupts[0].node, "right");
    let done = g.invoke(Command::resume(Resume::value("R")), &cfg).await?;
    assert_eq!(done.state.log, ["left=L", "right=R"]);
    Ok(())
}

#[tokio::test]
async fn resuming_a_thread_with_nothing_pending_is_a_typed_error() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(push("a"))
        })
        .add_edge(START, "a")
        .compile()?
        .with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let err = g
        .invoke(Command::resume(Resume::value(1)), &cfg)
        .await
        .err()
        .ok_or("expected error")?;
    assert!(matches!(err, RunError::NoPendingInterrupt { .. }), "{err}");
    let fresh = RunConfig::new().thread("never-ran");
    let err = g
        .invoke(Command::resume(Resume::value(1)), &fresh)
        .await
        .err()
        .ok_or("expected error")?;
    assert!(matches!(err, RunError::NoPendingInterrupt { .. }), "{err}");
    Ok(())
}

#[tokio::test]
async fn a_resume_map_with_an_unknown_id_or_no_entries_is_a_typed_error() -> TestResult {
    let g = two_askers()?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let bad = BTreeMap::from([("no-such-id".to_owned(), serde_json::json!(1))]);
    let err = g
        .invoke(Command::resume(Resume::Map(bad)), &cfg)
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::UnknownInterruptId { ref id, ref pending } if id == "no-such-id" && pending.len() == 2),
        "{err}"
    );
    let err = g
        .invoke(Command::resume(Resume::Map(BTreeMap::new())), &cfg)
        .await
        .err()
        .ok_or("expected error")?;
    assert!(matches!(err, RunError::EmptyResume), "{err}");
    Ok(())
}

#[tokio::test]
async fn interrupt_without_a_checkpointer_is_a_typed_error() -> TestResult {
    let g = two_askers()?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::InterruptWithoutCheckpointer { .. }),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_finished_sibling_does_not_rerun_when_an_interrupted_task_resumes() -> TestResult {
    let quick = Counter::default();
    let q2 = quick.clone();
    let g = StateGraph::<Log>::new()
        .add_node("quick", move |_s: Arc<Log>, _c: NodeContext| {
            q2.hit();
            async { Ok::<_, BoxError>(push("quick")) }
        })
        .add_node("ask", |_s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("?")?;
            Ok::<_, BoxError>(push(&a))
        })
        .add_edge(START, "quick")
        .add_edge(START, "ask")
        .compile()?
        .with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let done = g
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    assert_eq!(done.state.log, ["quick", "yes"]);
    assert_eq!(quick.get(), 1);
    Ok(())
}

fn abc(
    before: &[&str],
    after: &[&str],
    seen: Arc<Mutex<Vec<String>>>,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let mut g = StateGraph::<Log>::new();
    for name in ["a", "b", "c"] {
        let seen = seen.clone();
        g = g.add_node(name, move |_s: Arc<Log>, _c: NodeContext| {
            seen.lock().unpoisoned().push(name.to_owned());
            async move { Ok::<_, BoxError>(push(name)) }
        });
    }
    g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .interrupt_before(before.iter().copied())
        .interrupt_after(after.iter().copied())
        .compile()
}

#[tokio::test]
async fn interrupt_before_pauses_before_the_node_and_continue_runs_it_once() -> TestResult {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let g = abc(&["b"], &[], seen.clone())?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(paused.interrupts[0].node, "b");
    assert_eq!(paused.state.log, ["a"]);
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.next, ["b"]);
    let done = g.invoke(Input::Continue, &cfg).await?;
    assert_eq!(done.state.log, ["a", "b", "c"]);
    assert_eq!(*seen.lock().unpoisoned(), ["a", "b", "c"]);
    Ok(())
}

#[tokio::test]
async fn interrupt_after_pauses_after_the_node_and_does_not_refire_on_continue() -> TestResult {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let g = abc(&[], &["a"], seen)?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(paused.interrupts[0].node, "a");
    assert_eq!(paused.state.log, ["a"]);
    let done = g.invoke(Input::Continue, &cfg).await?;
    assert!(!done.is_interrupted());
    assert_eq!(done.state.log, ["a", "b", "c"]);
    Ok(())
}

#[tokio::test]
async fn a_resume_command_with_an_update_keeps_finished_siblings_and_applies_the_update(
) -> TestResult {
    let quick = Counter::default();
    let q2 = quick.clone();
    let g = StateGraph::<Log>::new()
        .add_node("quick", move |_s: Arc<Log>, _c: NodeContext| {
            q2.hit();
            async { Ok::<_, BoxError>(push("quick")) }
        })
        .add_node("ask", |s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("?")?;
            Ok::<_, BoxError>(push(&format!("{a} at value {}", s.value)))
        })
        .add_edge(START, "quick")
        .add_edge(START, "ask")
        .compile()?
        .with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let cmd = Command::resume(Resume::value("yes")).update(Log::update().value(5));
    let done = g.invoke(cmd, &cfg).await?;
    assert_eq!(quick.get(), 1);
    assert_eq!(done.state.value, 5);
    assert_eq!(done.state.log, ["quick", "yes at value 5"]);
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(
        snap.values.value, 5,
        "the update was stored with the resumed step"
    );
    Ok(())
}

fn two_questions() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("ask", |s: Arc<Log>, c: NodeContext| async move {
            let a1: String = c.interrupt("first?")?;
            let a2: String = c.interrupt("second?")?;
            Ok::<_, BoxError>(Log::update().log(vec![a1, a2, format!("value={}", s.value)]))
        })
        .add_edge(START, "ask")
        .compile()
}

#[tokio::test]
async fn under_durability_exit_a_second_interrupt_keeps_the_first_answer() -> TestResult {
    let g = two_questions()?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t").durability(Durability::Exit);
    g.invoke(Log::update(), &cfg).await?;
    let second = g.invoke(Command::resume(Resume::value("A1")), &cfg).await?;
    assert_eq!(second.interrupts[0].value, serde_json::json!("second?"));
    let done = g.invoke(Command::resume(Resume::value("A2")), &cfg).await?;
    assert_eq!(done.state.log, ["A1", "A2", "value=0"]);
    Ok(())
}

#[tokio::test]
async fn a_resume_commands_update_survives_a_second_pause() -> TestResult {
    let g = two_questions()?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let second = g
        .invoke(
            Command::resume(Resume::value("A1")).update(Log::update().value(5)),
            &cfg,
        )
        .await?;
    assert!(second.is_interrupted());
    let done = g.invoke(Command::resume(Resume::value("A2")), &cfg).await?;
    assert_eq!(done.state.log, ["A1", "A2", "value=5"]);
    assert_eq!(done.state.value, 5);
    Ok(())
}

#[tokio::test]
async fn a_task_that_fails_after_its_answers_keeps_them_for_the_retry() -> TestResult {
    let runs = Counter::default();
    let r2 = runs.clone();
    let g = StateGraph::<Log>::new()
        .add_node("ask", move |_s: Arc<Log>, c: NodeContext| {
            let n = r2.hit();
            async move {
                let a1: String = c.interrupt("first?")?;
                let a2: String = c.interrupt("second?")?;
                if n == 3 {
                    return Err::<LogUpdate, BoxError>("transient".into());
                }
                Ok(Log::update().log(vec![a1, a2]))
            }
        })
        .add_edge(START, "ask")
        .compile()?
        .with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    g.invoke(Command::resume(Resume::value("A1")), &cfg).await?;
    assert!(g
        .invoke(Command::resume(Resume::value("A2")), &cfg)
        .await
        .is_err());
    let done = g.invoke(Input::Continue, &cfg).await?;
    assert!(!done.is_interrupted(), "nothing is asked again");
    assert_eq!(done.state.log, ["A1", "A2"]);
    Ok(())
}

#[tokio::test]
async fn a_resume_value_answers_only_the_step_it_resumes() -> TestResult {
    // `ask` is answered; `confirm`, in a later step, must pause and not take the same value.
    let g = StateGraph::<Log>::new()
        .add_node("ask", |_s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("proceed?")?;
            Ok::<_, BoxError>(push(&a))
        })
        .add_node("confirm", |_s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("really delete everything?")?;
            Ok::<_, BoxError>(push(&format!("confirm={a}")))
        })
        .add_edge(START, "ask")
        .add_edge("ask", "confirm")
        .compile()?
        .with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let out = g
        .invoke(Command::resume(Resume::value("go on")), &cfg)
        .await?;
    assert!(
        out.is_interrupted(),
        "the second question was answered without being asked"
    );
    assert_eq!(
        out.interrupts[0].value,
        serde_json::json!("really delete everything?")
    );
    Ok(())
}

#[tokio::test]
async fn resuming_at_the_named_head_checkpoint_is_a_resume_not_a_fork() -> TestResult {
    let g = two_askers()?.with_checkpointer(saver());
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    let head = paused.checkpoint.ok_or("no checkpoint")?;
    let map: BTreeMap<String, serde_json::Value> = paused
        .interrupts
        .iter()
        .map(|i| (i.id.clone(), serde_json::json!("x")))
        .collect();
    let done = g
        .invoke(
            Command::resume(Resume::Map(map)),
            &cfg.clone().checkpoint(head),
        )
        .await?;
    assert_eq!(done.state.log, ["left=x", "right=x"]);
    Ok(())
}

use stategraph::Durability;
