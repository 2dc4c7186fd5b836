//! Behaviour tests of the engine core, one module per area.
#![allow(missing_docs, unreachable_pub)]

mod checkpoint_records;
mod command_routing;
mod compile_validation;
mod debug_stream;
mod durability_modes;
mod finished_task_writes;
mod functional;
mod graph_shape_storage;
mod inspect_replay;
mod interrupt_resume;
mod managed_values;
mod mermaid_export;
mod node_error_handlers;
mod node_error_handlers_resume;
mod node_timeouts;
mod replay_branches;
mod replay_reads_what_changed;
mod resume_by_task;
mod run_usage;
mod runtime_context;
mod sqlite_threads;
mod store_context;
mod stream_events;
mod subgraph_checkpointing;
mod superstep_semantics;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A counter shared between a test and its nodes.
#[derive(Clone, Default, Debug)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn hit(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;
