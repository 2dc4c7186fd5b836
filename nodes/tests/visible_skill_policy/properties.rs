//! Properties: visible and check_call agree, framework tools always pass.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::{Skill, SkillToolPolicy, FRAMEWORK_TOOLS};
use stategraph_nodes::state::SkillRef;
use stategraph_nodes::ToolPolicy;

use crate::support::*;

const TOOLS: [&str; 8] = [
    "calc",
    "bash",
    "web_search",
    "read_file",
    TOOL_SEARCH,
    "describe_skill",
    "plot",
    "mail",
];

fn skill_strategy() -> impl Strategy<Value = Skill> {
    (
        0usize..5,
        prop::option::of(prop::collection::vec(
            prop::sample::select(TOOLS.to_vec()),
            0..4,
        )),
        any::<bool>(),
    )
        .prop_map(|(i, allowed, enabled)| Skill {
            enabled,
            ..skill(&format!("s{i}"), allowed.as_deref())
        })
}

proptest! {
    #[test]
    fn skill_policy_visible_and_check_call_agree(
        skills in prop::collection::vec(skill_strategy(), 0..5),
        context in prop::collection::vec(0usize..6, 0..4),
        slash in prop::option::of(0usize..6),
        available in prop::option::of(prop::collection::vec(0usize..5, 0..4)),
        fail in any::<bool>(),
    ) {
        let store = CountingStore { loads: Arc::new(AtomicUsize::new(0)), fail, skills };
        let available = available.map(|a| a.iter().map(|i| format!("s{i}")).collect());
        let p = SkillToolPolicy::new(Arc::new(store), available);
        let state = ThreadState {
            skill_context: context.iter().map(|i| SkillRef { name: format!("s{i}"), path: path(&format!("s{i}")), ..SkillRef::default() }).collect(),
            ..ThreadState::default()
        };
        let run = RunContext { slash_skill: slash.map(|i| path(&format!("s{i}"))), ..RunContext::default() };
        let specs = config_specs(&TOOLS);
        let verdicts = p.visible(&specs.iter().collect::<Vec<_>>(), &state, &run);
        prop_assert_eq!(verdicts.len(), specs.len());
        for (spec, verdict) in specs.iter().zip(&verdicts) {
            let allowed = p.check_call(&ToolCall::new("c", spec.name.clone(), json!({})), None, &state, &run).is_ok();
            prop_assert_eq!(verdict.is_none(), allowed, "{}", spec.name);
            if FRAMEWORK_TOOLS.contains(&spec.name.as_str()) {
                prop_assert!(allowed, "framework tool {} removed", spec.name);
            }
        }
    }
}
