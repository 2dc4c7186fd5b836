//! Laws of the capability lifecycle, for any catalog, principal, promotions, skill policy and
//! guardrail:
//! what the model sees is a subset of what is authorized, and no call outside the set allowed
//! at call time reaches a handler.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use serde_json::json;
use stategraph::checkpoints::sync::Unpoisoned;
use stategraph::reducers::Promoted;
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::SkillRegistry;
use stategraph_nodes::{AllowlistProvider, Authorization, Guardrail, RoleTable};

const SKILL: &str = "/mnt/skills/custom/s/SKILL.md";

const POOL: [&str; 8] = [
    "read", "write", "search", "fetch", "calc", "mail", "shell", "draw",
];

#[derive(Debug, Clone)]
struct Case {
    /// (name index, source index) per registered tool.
    tools: Vec<(usize, usize)>,
    /// Names the role may use.
    allowed: BTreeSet<usize>,
    /// Names promoted, and whether under the current catalog hash.
    promoted: Vec<usize>,
    current_hash: bool,
    /// Names the model calls (an index past the pool is an invented tool).
    calls: Vec<usize>,
    /// A slash-activated skill allowing these names, if any.
    skill: Option<BTreeSet<usize>>,
    /// Names a guardrail denies.
    denied: BTreeSet<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0..POOL.len(), 0..4usize), 0..10),
        prop::collection::btree_set(0..POOL.len(), 0..POOL.len()),
        prop::collection::vec(0..POOL.len(), 0..4),
        any::<bool>(),
        prop::collection::vec(0..POOL.len() + 2, 0..6),
        prop::option::of(prop::collection::btree_set(0..POOL.len(), 0..POOL.len())),
        prop::collection::btree_set(0..POOL.len(), 0..3),
    )
        .prop_map(
            |(tools, allowed, promoted, current_hash, calls, skill, denied)| Case {
                tools,
                allowed,
                promoted,
                current_hash,
                calls,
                skill,
                denied,
            },
        )
}

fn name(i: usize) -> String {
    POOL.get(i)
        .map_or_else(|| format!("invented_{i}"), |n| n.to_string())
}

async fn check(case: Case) -> Result<(), TestCaseError> {
    let runs: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let sources = [
        ToolSource::Config,
        ToolSource::BuiltIn,
        ToolSource::Mcp,
        ToolSource::Other,
    ];
    let calls: Vec<ToolCall> = case
        .calls
        .iter()
        .enumerate()
        .map(|(k, i)| ToolCall::new(format!("c{k}"), name(*i), json!({"query": "a"})))
        .collect();
    let model = ScriptedModel::new(
        "m",
        [AiMessage::calls(calls.clone()), AiMessage::text("done")],
    );
    let mut builder = AgentBuilder::new(model.clone())
        .authorization(Authorization::new(
            RoleTable::new().allow("r", case.allowed.iter().map(|i| name(*i))),
        ))
        .guardrail(Guardrail::new(
            AllowlistProvider::allow_all().deny(case.denied.iter().map(|i| name(*i))),
        ));
    let mut run = RunContext::new("t", "u").role("r");
    if let Some(allowed) = &case.skill {
        let list: Vec<String> = allowed.iter().map(|i| name(*i)).collect();
        let md = format!(
            "---\nname: s\ndescription: d\nallowed-tools: [{}]\n---\n",
            list.join(", ")
        );
        builder = builder.skills(SkillRegistry::from_skill_mds([(SKILL, md, true)]));
        run = run.slash_skill(SKILL);
    }
    for (n, s) in &case.tools {
        let runs = Arc::clone(&runs);
        let tool_name = name(*n);
        builder = builder.tool(FnTool::new(
            ToolSpec::new(&tool_name, "a tool", sources[*s]),
            move |call, _cx| {
                let runs = Arc::clone(&runs);
                async move {
                    *runs
                        .lock()
                        .unpoisoned()
                        .entry(call.name.clone())
                        .or_default() += 1;
                    Ok(ToolMessage::new(&call.id, &call.name, "ran").into())
                }
            },
        ));
    }
    let agent = builder
        .assemble(run)
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let hash = match (agent.deferred(), case.current_hash) {
        (Some(d), true) => d.catalog_hash().to_owned(),
        _ => "stale-hash".to_owned(),
    };
    let mut input = ThreadState::human_input("go");
    if !case.promoted.is_empty() {
        input = input.promoted(Promoted::new(hash, case.promoted.iter().map(|i| name(*i))));
    }
    agent
        .invoke(input, &agent.run_config())
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    model.clear();

    let trace = agent.trace();
    let visible: BTreeSet<String> = trace.visible_on(1).into_iter().collect();
    for tool in &visible {
        prop_assert!(
            trace.reached(tool, Stage::Authorized),
            "{tool} was visible but never authorized"
        );
        prop_assert!(
            tool == "tool_search" || case.allowed.iter().any(|i| name(*i) == *tool),
            "{tool} visible to a role that may not use it"
        );
        if let Some(skill) = &case.skill {
            prop_assert!(
                tool == "tool_search" || skill.iter().any(|i| name(*i) == *tool),
                "{tool} visible under a skill that does not allow it"
            );
        }
    }
    let runs = runs
        .lock()
        .map_err(|_| TestCaseError::fail("poisoned"))?
        .clone();
    for tool in runs.keys() {
        prop_assert!(
            !case.denied.iter().any(|i| name(*i) == *tool),
            "{tool} ran although the guardrail denies it"
        );
        prop_assert!(
            visible.contains(tool),
            "{tool} ran but was not in the allowed set {visible:?}"
        );
    }
    for call in &calls {
        let ran = runs.contains_key(&call.name);
        let executed = trace
            .entries()
            .iter()
            .any(|e| e.tool == call.name && e.stage == Stage::Executed && e.passed());
        prop_assert!(
            !ran || executed,
            "{} ran without an Executed entry",
            call.name
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn visible_is_within_authorized_and_no_call_outside_the_allowed_set_runs(case in case()) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        rt.block_on(check(case))?;
    }
}
