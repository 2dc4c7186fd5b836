//! The long-term store in a node's context: one store for every thread of a graph, seen by
//! the subgraphs it runs, and none when the graph has none.

use std::sync::Arc;

use stategraph::checkpoints::MemorySaver;
use stategraph::prelude::*;
use stategraph::store::{MemoryStore, Namespace, Store};

use crate::TestResult;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Note {
    pub write: String,
    pub read: String,
}

fn users() -> Result<Namespace, BoxError> {
    Ok(Namespace::new(["users", "alice"])?)
}

/// Writes `write` under the key `note` when it is set, then reads that key back into `read`.
async fn write_then_read(s: Arc<Note>, cx: NodeContext) -> Result<Note, BoxError> {
    let store = cx.store().ok_or("the node has no store")?;
    if !s.write.is_empty() {
        let value = serde_json::json!({ "text": s.write });
        store
            .put(
                &users()?,
                "note",
                value.as_object().cloned().unwrap_or_default(),
            )
            .await?;
    }
    let item = store.get(&users()?, "note").await?;
    let text = item
        .and_then(|i| i.value.get("text")?.as_str().map(str::to_owned))
        .unwrap_or_default();
    Ok(Note {
        write: s.write.clone(),
        read: text,
    })
}

fn note_graph() -> Result<CompiledGraph<Note>, stategraph::CompileError> {
    StateGraph::<Note>::new()
        .add_node("note", |s: Arc<Note>, cx: NodeContext| async move {
            let out = write_then_read(s, cx).await?;
            Ok::<_, BoxError>(Note::update().read(out.read))
        })
        .add_edge(START, "note")
        .compile()
}

#[tokio::test]
async fn a_fact_one_thread_stores_is_read_by_another_thread_of_the_graph() -> TestResult {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let graph = note_graph()?
        .with_checkpointer(Arc::new(MemorySaver::new()))
        .with_store(store.clone());
    let first = graph
        .invoke(
            Note::update().write("likes tea".to_owned()),
            &RunConfig::new().thread("t-1"),
        )
        .await?;
    assert_eq!(first.state.read, "likes tea");
    let second = graph
        .invoke(Note::update(), &RunConfig::new().thread("t-2"))
        .await?;
    assert_eq!(second.state.read, "likes tea");
    assert!(store.get(&users()?, "note").await?.is_some());
    Ok(())
}

#[tokio::test]
async fn a_subgraph_node_sees_the_parent_graphs_store() -> TestResult {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let value = serde_json::json!({ "text": "from the parent" });
    store
        .put(
            &users()?,
            "note",
            value.as_object().cloned().unwrap_or_default(),
        )
        .await?;
    // The child is compiled without a store: it reaches the parent's.
    let child = note_graph()?;
    assert!(child.store().is_none());
    let parent = StateGraph::<Note>::new()
        .add_subgraph(
            "child",
            child,
            Checkpointing::Inherit,
            |_p: &Note| Note::update(),
            |c: &Note| Note::update().read(c.read.clone()),
        )
        .add_edge(START, "child")
        .compile()?
        .with_store(store);
    let out = parent.invoke(Note::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.read, "from the parent");
    Ok(())
}

#[tokio::test]
async fn a_subgraph_uses_its_own_store_only_when_the_parent_has_none() -> TestResult {
    let (mine, theirs): (Arc<dyn Store>, Arc<dyn Store>) = (
        Arc::new(MemoryStore::default()),
        Arc::new(MemoryStore::default()),
    );
    for (store, text) in [(&mine, "the child's"), (&theirs, "the parent's")] {
        let value = serde_json::json!({ "text": text });
        store
            .put(
                &users()?,
                "note",
                value.as_object().cloned().unwrap_or_default(),
            )
            .await?;
    }
    let parent = |with: Option<Arc<dyn Store>>| -> Result<CompiledGraph<Note>, BoxError> {
        let child = note_graph()?.with_store(Arc::clone(&mine));
        let graph = StateGraph::<Note>::new()
            .add_subgraph(
                "child",
                child,
                Checkpointing::Inherit,
                |_p: &Note| Note::update(),
                |c: &Note| Note::update().read(c.read.clone()),
            )
            .add_edge(START, "child")
            .compile()?;
        Ok(match with {
            Some(store) => graph.with_store(store),
            None => graph,
        })
    };
    let alone = parent(None)?
        .invoke(Note::update(), &RunConfig::new())
        .await?;
    assert_eq!(alone.state.read, "the child's");
    let under = parent(Some(Arc::clone(&theirs)))?
        .invoke(Note::update(), &RunConfig::new())
        .await?;
    assert_eq!(under.state.read, "the parent's");
    Ok(())
}

#[tokio::test]
async fn a_graph_without_a_store_gives_its_nodes_none() -> TestResult {
    let graph = StateGraph::<Note>::new()
        .add_node("look", |_s: Arc<Note>, cx: NodeContext| async move {
            let seen = if cx.store().is_some() { "some" } else { "none" };
            Ok::<_, BoxError>(Note::update().read(seen.to_owned()))
        })
        .add_edge(START, "look")
        .compile()?;
    assert!(graph.store().is_none());
    let out = graph.invoke(Note::update(), &RunConfig::new()).await?;
    assert_eq!(out.state.read, "none");
    let stored = graph.with_store(Arc::new(MemoryStore::default()));
    assert!(stored.without_store().store().is_none());
    Ok(())
}
