//! The functional API (`stategraph::func`): a workflow's tasks are recorded as they finish,
//! so running the workflow again on its thread (after an interrupt, a failure, a crash) runs
//! only the tasks that had not finished; it is a graph thread (checkpoints, state, history,
//! streaming) and can be a node of another graph.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::json;
use stategraph::checkpoints::{MemorySaver, Saver, SqliteSaver};
use stategraph::func::{entrypoint, Entrypoint, Workflow, WorkflowContext};
use stategraph::prelude::*;
use stategraph::{Checkpointing, Durability, EventKind, Resume, RunError};

use crate::TestResult;

/// Runs of each task, by name and number.
#[derive(Clone, Default)]
struct Ledger(Arc<Mutex<Vec<String>>>);

impl Ledger {
    fn note(&self, what: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(what);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// `n` squares as tasks, then an approval; the total if approved.
fn approve_squares(ledger: Ledger) -> Result<Entrypoint<u64, u64>, stategraph::CompileError> {
    entrypoint("squares", move |n: u64, cx: WorkflowContext| {
        let ledger = ledger.clone();
        async move {
            let mut total = 0;
            for i in 0..n {
                let ledger = ledger.clone();
                total += cx
                    .task("square", async move {
                        ledger.note(format!("square {i}"));
                        Ok::<_, BoxError>(i * i)
                    })
                    .await?;
            }
            let approved: bool = cx.interrupt(json!({ "total": total }))?;
            Ok::<_, BoxError>(if approved { total } else { 0 })
        }
    })
}

async fn tasks_run_once_through_an_interrupt(saver: Arc<dyn Saver>) -> TestResult {
    let ledger = Ledger::default();
    let wf = approve_squares(ledger.clone())?.with_checkpointer(saver);
    let config = RunConfig::new().thread("t");
    let paused = wf.invoke(3, &config).await?;
    assert_eq!(paused.output, None);
    assert_eq!(paused.interrupts[0].value, json!({ "total": 5 }));
    assert_eq!(ledger.take(), ["square 0", "square 1", "square 2"]);
    let done = wf.resume(Resume::value(true), &config).await?;
    assert_eq!(done.output, Some(5));
    assert!(ledger.take().is_empty(), "no task ran again on resume");
    Ok(())
}

#[tokio::test]
async fn a_workflows_finished_tasks_do_not_run_again_when_it_resumes() -> TestResult {
    tasks_run_once_through_an_interrupt(Arc::new(MemorySaver::new())).await
}

#[tokio::test]
async fn a_workflows_finished_tasks_do_not_run_again_when_it_resumes_on_sqlite() -> TestResult {
    let dir = tempfile::tempdir()?;
    tasks_run_once_through_an_interrupt(Arc::new(SqliteSaver::open(dir.path().join("w.db"))?)).await
}

#[tokio::test]
async fn after_a_failed_task_continuing_runs_only_that_task_and_the_ones_after() -> TestResult {
    let ledger = Ledger::default();
    let fail_once = Arc::new(AtomicUsize::new(0));
    let wf = {
        let (ledger, fail_once) = (ledger.clone(), fail_once.clone());
        entrypoint("steps", move |n: u64, cx: WorkflowContext| {
            let (ledger, fail_once) = (ledger.clone(), fail_once.clone());
            async move {
                let mut out = Vec::new();
                for i in 0..n {
                    let (ledger, fail_once) = (ledger.clone(), fail_once.clone());
                    out.push(
                        cx.task("step", async move {
                            ledger.note(format!("step {i}"));
                            if i == 2 && fail_once.fetch_add(1, Ordering::SeqCst) == 0 {
                                return Err::<u64, BoxError>("flaky".into());
                            }
                            Ok(i)
                        })
                        .await?,
                    );
                }
                Ok::<_, BoxError>(out)
            }
        })?
        .with_checkpointer(Arc::new(MemorySaver::new()))
    };
    let config = RunConfig::new().thread("t");
    let failed = wf.invoke(4, &config).await;
    assert!(matches!(failed, Err(RunError::Node { .. })), "{failed:?}");
    assert_eq!(ledger.take(), ["step 0", "step 1", "step 2"]);
    let done = wf.continue_run(&config).await?;
    assert_eq!(done.output, Some(vec![0, 1, 2, 3]));
    assert_eq!(
        ledger.take(),
        ["step 2", "step 3"],
        "steps 0 and 1 answered from the record"
    );
    Ok(())
}

#[tokio::test]
async fn parallel_tasks_are_recorded_each_and_found_again_by_their_start_order() -> TestResult {
    let ledger = Ledger::default();
    let wf = {
        let ledger = ledger.clone();
        entrypoint("fan", move |n: u64, cx: WorkflowContext| {
            let ledger = ledger.clone();
            async move {
                let started: Vec<_> = (0..n)
                    .map(|i| {
                        let ledger = ledger.clone();
                        cx.task("part", async move {
                            // Later parts finish first.
                            tokio::time::sleep(std::time::Duration::from_millis(5 * (n - i))).await;
                            ledger.note(format!("part {i}"));
                            Ok::<_, BoxError>(i * 10)
                        })
                    })
                    .collect();
                let parts = futures::future::try_join_all(started).await?;
                let ok: bool = cx.interrupt("parts done")?;
                Ok::<_, BoxError>(if ok { parts } else { Vec::new() })
            }
        })?
        .with_checkpointer(Arc::new(MemorySaver::new()))
    };
    let config = RunConfig::new().thread("t").durability(Durability::Async);
    wf.invoke(4, &config).await?;
    let mut ran = ledger.take();
    ran.sort();
    assert_eq!(ran, ["part 0", "part 1", "part 2", "part 3"]);
    let done = wf.resume(Resume::value(true), &config).await?;
    assert_eq!(
        done.output,
        Some(vec![0, 10, 20, 30]),
        "each result at its position"
    );
    assert!(ledger.take().is_empty());
    Ok(())
}

#[tokio::test]
async fn a_workflow_without_a_checkpointer_runs_its_tasks_and_returns() -> TestResult {
    let wf = entrypoint("plain", |n: u64, cx: WorkflowContext| async move {
        let doubled = cx
            .task("double", async move { Ok::<_, BoxError>(n * 2) })
            .await?;
        Ok::<_, BoxError>(doubled + 1)
    })?;
    let out = wf.invoke(20, &RunConfig::new()).await?;
    assert_eq!(out.output, Some(41));
    Ok(())
}

#[tokio::test]
async fn a_workflows_thread_shows_its_input_and_output_in_state_and_history() -> TestResult {
    let wf = approve_squares(Ledger::default())?.with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().thread("t");
    wf.invoke(2, &config).await?;
    wf.resume(Resume::value(true), &config).await?;
    let state = wf.graph().get_state("t", None).await?.expect("a head");
    assert_eq!(
        *state.values,
        Workflow {
            input: json!(2),
            output: json!(1)
        }
    );
    let history = wf
        .graph()
        .get_state_history("t", Default::default())
        .await?;
    assert!(
        history.len() >= 3,
        "input, start and the workflow's step: {}",
        history.len()
    );
    Ok(())
}

#[tokio::test]
async fn a_workflow_streams_its_update_as_a_graph_node_does() -> TestResult {
    let wf = entrypoint("echo", |s: String, _cx: WorkflowContext| async move {
        Ok::<_, BoxError>(format!("{s}!"))
    })?;
    let mut stream = wf.stream("hi".to_owned(), &RunConfig::new(), StreamMode::updates())?;
    let mut updates = Vec::new();
    while let Some(ev) = stream.next().await {
        if let EventKind::Updates { node, update, .. } = ev.kind {
            updates.push((node.to_string(), update.to_json()?));
        }
    }
    assert_eq!(updates, [("echo".to_owned(), json!({ "output": "hi!" }))]);
    Ok(())
}

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Outer {
    #[reduce(append)]
    pub log: Vec<String>,
    pub n: u64,
}

#[tokio::test]
async fn a_workflow_is_a_node_of_another_graph() -> TestResult {
    let wf = entrypoint("sum", |n: u64, cx: WorkflowContext| async move {
        let mut total = 0;
        for i in 1..=n {
            total += cx.task("add", async move { Ok::<_, BoxError>(i) }).await?;
        }
        Ok::<_, BoxError>(total)
    })?;
    let graph = StateGraph::<Outer>::new()
        .add_subgraph(
            "sum",
            wf.graph().clone(),
            Checkpointing::Inherit,
            |s: &Outer| Entrypoint::<u64, u64>::input(&s.n).unwrap_or_default(),
            |w: &Workflow| Outer::update().log(vec![format!("sum {}", w.output)]),
        )
        .add_edge(START, "sum")
        .add_edge("sum", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let out = graph
        .invoke(Outer::update().n(4), &RunConfig::new().thread("t"))
        .await?;
    assert_eq!(out.state.log, ["sum 10"]);
    Ok(())
}

#[tokio::test]
async fn continuing_a_thread_the_workflow_never_ran_on_says_so() -> TestResult {
    let wf = approve_squares(Ledger::default())?.with_checkpointer(Arc::new(MemorySaver::new()));
    let err = wf.continue_run(&RunConfig::new().thread("empty")).await;
    match err {
        Err(RunError::Decode { detail, .. }) => {
            assert!(
                detail.contains("no run of this workflow to continue"),
                "{detail}"
            );
        }
        other => panic!("expected a decode error naming the empty thread, got {other:?}"),
    }
    Ok(())
}
