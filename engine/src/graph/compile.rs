//! Compiling a [`StateGraph`]: node names resolved to indices, and edges, joins, conditional
//! edges and destinations wired into the compiled form, every problem found on the way kept.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use petgraph::graphmap::DiGraphMap;
use stategraph_checkpoints::{BRANCH_PREFIX, JOIN_PREFIX};

use super::compiled::{Branch, CompiledGraph, CompiledNode, GraphInner, Join};
use super::control_order::{field_names, ControlOrder};
use super::{defaults, validate, BranchSpec, NodeSpec, StateGraph};
use crate::command::{END, START};
use crate::error::{CompileError, GraphProblem};
use crate::State;

/// Check `graph` and build its compiled form, or report every problem found, in this order:
/// node names, edges, joins, conditional edges, destinations, the flow checks (entry,
/// reachability, a path to END), static interrupts.
pub(super) fn compile<S: State>(graph: StateGraph<S>) -> Result<CompiledGraph<S>, CompileError> {
    let StateGraph {
        name,
        nodes,
        edges,
        joins: join_specs,
        branches: branch_specs,
        interrupt_before,
        interrupt_after,
        node_defaults,
        context_schema,
    } = graph;
    let mut wiring = Wiring::new(&nodes);
    let nodes = defaults::apply(nodes, node_defaults, &mut wiring.problems);
    wiring.add_edges(&edges);
    wiring.add_joins(&join_specs);
    let branches = wiring.add_branches(branch_specs);
    wiring.add_destinations(&nodes);
    let flow_problems = validate::flow_problems(&wiring, &nodes);
    wiring.problems.extend(flow_problems);
    let named = nodes.iter().map(|n| (n.name.as_str(), &n.options));
    wiring
        .problems
        .extend(crate::cache::key_state_problems::<S>(named));
    let interrupt_before = wiring.interrupt_flags(&interrupt_before, "before");
    let interrupt_after = wiring.interrupt_flags(&interrupt_after, "after");

    if !wiring.problems.is_empty() {
        return Err(CompileError {
            problems: wiring.problems,
        });
    }

    let nodes = wiring.compiled_nodes(nodes);
    let runs_subtasks = nodes.iter().any(|n| n.options.subtasks);
    let control_order = ControlOrder::new(&field_names::<S>(), &nodes, &wiring.joins);
    Ok(CompiledGraph {
        inner: Arc::new(GraphInner {
            control_order,
            name,
            nodes,
            index: wiring.index,
            entry: wiring.entry,
            entry_branches: std::mem::take(&mut wiring.branches_of[wiring.start]),
            branches,
            joins: wiring.joins,
            edges,
            join_specs,
            context_schema,
            runs_subtasks,
            interrupt_before,
            interrupt_after,
            states: std::sync::Mutex::new(HashMap::new()),
            shape: std::sync::OnceLock::new(),
        }),
        saver: None,
        store: None,
        cache: None,
    })
}

/// A graph's wiring as it is resolved: node indices, the flow graph the checks walk, each
/// node's compiled edges, and the problems found so far.
///
/// Nodes are `0..count` in declaration order; in `flow`, START is `count` and END `count + 1`.
pub(super) struct Wiring {
    pub(super) problems: Vec<GraphProblem>,
    /// Node name → index, for the first node of each valid name.
    pub(super) index: HashMap<String, usize>,
    /// The number of declared nodes.
    pub(super) count: usize,
    /// START's index in `flow`.
    pub(super) start: usize,
    /// END's index in `flow`.
    pub(super) end: usize,
    /// Every possible transition (edges, joins, conditional targets, destinations).
    pub(super) flow: DiGraphMap<usize, ()>,
    /// Whether a node (or START) has any way out.
    pub(super) has_out: Vec<bool>,
    /// The nodes START's static edges lead to.
    pub(super) entry: Vec<usize>,
    /// Each node's static successors (END left out).
    out_static: Vec<Vec<usize>>,
    joins: Vec<Join>,
    /// Each node's joins, by index into `joins`.
    joins_of: Vec<Vec<usize>>,
    /// Each node's (and START's) conditional edges, by index into the branches.
    pub(super) branches_of: Vec<Vec<usize>>,
}

impl Wiring {
    /// Index the nodes by name (reporting reserved and duplicate names) and lay out the flow
    /// graph's vertices.
    fn new<S: State>(nodes: &[NodeSpec<S>]) -> Self {
        let mut problems = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
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
        let count = nodes.len();
        let mut flow: DiGraphMap<usize, ()> = DiGraphMap::new();
        for i in 0..count + 2 {
            flow.add_node(i);
        }
        Wiring {
            problems,
            index,
            count,
            start: count,
            end: count + 1,
            flow,
            has_out: vec![false; count + 1],
            entry: Vec::new(),
            out_static: vec![Vec::new(); count],
            joins: Vec::new(),
            joins_of: vec![Vec::new(); count],
            branches_of: vec![Vec::new(); count + 1],
        }
    }

