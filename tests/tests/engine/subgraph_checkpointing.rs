//! Subgraphs: checkpointing inherited, own or disabled; interrupts bubble up and resume
//! re-enters the child where it stopped.

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::RunError;
use stategraph_tests::RecordingSaver;

use crate::superstep_semantics::Log;
use crate::{Counter, TestResult};

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Child {
    #[reduce(append)]
    pub notes: Vec<String>,
    pub topic: String,
}

fn child_graph(
    prep_runs: Counter,
    ask: bool,
) -> Result<CompiledGraph<Child>, stategraph::CompileError> {
    StateGraph::<Child>::new()
        .add_node("prep", move |s: Arc<Child>, _c: NodeContext| {
            prep_runs.hit();
            async move {
                Ok::<_, BoxError>(Child::update().notes(vec![format!(
                    "prep {} (seen {})",
                    s.topic,
                    s.notes.len()
                )]))
            }
        })
        .add_node("ask", move |_s: Arc<Child>, c: NodeContext| async move {
            let answer: String = if ask {
                c.interrupt("approve?")?
            } else {
                "auto".to_owned()
            };
            Ok::<_, BoxError>(Child::update().notes(vec![format!("answer {answer}")]))
        })
        .add_edge(START, "prep")
        .add_edge("prep", "ask")
        .add_edge("ask", END)
        .compile()
}

fn parent(
    child: CompiledGraph<Child>,
    mode: Checkpointing,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_subgraph(
            "sub",
            child,
            mode,
            |p: &Log| Child::update().topic(format!("topic{}", p.log.len())),
            |c: &Child| Log::update().log(c.notes.clone()),
        )
        .add_node("after", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().log(vec!["after".into()]))
        })
        .add_edge(START, "sub")
        .add_edge("sub", "after")
        .add_edge("after", END)
        .compile()
}

#[tokio::test]
async fn an_interrupt_in_a_subgraph_bubbles_up_and_resume_reenters_the_child_where_it_stopped(
) -> TestResult {
    let prep = Counter::default();
    let saver = RecordingSaver::new();
    let g = parent(child_graph(prep.clone(), true)?, Checkpointing::Inherit)?
        .with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    let paused = g.invoke(Log::update(), &cfg).await?;
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.interrupts[0].node, "ask");
    assert_eq!(paused.interrupts[0].value, serde_json::json!("approve?"));

    let done = g
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    assert_eq!(
        done.state.log,
        ["prep topic0 (seen 0)", "answer yes", "after"]
    );
    assert_eq!(prep.get(), 1, "the child's finished step is not run again");
    Ok(())
}

