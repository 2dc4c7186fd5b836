//! Runnable examples for stategraph; see the `[[example]]` targets in this package.
//!
//! The library part holds what the docs' code shares ([`tally`]) and compiles every Rust block
//! of the README and of `docs/` as a doctest (the `docs` module, built for doctests only), so
//! that the documentation cannot go stale.

pub mod tally {
    //! The thread the guide `docs/guides/inspecting-and-replaying-threads.md` looks at: one
    //! node that appends its step index and updates a checksum, 30 times.

    use std::path::Path;
    use std::sync::Arc;

    use stategraph::checkpoints::SqliteSaver;
    use stategraph::prelude::*;

    /// The thread state.
    #[derive(State, Clone, Default, Debug, PartialEq)]
    pub struct Tally {
        /// One item per step: the step index (append reducer).
        #[reduce(append)]
        pub items: Vec<u64>,
        /// A running checksum over the items (last value).
        pub checksum: u64,
    }

    /// The graph: `step` runs until there are `steps` items.
    ///
    /// # Errors
    /// A graph that does not compile (it does).
    pub fn graph(steps: usize) -> Result<CompiledGraph<Tally>, BoxError> {
        Ok(StateGraph::<Tally>::new()
            .add_node("step", |s: Arc<Tally>, _ctx: NodeContext| async move {
                let i = s.items.len() as u64;
                Ok::<_, BoxError>(
                    Tally::update()
                        .items(vec![i])
                        .checksum(s.checksum.wrapping_mul(31).wrapping_add(i)),
                )
            })
            .add_edge(START, "step")
            .add_conditional_edges(
                "step",
                move |s: &Tally| if s.items.len() < steps { "step" } else { END },
                ["step", END],
            )
            .compile()?)
    }

    /// [`graph`] checkpointed in the SQLite file `db`, with the thread `demo` run to its end.
    ///
    /// # Errors
    /// The file cannot be opened; storage errors.
    pub async fn demo_thread(db: &Path) -> Result<CompiledGraph<Tally>, BoxError> {
        let graph = graph(30)?.with_checkpointer(Arc::new(SqliteSaver::open(db)?));
        graph
            .invoke(Tally::update(), &RunConfig::new().thread("demo"))
            .await?;
        Ok(graph)
    }
}

/// The README's and the docs' Rust blocks, compiled and run as doctests.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../README.md")]
    struct Readme;

    #[doc = include_str!("../docs/agent-runtime.md")]
    struct AgentRuntime;

    #[doc = include_str!("../docs/guides/inspecting-and-replaying-threads.md")]
    struct InspectingAndReplaying;

    #[doc = include_str!("../docs/guides/the-sales-review-run.md")]
    struct TheSalesReviewRun;

    #[doc = include_str!("../docs/guides/postgres.md")]
    struct Postgres;

    #[doc = include_str!("../docs/guides/scale-out.md")]
    struct ScaleOut;

    #[doc = include_str!("../docs/guides/server.md")]
    struct ServerGuide;

    #[doc = include_str!("../docs/langgraph-mapping.md")]
    struct LanggraphMapping;

    #[doc = include_str!("../docs/design.md")]
    struct Design;
}
