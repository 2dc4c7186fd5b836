//! stategraph: a durable state-graph engine for agent workflows.
//!
//! A graph is a set of nodes over a typed thread state. Each field of the state has a
//! reducer that merges the writes of one superstep. Nodes triggered in a step run
//! concurrently on one shared snapshot of the state; their writes are applied together at the
//! end of the step, in a deterministic order. With a checkpointer, every step of a thread is
//! stored, so a thread can be resumed after a failure, an interrupt or a crash.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph::prelude::*;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Chat {
//!     #[reduce(append)]
//!     log: Vec<String>,
//!     turns: u32,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let graph = StateGraph::<Chat>::new()
//!     .add_node("greet", |s: Arc<Chat>, _ctx: NodeContext| async move {
//!         Ok::<_, BoxError>(Chat::update().log(vec![format!("hello #{}", s.turns)]).turns(s.turns + 1))
//!     })
//!     .add_edge(START, "greet")
//!     .add_conditional_edges("greet", |s: &Chat| if s.turns < 3 { "greet" } else { END }, ["greet", END])
//!     .compile()?;
//!
//! let out = graph.invoke(Chat::update(), &RunConfig::new()).await?;
//! assert_eq!(out.state.log, ["hello #0", "hello #1", "hello #2"]);
//! # Ok::<(), stategraph::Error>(())
//! # }).unwrap();
//! ```

#[allow(unused_extern_crates)]
extern crate self as stategraph;

pub mod cache;
pub mod command;
pub mod context;
pub mod diff;
pub mod error;
pub mod event;
pub mod func;
pub mod graph;
pub mod handler;
pub mod managed;
mod mermaid;
pub mod node;
pub mod overwrite;
pub mod replay;
pub mod run;
pub mod state;
pub mod stream;
pub mod subgraph;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod timeout;
#[cfg(feature = "postgres")]
pub mod worker;

pub use command::{Command, Goto, Interrupt, Interrupted, Resume, Route, SendTo, END, START};
pub use context::{ContextError, ContextSchema, ContextValue, RouteContext};
pub use error::{BoxError, CompileError, Error, GraphProblem, RunError};
pub use event::{
    CheckpointEvent, Event, EventKind, MessagePart, NextTask, Shared, StreamMode, TaskStatus,
    TaskTrigger,
};
pub use graph::{CompiledGraph, StateGraph};
pub use handler::{ErrorHandler, FailureKind, HandledFailure, NodeError, HANDLED_ERRORS_KEY};
pub use node::{CancelToken, Node, NodeContext, NodeOptions, RetryPolicy};
pub use overwrite::Overwrite;
pub use run::{
    Durability, Input, RunConfig, RunOutcome, StateSnapshot, UsageMeter, DEFAULT_RECURSION_LIMIT,
};
pub use state::{Field, State};
pub use stategraph_checkpoints::TokenUsage;
pub use stream::RunStream;
pub use subgraph::{Checkpointing, ChildEnd};
pub use timeout::{TimeoutLimit, TimeoutPolicy};

pub use stategraph_checkpoints as checkpoints;
pub use stategraph_derive::State;
pub use stategraph_reducers as reducers;
pub use stategraph_reducers::List;
pub use stategraph_store as store;

#[doc(hidden)]
pub use serde;
#[doc(hidden)]
pub use serde_json;

/// The items most programs need.
pub mod prelude {
    pub use crate::checkpoints::{MemorySaver, Saver};
    pub use crate::{
        BoxError, Checkpointing, Command, CompiledGraph, Durability, Input, List, NodeContext,
        NodeOptions, Resume, RunConfig, State, StateGraph, StreamMode, END, START,
    };
}
