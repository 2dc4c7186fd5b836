//! SKILL.md parsing and the skill tool policy (deerflow-runtime semantics §6), one test per
//! rule.

// Helpers panic on a broken fixture, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use stategraph_nodes::deferred::{DeferredSetup, TOOL_SEARCH};
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::{
    parse_skill_md, PolicySource, Skill, SkillParseErrorKind, SkillRegistry, SkillStore,
    SkillToolPolicy, FRAMEWORK_TOOLS, NO_PERMITTED_MATCH, UNVALIDATED_SEARCH,
};
use stategraph_nodes::state::SkillRef;
use stategraph_nodes::stategraph::reducers::{MessageOp, MessagesUpdate, Promoted};
use stategraph_nodes::stategraph::{Command, Goto};
use stategraph_nodes::{BoxError, Denial, ToolContext, ToolPolicy};

type TestResult = Result<(), BoxError>;

fn path(name: &str) -> String {
    format!("/mnt/skills/public/{name}/SKILL.md")
}

fn skill(name: &str, allowed: Option<&[&str]>) -> Skill {
    Skill {
        name: name.to_string(),
        path: path(name),
        description: format!("The {name} skill"),
        allowed_tools: allowed.map(|a| a.iter().map(|s| s.to_string()).collect()),
        enabled: true,
    }
}

fn skill_md(name: &str, allowed_line: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill\n{allowed_line}---\n# {name}\n")
}

fn reading(names: &[&str]) -> ThreadState {
    ThreadState {
        skill_context: names
            .iter()
            .map(|n| SkillRef {
                name: n.to_string(),
                path: path(n),
                ..SkillRef::default()
            })
            .collect(),
        ..ThreadState::default()
    }
}

fn policy(skills: Vec<Skill>) -> SkillToolPolicy {
    SkillToolPolicy::new(Arc::new(SkillRegistry::new(skills)), None)
}

fn framework() -> Vec<String> {
    let mut names: Vec<String> = FRAMEWORK_TOOLS.iter().map(|s| s.to_string()).collect();
    names.sort();
    names
}

fn with_framework(extra: &[&str]) -> Vec<String> {
    let mut names = framework();
    names.extend(extra.iter().map(|s| s.to_string()));
    names.sort();
    names.dedup();
    names
}

/// A store counting its loads, optionally failing.
struct CountingStore {
    loads: Arc<AtomicUsize>,
    fail: bool,
    skills: Vec<Skill>,
}

impl SkillStore for CountingStore {
    fn load_all(&self) -> Result<Vec<Skill>, BoxError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            Err("storage offline".into())
        } else {
            Ok(self.skills.clone())
        }
    }
}

fn config_specs(names: &[&str]) -> Vec<ToolSpec> {
    names
        .iter()
        .map(|n| ToolSpec::new(*n, "", ToolSource::Config))
        .collect()
}

fn kept(
    policy: &SkillToolPolicy,
    names: &[&str],
    state: &ThreadState,
    run: &RunContext,
) -> Vec<String> {
    let specs = config_specs(names);
    specs
        .iter()
        .zip(policy.visible(&specs.iter().collect::<Vec<_>>(), state, run))
        .filter(|(_, v)| v.is_none())
        .map(|(s, _)| s.name.clone())
        .collect()
}

// ---------------------------------------------------------------- parsing

#[test]
fn parses_flow_style_allowed_tools() -> TestResult {
    let s = parse_skill_md(
        &path("calc"),
        &skill_md("calc", "allowed-tools: [calc, \"read_file\", 'bash']\n"),
    )?;
    assert_eq!(s.name, "calc");
    assert_eq!(s.description, "The calc skill");
    assert_eq!(s.path, path("calc"));
    assert!(s.enabled);
    assert_eq!(
        s.allowed_tools,
        Some(vec!["calc".into(), "read_file".into(), "bash".into()])
    );
    Ok(())
}

#[test]
fn parses_block_style_allowed_tools() -> TestResult {
    let s = parse_skill_md(
        "p",
        &skill_md("calc", "allowed-tools:\n  - calc\n  - \"web_search\"\n"),
    )?;
    assert_eq!(
        s.allowed_tools,
        Some(vec!["calc".into(), "web_search".into()])
    );
    let s = parse_skill_md("p", &skill_md("calc", "allowed-tools:\n- calc\n"))?;
    assert_eq!(s.allowed_tools, Some(vec!["calc".into()]));
    Ok(())
}