    /// The index of a name an edge may leave from: a node or START.
    fn resolve_from(&self, name: &str) -> Option<usize> {
        if name == START {
            Some(self.start)
        } else {
            self.index.get(name).copied()
        }
    }

    /// The index of a name an edge may lead to: a node or END.
    fn resolve_to(&self, name: &str) -> Option<usize> {
        if name == END {
            Some(self.end)
        } else {
            self.index.get(name).copied()
        }
    }

    /// Wire the static edges, in declaration order.
    fn add_edges(&mut self, edges: &[(String, String)]) {
        for (from, to) in edges {
            if from == END {
                self.problems.push(GraphProblem::InvalidEdge {
                    from: from.clone(),
                    to: to.clone(),
                    reason: "edges cannot leave END",
                });
                continue;
            }
            if to == START {
                self.problems.push(GraphProblem::InvalidEdge {
                    from: from.clone(),
                    to: to.clone(),
                    reason: "edges cannot enter START",
                });
                continue;
            }
            match (self.resolve_from(from), self.resolve_to(to)) {
                (Some(f), Some(t)) => {
                    self.flow.add_edge(f, t, ());
                    self.has_out[f] = true;
                    if t != self.end {
                        if f == self.start {
                            self.entry.push(t);
                        } else {
                            self.out_static[f].push(t);
                        }
                    }
                }
                _ => self.problems.push(GraphProblem::MissingNode {
                    from: from.clone(),
                    to: to.clone(),
                }),
            }
        }
    }

    /// Wire the fan-in joins, in declaration order.
    fn add_joins(&mut self, specs: &[(Vec<String>, String)]) {
        for (sources, to) in specs {
            self.add_join(sources, to);
        }
    }

    /// Wire one join: missing sources, a missing target and a join with no or repeated sources
    /// are reported; only a join with none of these is compiled.
    fn add_join(&mut self, sources: &[String], to: &String) {
        let target = self.index.get(to.as_str()).copied();
        let mut src_ix = Vec::new();
        for s in sources {
            match self.index.get(s.as_str()) {
                Some(&i) => src_ix.push(i),
                None => self.problems.push(GraphProblem::MissingNode {
                    from: s.clone(),
                    to: to.clone(),
                }),
            }
        }
        let distinct: BTreeSet<&String> = sources.iter().collect();
        let valid = !sources.is_empty() && distinct.len() == sources.len();
        match target {
            Some(t) if src_ix.len() == sources.len() && valid => {
                let j = self.joins.len();
                for &s in &src_ix {
                    self.flow.add_edge(s, t, ());
                    self.has_out[s] = true;
                    self.joins_of[s].push(j);
                }
                self.joins.push(Join {
                    channel: Arc::from(format!("{JOIN_PREFIX}{}:{}", sources.join("+"), to)),
                    sources: src_ix,
                    target: t,
                });
            }
            Some(_) => {}
            None => self.problems.push(GraphProblem::MissingNode {
                from: sources.join("+"),
                to: to.clone(),
            }),
        }
        if !valid {
            self.problems.push(GraphProblem::InvalidJoin {
                sources: sources.to_vec(),
                to: to.clone(),
            });
        }
    }

    /// Wire the conditional edges, in declaration order; returns the compiled ones.
    fn add_branches<S: State>(&mut self, specs: Vec<BranchSpec<S>>) -> Vec<Branch<S>> {
        let mut branches = Vec::new();
        for b in specs {
            let Some(f) = self.resolve_from(&b.from) else {
                self.problems.push(GraphProblem::MissingNode {
                    from: b.from.clone(),
                    to: b.targets.join("|"),
                });
                continue;
            };
            let mut ok = true;
            for t in &b.targets {
                match self.resolve_to(t) {
                    Some(ti) => {
                        self.flow.add_edge(f, ti, ());
                    }
                    None => {
                        ok = false;
                        self.problems.push(GraphProblem::UndeclaredTarget {
                            kind: "conditional edge",
                            from: b.from.clone(),
                            target: t.clone(),
                        });
                    }
                }
            }
            self.has_out[f] = true;
            if ok {
                self.branches_of[f].push(branches.len());
                branches.push(Branch {
                    from: b.from,
                    router: b.router,
                    targets: b.targets.into_iter().collect(),
                });
            }
        }
        branches
    }

    /// Wire each node's declared `destinations` (where its commands may route) into the flow.
    fn add_destinations<S: State>(&mut self, nodes: &[NodeSpec<S>]) {
        for (i, n) in nodes.iter().enumerate() {
            let Some(dests) = &n.options.destinations else {
                continue;
            };
            for d in dests {
                match self.resolve_to(d) {
                    Some(t) => {
                        self.flow.add_edge(i, t, ());
                        self.has_out[i] = true;
                    }
                    None => self.problems.push(GraphProblem::UndeclaredTarget {
                        kind: "destinations",
                        from: n.name.clone(),
                        target: d.clone(),
                    }),
                }
            }
        }
    }

