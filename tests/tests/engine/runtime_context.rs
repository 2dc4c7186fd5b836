//! The runtime context: one typed value per run, seen by nodes, routers and subgraphs, never
//! checkpointed. Compared with `fixtures/langgraph/runtime_context_*.json`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use stategraph::checkpoints::SqliteSaver;
use stategraph::prelude::*;
use stategraph::{ContextError, ContextSchema, RouteContext};
use stategraph_tests::langgraph::recorded;

use super::TestResult;

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Ctx {
    user: String,
}

#[derive(State, Clone, Default, Debug)]
struct Log {
    #[reduce(append)]
    log: Vec<Value>,
}

#[derive(State, Clone, Default, Debug)]
struct Inner {
    #[reduce(append)]
    inner: Vec<Value>,
}

/// What a reader saw, as the fixtures write it.
fn seen(ctx: Result<&Ctx, ContextError>) -> Value {
    match ctx {
        Ok(c) => json!({"type": "Ctx", "user": c.user}),
        Err(_) => Value::Null,
    }
}

fn one(name: &'static str) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node(name, |_s: Arc<Log>, cx: NodeContext| async move {
            Ok::<_, BoxError>(Log::update().log(vec![seen(cx.context::<Ctx>())]))
        })
        .add_edge(START, name)
        .add_edge(name, END)
        .compile()
}

#[tokio::test]
async fn the_context_reaches_a_node_a_router_and_a_subgraph_node() -> TestResult {
    let lg = recorded("runtime_context_visibility")?;
    let sub = StateGraph::<Inner>::new()
        .add_node("inner", |_s: Arc<Inner>, cx: NodeContext| async move {
            Ok::<_, BoxError>(Inner::update().inner(vec![seen(cx.context::<Ctx>())]))
        })
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()?;
    let routed = Arc::new(Mutex::new(Vec::new()));
    let r = routed.clone();
    let inner_seen = Arc::new(Mutex::new(Vec::new()));
    let keep = inner_seen.clone();
    let graph = StateGraph::<Log>::new()
        .add_node("node", |_s: Arc<Log>, cx: NodeContext| async move {
            Ok::<_, BoxError>(Log::update().log(vec![json!(["node", seen(cx.context::<Ctx>())])]))
        })
        .add_subgraph(
            "sub",
            sub,
            Checkpointing::Inherit,
            |_s: &Log| Inner::update(),
            move |c: &Inner| {
                keep.lock().map(|mut k| k.extend(c.inner.clone())).ok();
                Log::update()
            },
        )
        .add_edge(START, "node")
        .add_conditional_edges_with_context(
            "node",
            move |_s: &Log, cx: &RouteContext<'_>| {
                r.lock().map(|mut v| v.push(seen(cx.context::<Ctx>()))).ok();
                "sub"
            },
            ["sub"],
        )
        .add_edge("sub", END)
        .compile()?;
    let config = RunConfig::new().context(Ctx { user: "ada".into() });
    let out = graph.invoke(Log::update(), &config).await?;
    let node_entry = lg.pointer("/log/0").ok_or("no node entry")?;
    assert_eq!(&out.state.log[0], node_entry);
    let router: Vec<Value> = routed.lock().map_err(|e| e.to_string())?.clone();
    assert_eq!(Some(&Value::Array(router)), lg.get("router_saw"));
    let inner: Vec<Value> = inner_seen.lock().map_err(|e| e.to_string())?.clone();
    assert_eq!(Some(&Value::Array(inner)), lg.get("subgraph_saw"));
    Ok(())
}

#[tokio::test]
async fn a_missing_context_is_an_error_naming_the_expected_type() -> TestResult {
    let graph = StateGraph::<Log>::new()
        .add_node("n", |_s: Arc<Log>, cx: NodeContext| async move {
            cx.context::<Ctx>()?;
            Ok::<_, BoxError>(Log::update())
        })
        .add_edge(START, "n")
        .add_edge("n", END)
        .compile()?;
    let err = graph
        .invoke(Log::update(), &RunConfig::new())
        .await
        .err()
        .ok_or("ran without its context")?;
    let text = err.to_string();
    assert!(
        text.contains("has no context") && text.contains("Ctx"),
        "{text}"
    );
    Ok(())
}

#[tokio::test]
async fn a_context_of_another_type_is_an_error_naming_both_types() -> TestResult {
    let graph = one("n")?;
    let config = RunConfig::new().context(42u32);
    let out = graph.invoke(Log::update(), &config).await?;
    assert_eq!(out.state.log, vec![Value::Null]);
    let err = stategraph::ContextValue::new(42u32)
        .get::<Ctx>()
        .err()
        .ok_or("a u32 read as a Ctx")?;
    assert!(matches!(
        err,
        ContextError::WrongType { expected, found } if expected.ends_with("Ctx") && found == "u32"
    ));
    Ok(())
}

