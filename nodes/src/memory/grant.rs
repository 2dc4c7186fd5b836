//! [`MemoryGrant`]: memory tools only for an agent granted a store, checked when the model's
//! view is assembled and again before a handler runs.

use crate::context::RunContext;
use crate::message::ToolCall;
use crate::middleware::{Denial, ToolPolicy};
use crate::state::ThreadState;
use crate::tool::ToolSpec;

use super::{is_memory_tool, MEMORY_GRANT, MEMORY_TOOLS};

/// The policy every agent carries: without a grant ([`AgentBuilder::memory`]) it hides the
/// memory tools from the model and refuses their calls, whatever put them in the pool. (The
/// admission rule of the same name has already kept them out of such an agent's catalog;
/// this is the call-time half of complete mediation.)
///
/// [`AgentBuilder::memory`]: crate::AgentBuilder::memory
#[derive(Debug, Clone, Copy)]
pub struct MemoryGrant {
    granted: bool,
}

impl MemoryGrant {
    /// The policy of an agent that was (`true`) or was not granted a store.
    pub fn new(granted: bool) -> Self {
        MemoryGrant { granted }
    }

    fn refuses(&self, name: &str, spec: Option<&ToolSpec>) -> bool {
        if self.granted {
            return false;
        }
        match spec {
            Some(spec) => is_memory_tool(spec),
            // A call of a tool the agent does not have, under a memory tool's name.
            None => MEMORY_TOOLS.contains(&name),
        }
    }
}

const REASON: &str = "the agent was not granted a store";

impl ToolPolicy for MemoryGrant {
    fn name(&self) -> &str {
        MEMORY_GRANT
    }

    fn visible(
        &self,
        tools: &[&ToolSpec],
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Vec<Option<String>> {
        tools
            .iter()
            .map(|s| self.refuses(&s.name, Some(s)).then(|| REASON.to_owned()))
            .collect()
    }

    fn check_call(
        &self,
        call: &ToolCall,
        spec: Option<&ToolSpec>,
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Result<(), Denial> {
        if self.refuses(&call.name, spec) {
            return Err(Denial::new(
                REASON,
                format!(
                    "Error: {} is not available: this agent has no memory",
                    call.name
                ),
            ));
        }
        Ok(())
    }
}
