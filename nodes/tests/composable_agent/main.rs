//! Agent steps composed into a user's own graph: the model node, the tool node and
//! `tools_condition` over a user state with a messages field, and an assembled agent as a node
//! of a user's graph; one module per behaviour, shared helpers in `support`.

mod agent_node;
mod mediation;
mod model_tool_loop;
mod support;
mod tool_interrupts;
mod trace_per_thread;
