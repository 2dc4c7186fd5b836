//! The graph builder [`StateGraph`] and the immutable [`CompiledGraph`] it compiles to.

mod compile;
mod compiled;
mod context;
mod control_order;
mod defaults;
mod node_run;
mod shape;
mod validate;

use std::sync::Arc;

use crate::command::Route;
use crate::error::CompileError;
use crate::node::{Node, NodeOptions};
use crate::subgraph::{Checkpointing, SubgraphNode};
use crate::State;

pub use compiled::CompiledGraph;
pub(crate) use compiled::{CompiledNode, GraphInner};
pub(crate) use control_order::Channel;
use node_run::UserNode;
pub(crate) use node_run::{NodeRun, TaskOutput};

/// A conditional edge's router, with its result made a [`Route`].
type RouterFn<S> = Arc<dyn Fn(&S, &crate::RouteContext<'_>) -> Route + Send + Sync>;

/// A node as declared, before compiling.
struct NodeSpec<S: State> {
    name: String,
    run: Arc<dyn NodeRun<S>>,
    options: NodeOptions,
    subgraph: Option<Arc<dyn crate::mermaid::Render>>,
}

/// A conditional edge as declared, before compiling.
struct BranchSpec<S: State> {
    from: String,
    router: RouterFn<S>,
    targets: Vec<String>,
}

/// Builds a graph over state `S`: nodes, edges, conditional edges, fan-in joins, static
/// interrupts. [`StateGraph::compile`] checks it and reports every problem at once.
///
/// ```
/// use std::sync::Arc;
/// use stategraph::{NodeContext, State, StateGraph, END, START};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Count { n: u32 }
///
/// let graph = StateGraph::<Count>::new()
///     .add_node("inc", |s: Arc<Count>, _ctx: NodeContext| async move {
///         Ok::<_, stategraph::BoxError>(Count::update().n(s.n + 1))
///     })
///     .add_edge(START, "inc")
///     .add_conditional_edges("inc", |s: &Count| if s.n < 3 { "inc" } else { END }, ["inc", END])
///     .compile()?;
/// # let _ = graph;
/// # Ok::<(), stategraph::CompileError>(())
/// ```
pub struct StateGraph<S: State> {
    name: String,
    nodes: Vec<NodeSpec<S>>,
    edges: Vec<(String, String)>,
    joins: Vec<(Vec<String>, String)>,
    branches: Vec<BranchSpec<S>>,
    interrupt_before: Vec<String>,
    interrupt_after: Vec<String>,
    node_defaults: Option<NodeOptions>,
    context_schema: Option<crate::ContextSchema>,
}

impl<S: State> std::fmt::Debug for StateGraph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateGraph")
            .field("name", &self.name)
            .field(
                "nodes",
                &self.nodes.iter().map(|n| &n.name).collect::<Vec<_>>(),
            )
            .field("edges", &self.edges)
            .finish_non_exhaustive()
    }
}

impl<S: State> Default for StateGraph<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: State> StateGraph<S> {
    /// An empty graph.
    pub fn new() -> Self {
        StateGraph {
            name: "graph".to_owned(),
            nodes: Vec::new(),
            edges: Vec::new(),
            joins: Vec::new(),
            branches: Vec::new(),
            interrupt_before: Vec::new(),
            interrupt_after: Vec::new(),
            node_defaults: None,
            context_schema: None,
        }
    }

    /// Name the graph (used in diagrams and traces).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Add a node with default options.
    pub fn add_node(self, name: impl Into<String>, node: impl Node<S>) -> Self {
        self.add_node_with(name, node, NodeOptions::default())
    }

    /// Add a node with options (retry, timeout, defer, destinations).
    pub fn add_node_with(
        mut self,
        name: impl Into<String>,
        node: impl Node<S>,
        options: NodeOptions,
    ) -> Self {
        self.nodes.push(NodeSpec {
            name: name.into(),
            run: Arc::new(UserNode(node)),
            options,
            subgraph: None,
        });
        self
    }

    /// Add a compiled graph over state `C` as a node.
    ///
    /// `input` builds the child's input from the parent's state; `output` turns the child's
    /// final state into the parent's update. `checkpointing` decides whether the child's
    /// steps are checkpointed (see [`Checkpointing`]).
    pub fn add_subgraph<C: State>(
        self,
        name: impl Into<String>,
        graph: CompiledGraph<C>,
        checkpointing: Checkpointing,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        self.add_subgraph_with(
            name,
            graph,
            checkpointing,
            input,
            output,
            NodeOptions::default(),
        )
    }

