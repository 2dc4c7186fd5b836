//! The shape of the graph that wrote a thread ([`GraphShape`]): its nodes, edges, conditional
//! targets and subgraphs, and which node plays a known role (an agent's model or tool node).
//! A compiled graph hands it to its saver when it starts a run on a thread
//! ([`Saver::put_graph`](crate::Saver::put_graph)); a reader without the program's code asks
//! which graph made a checkpoint ([`Saver::graph_of`](crate::Saver::graph_of)) and draws it.
//!
//! A shape is stored once, keyed by the blake3 hash of its canonical encoding
//! ([`GraphShape::canonical`]: compact JSON, members in declaration order), so a thread run
//! by the same graph a thousand times holds one copy.
//!
//! ```
//! use stategraph_checkpoints::graph_shape::{EdgeKind, GraphEdge, GraphNode, GraphShape};
//! let shape = GraphShape::new("g")
//!     .with_node(GraphNode::new("a"))
//!     .with_edge(GraphEdge::new("__start__", "a", EdgeKind::Static))
//!     .with_edge(GraphEdge::new("a", "__end__", EdgeKind::Static));
//! assert_eq!(shape.key().len(), 64);
//! assert_eq!(GraphShape::from_canonical(&shape.canonical())?, shape);
//! # Ok::<(), serde_json::Error>(())
//! ```

use serde::{Deserialize, Serialize};

/// A graph's nodes and edges, as a reader without its code needs them to draw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GraphShape {
    /// The graph's name.
    pub name: String,
    /// Its nodes, in declaration order (`__start__` and `__end__` are not listed).
    pub nodes: Vec<GraphNode>,
    /// Its edges, in declaration order: static, joins, conditional, then goto destinations.
    pub edges: Vec<GraphEdge>,
}

/// A node of a [`GraphShape`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GraphNode {
    /// The node's name.
    pub name: String,
    /// The part it plays when the graph knows one, such as `model` or `tools` for an
    /// agent's model and tool nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The graph it runs, when it is a subgraph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgraph: Option<Box<GraphShape>>,
}

/// An edge of a [`GraphShape`]; `__start__` and `__end__` stand for the graph's entry and end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GraphEdge {
    /// Where it leaves.
    pub from: String,
    /// Where it goes.
    pub to: String,
    /// What kind of edge it is.
    pub kind: EdgeKind,
}

/// How an edge is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EdgeKind {
    /// Always, after its source ran.
    Static,
    /// Once every source of the join ran (one edge per source).
    Join,
    /// When the source's router picks this target.
    Conditional,
    /// When the source's command sends the run here (a declared goto destination).
    Goto,
}

impl GraphShape {
    /// An empty shape named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        GraphShape {
            name: name.into(),
            nodes: Vec::new(),
            edges: Vec::new(),
        }
    }

    /// With `node` added.
    pub fn with_node(mut self, node: GraphNode) -> Self {
        self.nodes.push(node);
        self
    }

    /// With `edge` added.
    pub fn with_edge(mut self, edge: GraphEdge) -> Self {
        self.edges.push(edge);
        self
    }

    /// The canonical encoding: compact JSON, members in declaration order, absent options
    /// left out. Equal shapes encode to equal bytes.
    pub fn canonical(&self) -> Vec<u8> {
        // Plain strings, vectors and enums: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decode a canonical encoding.
    ///
    /// # Errors
    /// The JSON error when `bytes` is not a shape.
    pub fn from_canonical(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The content key: the blake3 hash of [`GraphShape::canonical`], as 64 hex digits.
    pub fn key(&self) -> String {
        blake3::hash(&self.canonical()).to_hex().to_string()
    }

    /// The node named `name`, looking into subgraphs too (depth first).
    pub fn node(&self, name: &str) -> Option<&GraphNode> {
        self.nodes.iter().find_map(|n| {
            if n.name == name {
                Some(n)
            } else {
                n.subgraph.as_deref().and_then(|g| g.node(name))
            }
        })
    }
}

impl GraphNode {
    /// A plain node named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        GraphNode {
            name: name.into(),
            role: None,
            subgraph: None,
        }
    }

    /// With the role `role`.
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }

    /// Running the graph `shape`.
    pub fn with_subgraph(mut self, shape: GraphShape) -> Self {
        self.subgraph = Some(Box::new(shape));
        self
    }
}

impl GraphEdge {
    /// An edge from `from` to `to`.
    pub fn new(from: impl Into<String>, to: impl Into<String>, kind: EdgeKind) -> Self {
        GraphEdge {
            from: from.into(),
            to: to.into(),
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> GraphShape {
        GraphShape::new("g")
            .with_node(GraphNode::new("a").with_role("model"))
            .with_node(GraphNode::new("sub").with_subgraph(GraphShape::new("inner")))
            .with_edge(GraphEdge::new("a", "sub", EdgeKind::Conditional))
    }

    #[test]
    fn equal_shapes_share_a_key_and_a_changed_one_does_not() {
        assert_eq!(sample().key(), sample().key());
        let changed = sample().with_edge(GraphEdge::new("sub", "__end__", EdgeKind::Static));
        assert_ne!(sample().key(), changed.key());
    }

    #[test]
    fn the_canonical_encoding_round_trips_and_finds_nested_nodes() -> Result<(), serde_json::Error>
    {
        let back = GraphShape::from_canonical(&sample().canonical())?;
        assert_eq!(back, sample());
        assert_eq!(
            back.node("a").and_then(|n| n.role.as_deref()),
            Some("model")
        );
        assert!(GraphShape::from_canonical(b"{\"name\":1}").is_err());
        Ok(())
    }
}