#[test]
fn skill_without_allowed_tools_is_legacy() -> TestResult {
    let s = parse_skill_md(
        "p",
        &skill_md("old", "license: MIT\nmetadata:\n  author: someone\n"),
    )?;
    assert_eq!(s.allowed_tools, None);
    Ok(())
}

#[test]
fn explicit_empty_allowed_tools_is_an_empty_list() -> TestResult {
    let s = parse_skill_md("p", &skill_md("none", "allowed-tools: []\n"))?;
    assert_eq!(s.allowed_tools, Some(vec![]));
    Ok(())
}

#[test]
fn folded_and_quoted_descriptions_are_read() -> TestResult {
    let s = parse_skill_md(
        "p",
        "---\nname: \"x\"\ndescription: >\n  line one\n  line two\n---\n",
    )?;
    assert_eq!(s.name, "x");
    assert_eq!(s.description, "line one line two");
    Ok(())
}

#[test]
fn allowed_tools_that_is_not_a_list_is_a_parse_error() {
    for line in [
        "allowed-tools: calc\n",
        "allowed-tools: {a: b}\n",
        "allowed-tools:\n",
        "allowed-tools:\n  calc\n",
    ] {
        let err = parse_skill_md("/x/SKILL.md", &skill_md("s", line)).expect_err(line);
        assert!(
            matches!(err.kind, SkillParseErrorKind::AllowedToolsNotAList(_)),
            "{line:?}: {err}"
        );
        assert_eq!(err.path, "/x/SKILL.md");
    }
}

#[test]
fn allowed_tools_with_non_string_item_is_a_parse_error() {
    for line in [
        "allowed-tools: [calc, 3]\n",
        "allowed-tools: [calc, true]\n",
        "allowed-tools: [calc, [a]]\n",
        "allowed-tools:\n  - calc\n  - null\n",
        "allowed-tools:\n  - name: calc\n",
        "allowed-tools:\n  - - calc\n",
    ] {
        let err = parse_skill_md("p", &skill_md("s", line)).expect_err(line);
        assert!(
            matches!(err.kind, SkillParseErrorKind::BadAllowedTool { .. }),
            "{line:?}: {err}"
        );
    }
}

#[test]
fn allowed_tools_with_empty_item_is_a_parse_error() {
    for line in [
        "allowed-tools: [calc, ]\n",
        "allowed-tools: [calc, \"\"]\n",
        "allowed-tools:\n  - calc\n  -\n",
    ] {
        let err = parse_skill_md("p", &skill_md("s", line)).expect_err(line);
        assert!(
            matches!(err.kind, SkillParseErrorKind::BadAllowedTool { .. }),
            "{line:?}: {err}"
        );
    }
}

#[test]
fn quoted_number_is_a_string_item() -> TestResult {
    let s = parse_skill_md("p", &skill_md("s", "allowed-tools: [\"3\"]\n"))?;
    assert_eq!(s.allowed_tools, Some(vec!["3".into()]));
    Ok(())
}

#[test]
fn missing_frontmatter_name_or_description_is_a_parse_error() {
    let cases = [
        ("# no frontmatter\n", SkillParseErrorKind::NoFrontmatter),
        (
            "---\nname: x\ndescription: y\n",
            SkillParseErrorKind::Unclosed,
        ),
        (
            "---\ndescription: y\n---\n",
            SkillParseErrorKind::Missing("name"),
        ),
        (
            "---\nname: x\n---\n",
            SkillParseErrorKind::Missing("description"),
        ),
        (
            "---\nname: x\nname: y\ndescription: z\n---\n",
            SkillParseErrorKind::DuplicateKey("name".into()),
        ),
    ];
    for (text, kind) in cases {
        let err = parse_skill_md("/p/SKILL.md", text).expect_err(text);
        assert_eq!(err.kind, kind, "{text:?}");
        assert!(err.to_string().contains("/p/SKILL.md"), "{err}");
    }
}

#[test]
fn registry_records_parse_failures_separately() -> TestResult {
    let registry = SkillRegistry::from_skill_mds([
        (
            path("good"),
            skill_md("good", "allowed-tools: [calc]\n"),
            true,
        ),
        (path("off"), skill_md("off", ""), false),
        (path("bad"), skill_md("bad", "allowed-tools: calc\n"), true),
    ]);
    let loaded = registry.load_all()?;
    assert_eq!(
        loaded.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["good", "off"]
    );
    assert!(!loaded[1].enabled);
    assert_eq!(registry.failures().len(), 1);
    assert_eq!(registry.failures()[0].path, path("bad"));
    Ok(())
}

