//! Subgraphs: a compiled graph running as a node of another graph.

use std::sync::Arc;

use futures::future::BoxFuture;
use stategraph_checkpoints::WriteKind;

use crate::command::ParentCommand;
use crate::graph::{CompiledGraph, NodeRun, TaskOutput};
use crate::node::NodeResult;
use crate::run::{GraphLevel, GraphLevelEnd, Input, RunLoop, RunOutcome};
use crate::{Command, NodeContext, RunError, State};

/// How a subgraph's steps are checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checkpointing {
    /// Use the parent's checkpointer, in a namespace scoped to the parent task
    /// (`node:task_id`): each parent task starts a fresh child history, and an interrupt
    /// inside the child resumes where it stopped.
    #[default]
    Inherit,
    /// Use the parent's checkpointer in a namespace without task id (`node`): the child's
    /// state carries over from one parent invocation to the next on the same thread.
    Own,
    /// No checkpoints at all (ephemeral, as for subagents): nothing is written to any saver,
    /// and an interrupt inside it is an error.
    Disabled,
}

type MapFn<A, B> = Arc<dyn Fn(&A) -> B + Send + Sync>;

/// The child's input from the parent's state and the task's `Send` argument (`None` when the
/// task was not started by a `Send`); `Err` names why the argument does not fit.
pub(crate) type InputFn<S, C> = Arc<
    dyn Fn(&S, Option<&serde_json::Value>) -> Result<<C as State>::Update, String> + Send + Sync,
>;

pub(crate) struct SubgraphNode<S: State, C: State> {
    graph: CompiledGraph<C>,
    mode: Checkpointing,
    input: InputFn<S, C>,
    output: MapFn<C, S::Update>,
}

impl<S: State, C: State> SubgraphNode<S, C> {
    pub(crate) fn new(
        graph: CompiledGraph<C>,
        mode: Checkpointing,
        input: InputFn<S, C>,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        SubgraphNode {
            graph,
            mode,
            input,
            output: Arc::new(output),
        }
    }
}

/// An input mapping that reads the parent's state only: a task started by a `Send` with an
/// argument is refused (the argument would be dropped).
pub(crate) fn state_only<S: State, C: State>(
    input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
) -> InputFn<S, C> {
    Arc::new(
        move |state: &S, arg: Option<&serde_json::Value>| match arg {
            None => Ok(input(state)),
            Some(_) => Err(
                "this subgraph node maps only the parent's state; add it with \
             `add_subgraph_sent` to map a Send argument into the child's input"
                    .to_owned(),
            ),
        },
    )
}

impl<S: State, C: State> NodeRun<S> for SubgraphNode<S, C> {
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> BoxFuture<'static, NodeResult<S>> {
        let graph = self.graph.clone();
        let mode = self.mode;
        let input = self.input.clone();
        let output = self.output.clone();
        Box::pin(async move {
            let arg = ctx.inner.arg.clone();
            let node = ctx.node().to_owned();
            let child_input = move || {
                input(&state, arg.as_deref()).map_err(|detail| RunError::SendArg { node, detail })
            };
            match run_child(&graph, mode, &ctx, child_input).await {
                Ok(GraphLevelEnd::Done(outcome)) if outcome.is_interrupted() => {
                    NodeResult::Interrupted(outcome.interrupts)
                }
                Ok(GraphLevelEnd::Done(outcome)) => NodeResult::Output(TaskOutput {
                    updates: vec![output(&outcome.state)],
                    goto: Vec::new(),
                    parents: Vec::new(),
                    handled: None,
                }),
                Ok(GraphLevelEnd::ToParent(cmds)) => match parent_output(cmds, ctx.node()) {
                    Ok(out) => NodeResult::Output(out),
                    Err(e) => NodeResult::Child(e),
                },
                Err(e) => NodeResult::Child(e),
            }
        })
    }
}

