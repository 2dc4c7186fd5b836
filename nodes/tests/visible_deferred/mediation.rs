//! Complete mediation: a policy that hides a tool also keeps `tool_search` from returning its
//! schema or promoting it, and its call-time check is given the called tool's spec.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use stategraph_nodes::deferred::TOOL_SEARCH;
use stategraph_nodes::mediation::NO_VISIBLE_MATCH;
use stategraph_nodes::prelude::*;
use stategraph_nodes::{Denial, ToolPolicy, Verdict};

use crate::support::*;

/// Hides every tool whose name starts with `write` or `move`, and refuses their calls.
struct NoWrites {
    /// The specs its call-time check was given.
    checked: Arc<Mutex<Vec<Option<ToolSpec>>>>,
}

fn writes(name: &str) -> bool {
    name.starts_with("write") || name.starts_with("move")
}

impl ToolPolicy for NoWrites {
    fn name(&self) -> &str {
        "no_writes"
    }

    fn visible(&self, tools: &[&ToolSpec], _: &ThreadState, _: &RunContext) -> Vec<Option<String>> {
        tools
            .iter()
            .map(|t| writes(&t.name).then(|| "writes files".to_owned()))
            .collect()
    }

    fn check_call(
        &self,
        call: &ToolCall,
        spec: Option<&ToolSpec>,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<(), Denial> {
        self.checked.lock().unwrap().push(spec.cloned());
        if writes(&call.name) {
            return Err(Denial::new("writes files", "Error: writing is not allowed"));
        }
        Ok(())
    }
}

fn file_tool(name: &str, runs: &Arc<AtomicUsize>) -> FnTool {
    let runs = Arc::clone(runs);
    let tool_name = name.to_owned();
    FnTool::new(
        mcp(name, &format!("{name}: a file tool")),
        move |call, _cx| {
            runs.fetch_add(1, Ordering::SeqCst);
            let name = tool_name.clone();
            async move { Ok(ToolMessage::new(call.id, name, "ran").into()) }
        },
    )
}

#[tokio::test]
async fn a_hidden_tool_is_neither_returned_nor_promoted_by_tool_search() -> TestResult {
    let runs = Arc::new(AtomicUsize::new(0));
    let checked = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new("s1", TOOL_SEARCH, json!({"query": "file"}))]),
            AiMessage::calls([ToolCall::new(
                "s2",
                TOOL_SEARCH,
                json!({"query": "select:write_file"}),
            )]),
            AiMessage::calls([
                ToolCall::new("c1", "read_file", json!({})),
                ToolCall::new("c2", "write_file", json!({})),
            ]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(file_tool("read_file", &runs))
        .tool(file_tool("write_file", &runs))
        .tool(file_tool("move_file", &runs))
        .policy(NoWrites {
            checked: Arc::clone(&checked),
        })
        .assemble(RunContext::new("t", "u"))
        .await?;
    let out = agent.ask("tidy up").await?;

    let answers: Vec<&ToolMessage> = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .collect();
    // The regex matched all three; only the visible one's schema comes back.
    let schemas: Vec<serde_json::Value> = serde_json::from_str(&answers[0].content)?;
    let names: Vec<&str> = schemas
        .iter()
        .filter_map(|s| s["function"]["name"].as_str().or(s["name"].as_str()))
        .collect();
    assert_eq!(names, ["read_file"]);
    assert!(!answers[0].content.contains("write_file"));
    assert!(!answers[0].content.contains("move_file"));
    // Asking for the hidden one by name finds nothing.
    assert_eq!(answers[1].content, NO_VISIBLE_MATCH);
    // Only the visible one was promoted, and only it reached the model.
    let promoted = out.state.promoted.clone().ok_or("promoted")?;
    assert_eq!(promoted.names, ["read_file"]);
    let requests = model.requests();
    assert_eq!(requests[1].tool_names(), ["read_file", TOOL_SEARCH]);
    // The system prompt names only the deferred tool the policy lets the model see.
    let system = requests[0].system.clone().unwrap_or_default();
    assert!(
        system.contains("<available-deferred-tools>\nread_file\n</available-deferred-tools>"),
        "{system}"
    );
    assert_eq!(requests[2].tool_names(), ["read_file", TOOL_SEARCH]);
    // The trace says who left it out.
    let why = agent.trace().for_tool("write_file");
    assert!(
        why.iter()
            .any(|e| matches!(&e.verdict, Verdict::Removed { by, reason }
            if by == "no_writes" && reason.contains("tool_search"))),
        "{why:?}"
    );
    // The hidden tool was never promoted, so its call is refused and only read_file ran.
    assert!(answers[3].is_error());
    assert!(
        answers[3].content.contains("has not been promoted"),
        "{}",
        answers[3].content
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    Ok(())
}

#[tokio::test]
async fn a_policys_call_time_check_is_given_the_called_tools_spec() -> TestResult {
    let runs = Arc::new(AtomicUsize::new(0));
    let checked = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([
                ToolCall::new("c1", "read_file", json!({})),
                ToolCall::new("c2", "no_such_tool", json!({})),
            ]),
            AiMessage::text("done"),
        ],
    );
    AgentBuilder::new(model)
        .tool(file_tool("read_file", &runs))
        .defer_tools(false)
        .policy(NoWrites {
            checked: Arc::clone(&checked),
        })
        .assemble(RunContext::new("t", "u"))
        .await?
        .ask("read")
        .await?;
    let checked = checked.lock().unwrap().clone();
    assert_eq!(checked.len(), 2);
    let first = checked[0].as_ref().ok_or("read_file's spec")?;
    assert_eq!(first.name, "read_file");
    assert_eq!(first.description, "read_file: a file tool");
    assert_eq!(checked[1], None, "an unknown tool has no spec");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    Ok(())
}
