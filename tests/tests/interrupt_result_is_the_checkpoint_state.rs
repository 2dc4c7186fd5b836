//! Interrupts: a run that pauses returns the state of the checkpoint it paused at. A sibling
//! that finished in the paused step is not folded in (LangGraph folds it into the result and
//! into `get_state`; decisions 0031 and 0007): its update is streamed as it finishes, kept
//! as a pending write, and applied, without running it again, when the step resumes.
//! Compared with `fixtures/langgraph/interrupt_result_sibling_writes.json`.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use stategraph::prelude::*;
use stategraph::EventKind;
use stategraph_tests::langgraph::{recorded, strings, update_nodes};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    #[reduce(append)]
    pub log: Vec<String>,
}

/// From START, in parallel: `ask` (asks a question) and `done` (appends "done"; counted).
fn ask_and_done(
    done_runs: Arc<AtomicUsize>,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    Ok(StateGraph::<Log>::new()
        .add_node("ask", |_s: Arc<Log>, c: NodeContext| async move {
            let answer: String = c.interrupt("question")?;
            Ok::<_, BoxError>(Log::update().log(vec![format!("ask:{answer}")]))
        })
        .add_node("done", move |_s: Arc<Log>, _c: NodeContext| {
            done_runs.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, BoxError>(Log::update().log(vec!["done".into()])) }
        })
        .add_edge(START, "ask")
        .add_edge(START, "done")
        .add_edge("ask", END)
        .add_edge("done", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new())))
}

fn input() -> LogUpdate {
    Log::update().log(vec!["input".into()])
}

#[tokio::test]
async fn a_paused_run_returns_its_checkpoint_state_without_the_finished_siblings_write(
) -> TestResult {
    let lg = recorded("interrupt_result_sibling_writes")?;
    let done_runs = Arc::new(AtomicUsize::new(0));
    let g = ask_and_done(done_runs.clone())?;
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(input(), &cfg).await?;

    // LangGraph folds the sibling's write in; ours returns the checkpoint's state.
    assert_eq!(strings(&lg, "/result/log")?, ["input", "done"]);
    assert_eq!(paused.state.log, ["input"]);
    let snap = g.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(strings(&lg, "/get_state_values/log")?, ["input", "done"]);
    assert_eq!(
        snap.values.log, paused.state.log,
        "result = stored checkpoint"
    );
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(
        paused.interrupts[0].value,
        lg["result"]["__interrupt__"][0]["interrupt"]["value"]
    );

    // On resume both end up where LangGraph does, and `done` did not run again.
    let resumed = g
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    assert_eq!(resumed.state.log, strings(&lg, "/resumed_result/log")?);
    let lg_done_runs = lg
        .pointer("/runs_after_resume/done")
        .and_then(|v| v.as_u64());
    assert_eq!(Some(done_runs.load(Ordering::SeqCst) as u64), lg_done_runs);
    Ok(())
}

#[tokio::test]
async fn a_finished_siblings_update_is_streamed_before_the_run_pauses() -> TestResult {
    let lg = recorded("interrupt_result_sibling_writes")?;
    let g = ask_and_done(Arc::new(AtomicUsize::new(0)))?;
    let mut run = g.stream(
        input(),
        &RunConfig::new().thread("t"),
        StreamMode::updates(),
    );
    let mut events = Vec::new();
    while let Some(ev) = run.next().await {
        match ev.kind {
            EventKind::Updates { node, .. } => events.push(node.to_string()),
            EventKind::Interrupt(_) => events.push("__interrupt__".to_owned()),
            _ => {}
        }
    }
    run.outcome().await?;
    let mut lg_events = update_nodes(&lg, "/stream_updates")?;
    assert!(
        lg_events.contains(&"done".to_owned()),
        "LangGraph streams done's update"
    );
    // LangGraph streams each interrupt as its task stops; ours is one event as the run pauses.
    lg_events.retain(|e| e != "__interrupt__");
    lg_events.push("__interrupt__".to_owned());
    assert_eq!(events, lg_events, "done's update, then the pause");
    Ok(())
}
