//! The agent's graph: model and tool nodes, and the observer nodes around them.

use std::sync::Arc;

use stategraph::{BoxError, CompileError, CompiledGraph, NodeContext, StateGraph, END, START};

use crate::sandbox::Acquisition;
use crate::state::{ThreadState, ThreadStateUpdate};

use super::node::AgentCore;
use super::{ACQUIRE_SANDBOX_NODE, AFTER_AGENT_NODE, BEFORE_AGENT_NODE, MODEL_NODE, TOOL_NODE};

/// Whether the agent acquires its sandbox in a node before the first step.
fn eager_sandbox(core: &AgentCore) -> bool {
    core.sandbox
        .as_ref()
        .is_some_and(|rt| rt.options.acquisition == Acquisition::Eager)
}

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
            stategraph::NodeOptions::new()
                .destinations(model_targets)
                .role(MODEL_NODE),
        )
        .add_node_with(
            TOOL_NODE,
            move |s: Arc<ThreadState>, ctx: NodeContext| {
                let core = Arc::clone(&t);
                async move { core.tool_step(s, ctx).await }
            },
            // The last call of a batch sends the turn's next batch, or returns to the model.
            stategraph::NodeOptions::new()
                .destinations([MODEL_NODE, TOOL_NODE])
                .role(TOOL_NODE),
        );
    let first = if core.observers.is_empty() {
        MODEL_NODE
    } else {
        BEFORE_AGENT_NODE
    };
    if eager_sandbox(core) {
        let e = Arc::clone(core);
        g = g
            .add_node(
                ACQUIRE_SANDBOX_NODE,
                move |s: Arc<ThreadState>, _ctx: NodeContext| {
                    let core = Arc::clone(&e);
                    async move { core.acquire_sandbox_step(s).await }
                },
            )
            .add_edge(START, ACQUIRE_SANDBOX_NODE)
            .add_edge(ACQUIRE_SANDBOX_NODE, first);
    } else {
        g = g.add_edge(START, first);
    }
    if !core.observers.is_empty() {
        g = with_observers(g, core);
    }
    g.compile()
}

/// The `before_agent` and `after_agent` nodes around the loop, running the observers.
fn with_observers(g: StateGraph<ThreadState>, core: &Arc<AgentCore>) -> StateGraph<ThreadState> {
    let b = Arc::clone(core);
    let a = Arc::clone(core);
    g.add_node(
        BEFORE_AGENT_NODE,
        move |s: Arc<ThreadState>, _ctx: NodeContext| {
            let core = Arc::clone(&b);
            async move {
                for o in &core.observers {
                    o.before_agent(&s, &core.run_context());
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
                    o.after_agent(&s, &core.run_context());
                }
                Ok::<_, BoxError>(ThreadStateUpdate::default())
            }
        },
    )
    .add_edge(BEFORE_AGENT_NODE, MODEL_NODE)
    .add_edge(AFTER_AGENT_NODE, END)
}