    /// [`StateGraph::add_subgraph`] with node options (for example the `destinations` its
    /// nodes' parent commands may route to).
    pub fn add_subgraph_with<C: State>(
        self,
        name: impl Into<String>,
        graph: CompiledGraph<C>,
        checkpointing: Checkpointing,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
        options: NodeOptions,
    ) -> Self {
        self.push_subgraph(
            name.into(),
            graph,
            checkpointing,
            crate::subgraph::state_only::<S, C>(input),
            output,
            options,
        )
    }

    /// A subgraph node that can be the target of a `Send`: `input` builds the child's input
    /// from the parent's state and the task's argument (`None` when an edge, not a `Send`,
    /// started it). An argument that is not an `A` fails the task with
    /// [`RunError::SendArg`](crate::RunError::SendArg). A node added with
    /// [`StateGraph::add_subgraph`] refuses a `Send` argument the same way rather than dropping
    /// it.
    pub fn add_subgraph_sent<C: State, A: serde::de::DeserializeOwned>(
        self,
        name: impl Into<String>,
        graph: CompiledGraph<C>,
        checkpointing: Checkpointing,
        input: impl Fn(&S, Option<A>) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        let input = Arc::new(move |state: &S, arg: Option<&serde_json::Value>| {
            let arg = arg
                .map(|v| A::deserialize(v))
                .transpose()
                .map_err(|e| format!("not a {}: {e}", std::any::type_name::<A>()))?;
            Ok(input(state, arg))
        });
        self.push_subgraph(
            name.into(),
            graph,
            checkpointing,
            input,
            output,
            NodeOptions::default(),
        )
    }

    fn push_subgraph<C: State>(
        mut self,
        name: String,
        graph: CompiledGraph<C>,
        checkpointing: Checkpointing,
        input: crate::subgraph::InputFn<S, C>,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
        options: NodeOptions,
    ) -> Self {
        let render: Arc<dyn crate::mermaid::Render> = Arc::new(graph.clone());
        self.nodes.push(NodeSpec {
            name,
            run: Arc::new(SubgraphNode::new(graph, checkpointing, input, output)),
            options,
            subgraph: Some(render),
        });
        self
    }

    /// A static edge: after `from` runs, `to` runs in the next step. `from` may be
    /// [`START`](crate::START); `to` may be [`END`](crate::END).
    pub fn add_edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.edges.push((from.into(), to.into()));
        self
    }

    /// A fan-in edge: `to` runs once, after every node in `from` has run since `to` last ran.
    pub fn add_join<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        from: I,
        to: impl Into<String>,
    ) -> Self {
        self.joins
            .push((from.into_iter().map(Into::into).collect(), to.into()));
        self
    }

    /// A conditional edge: after `from` runs, `router` reads the state (after the step's
    /// writes) and returns node names (or [`END`](crate::END)) and/or
    /// [`SendTo`](crate::SendTo)s. Every name it may return must be listed in `targets`; another
    /// name fails the run with
    /// [`RunError::UnknownRouteTarget`](crate::RunError::UnknownRouteTarget).
    pub fn add_conditional_edges<R, I, T>(
        mut self,
        from: impl Into<String>,
        router: impl Fn(&S) -> R + Send + Sync + 'static,
        targets: I,
    ) -> Self
    where
        R: Into<Route>,
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.branches.push(BranchSpec {
            from: from.into(),
            router: Arc::new(move |s: &S, _: &crate::RouteContext<'_>| router(s).into()),
            targets: targets.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// Pause before any step that would run one of these nodes (`"*"`: every node).
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Pause after any step that ran one of these nodes (`"*"`: every node).
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Check the graph and build the runnable, immutable [`CompiledGraph`].
    ///
    /// # Errors
    /// A [`CompileError`] listing every problem found: duplicate or reserved names, edges to
    /// missing nodes, no entry, unreachable nodes, nodes with no path to END, undeclared
    /// conditional targets, static interrupts naming missing nodes.
    pub fn compile(self) -> Result<CompiledGraph<S>, CompileError> {
        compile::compile(self)
    }
}
