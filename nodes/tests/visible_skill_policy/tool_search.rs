//! Narrowing tool_search results to the tools the active policy allows.

use serde_json::json;
use stategraph_nodes::deferred::{DeferredSetup, TOOL_SEARCH};
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::{SkillToolPolicy, NO_PERMITTED_MATCH, UNVALIDATED_SEARCH};
use stategraph_nodes::stategraph::reducers::{MessageOp, MessagesUpdate, Promoted};
use stategraph_nodes::stategraph::{Command, Goto};
use stategraph_nodes::{ToolContext, ToolPolicy};

use crate::support::*;

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
                .title(Some("kept".to_owned())),
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
        Some(Some("kept".to_owned()))
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
