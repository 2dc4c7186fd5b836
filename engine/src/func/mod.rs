//! The functional API: a durable workflow written as one async Rust function.
//!
//! [`entrypoint`] turns `async fn(I, WorkflowContext) -> Result<O, BoxError>` into an
//! [`Entrypoint`]: a graph of one node over the [`Workflow`] state (its input and its
//! output, as JSON) that runs the function. Inside it, [`WorkflowContext::task`] runs a
//! piece of work whose result is recorded as it finishes, as a pending write of the node's
//! step (decision 0099): when the workflow runs again on the same thread, after a crash, an
//! interrupt or a retry, every task that had finished returns its recorded result without
//! running, in the order the function calls them. [`WorkflowContext::interrupt`] pauses the
//! workflow as a node's interrupt does, and a resume runs the function again from its start,
//! its finished tasks answering from the record.
//!
//! There is no second storage path: a workflow's thread is a graph thread (its checkpoints,
//! `get_state`, history, streaming and savers are the graph's), and [`Entrypoint::graph`] can
//! be a subgraph of another graph.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph::checkpoints::MemorySaver;
//! use stategraph::func::{entrypoint, WorkflowContext};
//! use stategraph::{BoxError, Resume, RunConfig};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let workflow = entrypoint("squares", |n: u64, cx: WorkflowContext| async move {
//!     let mut total = 0;
//!     for i in 0..n {
//!         total += cx.task("square", async move { Ok::<_, BoxError>(i * i) }).await?;
//!     }
//!     let approved: bool = cx.interrupt(format!("total {total}: approve?"))?;
//!     Ok::<_, BoxError>(if approved { total } else { 0 })
//! })?
//! .with_checkpointer(Arc::new(MemorySaver::new()));
//!
//! let config = RunConfig::new().thread("t1");
//! let paused = workflow.invoke(4, &config).await?;
//! assert_eq!(paused.output, None);
//! assert_eq!(paused.interrupts[0].value, "total 14: approve?");
//! // The resume runs the function again; its four tasks answer from the record.
//! let done = workflow.resume(Resume::value(true), &config).await?;
//! assert_eq!(done.output, Some(14));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod context;

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::{de::DeserializeOwned, Serialize};
use stategraph_checkpoints::{CheckpointId, Saver};

pub use context::WorkflowContext;

use crate::event::StreamMode;
use crate::node::NodeOptions;
use crate::run::{Input, RunConfig, RunOutcome};
use crate::stream::RunStream;
use crate::{
    BoxError, Command, CompileError, CompiledGraph, Interrupt, Resume, RunError, StateGraph, END,
    START,
};

/// The state of a workflow's thread: the input it was given and the value it returned, as
/// JSON (`null` until it returns).
#[derive(crate::State, Clone, Default, Debug, PartialEq)]
pub struct Workflow {
    /// The workflow's input.
    pub input: serde_json::Value,
    /// The workflow's return value.
    pub output: serde_json::Value,
}

/// How a workflow's run ended.
#[derive(Debug, Clone)]
pub struct WorkflowOutcome<O> {
    /// The value the workflow returned; `None` when it paused.
    pub output: Option<O>,
    /// The interrupts it paused on.
    pub interrupts: Vec<Interrupt>,
    /// The last checkpoint written, with a checkpointer.
    pub checkpoint: Option<CheckpointId>,
}

/// A durable workflow: an async function run as a one-node graph (see the [module](self)).
pub struct Entrypoint<I, O> {
    graph: CompiledGraph<Workflow>,
    _io: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for Entrypoint<I, O> {
    fn clone(&self) -> Self {
        Entrypoint {
            graph: self.graph.clone(),
            _io: PhantomData,
        }
    }
}

impl<I, O> std::fmt::Debug for Entrypoint<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entrypoint").finish_non_exhaustive()
    }
}

