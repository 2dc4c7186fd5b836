//! Resume values go to the task that asked, by its interrupt id: two `Send` tasks of one node
//! that ask in the same step, finishing in another order than their task order, each get
//! their own answer — live, after a reload from SQLite, and in a replay.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use stategraph::checkpoints::{
    ListOptions, MemorySaver, Namespace, PutCheckpoint, Saver, SqliteSaver, ThreadId,
};
use stategraph::prelude::*;
use stategraph::replay::RESUMED_KEY;
use stategraph::{Interrupt, RunError, SendTo};

use crate::subgraph_checkpointing::Child;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_split_over_two_resumes_reach_their_tasks_and_replay_as_given() -> TestResult {
    // The later task is answered first; the earlier one stays pending, then gets its own.
    // On SQLite each call opens the file anew, as another process would.
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    let memory: Arc<dyn Saver> = Arc::new(MemorySaver::new());
    for on_sqlite in [false, true] {
        let graph = || -> Result<CompiledGraph<Log>, Box<dyn std::error::Error + Send + Sync>> {
            let saver: Arc<dyn Saver> = match on_sqlite {
                true => Arc::new(SqliteSaver::open(&path)?),
                false => memory.clone(),
            };
            Ok(fan_out_askers(Duration::from_millis(40))?.with_checkpointer(saver))
        };
        let cfg = RunConfig::new().thread("t");
        let paused = graph()?.invoke(Log::update(), &cfg).await?;
        let (first, second): (Vec<Interrupt>, Vec<Interrupt>) = paused
            .interrupts
            .into_iter()
            .partition(|i| i.value == serde_json::json!("q1"));
        let still = graph()?
            .invoke(Command::resume(answer_each(&first)), &cfg)
            .await?;
        assert_eq!(still.interrupts, second, "the other task still waits");
        let done = graph()?
            .invoke(Command::resume(answer_each(&second)), &cfg)
            .await?;
        assert_eq!(done.state.log, ANSWERED);

        let g = graph()?;
        let history = g.get_state_history("t", Default::default()).await?;
        let first = history.last().ok_or("no history")?.checkpoint.id;
        let report = g.replay("t", first, None).await?;
        assert_eq!(report.divergence, None, "on sqlite: {on_sqlite}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_gives_each_send_task_its_own_recorded_answer() -> TestResult {
    let dir = tempfile::tempdir()?;
    for saver in [
        Arc::new(MemorySaver::new()) as Arc<dyn Saver>,
        Arc::new(SqliteSaver::open(dir.path().join("threads.db"))?),
    ] {
        let g = fan_out_askers(Duration::from_millis(40))?.with_checkpointer(saver);
        let cfg = RunConfig::new().thread("t");
        let paused = g.invoke(Log::update(), &cfg).await?;
        g.invoke(Command::resume(answer_each(&paused.interrupts)), &cfg)
            .await?;
        let history = g.get_state_history("t", Default::default()).await?;
        // The resumed step records each task's answers under its interrupt id.
        let resumed = history
            .iter()
            .find_map(|s| s.checkpoint.metadata.get(RESUMED_KEY))
            .ok_or("no resumed entry")?;
        let mut recorded: Vec<(String, serde_json::Value)> = resumed["tasks"]
            .as_array()
            .ok_or("no tasks")?
            .iter()
            .map(|t| {
                (
                    t["id"].as_str().unwrap_or_default().to_owned(),
                    t["values"].clone(),
                )
            })
            .collect();
        recorded.sort_by(|a, b| a.0.cmp(&b.0));
        let mut given: Vec<(String, serde_json::Value)> = paused
            .interrupts
            .iter()
            .map(|i| {
                let q = i.value.as_str().unwrap_or_default();
                (i.id.clone(), serde_json::json!([format!("answer to {q}")]))
            })
            .collect();
        given.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(recorded, given);

        let first = history.last().ok_or("no history")?.checkpoint.id;
        let report = g.replay("t", first, None).await?;
        assert_eq!(report.divergence, None);
        assert_eq!(report.answers_given, 1);
    }
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

/// A copy of root thread `t` of `from` in a new saver, its `resumed` entries without the
/// interrupt ids (as recorded before they were).
async fn without_answer_ids(
    from: &dyn Saver,
) -> Result<Arc<dyn Saver>, Box<dyn std::error::Error + Send + Sync>> {
    let to = Arc::new(MemorySaver::new());
    let (thread, root) = (ThreadId::new("t")?, Namespace::root());
    let mut headers = from.list(&thread, &root, ListOptions::default()).await?;
    headers.reverse();
    for mut checkpoint in headers {
        let changes = from.changes(&thread, &root, checkpoint.id).await?;
        let tasks = checkpoint
            .metadata
            .get_mut(RESUMED_KEY)
            .and_then(|r| r.get_mut("tasks"))
            .and_then(|t| t.as_array_mut());
        for entry in tasks.into_iter().flatten() {
            entry.as_object_mut().and_then(|e| e.remove("id"));
        }
        let writes = changes.into_writes();
        let id = checkpoint.id;
        to.put(PutCheckpoint {
            thread: thread.clone(),
            ns: root.clone(),
            checkpoint,
            writes,
        })
        .await?;
        let pending = from
            .get(&thread, &root, Some(id))
            .await?
            .ok_or("gone")?
            .pending;
        if !pending.is_empty() {
            to.put_writes(&thread, &root, id, pending).await?;
        }
    }
    Ok(to)
}

/// `left` asks twice, `right` once, in the same step.
fn left_and_right() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("left", |_s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("left?")?;
            let b: String = c.interrupt("left again?")?;
            Ok::<_, BoxError>(Log::update().log(vec![format!("left={a},{b}")]))
        })
        .add_node("right", |_s: Arc<Log>, c: NodeContext| async move {
            let a: String = c.interrupt("right?")?;
            Ok::<_, BoxError>(Log::update().log(vec![format!("right={a}")]))
        })
        .add_edge(START, "left")
        .add_edge(START, "right")
        .compile()
}

#[tokio::test]
async fn answers_recorded_without_interrupt_ids_still_replay_by_node() -> TestResult {
    let saver: Arc<dyn Saver> = Arc::new(MemorySaver::new());
    let g = left_and_right()?.with_checkpointer(saver.clone());
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    g.invoke(Command::resume(answer_each(&paused.interrupts)), &cfg)
        .await?;
    let done = g
        .invoke(Command::resume(Resume::value("again")), &cfg)
        .await?;
    assert_eq!(
        done.state.log,
        ["left=answer to left?,again", "right=answer to right?"]
    );

    let old = left_and_right()?.with_checkpointer(without_answer_ids(&*saver).await?);
    let history = old.get_state_history("t", Default::default()).await?;
    let recorded: Vec<&serde_json::Value> = history
        .iter()
        .filter_map(|s| s.checkpoint.metadata.get(RESUMED_KEY))
        .collect();
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        recorded[0]["tasks"],
        serde_json::json!([
            {"node": "left", "values": ["answer to left?", "again"]},
            {"node": "right", "values": ["answer to right?"]},
        ])
    );
    let first = history.last().ok_or("no history")?.checkpoint.id;
    let report = old.replay("t", first, None).await?;
    assert_eq!(report.divergence, None);
    assert_eq!(report.answers_given, 2);
    Ok(())
}

