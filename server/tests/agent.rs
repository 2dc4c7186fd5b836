//! An agent served as a runner: its runs go through `Agent::stream`, so each is recorded
//! under the server's run id, settled and given its one receipt, as an invoked run is.
#![cfg(feature = "agent")]

mod common;

use common::Served;
use serde_json::json;
use stategraph::checkpoints::{RunId, RunStatus, Saver, SqliteSaver, ThreadId};
use stategraph_nodes::prelude::*;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A server whose assistant `assistant` is an agent on `model`.
async fn serve_agent(
    model: &ScriptedModel,
) -> Result<Served, Box<dyn std::error::Error + Send + Sync>> {
    let agent = AgentBuilder::new(model.clone())
        .assemble(RunContext::new("unused", "ana"))
        .await?;
    Ok(Served::start_with(|b| b.runner("assistant", agent))
        .await
        .map_err(|e| e.to_string())?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_agent_records_and_settles_each_run_under_the_servers_run_id() -> TestResult {
    let model = ScriptedModel::new("m", [AiMessage::text("hello there")]);
    let s = serve_agent(&model).await?;
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "assistant",
                   "input": {"messages": [{"type": "human", "content": "hi"}]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let messages = r.json()["messages"].clone();
    assert_eq!(messages[0]["content"], "hi");
    assert_eq!(messages[1]["content"], "hello there");
    let location = r.header("content-location").unwrap_or_default().to_owned();
    let run = location.rsplit('/').next().unwrap_or_default().to_owned();
    let file = s.file();
    s.server.shutdown().await;
    let saver = SqliteSaver::open_read_only(&file)?;
    let stored = saver
        .get_run(Some(&ThreadId::new(&t)?), &RunId::new(&run)?)
        .await?
        .ok_or("the agent's run was not recorded under the server's id")?;
    assert_eq!(stored.status, RunStatus::Success);
    assert!(saver.get_receipt(&RunId::new(&run)?).await?.is_some());
    model.verify()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_agent_takes_and_gives_messages_as_langchain_dicts() -> TestResult {
    let model = ScriptedModel::new("m", [AiMessage::text("a red dot")]);
    let s = serve_agent(&model).await?;
    let api = s.api();
    let t = api.thread().await;
    // The role form a client sends, with an image in OpenAI's form.
    let image =
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}});
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "assistant", "input": {"messages": [
                {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]}
            ]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let messages = r.json()["messages"].clone();
    assert_eq!(
        messages[0]["content"],
        json!([{"type": "text", "text": "What is this?"},
               {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}])
    );
    assert_eq!(messages[0]["type"], "human");
    assert_eq!(messages[1]["type"], "ai");
    assert_eq!(
        messages[1]["response_metadata"],
        json!({"finish_reason": "stop"})
    );
    let seen = model.requests();
    assert_eq!(
        seen[0].messages[0].attachments(),
        [stategraph_nodes::media::Attachment::new(
            "image/png",
            "iVBORw0KGgo="
        )],
        "the model is given the image"
    );

    // A message that does not read is refused before the run, naming what was wrong.
    let t2 = api.thread().await;
    let bad = api
        .post(
            &format!("/threads/{t2}/runs/wait"),
            json!({"assistant_id": "assistant",
                   "input": {"messages": [{"role": "robot", "content": "beep"}]}}),
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("robot"), "{}", bad.body);
    s.server.shutdown().await;
    model.verify()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_agents_tools_read_the_runs_json_context() -> TestResult {
    let whoami = FnTool::new(
        ToolSpec::new("whoami", "Say who asks.", ToolSource::Config),
        |call, cx| async move {
            let text = match cx.context::<serde_json::Value>() {
                Ok(v) => v["user"].as_str().unwrap_or("?").to_owned(),
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
        .assemble(RunContext::new("unused", "ana"))
        .await?;
    let s = Served::start_with(|b| b.runner("assistant", agent))
        .await
        .map_err(|e| e.to_string())?;
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "assistant", "context": {"user": "ada"},
                   "input": {"messages": [{"type": "human", "content": "who am I?"}]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let tool = r.json()["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["type"] == "tool").cloned())
        .ok_or("no tool message")?;
    assert_eq!(tool["content"], "ada");
    Ok(())
}
