//! Narrowing `tool_search`: a search result cut down to the tools the active skill policy
//! allows, or replaced by an error when it cannot be checked.

use std::collections::HashSet;

use stategraph::reducers::{MessageOp, MessagesUpdate};

use super::policy::PolicyDecision;
use crate::deferred::TOOL_SEARCH;
use crate::message::{Message, ToolMessage};
use crate::tool::ToolOutput;
use crate::ToolCall;

/// The content of the tool message replacing a `tool_search` result the policy cannot check.
pub const UNVALIDATED_SEARCH: &str =
    "tool_search returned a result that could not be validated against the active skill policy.";

/// The content of a `tool_search` result whose every match the policy removed.
pub const NO_PERMITTED_MATCH: &str = "No tools found matching the active skill policy.";

/// The error answer to a `tool_search` call whose result cannot be checked.
fn unvalidated(call: &ToolCall) -> ToolOutput {
    ToolOutput::Message(ToolMessage::error(
        call.reply_id(),
        TOOL_SEARCH,
        UNVALIDATED_SEARCH,
    ))
}

/// The name of one OpenAI-function schema (`name` or `function.name`).
fn schema_name(schema: &serde_json::Value) -> Option<&str> {
    schema
        .get("name")
        .and_then(serde_json::Value::as_str)
        .or_else(|| {
            schema
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(serde_json::Value::as_str)
        })
}

/// Narrow a `tool_search` output to `decision`'s allowed names.
pub(super) fn narrow_search(
    call: &ToolCall,
    output: ToolOutput,
    decision: &PolicyDecision,
) -> ToolOutput {
    let ToolOutput::Command(cmd) = output else {
        return unvalidated(call);
    };
    let Some(update) = cmd.update_ref() else {
        return unvalidated(call);
    };
    let (Some(promoted), Some(messages)) = (&update.promoted, &update.messages) else {
        return unvalidated(call);
    };
    let [MessageOp::Upsert(Message::Tool(message))] = messages.ops() else {
        return unvalidated(call);
    };
    let permitted: Vec<String> = promoted
        .names
        .iter()
        .filter(|n| decision.allows(n))
        .cloned()
        .collect();
    let mut message = message.clone();
    if !promoted.names.is_empty() {
        let Ok(schemas) = serde_json::from_str::<Vec<serde_json::Value>>(&message.content) else {
            return unvalidated(call);
        };
        let permitted_set: HashSet<&str> = permitted.iter().map(String::as_str).collect();
        let kept: Vec<serde_json::Value> = schemas
            .into_iter()
            .filter(|s| schema_name(s).is_some_and(|n| permitted_set.contains(n)))
            .collect();
        message.content = if kept.is_empty() {
            NO_PERMITTED_MATCH.to_owned()
        } else {
            match serde_json::to_string_pretty(&kept) {
                Ok(text) => text,
                Err(_) => return unvalidated(call),
            }
        };
    }
    let mut narrowed = promoted.clone();
    narrowed.names = permitted;
    let mut update = update.clone();
    update.promoted = Some(narrowed);
    update.messages = Some(MessagesUpdate::from(Message::Tool(message)));
    // Replacing only the update keeps the command's routing, parent command and resume.
    ToolOutput::Command(cmd.update(update))
}