#[test]
fn frontmatter_that_is_not_yaml_is_a_typed_error_naming_the_file() {
    // The old line reader took a plain value holding `: ` or a tab-indented key as text; a
    // YAML reader refuses both, so such a skill is missing from the registry (fails closed).
    for text in [
        "---\nname: x\ndescription: Use when: asked\n---\n",
        "---\nname: x\n\tdescription: y\n---\n",
    ] {
        let err = parse_skill_md("/p/SKILL.md", text).expect_err(text);
        assert!(
            matches!(err.kind, SkillParseErrorKind::Syntax(_)),
            "{text:?}: {err}"
        );
        assert!(err.to_string().contains("/p/SKILL.md"), "{err}");
    }
    let err = parse_skill_md("/p/SKILL.md", "---\n- name\n---\n").expect_err("a list");
    assert_eq!(err.kind, SkillParseErrorKind::NotAMapping);
    let registry = SkillRegistry::from_skill_mds([(
        path("colon"),
        "---\nname: colon\ndescription: a: b\n---\n",
        true,
    )]);
    assert_eq!(registry.skills().len(), 0);
    assert_eq!(registry.failures()[0].path, path("colon"));
}

// ---------------------------------------------------------------- resolving the policy

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
        .check_call(&ToolCall::new("c", "bash", json!({})), &state, &run)
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
        Some(vec!["calc".to_string()]),
    );
    let decision = p.decide(&reading(&["calc", "web"]), &RunContext::default());
    assert_eq!(decision.allowed, Some(with_framework(&["calc"])));
}

#[test]
fn duplicate_skill_name_is_skipped() {
    let mut custom = skill("calc", Some(&["bash"]));
    custom.path = "/mnt/skills/custom/calc/SKILL.md".to_string();
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

// ---------------------------------------------------------------- visible and check_call

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
        .check_call(&ToolCall::new("c", "bash", json!({})), &state, &run)
        .expect_err("bash is not allowed");
    assert_eq!(
        denial.message,
        "Error: Tool 'bash' is not allowed by the active skill policy."
    );
    p.check_call(&ToolCall::new("c", "calc", json!({})), &state, &run)?;
    p.check_call(&ToolCall::new("c", TOOL_SEARCH, json!({})), &state, &run)?;
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
    assert!(p.check_call(&call, &reading(&["calc"]), &run).is_err());
    assert!(p
        .check_call(&call, &reading(&["calc", "web"]), &run)
        .is_ok());
}

// ---------------------------------------------------------------- tool_search sanitisation

fn deferred() -> DeferredSetup {
    DeferredSetup::build(&[
        ToolSpec::new("calc", "Arithmetic", ToolSource::Mcp),
        ToolSpec::new("secret_db", "Query the secret database", ToolSource::Mcp),
        ToolSpec::new("calc_plot", "Plot arithmetic", ToolSource::Mcp),
    ])
    .expect("deferred tools")
}

async fn search_output(setup: &DeferredSetup, query: &str) -> ToolOutput {
    setup
        .tool_search()
        .call(
            ToolCall::new("s1", TOOL_SEARCH, json!({"query": query})),
            ToolContext::detached(ThreadState::default(), RunContext::default()),
        )
        .await
        .expect("tool_search answers")
}

fn parts(output: &ToolOutput) -> (Promoted, ToolMessage, Vec<Goto>) {
    let ToolOutput::Command(cmd) = output else {
        panic!("a command, got {output:?}");
    };
    let update = cmd.update_ref().expect("update");
    let ops = update.messages.as_ref().expect("messages").ops();
    assert_eq!(ops.len(), 1);
    let MessageOp::Upsert(Message::Tool(m)) = &ops[0] else {
        panic!("a tool message");
    };
    (
        update.promoted.clone().expect("promoted"),
        m.clone(),
        cmd.gotos().to_vec(),
    )
}

fn sanitise(p: &SkillToolPolicy, output: ToolOutput, state: &ThreadState) -> ToolOutput {
    p.filter_output(
        &ToolCall::new("s1", TOOL_SEARCH, json!({})),
        output,
        state,
        &RunContext::default(),
    )
}

