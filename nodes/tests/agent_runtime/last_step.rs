//! The agent's last steps: a model answer that calls tools when the run has no steps left to
//! finish the turn is replaced by LangGraph's "need more steps" answer; tools read the run's
//! context. Compared with `tests/fixtures/langgraph/runtime_context_managed_react_agent.json`.

use serde_json::{json, Value};
use stategraph::{CompiledGraph, RunConfig, RunError, StateGraph, END, START};
use stategraph_nodes::last_step::NEED_MORE_STEPS;
use stategraph_nodes::prelude::*;
use stategraph_nodes::toolbox::{model_node, tool_node, tools_condition, Toolbox, TOOLS};

use crate::support::R;

fn recorded() -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/langgraph/runtime_context_managed_react_agent.json"
    );
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

/// A model that calls `search` on every turn (`turn i`, call `c<i>`).
fn always_searches() -> ScriptedModel {
    ScriptedModel::new(
        "m",
        (0..10).map(|i| {
            let mut ai = AiMessage::calls([ToolCall::new(
                format!("c{i}"),
                "search",
                json!({"q": i.to_string()}),
            )]);
            ai.content = format!("turn {i}");
            ai.id = Some(format!("ai-{i}"));
            ai
        }),
    )
}

fn search() -> FnTool {
    FnTool::new(
        ToolSpec::new("search", "Search.", ToolSource::Config),
        |call, _cx| async move {
            let q = call.args["q"].as_str().unwrap_or_default().to_owned();
            Ok(ToolMessage::new(call.id, "search", format!("found {q}")).into())
        },
    )
}

/// Messages as the fixture lists them (tool message ids left out: LangGraph's are random).
fn listed(messages: &stategraph::List<Message>) -> Vec<Value> {
    messages
        .iter()
        .map(|m| match m {
            Message::Human { content, .. } => json!({"type": "human", "content": content}),
            Message::Ai(ai) => json!({"type": "ai", "id": ai.id, "content": ai.content,
                                      "tool_calls": ai.tool_calls.len()}),
            Message::Tool(t) => json!({"type": "tool", "content": t.content}),
            Message::System { content, .. } => json!({"type": "system", "content": content}),
        })
        .collect()
}

fn expected(lg: &Value, limit: usize) -> Option<Vec<Value>> {
    let messages = lg
        .pointer(&format!("/by_limit/{limit}/messages"))?
        .as_array()?;
    Some(
        messages
            .iter()
            .map(|m| match m["type"].as_str() {
                Some("human") => json!({"type": "human", "content": m["content"]}),
                Some("ai") => json!({"type": "ai", "id": m["id"], "content": m["content"],
                                     "tool_calls": m["tool_calls"]}),
                _ => json!({"type": m["type"], "content": m["content"]}),
            })
            .collect(),
    )
}

#[tokio::test]
async fn an_agent_out_of_steps_answers_that_it_needs_more_as_in_langgraph() -> R {
    let lg = recorded()?;
    for limit in [4usize, 5, 6] {
        let agent = AgentBuilder::new(always_searches())
            .tool(search())
            .assemble(RunContext::new("t", "u"))
            .await?;
        let config = agent.run_config().recursion_limit(limit);
        let result = agent.invoke(ThreadState::human_input("hi"), &config).await;
        match expected(&lg, limit) {
            Some(want) => {
                let out = result?;
                assert_eq!(listed(&out.state.messages), want, "recursion limit {limit}");
                assert_eq!(
                    out.state.last_ai().map(|a| a.content.as_str()),
                    Some(NEED_MORE_STEPS)
                );
            }
            None => {
                assert_eq!(
                    lg.pointer(&format!("/by_limit/{limit}/error")),
                    Some(&json!("GraphRecursionError"))
                );
                let err = result.err().ok_or("the run fit in its limit")?;
                assert!(err.to_string().contains("recursion"), "{err}");
            }
        }
    }
    Ok(())
}

fn toolbox_agent() -> Result<CompiledGraph<ThreadState>, stategraph::CompileError> {
    let toolbox = Toolbox::new().tool(search());
    StateGraph::<ThreadState>::new()
        .add_node("agent", model_node(always_searches(), &toolbox))
        .add_node(TOOLS, tool_node(&toolbox))
        .add_edge(START, "agent")
        .add_conditional_edges("agent", tools_condition, [TOOLS, END])
        .add_edge(TOOLS, "agent")
        .compile()
}

#[tokio::test]
async fn a_toolbox_model_node_out_of_steps_answers_as_langgraphs_agent() -> R {
    let lg = recorded()?;
    for limit in [4usize, 5, 6] {
        let config = RunConfig::new().recursion_limit(limit);
        let result = toolbox_agent()?
            .invoke(ThreadState::human_input("hi"), &config)
            .await;
        match expected(&lg, limit) {
            Some(want) => assert_eq!(listed(&result?.state.messages), want, "limit {limit}"),
            None => assert!(matches!(result, Err(RunError::RecursionLimit { .. }))),
        }
    }
    Ok(())
}

#[derive(Debug)]
struct Caller {
    user: String,
}

#[tokio::test]
async fn a_tool_reads_the_runs_context() -> R {
    let whoami = FnTool::new(
        ToolSpec::new("whoami", "Say who asks.", ToolSource::Config),
        |call, cx| async move {
            let text = match cx.context::<Caller>() {
                Ok(c) => c.user.clone(),
                Err(e) => e.to_string(),
            };
            Ok(ToolMessage::new(call.id, "whoami", text).into())
        },
    );
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new("c1", "whoami", json!({}))]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model)
        .tool(whoami)
        .assemble(RunContext::new("t", "u"))
        .await?;
    let config = agent.run_config().context(Caller { user: "ada".into() });
    let out = agent
        .invoke(ThreadState::human_input("who am I?"), &config)
        .await?;
    let answer = out
        .state
        .messages
        .iter()
        .find_map(Message::as_tool)
        .map(|t| t.content.clone());
    assert_eq!(answer.as_deref(), Some("ada"));
    Ok(())
}
