//! The graph builder [`StateGraph`] and the immutable [`CompiledGraph`] it compiles to.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use petgraph::graphmap::DiGraphMap;
use petgraph::visit::{Bfs, Reversed};
use stategraph_checkpoints::{CheckpointId, Namespace, Saver, ThreadId};

use crate::command::{Goto, ParentCommand, Route, END, START};
use crate::error::{CompileError, GraphProblem};
use crate::node::{Node, NodeContext, NodeOptions, NodeResult};
use crate::subgraph::{Checkpointing, SubgraphNode};
use crate::State;

/// What a task produced, before it is applied.
pub(crate) struct TaskOutput<S: State> {
    pub(crate) updates: Vec<S::Update>,
    pub(crate) goto: Vec<Goto>,
    pub(crate) parents: Vec<ParentCommand>,
}

impl<S: State> Default for TaskOutput<S> {
    fn default() -> Self {
        TaskOutput {
            updates: Vec::new(),
            goto: Vec::new(),
            parents: Vec::new(),
        }
    }
}

/// The engine's internal node interface.
pub(crate) trait NodeRun<S: State>: Send + Sync + 'static {
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> BoxFuture<'static, NodeResult<S>>;
}

struct UserNode<N>(N);

impl<S: State, N: Node<S>> NodeRun<S> for UserNode<N> {
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> BoxFuture<'static, NodeResult<S>> {
        let fut = self.0.run(state, ctx);
        Box::pin(async move { NodeResult::from_user(fut.await) })
    }
}

type RouterFn<S> = Arc<dyn Fn(&S) -> Route + Send + Sync>;