#[tokio::test]
async fn two_send_tasks_of_one_subgraph_node_each_get_their_own_answer_and_replay() -> TestResult {
    // Each `Send` runs the child graph; its `ask` (slow for input 0) asks `q<n>`.
    let child = StateGraph::<Child>::new()
        .add_node("ask", |s: Arc<Child>, c: NodeContext| async move {
            if s.topic == "0" {
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            let a: String = c.interrupt(format!("q{}", s.topic))?;
            Ok::<_, BoxError>(Child::update().notes(vec![format!("{}={a}", s.topic)]))
        })
        .add_edge(START, "ask")
        .compile()?;
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "fan",
            |_s: Arc<Log>, _c: NodeContext| async move {
                Ok::<_, BoxError>(
                    Command::<Log>::new().goto_all((0..2_u64).map(|n| SendTo::new("sub", n))),
                )
            },
            NodeOptions::new().destinations(["sub"]),
        )
        .add_subgraph_sent(
            "sub",
            child,
            Checkpointing::Inherit,
            |_p: &Log, n: Option<u64>| Child::update().topic(n.unwrap_or_default().to_string()),
            |c: &Child| Log::update().log(c.notes.clone()),
        )
        .add_edge(START, "fan")
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert_both_asked(&paused.interrupts, "ask");
    let done = g
        .invoke(Command::resume(answer_each(&paused.interrupts)), &cfg)
        .await?;
    assert_eq!(done.state.log, ANSWERED);
    let history = g.get_state_history("t", Default::default()).await?;
    let first = history.last().ok_or("no history")?.checkpoint.id;
    assert_eq!(g.replay("t", first, None).await?.divergence, None);
    Ok(())
}
