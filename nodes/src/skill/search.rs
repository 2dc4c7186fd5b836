//! Narrowing `tool_search`: a search result cut down to the tools the active skill policy
//! allows, or replaced by an error when it cannot be checked.

use super::policy::PolicyDecision;
use crate::mediation::Wording;
use crate::tool::ToolOutput;
use crate::ToolCall;

/// The content of the tool message replacing a `tool_search` result the policy cannot check.
pub const UNVALIDATED_SEARCH: &str =
    "tool_search returned a result that could not be validated against the active skill policy.";

/// The content of a `tool_search` result whose every match the policy removed.
pub const NO_PERMITTED_MATCH: &str = "No tools found matching the active skill policy.";

/// Narrow a `tool_search` output to `decision`'s allowed names.
pub(super) fn narrow_search(
    call: &ToolCall,
    output: ToolOutput,
    decision: &PolicyDecision,
) -> ToolOutput {
    crate::mediation::narrow_search(
        call,
        output,
        &|name| decision.allows(name),
        &Wording {
            unchecked: UNVALIDATED_SEARCH,
            no_match: NO_PERMITTED_MATCH,
        },
    )
}
