//! What the model sees and which calls pass, under one decision.

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::FRAMEWORK_TOOLS;
use stategraph_nodes::{Denial, ToolPolicy};

use crate::support::*;

#[test]
fn visible_keeps_allowed_tools_in_order() {
    let p = policy(vec![skill("calc", Some(&["calc", "web_search"]))]);
    let state = reading(&["calc"]);
    let names = [
        "web_search",
        "bash",
        "read_file",
        "calc",
        TOOL_SEARCH,
        "describe_skill",
    ];
    assert_eq!(
        kept(&p, &names, &state, &RunContext::default()),
        [
            "web_search",
            "read_file",
            "calc",
            TOOL_SEARCH,
            "describe_skill"
        ]
    );
}

#[test]
fn framework_tools_are_never_removed() {
    let p = policy(vec![skill("none", Some(&[]))]);
    let state = reading(&["none"]);
    assert_eq!(
        kept(&p, &FRAMEWORK_TOOLS, &state, &RunContext::default()),
        FRAMEWORK_TOOLS
    );
}

#[test]
fn disallowed_call_is_refused_with_the_policy_message() -> Result<(), Denial> {
    let p = policy(vec![skill("calc", Some(&["calc"]))]);
    let state = reading(&["calc"]);
    let run = RunContext::default();
    let denial = p
        .check_call(&ToolCall::new("c", "bash", json!({})), None, &state, &run)
        .expect_err("bash is not allowed");
    assert_eq!(
        denial.message,
        "Error: Tool 'bash' is not allowed by the active skill policy."
    );
    p.check_call(&ToolCall::new("c", "calc", json!({})), None, &state, &run)?;
    p.check_call(
        &ToolCall::new("c", TOOL_SEARCH, json!({})),
        None,
        &state,
        &run,
    )?;
    Ok(())
}

#[test]
fn call_time_check_recomputes_from_current_state() {
    let p = policy(vec![
        skill("calc", Some(&["calc"])),
        skill("web", Some(&["web_search"])),
    ]);
    let call = ToolCall::new("c", "web_search", json!({}));
    let run = RunContext::default();
    assert!(p
        .check_call(&call, None, &reading(&["calc"]), &run)
        .is_err());
    assert!(p
        .check_call(&call, None, &reading(&["calc", "web"]), &run)
        .is_ok());
}