#[tokio::test]
async fn the_context_is_in_no_checkpoint_and_a_resume_sees_only_its_own() -> TestResult {
    let lg = recorded("runtime_context_not_checkpointed")?;
    for key in [
        "in_get_state_values",
        "in_get_state_metadata",
        "in_history",
        "in_stored_checkpoints",
    ] {
        assert_eq!(lg.get(key), Some(&json!(false)), "{key}");
    }
    let secret = "user-7f3a9c";
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("ctx.db");
    let saver = Arc::new(SqliteSaver::open(&path)?);
    let graph = StateGraph::<Log>::new()
        .add_node("ask", |_s: Arc<Log>, cx: NodeContext| async move {
            let before = seen(cx.context::<Ctx>());
            let answer: String = cx.interrupt("who?")?;
            let after = seen(cx.context::<Ctx>());
            Ok::<_, BoxError>(Log::update().log(vec![json!(["ask", before, after, answer])]))
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .compile()?
        .with_checkpointer(saver);
    let with = |user: &str| {
        RunConfig::new()
            .thread("t1")
            .context(Ctx { user: user.into() })
    };
    graph.invoke(Log::update(), &with(secret)).await?;
    let snap = graph.get_state("t1", None).await?.ok_or("no state")?;
    assert!(!format!("{snap:?}").contains(secret));
    let history = graph
        .get_state_history("t1", stategraph::checkpoints::ListOptions::default())
        .await?;
    assert!(!format!("{history:?}").contains(secret));
    let resumed = graph
        .invoke(Command::resume(Resume::Value(json!("yes"))), &with("bob"))
        .await?;
    assert_eq!(
        Some(&Value::Array(resumed.state.log.clone())),
        lg.get("resumed_with_new_context")
    );
    graph
        .invoke(Log::update(), &with(secret).thread("t2"))
        .await?;
    let bare = RunConfig::new().thread("t2");
    let resumed = graph
        .invoke(Command::resume(Resume::Value(json!("yes"))), &bare)
        .await?;
    assert_eq!(
        Some(&Value::Array(resumed.state.log.clone())),
        lg.get("resumed_without_context")
    );
    drop(graph);
    let mut bytes = std::fs::read(&path)?;
    for side in ["ctx.db-wal"] {
        if let Ok(more) = std::fs::read(dir.path().join(side)) {
            bytes.extend(more);
        }
    }
    let needle = secret.as_bytes();
    assert!(!bytes.windows(needle.len()).any(|w| w == needle));
    Ok(())
}

#[tokio::test]
async fn a_run_a_node_starts_inherits_the_context_unless_given_its_own() -> TestResult {
    let lg = recorded("runtime_context_nested_invoke")?;
    let inner = one("inner")?;
    let outer = StateGraph::<Log>::new()
        .add_node("outer", move |_s: Arc<Log>, cx: NodeContext| {
            let inner = inner.clone();
            async move {
                let inherited = inner
                    .invoke(Log::update(), &RunConfig::new().inherit_context(&cx))
                    .await?;
                let own_config = RunConfig::new()
                    .context(Ctx { user: "own".into() })
                    .inherit_context(&cx);
                let own = inner.invoke(Log::update(), &own_config).await?;
                Ok::<_, BoxError>(Log::update().log(vec![json!({
                    "inherited": inherited.state.log,
                    "own": own.state.log,
                })]))
            }
        })
        .add_edge(START, "outer")
        .add_edge("outer", END)
        .compile()?;
    let config = RunConfig::new().context(Ctx { user: "ada".into() });
    let out = outer.invoke(Log::update(), &config).await?;
    assert_eq!(Some(&Value::Array(out.state.log.clone())), lg.get("log"));
    Ok(())
}

#[tokio::test]
async fn a_json_context_decodes_as_the_declared_type() -> TestResult {
    let lg = recorded("runtime_context_unvalidated")?;
    let schema = ContextSchema::of::<Ctx>();
    let value = schema.decode(&json!({"user": "ada"}))?;
    let graph = one("node")?;
    let out = graph
        .invoke(Log::update(), &RunConfig::new().context_value(value))
        .await?;
    assert_eq!(
        Some(&Value::Array(out.state.log.clone())),
        lg.get("dict_for_dataclass_schema")
    );
    let absent = graph.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(
        Some(&Value::Array(absent.state.log.clone())),
        lg.get("absent")
    );
    Ok(())
}

#[tokio::test]
async fn a_json_context_that_does_not_fit_is_refused_naming_the_type() -> TestResult {
    // LangGraph passes an int through to a node typed for a dataclass; we refuse it before
    // the run (docs/decisions/0094).
    let lg = recorded("runtime_context_unvalidated")?;
    assert!(lg.pointer("/int_for_dataclass_schema/ok").is_some());
    let err = ContextSchema::of::<Ctx>()
        .decode(&json!(42))
        .err()
        .ok_or("an int decoded as a Ctx")?;
    let text = err.to_string();
    assert!(text.contains("Ctx") && text.contains("integer"), "{text}");
    Ok(())
}

/// A graph whose node writes the run's caller, on a memory saver.
fn who_graph() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    Ok(one("who")?.with_checkpointer(Arc::new(MemorySaver::new())))
}

#[tokio::test]
async fn a_replay_given_the_runs_context_does_not_diverge() -> TestResult {
    let graph = who_graph()?;
    let config = RunConfig::new()
        .thread("t")
        .context(Ctx { user: "ada".into() });
    graph.invoke(Log::update(), &config).await?;
    let history = graph
        .get_state_history("t", stategraph::checkpoints::ListOptions::default())
        .await?;
    let first = history.last().ok_or("no checkpoint")?.checkpoint.id;
    let same = stategraph::ContextValue::new(Ctx { user: "ada".into() });
    let report = graph.replay_with_context("t", first, None, same).await?;
    assert!(report.divergence.is_none(), "{:?}", report.divergence);
    // Without it the node sees none and writes something else: the replay names the step.
    let bare = graph.replay("t", first, None).await?;
    assert!(bare.divergence.is_some());
    Ok(())
}
