//! The compiled graph's [`GraphShape`]: made once per compiled graph and handed to the saver
//! when a run starts on a thread, so the checkpoint file says which graph made its
//! checkpoints (decision 0050).

use std::sync::Arc;

use futures::future::BoxFuture;

use stategraph_checkpoints::graph_shape::{EdgeKind, GraphEdge, GraphNode, GraphShape};
use stategraph_checkpoints::{CheckpointError, Saver, ThreadId};

use super::CompiledGraph;
use crate::{RunError, State};

impl<S: State> CompiledGraph<S> {
    /// The graph's shape: its nodes (with their roles and subgraphs) and every edge — static,
    /// join, conditional (one per router target) and goto — in declaration order. The run
    /// stores it with the thread's checkpoints, where `stategraph studio` draws it from.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::{NodeContext, State, StateGraph, END, START};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { n: u32 }
    ///
    /// let g = StateGraph::<S>::new()
    ///     .add_node("a", |_s: Arc<S>, _c: NodeContext| async { Ok::<_, stategraph::BoxError>(S::update()) })
    ///     .add_edge(START, "a")
    ///     .add_edge("a", END)
    ///     .compile()?;
    /// let shape = g.shape();
    /// assert_eq!(shape.nodes.len(), 1);
    /// assert_eq!(shape.edges.len(), 2);
    /// # Ok::<(), stategraph::CompileError>(())
    /// ```
    pub fn shape(&self) -> Arc<GraphShape> {
        Arc::clone(
            self.inner
                .shape
                .get_or_init(|| Arc::new(self.build_shape())),
        )
    }

    /// Build the shape from the compiled nodes and edges.
    pub(crate) fn build_shape(&self) -> GraphShape {
        let g = &self.inner;
        let mut shape = GraphShape::new(g.name.as_str());
        for n in &g.nodes {
            let mut node = GraphNode::new(&*n.name);
            if let Some(role) = &n.options.role {
                node = node.with_role(role.as_str());
            }
            if let Some(child) = &n.subgraph {
                node = node.with_subgraph(child.shape());
            }
            shape = shape.with_node(node);
        }
        for (from, to) in &g.edges {
            shape = shape.with_edge(GraphEdge::new(from.as_str(), to.as_str(), EdgeKind::Static));
        }
        for (sources, to) in &g.join_specs {
            for from in sources {
                shape = shape.with_edge(GraphEdge::new(from.as_str(), to.as_str(), EdgeKind::Join));
            }
        }
        for b in &g.branches {
            for t in &b.targets {
                let e = GraphEdge::new(b.from.as_str(), t.as_str(), EdgeKind::Conditional);
                shape = shape.with_edge(e);
            }
        }
        for n in &g.nodes {
            for d in n.destinations.iter().flatten() {
                shape = shape.with_edge(GraphEdge::new(&*n.name, d.as_str(), EdgeKind::Goto));
            }
        }
        shape
    }

    /// Tell `saver` that `thread`'s next checkpoints are made by this graph: the write, to be
    /// polled once at once (a saver that queues in call order takes it then, ahead of the
    /// run's first checkpoint) and then kept with the run's checkpoint writes, so that no run
    /// waits for its commit. A saver without graph shapes (the trait's default) stores
    /// nothing.
    pub(crate) fn shape_write(
        &self,
        saver: &Arc<dyn Saver>,
        thread: &ThreadId,
    ) -> BoxFuture<'static, Result<(), RunError>> {
        let (saver, thread, shape) = (Arc::clone(saver), thread.clone(), self.shape());
        Box::pin(async move {
            match saver.put_graph(&thread, shape).await {
                Ok(()) | Err(CheckpointError::Unsupported { .. }) => Ok(()),
                Err(e) => Err(RunError::from(e)),
            }
        })
    }
}