#[tokio::test]
async fn an_inherited_subgraph_keeps_a_history_per_parent_task() -> TestResult {
    let saver = RecordingSaver::new();
    let g = parent(
        child_graph(Counter::default(), false)?,
        Checkpointing::Inherit,
    )?
    .with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let second = g.invoke(Log::update(), &cfg).await?;
    // A fresh child per parent task: it saw no notes of the first invocation.
    assert!(
        second
            .state
            .log
            .iter()
            .any(|l| l.starts_with("prep topic3 (seen 0)")),
        "{:?}",
        second.state.log
    );
    let thread = stategraph::checkpoints::ThreadId::new("t")?;
    let namespaces = saver.inner.namespaces(&thread);
    let child_ns: Vec<_> = namespaces.iter().filter(|ns| !ns.is_root()).collect();
    assert_eq!(child_ns.len(), 2, "{namespaces:?}");
    assert!(
        child_ns.iter().all(|ns| ns.as_str().starts_with("sub:")),
        "{namespaces:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_subgraph_with_its_own_history_carries_state_across_invocations() -> TestResult {
    let saver = RecordingSaver::new();
    let g = parent(child_graph(Counter::default(), false)?, Checkpointing::Own)?
        .with_checkpointer(saver.shared());
    let cfg = RunConfig::new().thread("t");
    g.invoke(Log::update(), &cfg).await?;
    let second = g.invoke(Log::update(), &cfg).await?;
    // The child kept its two notes from the first invocation.
    assert!(
        second.state.log.iter().any(|l| l == "prep topic3 (seen 2)"),
        "{:?}",
        second.state.log
    );
    let thread = stategraph::checkpoints::ThreadId::new("t")?;
    let namespaces = saver.inner.namespaces(&thread);
    assert_eq!(
        namespaces.iter().map(|n| n.as_str()).collect::<Vec<_>>(),
        ["", "sub"]
    );
    Ok(())
}

#[tokio::test]
async fn a_subgraph_with_checkpointing_disabled_writes_nothing_to_any_saver() -> TestResult {
    let saver = RecordingSaver::new();
    let g = parent(
        child_graph(Counter::default(), false)?,
        Checkpointing::Disabled,
    )?
    .with_checkpointer(saver.shared());
    let out = g
        .invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    assert_eq!(
        out.state.log,
        ["prep topic0 (seen 0)", "answer auto", "after"]
    );
    let puts = saver.puts();
    assert!(!puts.is_empty(), "the parent is checkpointed");
    assert!(
        puts.iter().all(|p| p.ns.is_root()),
        "a child checkpoint was written"
    );
    assert!(saver.pending_calls().iter().all(|(ns, _, _)| ns.is_root()));
    Ok(())
}

#[tokio::test]
async fn a_saver_attached_to_a_disabled_subgraph_receives_nothing() -> TestResult {
    // The child graph carries a saver of its own; as a disabled subgraph it must not use it,
    // and as an inheriting one it uses the parent's.
    let own = RecordingSaver::new();
    let parent_saver = RecordingSaver::new();
    let child = child_graph(Counter::default(), false)?.with_checkpointer(own.shared());
    let g =
        parent(child.clone(), Checkpointing::Disabled)?.with_checkpointer(parent_saver.shared());
    g.invoke(Log::update(), &RunConfig::new().thread("t"))
        .await?;
    assert!(own.puts().is_empty());
    assert!(parent_saver.puts().iter().all(|p| p.ns.is_root()));

    let g = parent(child, Checkpointing::Inherit)?.with_checkpointer(parent_saver.shared());
    g.invoke(Log::update(), &RunConfig::new().thread("t2"))
        .await?;
    assert!(own.puts().is_empty());
    assert!(parent_saver.puts().iter().any(|p| !p.ns.is_root()));
    Ok(())
}

#[tokio::test]
async fn an_interrupt_inside_a_subgraph_with_checkpointing_disabled_is_a_typed_error() -> TestResult
{
    let saver = RecordingSaver::new();
    let g = parent(
        child_graph(Counter::default(), true)?,
        Checkpointing::Disabled,
    )?
    .with_checkpointer(saver.shared());
    let err = g
        .invoke(Log::update(), &RunConfig::new().thread("t"))
        .await
        .err()
        .ok_or("expected error")?;
    assert!(
        matches!(err, RunError::InterruptInEphemeralSubgraph { ref subgraph } if subgraph.as_str().starts_with("sub:")),
        "{err}"
    );
    Ok(())
}

/// A parent whose `fan` node sends 1, 2 and 3 to the subgraph node `sub`.
fn fan_out(
    build: impl FnOnce(StateGraph<Log>) -> StateGraph<Log>,
) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "fan",
            |_s: Arc<Log>, _c: NodeContext| async {
                Ok::<_, BoxError>(
                    Command::<Log>::new()
                        .goto_all((1u64..=3).map(|i| stategraph::SendTo::new("sub", i))),
                )
            },
            NodeOptions::new().destinations(["sub"]),
        )
        .add_edge(START, "fan")
        .add_edge("sub", END);
    build(g).compile()
}

fn echo_child() -> Result<CompiledGraph<Child>, stategraph::CompileError> {
    StateGraph::<Child>::new()
        .add_node("echo", |s: Arc<Child>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Child::update().notes(vec![format!("got {}", s.topic)]))
        })
        .add_edge(START, "echo")
        .add_edge("echo", END)
        .compile()
}

#[tokio::test]
async fn each_send_to_a_subgraph_node_maps_its_own_argument_into_the_child() -> TestResult {
    let child = echo_child()?;
    let g = fan_out(|g| {
        g.add_subgraph_sent(
            "sub",
            child,
            Checkpointing::Disabled,
            |_p: &Log, n: Option<u64>| Child::update().topic(format!("{n:?}")),
            |c: &Child| Log::update().log(c.notes.clone()),
        )
    })?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    let mut got = out.state.log.clone();
    got.sort();
    assert_eq!(got, ["got Some(1)", "got Some(2)", "got Some(3)"]);
    Ok(())
}

#[tokio::test]
async fn a_send_argument_to_a_state_only_subgraph_is_refused_not_dropped() -> TestResult {
    let child = echo_child()?;
    let g = fan_out(|g| {
        g.add_subgraph(
            "sub",
            child,
            Checkpointing::Disabled,
            |p: &Log| Child::update().topic(format!("{}", p.log.len())),
            |c: &Child| Log::update().log(c.notes.clone()),
        )
    })?;
    let err = g
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("the argument was dropped")?;
    assert!(
        matches!(&err, RunError::SendArg { node, detail } if node == "sub" && detail.contains("add_subgraph_sent")),
        "{err}"
    );
    Ok(())
}
