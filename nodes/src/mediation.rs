//! Complete mediation of `tool_search`: a search result narrowed to the tools a policy lets the
//! model see, or replaced by an error when it cannot be checked.
//!
//! `tool_search` searches the deferred catalog, which is built before any policy runs; without
//! this step a tool a policy hides would still have its schema returned, and be promoted, by
//! a search. Every policy layer therefore narrows what a search returns and promotes with
//! [`ToolPolicy::search_visible`](crate::ToolPolicy::search_visible).

use std::collections::HashSet;

use stategraph::reducers::{MessageOp, MessagesUpdate};

use crate::deferred::TOOL_SEARCH;
use crate::message::{Message, ToolMessage};
use crate::tool::ToolOutput;
use crate::ToolCall;

/// The content of the tool message replacing a `tool_search` result no policy can check.
pub const UNCHECKED_SEARCH: &str =
    "tool_search returned a result that could not be checked against the agent's tool policies.";

/// The content of a `tool_search` result whose every match a policy hid.
pub const NO_VISIBLE_MATCH: &str = "No tools found that the agent's tool policies allow.";

/// What a narrowed search says when it cannot check a result, or when nothing is left.
pub(crate) struct Wording<'a> {
    /// The error text for a result that cannot be checked.
    pub(crate) unchecked: &'a str,
    /// The text of a result with no match left.
    pub(crate) no_match: &'a str,
}

/// The wording of the policies' own narrowing.
pub(crate) const POLICY_WORDING: Wording<'static> = Wording {
    unchecked: UNCHECKED_SEARCH,
    no_match: NO_VISIBLE_MATCH,
};

/// The error answer to a `tool_search` call whose result cannot be checked.
fn unchecked(call: &ToolCall, wording: &Wording<'_>) -> ToolOutput {
    ToolOutput::Message(ToolMessage::error(
        call.reply_id(),
        TOOL_SEARCH,
        wording.unchecked,
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

/// The names a `tool_search` output promotes, or `None` when it is not the shape
/// `tool_search` answers with (a command writing `promoted` and one tool message).
pub(crate) fn promoted_names(output: &ToolOutput) -> Option<&[String]> {
    let ToolOutput::Command(cmd) = output else {
        return None;
    };
    let update = cmd.update_ref()?;
    match (&update.promoted, &update.messages) {
        (Some(promoted), Some(messages))
            if matches!(messages.ops(), [MessageOp::Upsert(Message::Tool(_))]) =>
        {
            Some(&promoted.names)
        }
        _ => None,
    }
}

/// Narrow a `tool_search` output to the names `allows` keeps: both the promotion and the
/// schemas in the tool message. An output of another shape becomes an error message (fail
/// closed).
pub(crate) fn narrow_search(
    call: &ToolCall,
    output: ToolOutput,
    allows: &dyn Fn(&str) -> bool,
    wording: &Wording<'_>,
) -> ToolOutput {
    let ToolOutput::Command(cmd) = output else {
        return unchecked(call, wording);
    };
    let Some(update) = cmd.update_ref() else {
        return unchecked(call, wording);
    };
    let (Some(promoted), Some(messages)) = (&update.promoted, &update.messages) else {
        return unchecked(call, wording);
    };
    let [MessageOp::Upsert(Message::Tool(message))] = messages.ops() else {
        return unchecked(call, wording);
    };
    let permitted: Vec<String> = promoted
        .names
        .iter()
        .filter(|n| allows(n))
        .cloned()
        .collect();
    let mut message = message.clone();
    if !promoted.names.is_empty() {
        let Ok(schemas) = serde_json::from_str::<Vec<serde_json::Value>>(&message.content) else {
            return unchecked(call, wording);
        };
        let permitted_set: HashSet<&str> = permitted.iter().map(String::as_str).collect();
        let kept: Vec<serde_json::Value> = schemas
            .into_iter()
            .filter(|s| schema_name(s).is_some_and(|n| permitted_set.contains(n)))
            .collect();
        message.content = if kept.is_empty() {
            wording.no_match.to_owned()
        } else {
            match serde_json::to_string_pretty(&kept) {
                Ok(text) => text,
                Err(_) => return unchecked(call, wording),
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
