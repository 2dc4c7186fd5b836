//! Resolving the active policy: slash skill, skill_context, passive; what survives.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::{PolicySource, SkillRegistry, SkillToolPolicy};
use stategraph_nodes::state::SkillRef;
use stategraph_nodes::ToolPolicy;

use crate::support::*;

#[test]
fn passive_policy_filters_nothing_and_never_reads_the_store() {
    let loads = Arc::new(AtomicUsize::new(0));
    let p = SkillToolPolicy::new(
        Arc::new(CountingStore {
            loads: Arc::clone(&loads),
            fail: true,
            skills: vec![],
        }),
        None,
    );
    let (state, run) = (ThreadState::default(), RunContext::default());
    let decision = p.decide(&state, &run);
    assert_eq!(decision.source, PolicySource::Passive);
    assert_eq!(decision.allowed, None);
    assert_eq!(kept(&p, &["bash", "calc"], &state, &run), ["bash", "calc"]);
    assert!(p
        .check_call(&ToolCall::new("c", "bash", json!({})), None, &state, &run)
        .is_ok());
    let out = p.filter_output(
        &ToolCall::new("c", TOOL_SEARCH, json!({})),
        ToolOutput::Message(ToolMessage::new("c", TOOL_SEARCH, "not even a command")),
        &state,
        &run,
    );
    assert_eq!(
        out.message().map(|m| m.content.as_str()),
        Some("not even a command")
    );
    assert_eq!(loads.load(Ordering::SeqCst), 0);
}

#[test]
fn slash_skill_dominates_skill_context() {
    let p = policy(vec![
        skill("calc", Some(&["calc"])),
        skill("web", Some(&["web_search"])),
    ]);
    let run = RunContext::default().slash_skill(path("calc"));
    let decision = p.decide(&reading(&["web"]), &run);
    assert_eq!(decision.source, PolicySource::Slash);
    assert_eq!(decision.paths, [path("calc")]);
    assert_eq!(decision.allowed, Some(with_framework(&["calc"])));
}

#[test]
fn skill_context_paths_are_active_in_state_order() {
    let p = policy(vec![
        skill("calc", Some(&["calc"])),
        skill("web", Some(&["web_search"])),
    ]);
    let decision = p.decide(&reading(&["web", "calc"]), &RunContext::default());
    assert_eq!(decision.source, PolicySource::SkillContext);
    assert_eq!(decision.paths, [path("web"), path("calc")]);
    assert_eq!(
        decision.allowed,
        Some(with_framework(&["calc", "web_search"]))
    );
}

#[test]
fn unresolvable_path_is_skipped() {
    let p = policy(vec![skill("calc", Some(&["calc"]))]);
    let decision = p.decide(&reading(&["ghost", "calc"]), &RunContext::default());
    assert_eq!(decision.allowed, Some(with_framework(&["calc"])));
}

#[test]
fn disabled_skill_is_skipped() {
    let mut off = skill("web", Some(&["web_search"]));
    off.enabled = false;
    let p = policy(vec![skill("calc", Some(&["calc"])), off]);
    let decision = p.decide(&reading(&["calc", "web"]), &RunContext::default());
    assert_eq!(decision.allowed, Some(with_framework(&["calc"])));
}

#[test]
fn skill_outside_available_skills_is_skipped() {
    let p = SkillToolPolicy::new(
        Arc::new(SkillRegistry::new(vec![
            skill("calc", Some(&["calc"])),
            skill("web", Some(&["web_search"])),
        ])),
        Some(vec!["calc".to_owned()]),
    );
    let decision = p.decide(&reading(&["calc", "web"]), &RunContext::default());
    assert_eq!(decision.allowed, Some(with_framework(&["calc"])));
}

#[test]
fn duplicate_skill_name_is_skipped() {
    let mut custom = skill("calc", Some(&["bash"]));
    custom.path = "/mnt/skills/custom/calc/SKILL.md".to_owned();
    let p = policy(vec![skill("calc", Some(&["calc"])), custom]);
    let mut state = reading(&["calc"]);
    state.skill_context.push(SkillRef {
        name: "calc".into(),
        path: "/mnt/skills/custom/calc/SKILL.md".into(),
        ..SkillRef::default()
    });
    let decision = p.decide(&state, &RunContext::default());
    assert_eq!(decision.allowed, Some(with_framework(&["calc"])));
}

#[test]
fn active_paths_are_normalised() {
    let p = policy(vec![skill("calc", Some(&["calc"]))]);
    let run = RunContext::default().slash_skill("/mnt//skills/public/./x/../calc/SKILL.md");
    assert_eq!(
        p.decide(&ThreadState::default(), &run).allowed,
        Some(with_framework(&["calc"]))
    );
}

#[test]
fn store_error_fails_closed_to_framework_tools() {
    let loads = Arc::new(AtomicUsize::new(0));
    let p = SkillToolPolicy::new(
        Arc::new(CountingStore {
            loads: Arc::clone(&loads),
            fail: true,
            skills: vec![skill("calc", None)],
        }),
        None,
    );
    let decision = p.decide(&reading(&["calc"]), &RunContext::default());
    assert_eq!(decision.allowed, Some(framework()));
    assert_eq!(loads.load(Ordering::SeqCst), 1);
}

#[test]
fn no_surviving_skill_fails_closed_to_framework_tools() {
    let p = policy(vec![skill("calc", None)]);
    let run = RunContext::default().slash_skill(path("ghost"));
    assert_eq!(
        p.decide(&ThreadState::default(), &run).allowed,
        Some(framework())
    );
}

#[test]
fn all_legacy_skills_allow_every_tool() {
    let p = policy(vec![skill("old", None), skill("older", None)]);
    let state = reading(&["old", "older"]);
    let run = RunContext::default();
    let decision = p.decide(&state, &run);
    assert_eq!(decision.source, PolicySource::SkillContext);
    assert_eq!(decision.allowed, None);
    assert_eq!(kept(&p, &["bash", "calc"], &state, &run), ["bash", "calc"]);
}

#[test]
fn legacy_skill_contributes_nothing_to_an_explicit_union() {
    let p = policy(vec![skill("old", None), skill("calc", Some(&["calc"]))]);
    let decision = p.decide(&reading(&["old", "calc"]), &RunContext::default());
    assert_eq!(decision.allowed, Some(with_framework(&["calc"])));
}

#[test]
fn explicit_empty_list_allows_only_framework_tools() {
    let p = policy(vec![skill("none", Some(&[]))]);
    let decision = p.decide(&reading(&["none"]), &RunContext::default());
    assert_eq!(decision.allowed, Some(framework()));
}

#[test]
fn malformed_allowed_tools_fails_closed_to_framework_tools() {
    let registry = SkillRegistry::from_skill_mds([(
        path("bad"),
        skill_md("bad", "allowed-tools: [calc, 7]\n"),
        true,
    )]);
    assert_eq!(registry.failures().len(), 1);
    let p = SkillToolPolicy::new(Arc::new(registry), None);
    let run = RunContext::default().slash_skill(path("bad"));
    assert_eq!(
        p.decide(&ThreadState::default(), &run).allowed,
        Some(framework())
    );
}