struct NodeSpec<S: State> {
    name: String,
    run: Arc<dyn NodeRun<S>>,
    options: NodeOptions,
    subgraph: Option<Arc<dyn crate::mermaid::Render>>,
}

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
            name: "graph".to_string(),
            nodes: Vec::new(),
            edges: Vec::new(),
            joins: Vec::new(),
            branches: Vec::new(),
            interrupt_before: Vec::new(),
            interrupt_after: Vec::new(),
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
        mut self,
        name: impl Into<String>,
        graph: CompiledGraph<C>,
        checkpointing: Checkpointing,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
        options: NodeOptions,
    ) -> Self {
        let render: Arc<dyn crate::mermaid::Render> = Arc::new(graph.clone());
        self.nodes.push(NodeSpec {
            name: name.into(),
            run: Arc::new(SubgraphNode::new(graph, checkpointing, input, output)),
            options,
            subgraph: Some(render),
        });
        self
    }

    /// A static edge: after `from` runs, `to` runs in the next step. `from` may be
    /// [`START`]; `to` may be [`END`].
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
    /// writes) and returns node names (or [`END`]) and/or [`Send`](crate::Send)s. Every name it
    /// may return must be listed in `targets`; another name fails the run with
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
            router: Arc::new(move |s: &S| router(s).into()),
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
        let mut problems = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() || n.name == START || n.name == END {
                problems.push(GraphProblem::ReservedName {
                    name: n.name.clone(),
                });
            } else if index.insert(n.name.clone(), i).is_some() {
                problems.push(GraphProblem::DuplicateNode {
                    name: n.name.clone(),
                });
            }
        }
        let count = self.nodes.len();
        let (start_ix, end_ix) = (count, count + 1);
        let resolve_from = |name: &str| {
            if name == START {
                Some(start_ix)
            } else {
                index.get(name).copied()
            }
        };
        let resolve_to = |name: &str| {
            if name == END {
                Some(end_ix)
            } else {
                index.get(name).copied()
            }
        };

        let mut flow: DiGraphMap<usize, ()> = DiGraphMap::new();
        for i in 0..count + 2 {
            flow.add_node(i);
        }
        let mut out_static: Vec<Vec<usize>> = vec![Vec::new(); count];
        let mut entry: Vec<usize> = Vec::new();
        let mut has_out = vec![false; count + 1];

        for (from, to) in &self.edges {
            if from == END {
                problems.push(GraphProblem::InvalidEdge {
                    from: from.clone(),
                    to: to.clone(),
                    reason: "edges cannot leave END",
                });
                continue;
            }
            if to == START {
                problems.push(GraphProblem::InvalidEdge {
                    from: from.clone(),
                    to: to.clone(),
                    reason: "edges cannot enter START",
                });
                continue;
            }
            match (resolve_from(from), resolve_to(to)) {
                (Some(f), Some(t)) => {
                    flow.add_edge(f, t, ());
                    has_out[f] = true;
                    if t != end_ix {
                        if f == start_ix {
                            entry.push(t);
                        } else {
                            out_static[f].push(t);
                        }
                    }
                }
                _ => problems.push(GraphProblem::MissingNode {
                    from: from.clone(),
                    to: to.clone(),
                }),
            }
        }

        let mut joins = Vec::new();
        let mut joins_of: Vec<Vec<usize>> = vec![Vec::new(); count];
        for (sources, to) in &self.joins {
            let target = index.get(to.as_str()).copied();
            let mut src_ix = Vec::new();
            for s in sources {
                match index.get(s.as_str()) {
                    Some(&i) => src_ix.push(i),
                    None => problems.push(GraphProblem::MissingNode {
                        from: s.clone(),
                        to: to.clone(),
                    }),
                }
            }
            match target {
                Some(t)
                    if src_ix.len() == sources.len()
                        && !src_ix.is_empty()
                        && sources.iter().collect::<BTreeSet<_>>().len() == sources.len() =>
                {
                    let j = joins.len();
                    for &s in &src_ix {
                        flow.add_edge(s, t, ());
                        has_out[s] = true;
                        joins_of[s].push(j);
                    }
                    joins.push(Join {
                        channel: Arc::from(format!("join:{}:{}", sources.join("+"), to)),
                        sources: src_ix,
                        target: t,
                    });
                }
                Some(_) => {}
                None => problems.push(GraphProblem::MissingNode {
                    from: sources.join("+"),
                    to: to.clone(),
                }),
            }
            let distinct: BTreeSet<&String> = sources.iter().collect();
            if sources.is_empty() || distinct.len() != sources.len() {
                problems.push(GraphProblem::InvalidJoin {
                    sources: sources.clone(),
                    to: to.clone(),
                });
            }
        }

        let mut branches = Vec::new();
        let mut branches_of: Vec<Vec<usize>> = vec![Vec::new(); count + 1];
        for b in self.branches {
            let Some(f) = resolve_from(&b.from) else {
                problems.push(GraphProblem::MissingNode {
                    from: b.from.clone(),
                    to: b.targets.join("|"),
                });
                continue;
            };
            let mut ok = true;
            for t in &b.targets {
                match resolve_to(t) {
                    Some(ti) => {
                        flow.add_edge(f, ti, ());
                    }
                    None => {
                        ok = false;
                        problems.push(GraphProblem::UndeclaredTarget {
                            kind: "conditional edge",
                            from: b.from.clone(),
                            target: t.clone(),
                        });
                    }
                }
            }
            has_out[f] = true;
            if ok {
                branches_of[f].push(branches.len());
                branches.push(Branch {
                    from: b.from,
                    router: b.router,
                    targets: b.targets.into_iter().collect(),
                });
            }
        }

        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(dests) = &n.options.destinations {
                for d in dests {
                    match resolve_to(d) {
                        Some(t) => {
                            flow.add_edge(i, t, ());
                            has_out[i] = true;
                        }
                        None => problems.push(GraphProblem::UndeclaredTarget {
                            kind: "destinations",
                            from: n.name.clone(),
                            target: d.clone(),
                        }),
                    }
                }
            }
        }

        if entry.is_empty() && branches_of[start_ix].is_empty() {
            problems.push(GraphProblem::NoEntry);
        }

        let mut reachable = vec![false; count + 2];
        let mut bfs = Bfs::new(&flow, start_ix);
        while let Some(n) = bfs.next(&flow) {
            reachable[n] = true;
        }
        // Terminal: END, or a node with nothing out (the run simply ends after it).
        let mut terminates = vec![false; count + 2];
        let reversed = Reversed(&flow);
        let terminals: Vec<usize> = std::iter::once(end_ix)
            .chain((0..count).filter(|&i| !has_out[i]))
            .collect();
        for t in terminals {
            let mut bfs = Bfs::new(reversed, t);
            while let Some(n) = bfs.next(reversed) {
                terminates[n] = true;
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if index.get(&n.name) != Some(&i) {
                continue;
            }
            if !reachable[i] {
                problems.push(GraphProblem::Unreachable {
                    name: n.name.clone(),
                });
            } else if !terminates[i] {
                problems.push(GraphProblem::NoPathToEnd {
                    name: n.name.clone(),
                });
            }
        }

        let mut flags = |names: &[String], when: &'static str| {
            let mut set = vec![false; count];
            for name in names {
                if name == "*" {
                    set.iter_mut().for_each(|f| *f = true);
                } else if let Some(&i) = index.get(name) {
                    set[i] = true;
                } else {
                    problems.push(GraphProblem::UnknownInterruptNode {
                        when,
                        name: name.clone(),
                    });
                }
            }
            set
        };
        let interrupt_before = flags(&self.interrupt_before, "before");
        let interrupt_after = flags(&self.interrupt_after, "after");

        if !problems.is_empty() {
            return Err(CompileError { problems });
        }

        let nodes: Vec<CompiledNode<S>> = self
            .nodes
            .into_iter()
            .enumerate()
            .map(|(i, n)| CompiledNode {
                name: Arc::from(n.name.as_str()),
                branch_channel: Arc::from(format!("branch:to:{}", n.name)),
                run: n.run,
                destinations: n
                    .options
                    .destinations
                    .clone()
                    .map(|d| d.into_iter().collect()),
                options: Arc::new(n.options),
                out: std::mem::take(&mut out_static[i]),
                joins: std::mem::take(&mut joins_of[i]),
                branches: std::mem::take(&mut branches_of[i]),
                subgraph: n.subgraph,
            })
            .collect();
        let control_order = ControlOrder::new(&field_names::<S>(), &nodes, &joins);
        Ok(CompiledGraph {
            inner: Arc::new(GraphInner {
                control_order,
                name: self.name,
                nodes,
                index,
                entry,
                entry_branches: std::mem::take(&mut branches_of[start_ix]),
                branches,
                joins,
                edges: self.edges,
                join_specs: self.joins,
                interrupt_before,
                interrupt_after,
                states: std::sync::Mutex::new(HashMap::new()),
            }),
            saver: None,
        })
    }
}

