//! Visible: the deferred tool catalog, the `tool_search` tool and the deferred-tool filter.
//! (Being implemented; see deerflow-runtime semantics §4–5.)

use std::sync::Arc;

use crate::middleware::{Denial, ToolPolicy};
use crate::tool::{Tool, ToolSpec};
use crate::{RunContext, ThreadState, ToolCall};

/// The name of the tool-search tool.
pub const TOOL_SEARCH: &str = "tool_search";

/// The deferred catalog of one agent build.
#[derive(Clone, Debug)]
pub struct DeferredSetup {
    catalog: Vec<ToolSpec>,
    hash: String,
}

impl DeferredSetup {
    /// The setup for `candidates`, or `None` when none is deferrable.
    pub fn build(candidates: &[ToolSpec]) -> Option<DeferredSetup> {
        let catalog: Vec<ToolSpec> = candidates
            .iter()
            .filter(|s| s.deferrable)
            .cloned()
            .collect();
        if catalog.is_empty() {
            return None;
        }
        let hash = String::new();
        Some(DeferredSetup { catalog, hash })
    }

    /// The catalog hash.
    pub fn catalog_hash(&self) -> &str {
        &self.hash
    }

    /// The deferred names, in catalog order.
    pub fn names(&self) -> Vec<String> {
        self.catalog.iter().map(|s| s.name.clone()).collect()
    }

    /// The system-prompt section listing the deferred names.
    pub fn prompt_section(&self) -> String {
        String::new()
    }

    /// The `tool_search` tool of this build.
    pub fn tool_search(&self) -> Arc<dyn Tool> {
        unimplemented!()
    }

    /// The filter hiding deferred tools that are not promoted under this build's hash.
    pub fn filter(&self) -> DeferredToolFilter {
        DeferredToolFilter {
            setup: self.clone(),
        }
    }
}

/// Hides deferred tools not promoted under the current catalog hash, and refuses calls to them.
#[derive(Clone, Debug)]
pub struct DeferredToolFilter {
    setup: DeferredSetup,
}

impl ToolPolicy for DeferredToolFilter {
    fn name(&self) -> &str {
        "deferred_tool_filter"
    }

    fn visible(
        &self,
        tools: &[ToolSpec],
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Vec<Option<String>> {
        let _ = &self.setup;
        vec![None; tools.len()]
    }

    fn check_call(
        &self,
        _call: &ToolCall,
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Result<(), Denial> {
        Ok(())
    }
}
