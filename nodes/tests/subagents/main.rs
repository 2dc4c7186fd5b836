//! Subagents: delegation through `task` / `multi_task` to ephemeral child graphs with
//! explicit, isolated capabilities; one module per area, shared helpers in `support`.

mod capabilities;
mod capacity;
mod context;
mod isolation;
mod memory_grant;
mod status;
mod streaming;
mod support;
mod trace;
mod usage;
mod wiring;
