//! The agent: model node + tool node + routing, layers and observers, catalog assembly,
//! authorization, guardrail, the call-time re-check and the capability trace; one module per
//! area, with shared helpers in `support`.

mod authorization;
mod catalog;
mod guardrail;
mod interrupts;
mod last_step;
mod layers;
mod memory;
mod memory_across_threads;
mod messages_mode;
mod model_tool_loop;
mod observers;
mod replay;
mod support;
