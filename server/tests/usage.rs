//! A run's token usage in the Agent Server's `Run` object: the totals of its model calls once
//! it has ended (`null` before), on SQLite and on PostgreSQL.
#![cfg(feature = "agent")]

mod common;

use common::{fresh_schema, Api, Served};
use serde_json::{json, Value};
use stategraph::prelude::*;
use stategraph::CompileError;
use stategraph_nodes::toolbox::{model_node, Toolbox};
use stategraph_nodes::{AiMessage, ScriptedModel, Usage};
use stategraph_server::demo::Conversation;
use stategraph_server::ServerBuilder;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// An answer that reported `input` and `output` tokens.
fn used(text: &str, input: u64, output: u64) -> AiMessage {
    let mut reply = AiMessage::text(text);
    reply.usage = Some(Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
    });
    reply
}

/// Two model nodes in a row, on a model that reports usage: 30 tokens in, 12 out, two calls.
fn metered() -> Result<CompiledGraph<Conversation>, CompileError> {
    let model = ScriptedModel::new("m", [used("first", 10, 5), used("second", 20, 7)]);
    StateGraph::<Conversation>::new()
        .add_node("draft", model_node(model.clone(), &Toolbox::new()))
        .add_node("revise", model_node(model, &Toolbox::new()))
        .add_edge(START, "draft")
        .add_edge("draft", "revise")
        .add_edge("revise", END)
        .compile()
}

fn with_metered(builder: ServerBuilder) -> ServerBuilder {
    match metered() {
        Ok(graph) => builder.graph("metered", &graph),
        Err(e) => panic!("the test graph compiles: {e}"),
    }
}

/// Run `assistant` on a new thread to its end; the thread and the run's id.
async fn run_to_end(api: &Api, assistant: &str) -> (String, String) {
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": assistant,
                   "input": {"messages": [{"type": "human", "content": "hi"}]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let location = r.header("content-location").unwrap_or_default().to_owned();
    let run = location.rsplit('/').next().unwrap_or_default().to_owned();
    (t, run)
}

async fn run_json(api: &Api, thread: &str, run: &str) -> Value {
    let r = api.get(&format!("/threads/{thread}/runs/{run}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// The behaviour both backends share.
async fn a_runs_usage_shows_once_it_has_ended(api: &Api) {
    let (t, run) = run_to_end(api, "metered").await;
    let got = run_json(api, &t, &run).await;
    assert_eq!(got["status"], "success", "{got}");
    let want = json!({"input_tokens": 30, "output_tokens": 12, "total_tokens": 42,
                      "model_calls": 2});
    assert_eq!(got["usage"], want, "{got}");
    let listed = api.get(&format!("/threads/{t}/runs")).await.json();
    assert_eq!(listed[0]["usage"], want, "{listed}");
    // A run not yet ended has none.
    let other = api.thread().await;
    let pending = api
        .post(
            &format!("/threads/{other}/runs"),
            json!({"assistant_id": "slow", "input": {}}),
        )
        .await;
    assert_eq!(pending.status, 200, "{}", pending.body);
    assert_eq!(pending.json()["usage"], Value::Null, "{}", pending.body);
    // A model that reports no usage: no tokens, its one call counted.
    let (t, run) = run_to_end(api, "chat").await;
    let got = run_json(api, &t, &run).await;
    assert_eq!(
        got["usage"],
        json!({"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "model_calls": 1}),
        "{got}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_runs_usage_is_in_its_run_object_on_sqlite() -> TestResult {
    let s = Served::start_with(with_metered).await?;
    a_runs_usage_shows_once_it_has_ended(&s.api()).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_runs_usage_is_in_its_run_object_on_postgres() -> TestResult {
    let schema = fresh_schema("usage");
    let Some(s) = Served::start_postgres_with(&schema, with_metered).await else {
        return Ok(());
    };
    a_runs_usage_shows_once_it_has_ended(&s.api()).await;
    Ok(())
}