impl<C: State> CompiledGraph<C> {
    /// Run this graph as the child of the running task `ctx`, as a node added with
    /// [`StateGraph::add_subgraph`](crate::StateGraph::add_subgraph) runs its graph: on the
    /// task's thread and run (its resume values, cancellation and event stream), checkpointed
    /// as `mode` says in a namespace under the task's, and re-entered where it stopped when
    /// the task runs again after an interrupt inside it (`input` is then not called).
    ///
    /// This is for a node that wraps a graph with code of its own around it. The child's
    /// interrupts come back in the outcome: return them as [`Interrupted`](crate::Interrupted)
    /// to pause the parent (the next run resumes them through this same call).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::{Checkpointing, Interrupted, NodeContext, State, StateGraph, END, START};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Inner { n: i64 }
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Outer { total: i64 }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let inner = StateGraph::<Inner>::new()
    ///     .add_node("double", |s: Arc<Inner>, _cx: NodeContext| async move {
    ///         Ok::<_, stategraph::BoxError>(Inner::update().n(s.n * 2))
    ///     })
    ///     .add_edge(START, "double")
    ///     .add_edge("double", END)
    ///     .compile()?;
    /// let outer = StateGraph::<Outer>::new()
    ///     .add_node("wrap", move |s: Arc<Outer>, cx: NodeContext| {
    ///         let inner = inner.clone();
    ///         async move {
    ///             let out = inner
    ///                 .run_in_task(&cx, Checkpointing::Inherit, || Inner::update().n(s.total + 1))
    ///                 .await?;
    ///             if out.is_interrupted() {
    ///                 return Err(Interrupted { interrupts: out.interrupts }.into());
    ///             }
    ///             Ok::<_, stategraph::BoxError>(Outer::update().total(out.state.n))
    ///         }
    ///     })
    ///     .add_edge(START, "wrap")
    ///     .add_edge("wrap", END)
    ///     .compile()?;
    /// let out = outer.invoke(Outer::update().total(4), &Default::default()).await?;
    /// assert_eq!(out.state.total, 10);
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// The child run's [`RunError`]; [`RunError::ParentCommand`] when a task of the child sent
    /// a command to the parent graph (only a node added with `add_subgraph` applies those).
    pub async fn run_in_task(
        &self,
        ctx: &NodeContext,
        mode: Checkpointing,
        input: impl FnOnce() -> C::Update,
    ) -> Result<RunOutcome<C>, RunError> {
        match run_child(self, mode, ctx, || Ok(input())).await? {
            GraphLevelEnd::Done(outcome) => Ok(outcome),
            GraphLevelEnd::ToParent(_) => Err(RunError::ParentCommand {
                node: ctx.node().to_owned(),
                reason: "the graph runs inside the node's code (`run_in_task`), which cannot \
                         apply it; add the graph with `add_subgraph`"
                    .to_owned(),
            }),
        }
    }
}

/// How a graph run inside a task ended ([`CompiledGraph::run_in_task_or_parent`]).
pub enum ChildEnd<C: State, P: State> {
    /// It finished, or paused on interrupts (see [`RunOutcome::is_interrupted`]).
    Done(RunOutcome<C>),
    /// A step of it sent commands to the graph enclosing the task's node
    /// ([`Command::to_parent`]), one per task that sent one, in task order: the child's run
    /// ends there, and the node returns them as its own.
    ToParent(Vec<Command<P>>),
}

impl<C: State, P: State> std::fmt::Debug for ChildEnd<C, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildEnd::Done(outcome) => f
                .debug_struct("Done")
                .field("interrupted", &outcome.is_interrupted())
                .finish_non_exhaustive(),
            ChildEnd::ToParent(cmds) => f.debug_tuple("ToParent").field(&cmds.len()).finish(),
        }
    }
}

impl<C: State> CompiledGraph<C> {
    /// [`CompiledGraph::run_in_task`] for a node over `P` that applies what the child sends
    /// to its parent graph: a child step whose tasks return [`Command::to_parent`] ends the
    /// child's run with those commands ([`ChildEnd::ToParent`]), for the node to return.
    ///
    /// # Errors
    /// As [`CompiledGraph::run_in_task`]; [`RunError::ParentCommand`] when a command is for a
    /// state other than `P`.
    pub async fn run_in_task_or_parent<P: State>(
        &self,
        ctx: &NodeContext,
        mode: Checkpointing,
        input: impl FnOnce() -> C::Update,
    ) -> Result<ChildEnd<C, P>, RunError> {
        match run_child(self, mode, ctx, || Ok(input())).await? {
            GraphLevelEnd::Done(outcome) => Ok(ChildEnd::Done(outcome)),
            GraphLevelEnd::ToParent(cmds) => cmds
                .into_iter()
                .map(|pc| downcast_parent::<P>(pc, ctx.node()))
                .collect::<Result<Vec<_>, _>>()
                .map(ChildEnd::ToParent),
        }
    }
}