pub(crate) struct CompiledNode<S: State> {
    pub(crate) name: Arc<str>,
    pub(crate) branch_channel: Arc<str>,
    pub(crate) run: Arc<dyn NodeRun<S>>,
    pub(crate) options: Arc<NodeOptions>,
    pub(crate) destinations: Option<BTreeSet<String>>,
    pub(crate) out: Vec<usize>,
    pub(crate) joins: Vec<usize>,
    pub(crate) branches: Vec<usize>,
    pub(crate) subgraph: Option<Arc<dyn crate::mermaid::Render>>,
}

pub(crate) struct Branch<S: State> {
    pub(crate) from: String,
    pub(crate) router: RouterFn<S>,
    pub(crate) targets: BTreeSet<String>,
}

pub(crate) struct Join {
    pub(crate) channel: Arc<str>,
    pub(crate) sources: Vec<usize>,
    pub(crate) target: usize,
}

pub(crate) struct GraphInner<S: State> {
    pub(crate) name: String,
    pub(crate) nodes: Vec<CompiledNode<S>>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) entry: Vec<usize>,
    pub(crate) entry_branches: Vec<usize>,
    pub(crate) branches: Vec<Branch<S>>,
    pub(crate) joins: Vec<Join>,
    pub(crate) edges: Vec<(String, String)>,
    pub(crate) join_specs: Vec<(Vec<String>, String)>,
    pub(crate) interrupt_before: Vec<bool>,
    pub(crate) interrupt_after: Vec<bool>,
    /// The order control records list channels and nodes in (see [`ControlOrder`]).
    pub(crate) control_order: ControlOrder,
    /// The state each recently run thread was left in, by its head checkpoint.
    pub(crate) states: std::sync::Mutex<RememberedStates<S>>,
}

/// The state each remembered `(thread, namespace)` was left in, with its head checkpoint.
pub(crate) type RememberedStates<S> = HashMap<(ThreadId, Namespace), (CheckpointId, Arc<S>)>;

/// A versioned channel of a graph: a state field, a node's trigger channel or a join's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Channel {
    Field(usize),
    Branch(usize),
    Join(usize),
}

