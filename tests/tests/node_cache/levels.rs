//! The cache across graph levels: a subgraph's cached node uses the root graph's cache.

use std::sync::Arc;

use stategraph::cache::CachePolicy;
use stategraph::prelude::*;
use stategraph::Checkpointing;

use super::{cached, double_graph, memory_cache, Counter, TestResult, S};

#[tokio::test]
async fn a_subgraphs_cached_node_uses_the_root_graphs_cache() -> TestResult {
    let runs = Counter::default();
    let child = double_graph(&runs, CachePolicy::new());
    let parent = StateGraph::<S>::new()
        .add_subgraph(
            "child",
            child,
            Checkpointing::Inherit,
            |s: &S| S::update().x(s.x),
            |c: &S| S::update().log(c.log.clone()),
        )
        .add_edge(START, "child")
        .add_edge("child", END)
        .compile()?;
    let (cache, clock) = memory_cache();
    let parent = cached(&parent, &cache, &clock);
    for _ in 0..2 {
        let out = parent.invoke(S::update().x(5), &RunConfig::new()).await?;
        assert_eq!(out.state.log, [10]);
    }
    assert_eq!(runs.get(), 1, "the second run's child node was a hit");
    // The entry is the subgraph's (its graph name and node), so the subgraph clears it.
    let child = double_graph(&runs, CachePolicy::new()).with_cache(Arc::clone(&cache));
    assert_eq!(child.clear_cache(&["double"]).await?, 1);
    Ok(())
}
