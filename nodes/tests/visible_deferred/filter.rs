//! The deferred-tool filter: hidden until promoted under the current hash.

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::{Denial, ToolPolicy};

use crate::support::*;

fn specs_for(names: &[&str], deferred: &[&str]) -> Vec<ToolSpec> {
    names
        .iter()
        .map(|n| ToolSpec::new(*n, "", ToolSource::Config).deferrable(deferred.contains(n)))
        .collect()
}

#[test]
fn filter_hides_unpromoted_deferred_tools_keeping_order() {
    let specs = specs_for(&["calc", "d1", "web", "d2", TOOL_SEARCH], &["d1", "d2"]);
    let s = setup(&specs);
    let verdicts = s.filter().visible(
        &specs.iter().collect::<Vec<_>>(),
        &ThreadState::default(),
        &RunContext::default(),
    );
    let kept: Vec<&str> = specs
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| v.is_none())
        .map(|(t, _)| t.name.as_str())
        .collect();
    assert_eq!(kept, ["calc", "web", TOOL_SEARCH]);
    let reason = verdicts[1].clone().expect("d1 hidden");
    assert!(reason.contains(s.catalog_hash()), "{reason}");
}

#[test]
fn promoted_tools_under_this_hash_are_visible() {
    let specs = specs_for(&["d1", "d2"], &["d1", "d2"]);
    let s = setup(&specs);
    let state = state_promoting(s.catalog_hash(), &["d2"]);
    let verdicts = s.filter().visible(
        &specs.iter().collect::<Vec<_>>(),
        &state,
        &RunContext::default(),
    );
    assert!(verdicts[0].is_some());
    assert!(verdicts[1].is_none());
    assert_eq!(s.filter().hidden(&state), ["d1"]);
}

#[test]
fn stale_hash_promotes_nothing() {
    let specs = specs_for(&["d1", "d2"], &["d1", "d2"]);
    let s = setup(&specs);
    let state = state_promoting("0123456789abcdef", &["d1", "d2"]);
    let verdicts = s.filter().visible(
        &specs.iter().collect::<Vec<_>>(),
        &state,
        &RunContext::default(),
    );
    assert!(verdicts.iter().all(Option::is_some));
    let call = ToolCall::new("c", "d1", json!({}));
    assert!(s
        .filter()
        .check_call(&call, None, &state, &RunContext::default())
        .is_err());
}

#[test]
fn call_to_hidden_deferred_tool_is_refused_with_tool_search_hint() {
    let s = setup(&specs_for(&["d1"], &["d1"]));
    let denial = s
        .filter()
        .check_call(
            &ToolCall::new("c", "d1", json!({})),
            None,
            &ThreadState::default(),
            &RunContext::default(),
        )
        .expect_err("hidden");
    assert!(denial.message.contains("deferred"), "{}", denial.message);
    assert!(
        denial.message.contains("not been promoted"),
        "{}",
        denial.message
    );
    assert!(denial.message.contains(TOOL_SEARCH), "{}", denial.message);
}

#[test]
fn non_deferred_and_promoted_calls_pass_the_filter() -> Result<(), Denial> {
    let s = setup(&specs_for(&["calc", "d1"], &["d1"]));
    let state = state_promoting(s.catalog_hash(), &["d1"]);
    let run = RunContext::default();
    let f = s.filter();
    f.check_call(
        &ToolCall::new("c", "calc", json!({})),
        None,
        &ThreadState::default(),
        &run,
    )?;
    f.check_call(
        &ToolCall::new("c", TOOL_SEARCH, json!({})),
        None,
        &ThreadState::default(),
        &run,
    )?;
    f.check_call(&ToolCall::new("c", "d1", json!({})), None, &state, &run)?;
    Ok(())
}

#[test]
fn a_second_setup_does_not_change_the_first() {
    let lead = setup(&specs_for(&["d1", "d2"], &["d1", "d2"]));
    let sub = setup(&specs_for(&["d1"], &["d1"]));
    assert_ne!(lead.catalog_hash(), sub.catalog_hash());
    // A promotion under the subagent's hash is stale for the lead.
    let state = state_promoting(sub.catalog_hash(), &["d1"]);
    assert_eq!(lead.filter().hidden(&state), ["d1", "d2"]);
    assert!(sub.filter().hidden(&state).is_empty());
}
