//! `Command`: update + goto, `Send` fan-out, commands to the parent graph.

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::{RunError, SendTo};

use crate::TestResult;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Job {
    #[reduce(append)]
    pub results: Vec<u64>,
    #[reduce(append)]
    pub log: Vec<String>,
    pub total: u64,
}

fn fanout(k: u64) -> Result<CompiledGraph<Job>, stategraph::CompileError> {
    StateGraph::<Job>::new()
        .add_node_with(
            "emit",
            move |_s: Arc<Job>, _c: NodeContext| async move {
                Ok::<_, BoxError>(
                    Command::<Job>::new().goto_all((0..k).map(|i| SendTo::new("worker", i))),
                )
            },
            NodeOptions::new().destinations(["worker"]),
        )
        .add_node("worker", |_s: Arc<Job>, c: NodeContext| async move {
            let i: u64 = c.arg()?;
            Ok::<_, BoxError>(Job::update().results(vec![2 * i]))
        })
        .add_node("reduce", |s: Arc<Job>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Job::update().total(s.results.iter().sum::<u64>()))
        })
        .add_edge(START, "emit")
        .add_edge("worker", "reduce")
        .add_edge("reduce", END)
        .compile()
}

#[tokio::test]
async fn each_send_runs_its_node_with_its_own_input_and_results_merge_in_send_order() -> TestResult
{
    let out = fanout(100)?
        .invoke(Job::update(), &RunConfig::new())
        .await?;
    assert_eq!(
        out.state.results,
        (0..100).map(|i| 2 * i).collect::<Vec<u64>>()
    );
    assert_eq!(out.state.total, 2 * (0..100).sum::<u64>());
    Ok(())
}

#[tokio::test]
async fn a_ten_thousand_send_step_completes() -> TestResult {
    let out = fanout(10_000)?
        .invoke(Job::update(), &RunConfig::new())
        .await?;
    assert_eq!(out.state.results.len(), 10_000);
    assert_eq!(out.state.total, 2 * (0..10_000u64).sum::<u64>());
    Ok(())
}

#[tokio::test]
async fn a_command_carries_an_update_and_a_goto_together() -> TestResult {
    let g = StateGraph::<Job>::new()
        .add_node_with(
            "decide",
            |_s: Arc<Job>, _c: NodeContext| async {
                Ok::<_, BoxError>(
                    Command::new()
                        .update(Job::update().log(vec!["decide".into()]))
                        .goto("b"),
                )
            },
            NodeOptions::new().destinations(["a", "b"]),
        )
        .add_node("a", |_s: Arc<Job>, _c: NodeContext| async {
            Ok::<_, BoxError>(Job::update().log(vec!["a".into()]))
        })
        .add_node("b", |s: Arc<Job>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Job::update().log(vec![format!("b saw {:?}", s.log)]))
        })
        .add_edge(START, "decide")
        .compile()?;
    let out = g.invoke(Job::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.log, ["decide", "b saw [\"decide\"]"]);
    Ok(())
}

#[tokio::test]
async fn goto_an_unknown_node_is_a_typed_error_naming_it() -> TestResult {
    let g = StateGraph::<Job>::new()
        .add_node("a", |_s: Arc<Job>, _c: NodeContext| async {
            Ok::<_, BoxError>(Command::<Job>::new().goto("nope"))
        })
        .add_edge(START, "a")
        .compile()?;
    let err = g
        .invoke(Job::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::UnknownNode { ref name, ref from, .. } if name == "nope" && from == "a"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn goto_outside_declared_destinations_is_rejected() -> TestResult {
    let g = StateGraph::<Job>::new()
        .add_node_with(
            "a",
            |_s: Arc<Job>, _c: NodeContext| async {
                Ok::<_, BoxError>(Command::<Job>::new().goto("c"))
            },
            NodeOptions::new().destinations(["b"]),
        )
        .add_node("b", |_s: Arc<Job>, _c: NodeContext| async {
            Ok::<_, BoxError>(Job::update())
        })
        .add_node("c", |_s: Arc<Job>, _c: NodeContext| async {
            Ok::<_, BoxError>(Job::update())
        })
        .add_edge(START, "a")
        .add_edge(START, "c")
        .compile()?;
    let err = g
        .invoke(Job::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::UnknownRouteTarget { ref value, .. } if value == "c"),
        "{err}"
    );
    Ok(())
}

fn sub_node_to_parent(
    cmd: fn() -> Command<Job>,
) -> impl Fn(Arc<Job>, NodeContext) -> futures::future::Ready<Result<Command<Job>, BoxError>>
       + Send
       + Sync
       + 'static {
    move |_s, _c| futures::future::ready(Ok(Command::<Job>::to_parent(cmd())))
}

fn parent_with_child(
    child: CompiledGraph<Job>,
) -> Result<CompiledGraph<Job>, stategraph::CompileError> {
    StateGraph::<Job>::new()
        .add_subgraph_with(
            "sub",
            child,
            Checkpointing::Disabled,
            |_p: &Job| Job::update(),
            |_c: &Job| Job::update(),
            NodeOptions::new().destinations(["after", "worker", END]),
        )
        .add_node("after", |_s: Arc<Job>, _c: NodeContext| async {
            Ok::<_, BoxError>(Job::update().log(vec!["after".into()]))
        })
        .add_node("worker", |_s: Arc<Job>, c: NodeContext| async move {
            let i: u64 = c.arg()?;
            Ok::<_, BoxError>(Job::update().results(vec![i]))
        })
        .add_edge(START, "sub")
        .compile()
}

