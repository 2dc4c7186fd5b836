//! The graph the run-queue tests run: `a → b → c`, each node appending `label/node` to the
//! log after a pause (a model call's wait) and counting its runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use stategraph::prelude::*;
use stategraph::CompileError;

/// A run's log and the label its input gives it.
#[derive(stategraph::State, Clone, Default, Debug, PartialEq)]
pub struct Steps {
    /// `label/node` for each node run, in order.
    #[reduce(append)]
    pub log: Vec<String>,
    /// The run's label (its input).
    pub label: String,
}

/// `a → b → c`, each node waiting `pause`, counting itself in `runs`, and appending
/// `label/node` to the log.
///
/// # Errors
/// None in practice (the graph is fixed); a compile error if it ever stopped compiling.
pub fn steps(
    pause: Duration,
    runs: Arc<AtomicUsize>,
) -> Result<CompiledGraph<Steps>, CompileError> {
    let node = |name: &'static str| {
        let runs = runs.clone();
        move |s: Arc<Steps>, _ctx: NodeContext| {
            let runs = runs.clone();
            async move {
                tokio::time::sleep(pause).await;
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(Steps::update().log(vec![format!("{}/{name}", s.label)]))
            }
        }
    };
    StateGraph::<Steps>::new()
        .add_node("a", node("a"))
        .add_node("b", node("b"))
        .add_node("c", node("c"))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .compile()
}
