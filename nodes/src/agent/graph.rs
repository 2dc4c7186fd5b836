//! The agent's graph: model and tool nodes, and the observer nodes around them.

use std::sync::Arc;

use stategraph::{BoxError, CompileError, CompiledGraph, NodeContext, StateGraph, END, START};

use crate::state::{ThreadState, ThreadStateUpdate};

use super::node::AgentCore;
use super::{AFTER_AGENT_NODE, BEFORE_AGENT_NODE, MODEL_NODE, TOOL_NODE};

/// Compile the agent's graph over `core`.
pub(super) fn build_graph(
    core: &Arc<AgentCore>,
) -> Result<CompiledGraph<ThreadState>, CompileError> {
    let m = Arc::clone(core);
    let t = Arc::clone(core);
    let model_targets: Vec<&str> = if core.observers.is_empty() {
        vec![TOOL_NODE, END]
    } else {
        vec![TOOL_NODE, AFTER_AGENT_NODE]
    };
    let mut g = StateGraph::<ThreadState>::new()
        .add_node_with(
            MODEL_NODE,
            move |s: Arc<ThreadState>, ctx: NodeContext| {
                let core = Arc::clone(&m);
                async move { core.model_step(s, ctx).await }
            },
            stategraph::NodeOptions::new().destinations(model_targets),
        )
        .add_node(TOOL_NODE, move |s: Arc<ThreadState>, ctx: NodeContext| {
            let core = Arc::clone(&t);
            async move { core.tool_step(s, ctx).await }
        })
        .add_edge(TOOL_NODE, MODEL_NODE);
    if core.observers.is_empty() {
        g = g.add_edge(START, MODEL_NODE);
    } else {
        let b = Arc::clone(core);
        let a = Arc::clone(core);
        g = g
            .add_node(
                BEFORE_AGENT_NODE,
                move |s: Arc<ThreadState>, _ctx: NodeContext| {
                    let core = Arc::clone(&b);
                    async move {
                        for o in &core.observers {
                            o.before_agent(&s, &core.run);
                        }
                        Ok::<_, BoxError>(ThreadStateUpdate::default())
                    }
                },
            )
            .add_node(
                AFTER_AGENT_NODE,
                move |s: Arc<ThreadState>, _ctx: NodeContext| {
                    let core = Arc::clone(&a);
                    async move {
                        for o in core.observers.iter().rev() {
                            o.after_agent(&s, &core.run);
                        }
                        Ok::<_, BoxError>(ThreadStateUpdate::default())
                    }
                },
            )
            .add_edge(START, BEFORE_AGENT_NODE)
            .add_edge(BEFORE_AGENT_NODE, MODEL_NODE)
            .add_edge(AFTER_AGENT_NODE, END);
    }
    g.compile()
}
