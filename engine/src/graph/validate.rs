//! The checks on a graph's resolved flow: it has an entry, every node is reachable from START,
//! and every reachable node can get to END (or to a node the run simply ends after).

use petgraph::graphmap::DiGraphMap;
use petgraph::visit::{Bfs, Reversed};

use super::compile::Wiring;
use super::NodeSpec;
use crate::error::GraphProblem;
use crate::State;

/// The flow's problems, in order: no entry, then per node (in declaration order, the first
/// node of each valid name only) unreachable or without a path to END.
pub(super) fn flow_problems<S: State>(wiring: &Wiring, nodes: &[NodeSpec<S>]) -> Vec<GraphProblem> {
    let mut problems = Vec::new();
    if wiring.entry.is_empty() && wiring.branches_of[wiring.start].is_empty() {
        problems.push(GraphProblem::NoEntry);
    }
    let reachable = reachable_from(&wiring.flow, wiring.start);
    // Terminal: END, or a node with nothing out (the run simply ends after it).
    let terminals: Vec<usize> = std::iter::once(wiring.end)
        .chain((0..wiring.count).filter(|&i| !wiring.has_out[i]))
        .collect();
    let terminates = reaching(&wiring.flow, &terminals);
    for (i, n) in nodes.iter().enumerate() {
        if wiring.index.get(&n.name) != Some(&i) {
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
    problems
}

/// For each vertex `0..flow.node_count()`, whether a path leads to it from `start`.
fn reachable_from(flow: &DiGraphMap<usize, ()>, start: usize) -> Vec<bool> {
    let mut reachable = vec![false; flow.node_count()];
    let mut bfs = Bfs::new(flow, start);
    while let Some(n) = bfs.next(flow) {
        reachable[n] = true;
    }
    reachable
}

/// For each vertex `0..flow.node_count()`, whether a path leads from it to one of `targets`.
fn reaching(flow: &DiGraphMap<usize, ()>, targets: &[usize]) -> Vec<bool> {
    let mut reaches = vec![false; flow.node_count()];
    let reversed = Reversed(flow);
    for &t in targets {
        let mut bfs = Bfs::new(reversed, t);
        while let Some(n) = bfs.next(reversed) {
            reaches[n] = true;
        }
    }
    reaches
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 0 → 1 → 2, 3 → 3 (a loop), 4 alone.
    fn flow() -> DiGraphMap<usize, ()> {
        let mut flow = DiGraphMap::new();
        for i in 0..5 {
            flow.add_node(i);
        }
        flow.add_edge(0, 1, ());
        flow.add_edge(1, 2, ());
        flow.add_edge(3, 3, ());
        flow
    }

    #[test]
    fn reachable_follows_edges_forward_from_start() {
        assert_eq!(
            reachable_from(&flow(), 1),
            [false, true, true, false, false]
        );
        assert_eq!(
            reachable_from(&flow(), 3),
            [false, false, false, true, false]
        );
    }

    #[test]
    fn reaching_follows_edges_backward_from_every_target() {
        assert_eq!(reaching(&flow(), &[2]), [true, true, true, false, false]);
        assert_eq!(reaching(&flow(), &[1, 4]), [true, true, false, false, true]);
        assert_eq!(reaching(&flow(), &[]), [false; 5]);
    }
}
