//! Streaming: values per step, updates per node, custom events, task events, namespaces.

use std::sync::Arc;

use futures::StreamExt;
use stategraph::prelude::*;
use stategraph::{EventKind, TaskStatus};

use crate::subgraph_checkpointing::Child;
use crate::superstep_semantics::{Log, LogUpdate};
use crate::TestResult;

fn two_steps() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, c: NodeContext| async move {
            c.emit(serde_json::json!({ "progress": 50 })).await;
            Ok::<_, BoxError>(Log::update().log(vec!["a".into()]))
        })
        .add_node("b", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().value(7))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile()
}

#[tokio::test]
async fn values_events_show_the_state_after_each_step() -> TestResult {
    let mut run = two_steps()?.stream(Log::update(), &RunConfig::new(), StreamMode::values());
    let mut seen = Vec::new();
    while let Some(ev) = run.next().await {
        if let EventKind::Values(v) = &ev.kind {
            let s = v.get::<Log>().ok_or("values of another type")?;
            seen.push((ev.step, s.log.clone(), s.value));
        }
    }
    run.outcome().await?;
    assert_eq!(
        seen,
        [
            (0, vec![], 0),
            (1, vec!["a".to_owned()], 0),
            (2, vec!["a".to_owned()], 7)
        ],
        "start step, then a, then b"
    );
    Ok(())
}

#[tokio::test]
async fn updates_and_custom_events_name_their_node() -> TestResult {
    let mut run = two_steps()?.stream(Log::update(), &RunConfig::new(), StreamMode::default());
    let mut updates = Vec::new();
    let mut custom = Vec::new();
    while let Some(ev) = run.next().await {
        match ev.kind {
            EventKind::Updates { node, update, .. } => {
                let u = update.get::<LogUpdate>().ok_or("update of another type")?;
                updates.push((node.to_string(), u.log.clone(), u.value));
            }
            EventKind::Custom { node, payload } => custom.push((node.to_string(), payload)),
            _ => {}
        }
    }
    run.outcome().await?;
    assert_eq!(
        updates,
        [
            ("a".to_owned(), Some(vec!["a".to_owned()]), None),
            ("b".to_owned(), None, Some(7))
        ]
    );
    assert_eq!(
        custom,
        [("a".to_owned(), serde_json::json!({ "progress": 50 }))]
    );
    Ok(())
}

#[tokio::test]
async fn task_events_report_start_and_end_of_each_task() -> TestResult {
    let mode = StreamMode {
        tasks: true,
        ..StreamMode::none()
    };
    let mut run = two_steps()?.stream(Log::update(), &RunConfig::new(), mode);
    let mut events = Vec::new();
    while let Some(ev) = run.next().await {
        match ev.kind {
            EventKind::TaskStart { node, .. } => events.push(format!("start {node}")),
            EventKind::TaskEnd { node, status, .. } => {
                assert_eq!(status, TaskStatus::Succeeded);
                events.push(format!("end {node}"));
            }
            _ => {}
        }
    }
    run.outcome().await?;
    assert_eq!(events, ["start a", "end a", "start b", "end b"]);
    Ok(())
}

#[tokio::test]
async fn subgraph_events_carry_the_subgraph_namespace_only_when_asked() -> TestResult {
    let child = StateGraph::<Child>::new()
        .add_node("inner", |_s: Arc<Child>, c: NodeContext| async move {
            c.emit("inside").await;
            Ok::<_, BoxError>(Child::update().notes(vec!["n".into()]))
        })
        .add_edge(START, "inner")
        .compile()?;
    let g = StateGraph::<Log>::new()
        .add_subgraph(
            "sub",
            child,
            Checkpointing::Disabled,
            |_p: &Log| Child::update(),
            |c: &Child| Log::update().log(c.notes.clone()),
        )
        .add_edge(START, "sub")
        .compile()?;

    let mut run = g.stream(Log::update(), &RunConfig::new(), StreamMode::all());
    let mut child_values = 0;
    let mut custom_ns = Vec::new();
    while let Some(ev) = run.next().await {
        match &ev.kind {
            EventKind::Values(v) if !ev.ns.is_root() => {
                assert!(
                    v.get::<Child>().is_some(),
                    "child values hold the child's state type"
                );
                assert!(ev.ns.as_str().starts_with("sub:"), "{:?}", ev.ns);
                child_values += 1;
            }
            EventKind::Custom { .. } => custom_ns.push(ev.ns.as_str().to_owned()),
            _ => {}
        }
    }
    let out = run.outcome().await?;
    assert_eq!(out.state.log, ["n"]);
    assert_eq!(child_values, 2, "the child's start step and its node step");
    assert_eq!(custom_ns.len(), 1);
    assert!(custom_ns[0].starts_with("sub:"));

    // Without `subgraphs`, only root events arrive.
    let mut run = g.stream(
        Log::update(),
        &RunConfig::new(),
        StreamMode {
            subgraphs: false,
            ..StreamMode::all()
        },
    );
    while let Some(ev) = run.next().await {
        assert!(ev.ns.is_root(), "unexpected child event {ev:?}");
    }
    run.outcome().await?;
    Ok(())
}

#[tokio::test]
async fn waiting_for_the_outcome_without_reading_events_does_not_stall_the_run() -> TestResult {
    // Far more events than the stream's channel holds (1,024): if unread events blocked the
    // run, `outcome` would never return.
    let g = StateGraph::<Log>::new()
        .add_node("spin", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Log::update().value(s.value + 1))
        })
        .add_edge(START, "spin")
        .add_conditional_edges(
            "spin",
            |s: &Log| if s.value < 2000 { "spin" } else { END },
            ["spin", END],
        )
        .compile()?;
    let run = g.stream(Log::update(), &RunConfig::new(), StreamMode::all());
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), run.outcome()).await??;
    assert_eq!(out.state.value, 2000);
    Ok(())
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_run() -> TestResult {
    let runs = crate::Counter::default();
    let r2 = runs.clone();
    let g = StateGraph::<Log>::new()
        .add_node("spin", move |_s: Arc<Log>, _c: NodeContext| {
            r2.hit();
            async {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                Ok::<_, BoxError>(Log::update().value(1))
            }
        })
        .add_edge(START, "spin")
        .add_conditional_edges("spin", |_s: &Log| "spin", ["spin", END])
        .compile()?;
    let mut run = g.stream(Log::update(), &RunConfig::new(), StreamMode::values());
    run.next().await;
    drop(run);
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let at_rest = runs.get();
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    assert_eq!(
        runs.get(),
        at_rest,
        "the run went on after its stream was dropped"
    );
    Ok(())
}

#[tokio::test]
async fn a_slow_consumer_does_not_lose_events_past_the_channel_size() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("spin", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Log::update().value(s.value + 1))
        })
        .add_edge(START, "spin")
        .add_conditional_edges(
            "spin",
            |s: &Log| if s.value < 1500 { "spin" } else { END },
            ["spin", END],
        )
        .compile()?;
    let mut run = g.stream(Log::update(), &RunConfig::new(), StreamMode::values());
    let mut count = 0;
    while let Some(ev) = run.next().await {
        if count % 200 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        if matches!(ev.kind, EventKind::Values(_)) {
            count += 1;
        }
    }
    let out = run.outcome().await?;
    assert_eq!(out.state.value, 1500);
    assert_eq!(
        count, 1501,
        "one values event per step, start step included"
    );
    Ok(())
}
