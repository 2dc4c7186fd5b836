//! The graph travels with the file: a run stores its graph's shape once, content-addressed,
//! and a reader finds which graph made each checkpoint (decision 0050).

use std::sync::Arc;

use stategraph::checkpoints::graph_shape::EdgeKind;
use stategraph::checkpoints::{ListOptions, Namespace, Saver, SqliteSaver, ThreadId};
use stategraph::prelude::*;

use crate::superstep_semantics::{Log, LogUpdate};
use crate::TestResult;

fn push(
    s: &'static str,
) -> impl Fn(Arc<Log>, NodeContext) -> futures::future::Ready<Result<LogUpdate, BoxError>>
       + Send
       + Sync
       + 'static {
    move |_s, _c| futures::future::ready(Ok(Log::update().log(vec![s.to_owned()])))
}

fn one_node() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node_with("a", push("a"), NodeOptions::new().role("model"))
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
}

fn two_nodes() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("a", push("a"))
        .add_node("b", push("b"))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile()
}

fn count(path: &std::path::Path, table: &str) -> Result<i64, rusqlite::Error> {
    let conn = rusqlite::Connection::open(path)?;
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
}

#[tokio::test]
async fn a_graph_run_many_times_stores_its_shape_once_and_a_changed_graph_its_new_one() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("g.db");
    let saver: Arc<dyn Saver> = Arc::new(SqliteSaver::open(&path)?);
    let cfg = RunConfig::new().thread("t");
    let first = one_node()?.with_checkpointer(Arc::clone(&saver));
    for _ in 0..3 {
        first.invoke(Log::update(), &cfg).await?;
    }
    let t = ThreadId::new("t")?;
    let old_head = saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?[0]
        .id;
    let second = two_nodes()?.with_checkpointer(Arc::clone(&saver));
    second.invoke(Log::update(), &cfg).await?;
    saver.flush().await?;
    assert_eq!(count(&path, "sg_graphs")?, 2, "one row per distinct shape");
    assert_eq!(
        count(&path, "sg_thread_graphs")?,
        2,
        "one pointer per change"
    );
    let old = saver
        .graph_of(&t, Some(old_head))
        .await?
        .ok_or("no old shape")?;
    assert_eq!(old, *first.shape());
    assert_eq!(old.node("a").and_then(|n| n.role.as_deref()), Some("model"));
    let new = saver.graph_of(&t, None).await?.ok_or("no new shape")?;
    assert_eq!(new, *second.shape());
    assert!(new
        .edges
        .iter()
        .any(|e| e.from == "a" && e.to == "b" && e.kind == EdgeKind::Static));
    Ok(())
}

#[tokio::test]
async fn a_shape_lists_conditional_join_goto_edges_and_subgraphs() -> TestResult {
    let shape = crate::mermaid_export::sample()?.shape();
    let kinds = |k: EdgeKind| shape.edges.iter().filter(|e| e.kind == k).count();
    assert_eq!(kinds(EdgeKind::Conditional), 3);
    assert_eq!(kinds(EdgeKind::Join), 2);
    assert_eq!(kinds(EdgeKind::Goto), 2);
    let team = shape.node("team").ok_or("no team")?;
    let child = team.subgraph.as_deref().ok_or("team has no subgraph")?;
    assert_eq!(child.nodes.len(), 2);
    Ok(())
}

#[tokio::test]
async fn a_file_without_the_graph_tables_still_opens_and_has_no_shape() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("old.db");
    {
        let saver = Arc::new(SqliteSaver::open(&path)?);
        let g = one_node()?.with_checkpointer(saver.clone());
        g.invoke(Log::update(), &RunConfig::new().thread("t"))
            .await?;
        saver.close()?;
    }
    let conn = rusqlite::Connection::open(&path)?;
    conn.execute_batch("DROP TABLE sg_graphs; DROP TABLE sg_thread_graphs;")?;
    drop(conn);
    let ro = stategraph::checkpoints::inspect::open_existing_read_only(&path)?;
    let t = ThreadId::new("t")?;
    assert_eq!(ro.graph_of(&t, None).await?, None);
    assert!(!ro
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?
        .is_empty());
    Ok(())
}