fn calc_only() -> (SkillToolPolicy, ThreadState) {
    (
        policy(vec![skill("calc", Some(&["calc", "calc_plot"]))]),
        reading(&["calc"]),
    )
}

#[tokio::test]
async fn tool_search_results_are_narrowed_by_active_skill() -> TestResult {
    let setup = deferred();
    let (p, state) = calc_only();
    let out = sanitise(
        &p,
        search_output(&setup, "select:calc,secret_db,calc_plot").await,
        &state,
    );
    let (promoted, message, _) = parts(&out);
    assert_eq!(promoted.catalog_hash, setup.catalog_hash());
    assert_eq!(promoted.names, ["calc", "calc_plot"]);
    let schemas: Vec<serde_json::Value> = serde_json::from_str(&message.content)?;
    let names: Vec<&str> = schemas
        .iter()
        .filter_map(|s| s["function"]["name"].as_str())
        .collect();
    assert_eq!(names, ["calc", "calc_plot"]);
    assert!(!message.content.contains("secret_db"));
    Ok(())
}

#[tokio::test]
async fn tool_search_narrowed_to_nothing_says_no_tools_match_the_policy() -> TestResult {
    let setup = deferred();
    let (p, state) = calc_only();
    let out = sanitise(&p, search_output(&setup, "select:secret_db").await, &state);
    let (promoted, message, _) = parts(&out);
    assert!(promoted.names.is_empty());
    assert_eq!(promoted.catalog_hash, setup.catalog_hash());
    assert_eq!(message.content, NO_PERMITTED_MATCH);
    Ok(())
}

#[tokio::test]
async fn tool_search_without_match_keeps_its_message_under_a_policy() -> TestResult {
    let (p, state) = calc_only();
    let out = sanitise(&p, search_output(&deferred(), "zzz").await, &state);
    assert_eq!(parts(&out).1.content, "No tools found matching: zzz");
    Ok(())
}

#[test]
fn tool_search_result_that_is_not_a_command_is_replaced_by_the_validation_error() {
    let (p, state) = calc_only();
    let out = sanitise(
        &p,
        ToolOutput::Message(ToolMessage::new("s1", TOOL_SEARCH, "[]")),
        &state,
    );
    let m = out.message().expect("a message");
    assert!(m.is_error());
    assert_eq!(m.content, UNVALIDATED_SEARCH);
    assert_eq!(m.tool_call_id, "s1");
}

#[test]
fn tool_search_command_without_promotion_or_with_two_messages_is_replaced() {
    let (p, state) = calc_only();
    let tool_msg = |c: &str| Message::Tool(ToolMessage::new("s1", TOOL_SEARCH, c));
    let bad = [
        Command::new(),
        Command::new().update(ThreadState::update().messages(MessagesUpdate::from(tool_msg("[]")))),
        Command::new().update(ThreadState::update().promoted(Promoted::new("h", ["calc"]))),
        Command::new().update(
            ThreadState::update()
                .promoted(Promoted::new("h", ["calc"]))
                .messages(MessagesUpdate::from(vec![tool_msg("[]"), tool_msg("[]")])),
        ),
        Command::new().update(
            ThreadState::update()
                .promoted(Promoted::new("h", ["calc"]))
                .messages(MessagesUpdate::from(Message::human("[]"))),
        ),
    ];
    for cmd in bad {
        let out = sanitise(&p, ToolOutput::Command(cmd), &state);
        assert_eq!(
            out.message().map(|m| m.content.as_str()),
            Some(UNVALIDATED_SEARCH)
        );
        assert!(out.is_error());
    }
}

#[test]
fn tool_search_content_that_is_not_a_json_list_is_replaced() {
    let (p, state) = calc_only();
    let cmd = Command::new().update(
        ThreadState::update()
            .promoted(Promoted::new("h", ["calc"]))
            .messages(MessagesUpdate::from(Message::Tool(ToolMessage::new(
                "s1",
                TOOL_SEARCH,
                "calc is here",
            )))),
    );
    let out = sanitise(&p, ToolOutput::Command(cmd), &state);
    assert_eq!(
        out.message().map(|m| m.content.as_str()),
        Some(UNVALIDATED_SEARCH)
    );
}

