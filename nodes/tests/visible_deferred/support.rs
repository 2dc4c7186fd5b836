//! Shared helpers of these tests.

use stategraph_nodes::deferred::{DeferredSetup, TOOL_SEARCH};
use stategraph_nodes::prelude::*;
use stategraph_nodes::stategraph::reducers::{MessageOp, Promoted};
use stategraph_nodes::{BoxError, ToolContext};

pub(crate) type TestResult = Result<(), BoxError>;

pub(crate) fn mcp(name: &str, description: &str) -> ToolSpec {
    ToolSpec::new(name, description, ToolSource::Mcp)
}

pub(crate) fn setup(specs: &[ToolSpec]) -> DeferredSetup {
    DeferredSetup::build(specs).expect("a deferrable candidate")
}

pub(crate) fn names(found: &[&ToolSpec]) -> Vec<String> {
    found.iter().map(|s| s.name.clone()).collect()
}

pub(crate) fn search(setup: &DeferredSetup, query: &str) -> Vec<String> {
    names(&setup.search(query))
}

pub(crate) fn state_promoting(hash: &str, promoted: &[&str]) -> ThreadState {
    ThreadState {
        promoted: Some(Promoted::new(hash, promoted.iter().copied())),
        ..ThreadState::default()
    }
}

pub(crate) async fn run_tool_search(setup: &DeferredSetup, args: serde_json::Value) -> ToolOutput {
    setup
        .tool_search()
        .call(
            ToolCall::new("c1", TOOL_SEARCH, args),
            ToolContext::detached(ThreadState::default(), RunContext::default()),
        )
        .await
        .expect("tool_search answers")
}

/// The promotion and the tool message a `tool_search` command carries.
pub(crate) fn promotion_of(output: &ToolOutput) -> (Promoted, ToolMessage) {
    let ToolOutput::Command(cmd) = output else {
        panic!("tool_search must answer with a command, got {output:?}");
    };
    let update = cmd.update_ref().expect("an update");
    let promoted = update.promoted.clone().expect("promoted is written");
    let ops = update
        .messages
        .as_ref()
        .expect("messages are written")
        .ops();
    assert_eq!(ops.len(), 1, "exactly one message");
    let MessageOp::Upsert(Message::Tool(m)) = &ops[0] else {
        panic!("a tool message, got {:?}", ops[0]);
    };
    (promoted, m.clone())
}

pub(crate) fn five_plus() -> DeferredSetup {
    setup(&[
        mcp("github_issues", "List GitHub issues"),
        mcp("github_prs", "List pull requests on GitHub"),
        mcp("slack_post", "Post a message to Slack"),
        mcp("jira_search", "Search Jira issues"),
        mcp("notebook_run", "Run a Jupyter notebook cell"),
        mcp("issue_tracker", "Tracks issues and issues"),
        mcp("calendar", "Calendar events"),
    ])
}
