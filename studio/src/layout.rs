//! The graph drawn as SVG, laid out here rather than in the browser: nodes in layers by the
//! longest path from `__start__` (back edges, the loops, left out of the layering and drawn
//! curving round the right), `__end__` in the last layer, each layer ordered once by the mean
//! position of its nodes' predecessors. Every name is escaped; each node is a `<g>` with a
//! `data-node` attribute the page marks (ran, next, on the path).

use std::collections::HashMap;
use std::fmt::Write as _;

use stategraph_checkpoints::graph_shape::{EdgeKind, GraphShape};

/// The entry's name in a shape's edges.
const START: &str = "__start__";
/// The end's name in a shape's edges.
const END: &str = "__end__";
const NODE_H: f64 = 36.0;
const LAYER_GAP: f64 = 70.0;
const NODE_GAP: f64 = 28.0;
const MARGIN: f64 = 24.0;
/// Room on the right for loops drawn round the nodes.
const LOOP_ROOM: f64 = 60.0;

/// A node placed on the drawing.
#[derive(Debug, Clone)]
struct Placed {
    name: String,
    class: String,
    title: String,
    layer: usize,
    x: f64,
    width: f64,
}

/// `text` escaped for XML text and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The nodes with their classes and titles, `__start__` first and `__end__` last.
fn nodes_of(shape: &GraphShape) -> Vec<Placed> {
    let placed = |name: &str, class: String, title: String| Placed {
        name: name.to_owned(),
        class,
        title,
        layer: 0,
        x: 0.0,
        width: width_of(name),
    };
    let mut out = vec![placed(START, "node terminal".to_owned(), START.to_owned())];
    for n in &shape.nodes {
        let mut class = String::from("node");
        let mut title = n.name.clone();
        if let Some(role) = &n.role {
            let role: String = role.chars().filter(char::is_ascii_alphanumeric).collect();
            let _ = write!(class, " role-{role}");
            let _ = write!(title, " (role: {role})");
        }
        if let Some(child) = &n.subgraph {
            class.push_str(" subgraph");
            let names: Vec<&str> = child.nodes.iter().map(|c| c.name.as_str()).collect();
            let _ = write!(title, " (subgraph: {})", names.join(", "));
        }
        out.push(placed(&n.name, class, title));
    }
    out.push(placed(END, "node terminal".to_owned(), END.to_owned()));
    out
}

fn width_of(name: &str) -> f64 {
    let chars = name.chars().count().min(28) as f64;
    (chars * 7.5 + 28.0).max(80.0)
}

