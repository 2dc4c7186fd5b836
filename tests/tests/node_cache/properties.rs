//! The cache's law: for a pure node, a hit equals a re-run — the same update streamed and
//! the same final state — whatever the input.

use std::sync::Arc;

use futures::StreamExt;
use proptest::prelude::*;
use stategraph::cache::CachePolicy;
use stategraph::prelude::*;
use stategraph::EventKind;

use super::{cached, memory_cache, SUpdate, S};

/// A pure node of the whole state: its update depends on `x`, `y` and the log.
fn pure_graph() -> CompiledGraph<S> {
    StateGraph::<S>::new()
        .add_node_with(
            "pure",
            |s: Arc<S>, _cx: NodeContext| async move {
                let sum: i64 = s.log.iter().fold(0i64, |a, b| a.wrapping_add(*b));
                Ok::<_, BoxError>(
                    S::update()
                        .log(vec![s.x.wrapping_mul(3).wrapping_sub(s.y), sum])
                        .y(s.y.wrapping_add(1)),
                )
            },
            NodeOptions::new().cache(CachePolicy::new()),
        )
        .add_edge(START, "pure")
        .add_edge("pure", END)
        .compile()
        .expect("the graph compiles")
}

/// The final state and the streamed updates (as JSON, with their cached flags) of a run.
async fn run(graph: &CompiledGraph<S>, input: SUpdate) -> (S, Vec<(serde_json::Value, bool)>) {
    let mut stream = graph.stream(input, &RunConfig::new(), StreamMode::updates());
    let mut updates = Vec::new();
    while let Some(ev) = stream.next().await {
        if let EventKind::Updates { update, cached, .. } = ev.kind {
            updates.push((update.to_json().expect("json"), cached));
        }
    }
    let out = stream.outcome().await.expect("the run finishes");
    ((*out.state).clone(), updates)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_cache_hit_equals_a_re_run_for_pure_nodes(
        x in any::<i64>(),
        y in any::<i64>(),
        log in proptest::collection::vec(any::<i64>(), 0..6),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async {
            let input = || S::update().x(x).y(y).log(log.clone());
            let plain = pure_graph();
            let (cache, clock) = memory_cache();
            let with_cache = cached(&plain, &cache, &clock);
            let (ran_state, ran_updates) = run(&plain, input()).await;
            let (miss_state, miss_updates) = run(&with_cache, input()).await;
            let (hit_state, hit_updates) = run(&with_cache, input()).await;
            prop_assert_eq!(&miss_state, &ran_state);
            prop_assert_eq!(&hit_state, &ran_state);
            prop_assert_eq!(&miss_updates, &ran_updates);
            let hit: Vec<_> = hit_updates.iter().map(|(u, _)| u.clone()).collect();
            let ran: Vec<_> = ran_updates.iter().map(|(u, _)| u.clone()).collect();
            prop_assert_eq!(hit, ran);
            prop_assert!(hit_updates.iter().all(|(_, cached)| *cached), "the second run is a hit");
            Ok(())
        })?;
    }
}