/// Every versioned channel in name order (field names shared by every control record), and for
/// each node the channels it can have seen in name order: a control record's maps are built from these in one ordered pass (bulk-built, not
/// inserted entry by entry).
pub(crate) struct ControlOrder {
    /// `(name, channel)`, sorted by name.
    pub(crate) channels: Vec<Named>,
    /// Node indices sorted by node name, each with the channels it can have seen (its trigger
    /// channel, the joins into it), sorted by name.
    pub(crate) seen: Vec<(usize, Vec<Named>)>,
}

/// A channel with its name.
pub(crate) type Named = (Arc<str>, Channel);

impl ControlOrder {
    fn new<S: State>(field_names: &[Arc<str>], nodes: &[CompiledNode<S>], joins: &[Join]) -> Self {
        let mut channels: Vec<Named> = field_names
            .iter()
            .enumerate()
            .map(|(i, n)| (Arc::clone(n), Channel::Field(i)))
            .chain(
                nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (Arc::clone(&n.branch_channel), Channel::Branch(i))),
            )
            .chain(
                joins
                    .iter()
                    .enumerate()
                    .map(|(j, join)| (Arc::clone(&join.channel), Channel::Join(j))),
            )
            .collect();
        channels.sort_by(|a, b| a.0.cmp(&b.0));
        let mut seen: Vec<(usize, Vec<Named>)> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut chans = vec![(Arc::clone(&n.branch_channel), Channel::Branch(i))];
                chans.extend(
                    joins
                        .iter()
                        .enumerate()
                        .filter(|(_, join)| join.target == i)
                        .map(|(j, join)| (Arc::clone(&join.channel), Channel::Join(j))),
                );
                chans.sort_by(|a, b| a.0.cmp(&b.0));
                (i, chans)
            })
            .collect();
        seen.sort_by(|a, b| nodes[a.0].name.cmp(&nodes[b.0].name));
        ControlOrder { channels, seen }
    }
}

/// The state's field names by field index (placed by `index()`, not by position in `ALL`).
fn field_names<S: State>() -> Vec<Arc<str>> {
    use crate::state::Field;
    let all = <S::Field as Field>::ALL;
    let mut names: Vec<Arc<str>> = vec![Arc::from(""); all.len()];
    for f in all {
        if let Some(slot) = names.get_mut(f.index()) {
            *slot = Arc::from(f.name());
        }
    }
    names
}

/// Threads whose last state a compiled graph keeps for its next run.
const REMEMBERED_THREADS: usize = 64;

impl<S: State> GraphInner<S> {
    /// Take the state remembered for `(thread, ns)`, with the checkpoint it is the state of.
    pub(crate) fn take_cached(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
    ) -> Option<(CheckpointId, Arc<S>)> {
        self.states
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(thread.clone(), ns.clone()))
    }

    /// Remember the state at checkpoint `head` of `(thread, ns)`.
    pub(crate) fn remember(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
        head: CheckpointId,
        state: Arc<S>,
    ) {
        let mut states = self.states.lock().unwrap_or_else(|p| p.into_inner());
        if states.len() >= REMEMBERED_THREADS {
            states.clear();
        }
        states.insert((thread.clone(), ns.clone()), (head, state));
    }
}

/// A checked, immutable graph, ready to run. Cheap to clone.
pub struct CompiledGraph<S: State> {
    pub(crate) inner: Arc<GraphInner<S>>,
    pub(crate) saver: Option<Arc<dyn Saver>>,
}

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: self.saver.clone(),
        }
    }
}

impl<S: State> fmt::Debug for CompiledGraph<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledGraph")
            .field("name", &self.inner.name)
            .field(
                "nodes",
                &self
                    .inner
                    .nodes
                    .iter()
                    .map(|n| &*n.name)
                    .collect::<Vec<_>>(),
            )
            .field("checkpointer", &self.saver.is_some())
            .finish()
    }
}

impl<S: State> CompiledGraph<S> {
    /// The same graph, checkpointing every step of a thread into `saver`.
    pub fn with_checkpointer(&self, saver: Arc<dyn Saver>) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: Some(saver),
        }
    }

    /// The same graph without a checkpointer.
    pub fn without_checkpointer(&self) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: None,
        }
    }

    /// The checkpointer, if any.
    pub fn checkpointer(&self) -> Option<&Arc<dyn Saver>> {
        self.saver.as_ref()
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node names, in declaration order.
    pub fn node_names(&self) -> Vec<&str> {
        self.inner.nodes.iter().map(|n| &*n.name).collect()
    }
}