#[test]
fn tool_search_narrowing_accepts_bare_schemas_and_keeps_hash_and_goto() {
    let (p, state) = calc_only();
    let content = json!([{"name": "secret_db"}, {"name": "calc"}]).to_string();
    let cmd = Command::new()
        .update(
            ThreadState::update()
                .promoted(Promoted::new("h1", ["secret_db", "calc"]))
                .messages(MessagesUpdate::from(Message::Tool(ToolMessage::new(
                    "s1",
                    TOOL_SEARCH,
                    content,
                ))))
                .title(Some("kept".to_string())),
        )
        .goto("somewhere");
    let out = sanitise(&p, ToolOutput::Command(cmd), &state);
    let (promoted, message, gotos) = parts(&out);
    assert_eq!(promoted, Promoted::new("h1", ["calc"]));
    let schemas: Vec<serde_json::Value> = serde_json::from_str(&message.content).expect("json");
    assert_eq!(schemas, [json!({"name": "calc"})]);
    assert_eq!(gotos, [Goto::Node("somewhere".into())]);
    let ToolOutput::Command(cmd) = &out else {
        panic!()
    };
    assert_eq!(
        cmd.update_ref().and_then(|u| u.title.clone()),
        Some(Some("kept".to_string()))
    );
}

#[tokio::test]
async fn tool_search_is_untouched_without_a_restriction() {
    let setup = deferred();
    let p = policy(vec![skill("old", None)]);
    let out = sanitise(
        &p,
        search_output(&setup, "select:secret_db").await,
        &reading(&["old"]),
    );
    assert_eq!(parts(&out).0.names, ["secret_db"]);
}

#[test]
fn other_tools_output_is_untouched() {
    let (p, state) = calc_only();
    let out = p.filter_output(
        &ToolCall::new("c", "calc", json!({})),
        ToolOutput::Message(ToolMessage::new("c", "calc", "42")),
        &state,
        &RunContext::default(),
    );
    assert_eq!(out.message().map(|m| m.content.as_str()), Some("42"));
}

// ---------------------------------------------------------------- end to end

#[tokio::test]
async fn denied_deferred_tool_is_never_promoted_shown_or_run_under_an_active_skill() -> TestResult {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let secret = FnTool::new(
        ToolSpec::new("secret_db", "Query the secret database", ToolSource::Mcp),
        move |call, _cx| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ToolMessage::new(call.id, "secret_db", "rows").into()) }
        },
    );
    let calc = FnTool::new(
        ToolSpec::new("calc", "Arithmetic", ToolSource::Config),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "calc", "4").into()) },
    );
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new(
                "s1",
                TOOL_SEARCH,
                json!({"query": "select:secret_db"}),
            )]),
            AiMessage::calls([ToolCall::new("x1", "secret_db", json!({}))]),
            AiMessage::text("done"),
        ],
    );
    let registry = SkillRegistry::from_skill_mds([(
        path("calc"),
        skill_md("calc", "allowed-tools: [calc]\n"),
        true,
    )]);
    let agent = AgentBuilder::new(model.clone())
        .tool(calc)
        .tool(secret)
        .skills(registry)
        .assemble(RunContext::new("t", "u").slash_skill(path("calc")))
        .await?;
    let out = agent.ask("query the secret db").await?;

    let promoted = out
        .state
        .promoted
        .clone()
        .expect("tool_search wrote promoted");
    assert!(promoted.names.is_empty());
    for (i, request) in model.requests().iter().enumerate() {
        assert_eq!(request.tool_names(), ["calc", TOOL_SEARCH], "request {i}");
        for m in request.messages.iter() {
            if let Message::Tool(t) = m {
                assert!(
                    !t.content.contains("Query the secret database"),
                    "schema leaked: {}",
                    t.content
                );
            }
        }
    }
    let search_answer = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .find(|m| m.tool_call_id == "s1")
        .expect("s1");
    assert_eq!(search_answer.content, NO_PERMITTED_MATCH);
    let blocked = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .find(|m| m.tool_call_id == "x1")
        .expect("x1");
    assert!(blocked.is_error());
    assert_eq!(
        blocked.content,
        "Error: Tool 'secret_db' is not allowed by the active skill policy."
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the body never ran");
    model.verify()?;
    Ok(())
}

// ---------------------------------------------------------------- properties

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
            let allowed = p.check_call(&ToolCall::new("c", spec.name.clone(), json!({})), &state, &run).is_ok();
            prop_assert_eq!(verdict.is_none(), allowed, "{}", spec.name);
            if FRAMEWORK_TOOLS.contains(&spec.name.as_str()) {
                prop_assert!(allowed, "framework tool {} removed", spec.name);
            }
        }
    }
}
