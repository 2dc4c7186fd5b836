//! Streaming: a task's update is streamed as the task finishes (LangGraph does the same), so a
//! slow sibling does not hold back the progress of the others; the state still merges in task
//! order. Compared with `fixtures/langgraph/stream_updates_order.json`.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use stategraph::prelude::*;
use stategraph::EventKind;
use stategraph_tests::langgraph::{recorded, update_nodes};
use tokio::sync::Notify;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    #[reduce(append)]
    pub log: Vec<String>,
}

/// `slow` (declared first) finishes only once `release` is notified; `fast` at once. Both run
/// from START in one step. `released` says whether `slow` was let go by `release` (rather
/// than by its guard timeout, which only keeps a regression from hanging: the clock is paused,
/// so it fires, in virtual time, as soon as nothing else can run).
fn slow_and_fast(
    options: NodeOptions,
    release: Arc<Notify>,
    released: Arc<AtomicBool>,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node_with(
            "slow",
            move |_s: Arc<Log>, _c: NodeContext| {
                let (release, released) = (release.clone(), released.clone());
                async move {
                    let guard = Duration::from_secs(3600);
                    let on_cue = tokio::time::timeout(guard, release.notified())
                        .await
                        .is_ok();
                    released.store(on_cue, Ordering::SeqCst);
                    Ok::<_, BoxError>(Log::update().log(vec!["slow".into()]))
                }
            },
            options.clone(),
        )
        .add_node_with(
            "fast",
            |_s: Arc<Log>, _c: NodeContext| async {
                Ok::<_, BoxError>(Log::update().log(vec!["fast".into()]))
            },
            options,
        )
        .add_edge(START, "slow")
        .add_edge(START, "fast")
        .add_edge("slow", END)
        .add_edge("fast", END)
        .compile()
}

/// Stream `g` with `mode`, letting `slow` go once `fast`'s update arrived; every event as
/// `"update <node>"`, `"start <node>"` or `"end <node>"`.
async fn events_releasing_slow_after_fast(
    g: &CompiledGraph<Log>,
    mode: StreamMode,
    release: &Notify,
) -> Result<(Vec<String>, Arc<Log>), Box<dyn std::error::Error + Send + Sync>> {
    let mut run = g.stream(Log::update(), &RunConfig::new(), mode);
    let mut events = Vec::new();
    while let Some(ev) = run.next().await {
        match ev.kind {
            EventKind::Updates { node, .. } => {
                if &*node == "fast" {
                    release.notify_one();
                }
                events.push(format!("update {node}"));
            }
            EventKind::TaskStart { node, .. } => events.push(format!("start {node}")),
            EventKind::TaskEnd { node, .. } => events.push(format!("end {node}")),
            _ => {}
        }
    }
    Ok((events, run.outcome().await?.state))
}

async fn fast_update_comes_first(options: NodeOptions) -> TestResult {
    let lg = recorded("stream_updates_order")?;
    let release = Arc::new(Notify::new());
    let released = Arc::new(AtomicBool::new(false));
    let g = slow_and_fast(options, release.clone(), released.clone())?;
    let (events, state) =
        events_releasing_slow_after_fast(&g, StreamMode::updates(), &release).await?;
    let lg_order: Vec<String> = update_nodes(&lg, "/updates")?
        .into_iter()
        .map(|n| format!("update {n}"))
        .collect();
    assert_eq!(events, lg_order, "updates in finish order, as LangGraph");
    assert!(
        released.load(Ordering::SeqCst),
        "fast's update reached the stream while slow was still running"
    );
    assert_eq!(
        state.log,
        ["slow", "fast"],
        "the merge stays in task (declaration) order, whatever the finish order"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_fast_tasks_update_is_streamed_before_its_slow_sibling_finishes() -> TestResult {
    fast_update_comes_first(NodeOptions::new()).await
}

#[tokio::test(start_paused = true)]
async fn a_spawned_fast_tasks_update_is_streamed_before_its_slow_sibling_finishes() -> TestResult {
    fast_update_comes_first(NodeOptions::new().spawn()).await
}

#[tokio::test(start_paused = true)]
async fn each_task_ends_right_after_its_update_in_finish_order() -> TestResult {
    let release = Arc::new(Notify::new());
    let released = Arc::new(AtomicBool::new(false));
    let g = slow_and_fast(NodeOptions::new(), release.clone(), released.clone())?;
    let mode = StreamMode {
        tasks: true,
        ..StreamMode::updates()
    };
    let (events, _) = events_releasing_slow_after_fast(&g, mode, &release).await?;
    assert_eq!(
        events,
        [
            "start slow",
            "start fast",
            "update fast",
            "end fast",
            "update slow",
            "end slow"
        ]
    );
    assert!(released.load(Ordering::SeqCst));
    Ok(())
}
