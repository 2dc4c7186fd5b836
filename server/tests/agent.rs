//! An agent served as a runner: its runs go through `Agent::stream`, so each is recorded
//! under the server's run id, settled and given its one receipt, as an invoked run is.
#![cfg(feature = "agent")]

mod common;

use common::Served;
use serde_json::json;
use stategraph::checkpoints::{RunId, RunStatus, Saver, SqliteSaver, ThreadId};
use stategraph_nodes::prelude::*;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_agent_records_and_settles_each_run_under_the_servers_run_id() -> TestResult {
    let model = ScriptedModel::new("m", [AiMessage::text("hello there")]);
    let agent = AgentBuilder::new(model.clone())
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
