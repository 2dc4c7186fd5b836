//! Resume values go to the task that asked, by its interrupt id: two `Send` tasks of one node
//! that ask in the same step, finishing in another order than their task order, each get
//! their own answer — live and after a reload from SQLite.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use stategraph::checkpoints::{MemorySaver, SqliteSaver};
use stategraph::prelude::*;
use stategraph::{Interrupt, RunError, SendTo};

use crate::superstep_semantics::Log;
use crate::{Counter, TestResult};

/// `fan` sends `worker` the inputs 0 and 1. A worker asks `q<n>` and logs `<n>=<answer>`;
/// worker 0 waits `slow` first, so that it asks (and, resumed, finishes) after worker 1.
fn fan_out_askers(slow: Duration) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node_with(
            "fan",
            |_s: Arc<Log>, _c: NodeContext| async move {
                Ok::<_, BoxError>(
                    Command::<Log>::new().goto_all((0..2_u64).map(|n| SendTo::new("worker", n))),
                )
            },
            NodeOptions::new().destinations(["worker"]),
        )
        .add_node("worker", move |_s: Arc<Log>, c: NodeContext| async move {
            let n: u64 = c.arg()?;
            if n == 0 {
                tokio::time::sleep(slow).await;
            }
            let a: String = c.interrupt(format!("q{n}"))?;
            Ok::<_, BoxError>(Log::update().log(vec![format!("{n}={a}")]))
        })
        .add_edge(START, "fan")
        .compile()
}

/// A resume map answering each interrupt with `answer to <its question>`.
fn answer_each(interrupts: &[Interrupt]) -> Resume {
    Resume::Map(
        interrupts
            .iter()
            .map(|i| {
                let q = i.value.as_str().unwrap_or_default();
                (i.id.clone(), serde_json::json!(format!("answer to {q}")))
            })
            .collect(),
    )
}

const ANSWERED: [&str; 2] = ["0=answer to q0", "1=answer to q1"];

/// Both tasks paused in `node`, with an interrupt id each.
fn assert_both_asked(interrupts: &[Interrupt], node: &str) {
    let mut asked: Vec<(&str, Option<&str>)> = interrupts
        .iter()
        .map(|i| (i.node.as_str(), i.value.as_str()))
        .collect();
    asked.sort();
    assert_eq!(asked, [(node, Some("q0")), (node, Some("q1"))]);
    assert_ne!(interrupts[0].id, interrupts[1].id, "one id per task");
}

#[tokio::test]
async fn two_send_tasks_of_one_node_each_get_the_answer_to_their_own_interrupt() -> TestResult {
    let g =
        fan_out_askers(Duration::from_millis(40))?.with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert_both_asked(&paused.interrupts, "worker");
    let done = g
        .invoke(Command::resume(answer_each(&paused.interrupts)), &cfg)
        .await?;
    assert!(!done.is_interrupted());
    assert_eq!(done.state.log, ANSWERED);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_by_interrupt_id_reach_their_tasks_after_a_reload_from_sqlite() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    let cfg = RunConfig::new().thread("t");
    {
        let g = fan_out_askers(Duration::from_millis(40))?
            .with_checkpointer(Arc::new(SqliteSaver::open(&path)?));
        assert_both_asked(&g.invoke(Log::update(), &cfg).await?.interrupts, "worker");
    }
    // Another process: a new saver on the same file, the interrupts read back from it.
    let g = fan_out_askers(Duration::from_millis(40))?
        .with_checkpointer(Arc::new(SqliteSaver::open(&path)?));
    let pending = g.get_state("t", None).await?.ok_or("no state")?.interrupts;
    assert_both_asked(&pending, "worker");
    let done = g
        .invoke(Command::resume(answer_each(&pending)), &cfg)
        .await?;
    assert_eq!(done.state.log, ANSWERED);
    Ok(())
}

#[tokio::test]
async fn a_single_resume_value_goes_to_the_task_whose_interrupt_is_pending() -> TestResult {
    // Worker 1 fails its first run after worker 0 asked: only worker 0's question is
    // pending. Resumed, worker 1 asks first; the value still belongs to worker 0.
    let runs = Counter::default();
    let r2 = runs.clone();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "fan",
            |_s: Arc<Log>, _c: NodeContext| async move {
                Ok::<_, BoxError>(
                    Command::<Log>::new().goto_all((0..2_u64).map(|n| SendTo::new("worker", n))),
                )
            },
            NodeOptions::new().destinations(["worker"]),
        )
        .add_node("worker", move |_s: Arc<Log>, c: NodeContext| {
            let r2 = r2.clone();
            async move {
                let n: u64 = c.arg()?;
                match n {
                    0 => tokio::time::sleep(Duration::from_millis(40)).await,
                    _ if r2.hit() == 1 => {
                        tokio::time::sleep(Duration::from_millis(80)).await;
                        return Err("worker 1 is not ready yet".into());
                    }
                    _ => {}
                }
                let a: String = c.interrupt(format!("q{n}"))?;
                Ok::<_, BoxError>(Log::update().log(vec![format!("{n}={a}")]))
            }
        })
        .add_edge(START, "fan")
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let err = g
        .invoke(Log::update(), &cfg)
        .await
        .err()
        .ok_or("no failure")?;
    assert!(matches!(err, RunError::Node { .. }), "{err}");
    let state = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(state.interrupts.len(), 1);
    assert_eq!(state.interrupts[0].value, serde_json::json!("q0"));

    let out = g
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    let asked: Vec<&serde_json::Value> = out.interrupts.iter().map(|i| &i.value).collect();
    assert_eq!(
        asked,
        [&serde_json::json!("q1")],
        "worker 1 asks its own question"
    );
    let done = g.invoke(Command::resume(Resume::value("no")), &cfg).await?;
    assert_eq!(done.state.log, ["0=yes", "1=no"]);
    assert_eq!(runs.get(), 3);
    Ok(())
}

#[tokio::test]
async fn a_resume_map_naming_one_task_leaves_the_other_task_of_its_node_asking() -> TestResult {
    let g = fan_out_askers(Duration::ZERO)?.with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    let q0 = paused
        .interrupts
        .iter()
        .find(|i| i.value == serde_json::json!("q0"))
        .ok_or("no q0")?;
    let map = BTreeMap::from([(q0.id.clone(), serde_json::json!("only zero"))]);
    let still = g.invoke(Command::resume(Resume::Map(map)), &cfg).await?;
    assert_eq!(still.interrupts.len(), 1);
    assert_eq!(still.interrupts[0].value, serde_json::json!("q1"));
    assert_eq!(still.state.log, Vec::<String>::new());
    Ok(())
}
