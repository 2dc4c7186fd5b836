//! Assembly fails closed when the deferred setup an application supplies leaves deferrable
//! tools out: their schemas are never bound.

use std::sync::{Arc, Mutex};

use stategraph_nodes::deferred::{DeferredSetup, TOOL_SEARCH};
use stategraph_nodes::prelude::*;
use stategraph_nodes::AgentError;

use crate::support::*;

fn answering(spec: ToolSpec) -> FnTool {
    let name = spec.name.clone();
    FnTool::new(spec, move |call, _cx| {
        let name = name.clone();
        async move { Ok(ToolMessage::new(call.id, name, "ran").into()) }
    })
}

/// An agent with one config tool and two deferrable MCP tools.
fn builder(model: &ScriptedModel) -> AgentBuilder {
    AgentBuilder::new(model.clone())
        .tool(answering(ToolSpec::new("calc", "math", ToolSource::Config)))
        .tool(answering(mcp("mcp_weather", "Weather")))
        .tool(answering(mcp("mcp_stocks", "Stocks")))
}

#[tokio::test]
async fn an_empty_user_setup_with_deferrable_mcp_tools_fails_assembly_naming_them() -> TestResult {
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let assembled = builder(&model)
        .deferred_setup(|_: &[ToolSpec]| None::<DeferredSetup>)
        .assemble(RunContext::new("t", "u"))
        .await;
    match assembled {
        Err(AgentError::DeferredSetup(names)) => {
            assert_eq!(names, ["mcp_weather", "mcp_stocks"]);
        }
        Err(other) => panic!("expected AgentError::DeferredSetup, got {other}"),
        Ok(agent) => panic!(
            "assembly must fail, but the agent bound {:?}",
            agent.tool_names()
        ),
    }
    // No agent, so no model call ever carried their schemas.
    assert!(model.requests().is_empty());
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_user_setup_leaving_out_a_deferrable_tool_fails_assembly_naming_it() -> TestResult {
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let only_weather = |candidates: &[ToolSpec]| {
        let kept: Vec<ToolSpec> = candidates
            .iter()
            .filter(|s| s.name == "mcp_weather")
            .cloned()
            .collect();
        DeferredSetup::build(&kept)
    };
    let assembled = builder(&model)
        .deferred_setup(only_weather)
        .assemble(RunContext::new("t", "u"))
        .await;
    assert!(
        matches!(&assembled, Err(AgentError::DeferredSetup(names)) if names == &["mcp_stocks"]),
        "{:?}",
        assembled.map(|a| a.tool_names())
    );
    Ok(())
}

#[tokio::test]
async fn a_user_setup_deferring_a_tool_the_agent_lacks_fails_assembly_naming_it() -> TestResult {
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let with_extra = |candidates: &[ToolSpec]| {
        let mut all = candidates.to_vec();
        all.push(mcp("mcp_admin", "Not granted to this agent"));
        DeferredSetup::build(&all)
    };
    let assembled = builder(&model)
        .deferred_setup(with_extra)
        .assemble(RunContext::new("t", "u"))
        .await;
    assert!(
        matches!(&assembled, Err(AgentError::DeferredNotCandidates(names)) if names == &["mcp_admin"]),
        "{:?}",
        assembled.map(|a| a.tool_names())
    );
    Ok(())
}

#[tokio::test]
async fn a_user_setup_gets_the_authorized_specs_and_is_the_agents_deferred_catalog() -> TestResult {
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let seen = Arc::clone(&seen);
        move |candidates: &[ToolSpec]| {
            let mut seen = seen.lock().unwrap();
            seen.extend(candidates.iter().map(|s| s.name.clone()));
            DeferredSetup::build(candidates)
        }
    };
    let agent = builder(&model)
        .deferred_setup(record)
        .assemble(RunContext::new("t", "u"))
        .await?;
    assert_eq!(*seen.lock().unwrap(), ["calc", "mcp_weather", "mcp_stocks"]);
    assert_eq!(
        agent.deferred().map(|s| s.names()),
        Some(vec!["mcp_weather".to_owned(), "mcp_stocks".to_owned()])
    );
    assert_eq!(
        agent.tool_names().last().map(String::as_str),
        Some(TOOL_SEARCH)
    );
    Ok(())
}

#[tokio::test]
async fn a_user_setup_is_not_asked_when_deferral_is_off() -> TestResult {
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let agent = builder(&model)
        .defer_tools(false)
        .deferred_setup(|_: &[ToolSpec]| -> Option<DeferredSetup> {
            panic!("deferral is off: the setup must not be made")
        })
        .assemble(RunContext::new("t", "u"))
        .await?;
    assert!(agent.deferred().is_none());
    assert_eq!(agent.tool_names(), ["calc", "mcp_weather", "mcp_stocks"]);
    Ok(())
}