/// A command for the parent graph, as the parent's `Command<S>`.
fn downcast_parent<S: State>(pc: ParentCommand, node: &str) -> Result<Command<S>, RunError> {
    let type_name = pc.type_name;
    pc.command
        .downcast::<Command<S>>()
        .map(|cmd| *cmd)
        .map_err(|_| RunError::ParentCommand {
            node: node.to_owned(),
            reason: format!(
                "its command is for state {type_name}, and the parent's state is {}",
                std::any::type_name::<S>()
            ),
        })
}

/// Where the child graph of the task `ctx` checkpoints under `mode`.
fn child_level(mode: Checkpointing, ctx: &NodeContext) -> GraphLevel {
    let parent = &ctx.inner.scope;
    let node = ctx.node();
    let (ns, saver, ephemeral) = match mode {
        Checkpointing::Inherit => (
            parent.ns.child(&format!("{node}:{}", ctx.task_id())),
            parent.saver.clone(),
            parent.ephemeral,
        ),
        Checkpointing::Own => (
            parent.ns.child(node),
            parent.saver.clone(),
            parent.ephemeral,
        ),
        Checkpointing::Disabled => (
            parent.ns.child(&format!("{node}:{}", ctx.task_id())),
            None,
            true,
        ),
    };
    GraphLevel {
        ns,
        saver,
        ephemeral,
        is_root: false,
        store: parent.store.clone(),
        cache: ctx.inner.run.cache.clone(),
    }
}

/// Whether the child at `level` stopped inside (interrupt, failure, crash) and is re-entered
/// instead of started over. Under `Inherit` the namespace belongs to this very task, so an
/// unfinished child can only be an earlier attempt of it; under `Own` the history is shared
/// across invocations, so only a task that paused or failed before re-enters.
async fn child_resumes(
    mode: Checkpointing,
    ctx: &NodeContext,
    level: &GraphLevel,
) -> Result<bool, RunError> {
    let may_resume = match mode {
        Checkpointing::Inherit => true,
        Checkpointing::Own => ctx.inner.resumed,
        Checkpointing::Disabled => false,
    };
    let (Some(saver), Some(thread), true) = (&level.saver, &ctx.inner.run.thread, may_resume)
    else {
        return Ok(false);
    };
    let Some(head) = saver.get(thread, &level.ns, None).await? else {
        return Ok(false);
    };
    let unfinished =
        !head.checkpoint.control.branches.is_empty() || !head.checkpoint.control.sends.is_empty();
    let paused = head
        .pending
        .iter()
        .any(|w| matches!(w.kind, WriteKind::Interrupt { .. } | WriteKind::Error(_)));
    Ok(unfinished || paused)
}

/// Run the child graph for the task `ctx`: continued where it stopped, or on new input.
async fn run_child<C: State>(
    graph: &CompiledGraph<C>,
    mode: Checkpointing,
    ctx: &NodeContext,
    input: impl FnOnce() -> Result<C::Update, RunError>,
) -> Result<GraphLevelEnd<C>, RunError> {
    let mut level = child_level(mode, ctx);
    if level.store.is_none() {
        level.store = graph.store.clone();
    }
    if level.cache.is_none() {
        level.cache = graph.cache.clone();
    }
    let child_input = if child_resumes(mode, ctx, &level).await? {
        Input::Continue
    } else {
        Input::Update(input()?)
    };
    let shared = ctx.inner.run.clone();
    RunLoop::start(graph, shared, level, child_input, None)
        .await?
        .run()
        .await
}

/// The parent task's output made of the commands the child addressed to the parent graph.
fn parent_output<S: State>(
    cmds: Vec<ParentCommand>,
    node: &str,
) -> Result<TaskOutput<S>, RunError> {
    let mut out = TaskOutput::default();
    for pc in cmds {
        let Command {
            update,
            goto,
            parent,
            ..
        } = downcast_parent::<S>(pc, node)?;
        out.updates.extend(update);
        out.goto.extend(goto);
        out.parents.extend(parent);
    }
    Ok(out)
}
