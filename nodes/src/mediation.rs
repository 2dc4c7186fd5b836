//! Complete mediation of `tool_search`: a search result narrowed to the tools a policy lets the
//! model see, or replaced by an error when it cannot be checked; and the deferred names the
//! system prompt lists, narrowed the same way.
//!
//! `tool_search` searches the deferred catalog, which is built before any policy runs; without
//! this step a tool a policy hides would still have its schema returned, and be promoted, by
//! a search. Every policy layer therefore narrows what a search returns and promotes with
//! [`ToolPolicy::search_visible`].

use std::collections::{HashMap, HashSet};

use stategraph::reducers::{MessageOp, MessagesUpdate};

use crate::context::RunContext;
use crate::deferred::{html_escape, TOOL_SEARCH};
use crate::message::{Message, ToolMessage};
use crate::middleware::{ModelCall, ToolPolicy};
use crate::state::ThreadState;
use crate::tool::{ToolOutput, ToolSpec};
use crate::trace::{CapabilityTrace, Stage, TraceEntry, Verdict};
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

/// The opening and closing lines of the deferred-tools section of a system prompt.
const SECTION_OPEN: &str = "<available-deferred-tools>\n";
const SECTION_CLOSE: &str = "</available-deferred-tools>";

/// `system` with the names of its `<available-deferred-tools>` section narrowed to those
/// `reveal` keeps: `reveal` gets each listed name as escaped in the section (and says whether
/// to keep it). A section left empty is removed with the blank line before it. `None` when
/// nothing changes.
pub(crate) fn narrow_prompt_section(system: &str, reveal: &dyn Fn(&str) -> bool) -> Option<String> {
    let start = system.find(SECTION_OPEN)?;
    let body_start = start + SECTION_OPEN.len();
    let body_len = system.get(body_start..)?.find(SECTION_CLOSE)?;
    let body = system.get(body_start..body_start + body_len)?;
    let names: Vec<&str> = body.lines().collect();
    let kept: Vec<&str> = names.iter().copied().filter(|n| reveal(n)).collect();
    if kept.len() == names.len() {
        return None;
    }
    let before = system.get(..start)?;
    let after = system.get(body_start + body_len + SECTION_CLOSE.len()..)?;
    if kept.is_empty() {
        let before = before.strip_suffix("\n\n").unwrap_or(before);
        return Some(format!("{before}{after}"));
    }
    let mut section = String::from(SECTION_OPEN);
    for name in kept {
        section.push_str(name);
        section.push('\n');
    }
    section.push_str(SECTION_CLOSE);
    Some(format!("{before}{section}{after}"))
}

/// The escaped form of `name`, as the deferred-tools section lists it.
fn listed_name(name: &str) -> String {
    html_escape(name)
}

/// The deferred names the system prompt lists, narrowed to what the policy lets a search
/// reveal: a tool a policy hides is not named to the model either.
pub(crate) fn mediate_prompt<P: ToolPolicy>(
    policy: &P,
    specs: &HashMap<String, ToolSpec>,
    call: &mut ModelCall,
) {
    let Some(system) = call.request.system.as_deref() else {
        return;
    };
    if !system.contains(SECTION_OPEN) {
        return;
    }
    let names: Vec<&ToolSpec> = specs.values().filter(|s| s.deferrable).collect();
    let verdicts = policy.search_visible(&names, &call.state, &call.run);
    let hidden: HashSet<String> = names
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| v.is_some())
        .map(|(s, _)| listed_name(&s.name))
        .collect();
    if hidden.is_empty() {
        return;
    }
    if let Some(narrowed) = narrow_prompt_section(system, &|n| !hidden.contains(n)) {
        call.request.system = Some(narrowed);
    }
}

/// A result of the agent's own `tool_search`, narrowed to what the policy lets a search
/// reveal (complete mediation); any other output unchanged.
pub(crate) fn mediate_search<P: ToolPolicy>(
    (policy, specs): (&P, &HashMap<String, ToolSpec>),
    call: &ToolCall,
    output: ToolOutput,
    trace: &CapabilityTrace,
    (state, run): (&ThreadState, &RunContext),
) -> ToolOutput {
    let own_search = specs
        .get(TOOL_SEARCH)
        .is_some_and(|s| s.source == crate::ToolSource::BuiltIn);
    if call.name != TOOL_SEARCH || !own_search {
        return output;
    }
    let Some(names) = promoted_names(&output) else {
        return narrow_search(call, output, &|_| false, &POLICY_WORDING);
    };
    let found: Vec<&ToolSpec> = names.iter().filter_map(|n| specs.get(n)).collect();
    let verdicts = policy.search_visible(&found, state, run);
    // A name with no spec, or no verdict, is not revealed (fail closed).
    let mut allowed: HashSet<&str> = HashSet::new();
    for (i, spec) in found.iter().enumerate() {
        match verdicts.get(i) {
            Some(None) => {
                allowed.insert(&spec.name);
            }
            hidden => trace.record(
                TraceEntry::new(
                    &spec.name,
                    Stage::Visible,
                    Verdict::removed(
                        policy.name(),
                        format!(
                            "left out of a tool_search result: {}",
                            hidden.cloned().flatten().unwrap_or_default()
                        ),
                    ),
                )
                .for_call(&call.id),
            ),
        }
    }
    if allowed.len() == names.len() {
        return output;
    }
    let allowed: HashSet<String> = allowed.into_iter().map(str::to_owned).collect();
    narrow_search(call, output, &|n| allowed.contains(n), &POLICY_WORDING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_name_leaves_the_prompt_section_and_an_empty_section_leaves_the_prompt() {
        let system = "Be brief.\n\n<available-deferred-tools>\nread_file\nwrite_file\n</available-deferred-tools>";
        let narrowed = narrow_prompt_section(system, &|n| n != "write_file");
        assert_eq!(
            narrowed.as_deref(),
            Some("Be brief.\n\n<available-deferred-tools>\nread_file\n</available-deferred-tools>")
        );
        assert_eq!(narrow_prompt_section(system, &|_| true), None);
        assert_eq!(
            narrow_prompt_section(system, &|_| false).as_deref(),
            Some("Be brief.")
        );
        assert_eq!(narrow_prompt_section("no section", &|_| false), None);
    }
}