/// Each node's layer: the longest path from the start over forward edges; the end last.
fn layers(n: usize, edges: &[(usize, usize, EdgeKind)]) -> (Vec<usize>, Vec<bool>) {
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, (a, _, _)) in edges.iter().enumerate() {
        out_edges[*a].push(i);
    }
    // Depth-first from the start (then from any node not reached) marks back edges.
    let mut back = vec![false; edges.len()];
    let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = 1;
        while let Some((v, i)) = stack.pop() {
            if let Some(&e) = out_edges[v].get(i) {
                stack.push((v, i + 1));
                let w = edges[e].1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => back[e] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
            }
        }
    }
    let mut layer = vec![0usize; n];
    // Longest path by relaxation; a DAG of n nodes settles within n rounds.
    for _ in 0..n {
        let mut changed = false;
        for (e, (a, b, _)) in edges.iter().enumerate() {
            if !back[e] && layer[*b] < layer[*a] + 1 {
                layer[*b] = layer[*a] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for l in layer.iter_mut().take(n.saturating_sub(1)).skip(1) {
        *l = (*l).max(1);
    }
    let last = layer
        .iter()
        .take(n.saturating_sub(1))
        .max()
        .copied()
        .unwrap_or(0)
        + 1;
    if let Some(end) = layer.last_mut() {
        *end = last;
    }
    (layer, back)
}

/// Each placed node's position in `nodes`, by name.
fn index_of(nodes: &[Placed]) -> HashMap<&str, usize> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect()
}

/// The shape's edges between placed nodes, by position (an edge naming a node the shape does
/// not hold is left out).
fn edges_of(shape: &GraphShape, index: &HashMap<&str, usize>) -> Vec<(usize, usize, EdgeKind)> {
    shape
        .edges
        .iter()
        .filter_map(|e| {
            Some((
                *index.get(e.from.as_str())?,
                *index.get(e.to.as_str())?,
                e.kind,
            ))
        })
        .collect()
}

/// The shape as an SVG document.
pub(crate) fn draw(shape: &GraphShape) -> String {
    let mut nodes = nodes_of(shape);
    let edges = edges_of(shape, &index_of(&nodes));
    let (layer, back) = layers(nodes.len(), &edges);
    for (p, l) in nodes.iter_mut().zip(&layer) {
        p.layer = *l;
    }
    let rows = place(&mut nodes, &edges, &back);
    let width = rows
        .iter()
        .map(|r| row_width(&nodes, r))
        .fold(0.0, f64::max)
        + 2.0 * MARGIN
        + LOOP_ROOM;
    let height = rows.len() as f64 * (NODE_H + LAYER_GAP) - LAYER_GAP + 2.0 * MARGIN;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\" aria-label=\"graph {}\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" \
         markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\"/></marker></defs>",
        escape(&shape.name)
    );
    for (e, edge) in edges.iter().enumerate() {
        edge_svg(&mut svg, &nodes, *edge, back[e]);
    }
    for p in &nodes {
        let (x, top) = (p.x, top_of(p.layer));
        let label: String = p.name.chars().take(28).collect();
        let _ = write!(
            svg,
            "<g class=\"{}\" data-node=\"{}\"><title>{}</title>\
             <rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{NODE_H}\" rx=\"8\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></g>",
            p.class,
            escape(&p.name),
            escape(&p.title),
            p.width,
            x + p.width / 2.0,
            top + NODE_H / 2.0 + 5.0,
            escape(&label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The top of layer `l`.
fn top_of(l: usize) -> f64 {
    MARGIN + l as f64 * (NODE_H + LAYER_GAP)
}

/// One edge as a `<path>`: down from its source's bottom to its target's top, or, for a
/// back edge (a loop), round the right of both.
fn edge_svg(
    svg: &mut String,
    nodes: &[Placed],
    (a, b, kind): (usize, usize, EdgeKind),
    back: bool,
) {
    let (pa, pb) = (&nodes[a], &nodes[b]);
    let class = match kind {
        EdgeKind::Static => "edge static",
        EdgeKind::Join => "edge join",
        EdgeKind::Conditional => "edge conditional",
        EdgeKind::Goto => "edge goto",
        _ => "edge",
    };
    let path = if back || pb.layer <= pa.layer {
        // A node's loop to itself leaves from its upper right and comes back lower.
        let own = if a == b { NODE_H / 4.0 } else { 0.0 };
        let (x1, y1) = (pa.x + pa.width, top_of(pa.layer) + NODE_H / 2.0 - own);
        let (x2, y2) = (pb.x + pb.width, top_of(pb.layer) + NODE_H / 2.0 + own);
        let reach = if a == b { 0.5 } else { 0.8 };
        let bulge = x1.max(x2) + LOOP_ROOM * reach;
        format!("M{x1:.1},{y1:.1} C{bulge:.1},{y1:.1} {bulge:.1},{y2:.1} {x2:.1},{y2:.1}")
    } else {
        let (x1, y1) = (pa.x + pa.width / 2.0, top_of(pa.layer) + NODE_H);
        let (x2, y2) = (pb.x + pb.width / 2.0, top_of(pb.layer));
        let mid = (y1 + y2) / 2.0;
        format!("M{x1:.1},{y1:.1} C{x1:.1},{mid:.1} {x2:.1},{mid:.1} {x2:.1},{y2:.1}")
    };
    let _ = write!(
        svg,
        "<path class=\"{class}\" data-from=\"{}\" data-to=\"{}\" d=\"{path}\" marker-end=\"url(#arrow)\"/>",
        escape(&pa.name),
        escape(&pb.name)
    );
}

/// The nodes of each layer, ordered, with their x positions set; returns the layers.
fn place(
    nodes: &mut [Placed],
    edges: &[(usize, usize, EdgeKind)],
    back: &[bool],
) -> Vec<Vec<usize>> {
    let count = nodes.iter().map(|p| p.layer).max().unwrap_or(0) + 1;
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (i, p) in nodes.iter().enumerate() {
        rows[p.layer].push(i);
    }
    let mut order = vec![0.0f64; nodes.len()];
    for row in &rows {
        for (k, &i) in row.iter().enumerate() {
            order[i] = k as f64;
        }
    }
    for row in rows.iter_mut().skip(1) {
        let mut keyed: Vec<(f64, usize)> = row
            .iter()
            .map(|&i| {
                let preds: Vec<f64> = edges
                    .iter()
                    .enumerate()
                    .filter(|(e, (_, b, _))| *b == i && !back[*e])
                    .map(|(_, (a, _, _))| order[*a])
                    .collect();
                let key = if preds.is_empty() {
                    order[i]
                } else {
                    preds.iter().sum::<f64>() / preds.len() as f64
                };
                (key, i)
            })
            .collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        *row = keyed.iter().map(|(_, i)| *i).collect();
        for (k, &i) in row.iter().enumerate() {
            order[i] = k as f64;
        }
    }
    let widest = rows.iter().map(|r| row_width(nodes, r)).fold(0.0, f64::max);
    for row in &rows {
        let mut x = MARGIN + (widest - row_width(nodes, row)) / 2.0;
        for &i in row {
            nodes[i].x = x;
            x += nodes[i].width + NODE_GAP;
        }
    }
    rows
}

fn row_width(nodes: &[Placed], row: &[usize]) -> f64 {
    let w: f64 = row.iter().map(|&i| nodes[i].width).sum();
    w + NODE_GAP * row.len().saturating_sub(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoints::graph_shape::{GraphEdge, GraphNode};

    fn looped() -> GraphShape {
        GraphShape::new("agent")
            .with_node(GraphNode::new("model").with_role("model"))
            .with_node(GraphNode::new("tools").with_role("tools"))
            .with_node(GraphNode::new("<b>&"))
            .with_edge(GraphEdge::new(START, "model", EdgeKind::Static))
            .with_edge(GraphEdge::new("model", "tools", EdgeKind::Goto))
            .with_edge(GraphEdge::new("tools", "model", EdgeKind::Goto))
            .with_edge(GraphEdge::new("model", END, EdgeKind::Goto))
            .with_edge(GraphEdge::new("model", "<b>&", EdgeKind::Conditional))
    }

    #[test]
    fn a_loop_is_layered_by_its_forward_edges_and_the_end_comes_last() {
        let shape = looped();
        let nodes = nodes_of(&shape);
        let index = index_of(&nodes);
        let edges = edges_of(&shape, &index);
        assert_eq!(
            edges.len(),
            shape.edges.len(),
            "every edge is between placed nodes"
        );
        let (layer, back) = layers(nodes.len(), &edges);
        assert_eq!(layer[index["model"]], 1);
        assert_eq!(layer[index["tools"]], 2);
        assert_eq!(layer[index[END]], 3);
        assert_eq!(
            back.iter().filter(|b| **b).count(),
            1,
            "tools -> model is the back edge"
        );
    }

    #[test]
    fn every_node_is_drawn_once_with_its_role_and_names_are_escaped() {
        let svg = draw(&looped());
        assert_eq!(svg.matches("<g class=\"node").count(), 5);
        assert!(svg.contains("class=\"node role-model\" data-node=\"model\""));
        assert!(svg.contains("data-node=\"&lt;b&gt;&amp;\""));
        assert!(!svg.contains("<b>"));
        assert_eq!(svg.matches("<path class=\"edge").count(), 5);
    }
}