    /// One flag per node: whether `names` (node names, or `"*"` for every node) holds it.
    /// Unknown names are reported as static interrupts `when` ("before"/"after").
    fn interrupt_flags(&mut self, names: &[String], when: &'static str) -> Vec<bool> {
        let mut set = vec![false; self.count];
        for name in names {
            if name == "*" {
                set.iter_mut().for_each(|f| *f = true);
            } else if let Some(&i) = self.index.get(name) {
                set[i] = true;
            } else {
                self.problems.push(GraphProblem::UnknownInterruptNode {
                    when,
                    name: name.clone(),
                });
            }
        }
        set
    }

    /// The compiled nodes, each taking its wired edges, joins and branches.
    fn compiled_nodes<S: State>(&mut self, nodes: Vec<NodeSpec<S>>) -> Vec<CompiledNode<S>> {
        nodes
            .into_iter()
            .enumerate()
            .map(|(i, n)| CompiledNode {
                name: Arc::from(n.name.as_str()),
                branch_channel: Arc::from(format!("{BRANCH_PREFIX}{}", n.name)),
                run: n.run,
                destinations: n
                    .options
                    .destinations
                    .clone()
                    .map(|d| d.into_iter().collect()),
                options: Arc::new(n.options),
                out: std::mem::take(&mut self.out_static[i]),
                joins: std::mem::take(&mut self.joins_of[i]),
                branches: std::mem::take(&mut self.branches_of[i]),
                subgraph: n.subgraph,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::future::{ready, Ready};

    use crate::{BoxError, CompileError, GraphProblem, NodeContext, StateGraph, END, START};

    #[derive(crate::State, Clone, Default, Debug)]
    struct Count {
        n: u32,
    }

    fn noop(
    ) -> impl Fn(Arc<Count>, NodeContext) -> Ready<Result<CountUpdate, BoxError>> + Send + Sync + 'static
    {
        |_s, _c| ready(Ok(Count::update()))
    }

    fn problems(graph: StateGraph<Count>) -> Vec<GraphProblem> {
        graph
            .compile()
            .err()
            .map(|e| e.problems)
            .unwrap_or_default()
    }

    #[test]
    fn edges_joins_and_branches_are_wired_into_each_node() -> Result<(), CompileError> {
        let graph = StateGraph::<Count>::new()
            .add_node("a", noop())
            .add_node("b", noop())
            .add_node("c", noop())
            .add_edge(START, "a")
            .add_edge(START, "b")
            .add_edge("a", "c")
            .add_edge("b", END)
            .add_join(["a", "b"], "c")
            .add_conditional_edges("c", |_: &Count| END, ["a", END])
            .compile()?;
        let g = &graph.inner;
        assert_eq!(g.entry, [0, 1]);
        assert!(g.entry_branches.is_empty());
        assert_eq!(g.nodes[0].out, [2]);
        assert!(
            g.nodes[1].out.is_empty(),
            "an edge to END is no static successor"
        );
        assert_eq!(
            (&*g.nodes[0].joins, &*g.nodes[1].joins),
            (&[0][..], &[0][..])
        );
        assert_eq!(&*g.joins[0].channel, "join:a+b:c");
        assert_eq!((&*g.joins[0].sources, g.joins[0].target), (&[0, 1][..], 2));
        assert_eq!(g.nodes[2].branches, [0]);
        assert_eq!(g.branches[0].from, "c");
        assert_eq!(&*g.nodes[2].branch_channel, "branch:to:c");
        Ok(())
    }

    #[test]
    fn a_router_from_start_is_an_entry() -> Result<(), CompileError> {
        let graph = StateGraph::<Count>::new()
            .add_node("a", noop())
            .add_conditional_edges(START, |_: &Count| "a", ["a"])
            .add_edge("a", END)
            .compile()?;
        assert!(graph.inner.entry.is_empty());
        assert_eq!(graph.inner.entry_branches, [0]);
        Ok(())
    }

    #[test]
    fn a_bad_join_reports_its_sources_then_its_target_then_its_shape() {
        let graph = StateGraph::<Count>::new()
            .add_node("a", noop())
            .add_edge(START, "a")
            .add_edge("a", END)
            .add_join(["a", "ghost", "a"], "nowhere");
        let sources: Vec<String> = ["a", "ghost", "a"].map(String::from).into();
        assert_eq!(
            problems(graph),
            [
                GraphProblem::MissingNode {
                    from: "ghost".into(),
                    to: "nowhere".into(),
                },
                GraphProblem::MissingNode {
                    from: "a+ghost+a".into(),
                    to: "nowhere".into(),
                },
                GraphProblem::InvalidJoin {
                    sources,
                    to: "nowhere".into(),
                },
            ]
        );
    }

    #[test]
    fn interrupt_flags_mark_named_nodes_and_star_marks_all() -> Result<(), CompileError> {
        let graph = StateGraph::<Count>::new()
            .add_node("a", noop())
            .add_node("b", noop())
            .add_edge(START, "a")
            .add_edge("a", "b")
            .interrupt_before(["*"])
            .interrupt_after(["b"])
            .compile()?;
        assert_eq!(graph.inner.interrupt_before, [true, true]);
        assert_eq!(graph.inner.interrupt_after, [false, true]);
        Ok(())
    }
}