/// Make a workflow of `body`, named `name` (its node's name too).
///
/// # Errors
/// [`CompileError`] if `name` is not a valid node name.
pub fn entrypoint<I, O, F, Fut>(
    name: impl Into<String>,
    body: F,
) -> Result<Entrypoint<I, O>, CompileError>
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(I, WorkflowContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, BoxError>> + Send + 'static,
{
    let name = name.into();
    let body = Arc::new(body);
    let node = move |s: Arc<Workflow>, cx: crate::NodeContext| {
        let body = body.clone();
        async move {
            let input = I::deserialize(&s.input)
                .map_err(|e| format!("the workflow's input does not decode: {e}"))?;
            let output = body(input, WorkflowContext::new(cx)).await?;
            let output = serde_json::to_value(output)?;
            Ok::<_, BoxError>(Workflow::update().output(output))
        }
    };
    let options = NodeOptions {
        subtasks: true,
        ..NodeOptions::new()
    };
    let graph = StateGraph::<Workflow>::new()
        .named(name.clone())
        .add_node_with(name.clone(), node, options)
        .add_edge(START, name.clone())
        .add_edge(name, END)
        .compile()?;
    Ok(Entrypoint {
        graph,
        _io: PhantomData,
    })
}

impl<I, O> Entrypoint<I, O>
where
    I: Serialize,
    O: DeserializeOwned,
{
    /// The same workflow, checkpointing to `saver`.
    pub fn with_checkpointer(&self, saver: Arc<dyn Saver>) -> Self {
        Entrypoint {
            graph: self.graph.with_checkpointer(saver),
            _io: PhantomData,
        }
    }

    /// The graph that runs the workflow: for `get_state`, history, replay, or to add it to
    /// another graph as a subgraph.
    pub fn graph(&self) -> &CompiledGraph<Workflow> {
        &self.graph
    }

    /// The update that starts a run with `input`.
    ///
    /// # Errors
    /// [`RunError::Encode`] if `input` cannot be serialized.
    pub fn input(input: &I) -> Result<WorkflowUpdate, RunError> {
        let value = serde_json::to_value(input).map_err(|source| RunError::Encode {
            field: "input",
            source,
        })?;
        Ok(Workflow::update()
            .input(value)
            .output(serde_json::Value::Null))
    }

    /// Run the workflow on `input` (a new run of the thread, if `config` names one).
    ///
    /// # Errors
    /// The run's [`RunError`]; a failed task fails the run as a failed node does.
    pub async fn invoke(
        &self,
        input: I,
        config: &RunConfig,
    ) -> Result<WorkflowOutcome<O>, RunError> {
        let out = self.graph.invoke(Self::input(&input)?, config).await?;
        Self::outcome(out, config)
    }

    /// Answer the interrupts the workflow paused on and run it again from its start; its
    /// finished tasks return their recorded results.
    ///
    /// # Errors
    /// As [`Entrypoint::invoke`].
    pub async fn resume(
        &self,
        resume: Resume,
        config: &RunConfig,
    ) -> Result<WorkflowOutcome<O>, RunError> {
        let out = self
            .graph
            .invoke(Command::<Workflow>::resume(resume), config)
            .await?;
        Self::outcome(out, config)
    }

    /// Go on with the thread's run where it stopped (after a crash or a failure): the
    /// function runs again from its start, and every task that had finished returns its
    /// recorded result without running.
    ///
    /// # Errors
    /// As [`Entrypoint::invoke`].
    pub async fn continue_run(&self, config: &RunConfig) -> Result<WorkflowOutcome<O>, RunError> {
        let out = self.graph.invoke(Input::Continue, config).await?;
        Self::outcome(out, config)
    }

    /// Run the workflow on `input`, streaming its events as a graph's.
    ///
    /// # Errors
    /// [`RunError::Encode`] if `input` cannot be serialized.
    pub fn stream(
        &self,
        input: I,
        config: &RunConfig,
        mode: StreamMode,
    ) -> Result<RunStream<Workflow>, RunError> {
        Ok(self.graph.stream(Self::input(&input)?, config, mode))
    }

    fn outcome(
        out: RunOutcome<Workflow>,
        config: &RunConfig,
    ) -> Result<WorkflowOutcome<O>, RunError> {
        let output = if out.is_interrupted() {
            None
        } else {
            let decoded = O::deserialize(&out.state.output).map_err(|e| RunError::Decode {
                field: "the workflow's output".to_owned(),
                thread: config
                    .thread_name()
                    .and_then(|t| stategraph_checkpoints::ThreadId::new(t).ok()),
                detail: if out.state.output.is_null() && out.steps == 0 {
                    "the thread holds no run of this workflow to continue (none was started \
                     on it, or under durability async its start was lost in a crash: invoke \
                     it again)"
                        .to_owned()
                } else {
                    e.to_string()
                },
            })?;
            Some(decoded)
        };
        Ok(WorkflowOutcome {
            output,
            interrupts: out.interrupts,
            checkpoint: out.checkpoint,
        })
    }
}