#[tokio::test]
async fn a_parent_command_applies_in_the_parent_as_if_the_subgraph_node_returned_it() -> TestResult
{
    let child = StateGraph::<Job>::new()
        .add_node(
            "inner",
            sub_node_to_parent(|| {
                Command::new()
                    .update(Job::update().log(vec!["from-sub".into()]))
                    .goto("after")
            }),
        )
        .add_edge(START, "inner")
        .compile()?;
    let out = parent_with_child(child)?
        .invoke(Job::update(), &RunConfig::new())
        .await?;
    assert_eq!(out.state.log, ["from-sub", "after"]);
    Ok(())
}

#[tokio::test]
async fn a_parent_command_with_update_sends_and_goto_loses_nothing() -> TestResult {
    let child = StateGraph::<Job>::new()
        .add_node(
            "inner",
            sub_node_to_parent(|| {
                Command::new()
                    .update(Job::update().log(vec!["from-sub".into()]))
                    .goto("after")
                    .goto(SendTo::new("worker", 7_u64))
                    .goto(SendTo::new("worker", 8_u64))
            }),
        )
        .add_edge(START, "inner")
        .compile()?;
    let out = parent_with_child(child)?
        .invoke(Job::update(), &RunConfig::new())
        .await?;
    assert_eq!(out.state.log, ["from-sub", "after"]);
    assert_eq!(out.state.results, [7, 8]);
    Ok(())
}

#[tokio::test]
async fn a_parent_command_from_depth_three_reaches_each_enclosing_graph() -> TestResult {
    // grandchild → child: the child applies it and sends its own command further up.
    let grandchild = StateGraph::<Job>::new()
        .add_node(
            "deep",
            sub_node_to_parent(|| {
                Command::new()
                    .update(Job::update().log(vec!["deep".into()]))
                    .goto("relay")
            }),
        )
        .add_edge(START, "deep")
        .compile()?;
    let child = StateGraph::<Job>::new()
        .add_subgraph_with(
            "grand",
            grandchild,
            Checkpointing::Disabled,
            |_p: &Job| Job::update(),
            |_c: &Job| Job::update(),
            NodeOptions::new().destinations(["relay"]),
        )
        .add_node("relay", |s: Arc<Job>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Command::<Job>::to_parent(
                Command::<Job>::new()
                    .update(Job::update().log(vec![format!("relay saw {:?}", s.log)]))
                    .goto("after"),
            ))
        })
        .add_edge(START, "grand")
        .compile()?;
    let out = parent_with_child(child)?
        .invoke(Job::update(), &RunConfig::new())
        .await?;
    assert_eq!(out.state.log, ["relay saw [\"deep\"]", "after"]);
    Ok(())
}

#[tokio::test]
async fn a_parent_command_at_the_root_is_a_typed_error() -> TestResult {
    let g = StateGraph::<Job>::new()
        .add_node("a", sub_node_to_parent(|| Command::new().goto("a")))
        .add_edge(START, "a")
        .compile()?;
    let err = g
        .invoke(Job::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::ParentCommand { ref node, .. } if node == "a"),
        "{err}"
    );
    Ok(())
}

#[derive(State, Clone, Default, Debug)]
pub struct Other {
    pub x: u32,
}

#[tokio::test]
async fn a_parent_command_for_the_wrong_state_type_is_a_typed_error() -> TestResult {
    let child = StateGraph::<Job>::new()
        .add_node("inner", |_s: Arc<Job>, _c: NodeContext| async {
            Ok::<_, BoxError>(Command::<Job>::to_parent(
                Command::<Other>::new().update(Other::update().x(1)),
            ))
        })
        .add_edge(START, "inner")
        .compile()?;
    let err = parent_with_child(child)?
        .invoke(Job::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::ParentCommand { ref reason, .. } if reason.contains("Other")),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_parent_command_wins_over_a_sibling_interrupt_in_the_child() -> TestResult {
    let child = StateGraph::<Job>::new()
        .add_node(
            "handoff",
            sub_node_to_parent(|| {
                Command::new()
                    .update(Job::update().log(vec!["handoff".into()]))
                    .goto("after")
            }),
        )
        .add_node("ask", |_s: Arc<Job>, c: NodeContext| async move {
            let _: String = c.interrupt("?")?;
            Ok::<_, BoxError>(Job::update())
        })
        .add_edge(START, "handoff")
        .add_edge(START, "ask")
        .compile()?;
    let g = parent_with_child(child)?
        .with_checkpointer(Arc::new(stategraph::checkpoints::MemorySaver::new()));
    let out = g
        .invoke(Job::update(), &RunConfig::new().thread("t"))
        .await?;
    assert!(!out.is_interrupted());
    assert_eq!(out.state.log, ["handoff", "after"]);
    Ok(())
}
