//! Managed values: how many steps a run has left before its recursion limit
//! ([`NodeContext::remaining_steps`]) and whether this is the last one a node can still route
//! on from ([`NodeContext::is_last_step`]) — LangGraph's `RemainingSteps` and `IsLastStep`.
//!
//! They are not state: no field holds them and no checkpoint stores them. They are computed
//! for each task from the step it runs in and the step its graph level stops after, with
//! LangGraph's numbers: `stop = s0 + recursion_limit + 1`, where `s0` is the step of the
//! run's `input` checkpoint for new input (−1 on a new thread, whose `__start__` step is 0),
//! or the first step a command (a resume, an update, a goto) or a continue runs. A task of
//! step `s` sees `remaining = stop − s` and `is_last = (s == stop − 1)`. On a new thread with
//! limit `L` the first node sees `L − 1`; the first task a command runs sees `L + 1` (there is
//! no `__start__` step before it).
//! A subgraph counts its own steps from its own start, against the same limit.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph::prelude::*;
//! use stategraph::RouteContext;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct S {
//!     #[reduce(append)]
//!     seen: Vec<i64>,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let graph = StateGraph::<S>::new()
//!     .add_node("tick", |_s: Arc<S>, cx: NodeContext| async move {
//!         Ok::<_, BoxError>(S::update().seen(vec![cx.remaining_steps()]))
//!     })
//!     .add_edge(START, "tick")
//!     .add_conditional_edges_with_context(
//!         "tick",
//!         |_s: &S, cx: &RouteContext<'_>| if cx.is_last_step() { END } else { "tick" },
//!         ["tick", END],
//!     )
//!     .compile()?;
//! let out = graph.invoke(S::update(), &RunConfig::new().recursion_limit(3)).await?;
//! assert_eq!(out.state.seen, vec![2, 1]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

use crate::context::RouteContext;
use crate::NodeContext;

/// A task's step and the last step its graph level may run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steps {
    pub(crate) step: i64,
    pub(crate) stop: i64,
}

impl Steps {
    fn remaining(self) -> i64 {
        self.stop.saturating_sub(self.step)
    }

    fn is_last(self) -> bool {
        self.step == self.stop.saturating_sub(1)
    }
}

impl NodeContext {
    /// Steps the run may still take after this one before it fails with
    /// [`RunError::RecursionLimit`](crate::RunError::RecursionLimit) (LangGraph's
    /// `RemainingSteps`): `1` on the last step from which a node can still route to another,
    /// `0` on the very last step.
    pub fn remaining_steps(&self) -> i64 {
        self.steps().remaining()
    }

    /// Whether this step is the last from which the run can still take one more step
    /// (LangGraph's `IsLastStep`: `remaining_steps() == 1`). A node that sees it should
    /// answer rather than route to another node that would call a model.
    pub fn is_last_step(&self) -> bool {
        self.steps().is_last()
    }

    fn steps(&self) -> Steps {
        Steps {
            step: self.inner.step,
            stop: self.inner.stop,
        }
    }
}

impl RouteContext<'_> {
    /// [`NodeContext::remaining_steps`] of the step the router's node ran in.
    pub fn remaining_steps(&self) -> i64 {
        self.steps.remaining()
    }

    /// [`NodeContext::is_last_step`] of the step the router's node ran in.
    pub fn is_last_step(&self) -> bool {
        self.steps.is_last()
    }

    /// The step the router's node ran in.
    pub fn step(&self) -> i64 {
        self.steps.step
    }
}
