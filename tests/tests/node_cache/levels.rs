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

#[tokio::test]
async fn a_graphs_node_defaults_give_its_nodes_a_cache_policy_unless_they_set_one() -> TestResult {
    let (defaulted, own) = (Counter::default(), Counter::default());
    let node = |runs: &Counter| {
        let runs = runs.clone();
        move |s: Arc<S>, _cx: NodeContext| {
            runs.hit();
            async move { Ok::<_, BoxError>(S::update().log(vec![s.x])) }
        }
    };
    // The default caches every node; `own` keys all inputs alike, so its second run hits
    // even with a new input, where the defaulted node (keyed by its input) runs again.
    let graph = StateGraph::<S>::new()
        .set_node_defaults(NodeOptions::new().cache(CachePolicy::new()))
        .add_node("defaulted", node(&defaulted))
        .add_node_with(
            "own",
            node(&own),
            NodeOptions::new().cache(CachePolicy::new().key(|_s: &S, _arg| "same".to_owned())),
        )
        .add_edge(START, "defaulted")
        .add_edge(START, "own")
        .add_edge("defaulted", END)
        .add_edge("own", END)
        .compile()?;
    let (cache, clock) = memory_cache();
    let graph = cached(&graph, &cache, &clock);
    for x in [1, 1, 2] {
        graph.invoke(S::update().x(x), &RunConfig::new()).await?;
    }
    assert_eq!(
        defaulted.get(),
        2,
        "inputs 1 and 2 ran; the second 1 hit the default policy"
    );
    assert_eq!(own.get(), 1, "the node's own key made every input the same");
    Ok(())
}
