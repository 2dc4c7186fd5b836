//! A run's `context` field: decoded as the graph's declared context type and given to its
//! nodes, never stored in a checkpoint; a context that does not decode is a 422 naming what
//! was wrong; a graph that declares no type gets the JSON value itself.

mod common;

use std::sync::Arc;

use common::Served;
use serde_json::{json, Value};
use stategraph::prelude::*;
use stategraph::CompileError;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Debug, serde::Deserialize)]
struct Caller {
    user: String,
    tier: u8,
}

#[derive(State, Clone, Default, Debug)]
struct Greeting {
    #[reduce(append)]
    log: Vec<String>,
}

/// A graph whose node greets the run's caller (or says it has none).
fn greeter() -> Result<CompiledGraph<Greeting>, CompileError> {
    StateGraph::<Greeting>::new()
        .context_schema::<Caller>()
        .add_node("greet", |_s: Arc<Greeting>, cx: NodeContext| async move {
            let line = match cx.context::<Caller>() {
                Ok(c) => format!("hello {} (tier {})", c.user, c.tier),
                Err(e) => format!("no caller: {e}"),
            };
            Ok::<_, BoxError>(Greeting::update().log(vec![line]))
        })
        .add_edge(START, "greet")
        .add_edge("greet", END)
        .compile()
}

/// A graph that declares no context type and echoes the JSON it was given.
fn echo() -> Result<CompiledGraph<Greeting>, CompileError> {
    StateGraph::<Greeting>::new()
        .add_node("echo", |_s: Arc<Greeting>, cx: NodeContext| async move {
            let line = match cx.context::<Value>() {
                Ok(v) => v.to_string(),
                Err(e) => e.to_string(),
            };
            Ok::<_, BoxError>(Greeting::update().log(vec![line]))
        })
        .add_edge(START, "echo")
        .add_edge("echo", END)
        .compile()
}

async fn served() -> Result<Served, Box<dyn std::error::Error>> {
    let (g, e) = (greeter()?, echo()?);
    Served::start_with(move |b| b.graph("greeter", &g).graph("echo", &e)).await
}

#[tokio::test]
async fn a_runs_context_reaches_its_nodes_as_the_declared_type() -> TestResult {
    let s = served().await?;
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "greeter", "input": {},
                   "context": {"user": "user-7f3a9c", "tier": 2}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["log"], json!(["hello user-7f3a9c (tier 2)"]));
    Ok(())
}

#[tokio::test]
async fn a_context_that_does_not_fit_is_a_422_naming_the_type_and_the_field() -> TestResult {
    let s = served().await?;
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "greeter", "input": {},
                   "context": {"user": "ada", "tier": "gold"}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(
        r.body.contains("Caller") && r.body.contains("gold"),
        "{}",
        r.body
    );
    let runs = api.get(&format!("/threads/{t}/runs")).await;
    assert_eq!(runs.json(), json!([]), "a refused run is not queued");
    Ok(())
}

#[tokio::test]
async fn no_context_leaves_the_run_without_one_when_its_type_needs_fields() -> TestResult {
    let s = served().await?;
    let api = s.api();
    for body in [
        json!({"assistant_id": "greeter", "input": {}}),
        json!({"assistant_id": "greeter", "input": {}, "context": {}}),
        json!({"assistant_id": "greeter", "input": {}, "context": null}),
    ] {
        let t = api.thread().await;
        let r = api.post(&format!("/threads/{t}/runs/wait"), body).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let line = r.json()["log"][0].as_str().unwrap_or_default().to_owned();
        assert!(
            line.starts_with("no caller") && line.contains("Caller"),
            "{line}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_graph_without_a_context_type_gets_the_json_itself() -> TestResult {
    let s = served().await?;
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": {}, "context": {"any": [1, 2]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["log"], json!([r#"{"any":[1,2]}"#]));
    // No context is `{}`, as LangGraph's server gives it.
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": {}}),
        )
        .await;
    assert_eq!(r.json()["log"], json!([r#"{"any":[1,2]}"#, "{}"]));
    Ok(())
}

#[tokio::test]
async fn a_runs_context_is_in_no_thread_state_or_history() -> TestResult {
    let s = served().await?;
    let api = s.api();
    let t = api.thread().await;
    let secret = "user-7f3a9c";
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "greeter", "input": {},
                   "context": {"user": secret, "tier": 1}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let state = api.get(&format!("/threads/{t}/state")).await;
    assert_eq!(state.status, 200);
    // The node's own output names the caller; nothing else in the state does.
    let values = state.json()["values"].clone();
    let mut rest = state.json();
    rest["values"] = Value::Null;
    assert!(!rest.to_string().contains(secret), "{rest}");
    assert_eq!(values["log"], json!([format!("hello {secret} (tier 1)")]));
    let history = api
        .post(&format!("/threads/{t}/history"), json!({"limit": 10}))
        .await;
    assert_eq!(history.status, 200);
    for entry in history.json().as_array().cloned().unwrap_or_default() {
        let mut entry = entry;
        entry["values"] = Value::Null;
        assert!(!entry.to_string().contains(secret), "{entry}");
    }
    Ok(())
}

#[tokio::test]
async fn a_queued_runs_context_reaches_its_nodes_on_postgres() -> TestResult {
    let (g, e) = (greeter()?, echo()?);
    let schema = common::fresh_schema("run_context");
    let Some(s) =
        Served::start_postgres_with(&schema, move |b| b.graph("greeter", &g).graph("echo", &e))
            .await
    else {
        return Ok(());
    };
    let api = s.api();
    let t = api.thread().await;
    let r = api
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "greeter", "input": {},
                   "context": {"user": "ada", "tier": 3}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["log"], json!(["hello ada (tier 3)"]));
    Ok(())
}
