//! What the studio's tests share: a checkpoint file written by real graphs (a counter loop
//! and an agent with a tool), and a fingerprint of the file's rows to show nothing changed.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use stategraph::checkpoints::{Saver, SqliteSaver};
use stategraph::prelude::*;
use stategraph_nodes::prelude::*;
use stategraph_nodes::{FnTool, ToolMessage, ToolSource, ToolSpec};
use stategraph_studio::Studio;
use tower::ServiceExt;

pub type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;
pub type E = Box<dyn std::error::Error + Send + Sync>;

/// The counter thread's id.
pub const COUNTER: &str = "counter";
/// The agent thread's id.
pub const AGENT: &str = "agent-1";

#[derive(State, Clone, Default, Debug)]
pub struct Counter {
    pub count: i64,
    #[reduce(append)]
    pub log: Vec<String>,
}

/// `plan` counts, `act` logs, and the router loops back to `plan` until the count is 3.
pub fn counter_graph() -> Result<CompiledGraph<Counter>, stategraph::CompileError> {
    StateGraph::<Counter>::new()
        .add_node("plan", |s: Arc<Counter>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Counter::update()
                    .count(s.count + 1)
                    .log(vec![format!("plan {}", s.count + 1)]),
            )
        })
        .add_node("act", |s: Arc<Counter>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Counter::update().log(vec![format!("act {}", s.count)]))
        })
        .add_edge(START, "plan")
        .add_edge("plan", "act")
        .add_conditional_edges(
            "act",
            |s: &Counter| if s.count < 3 { vec!["plan"] } else { vec![END] },
            ["plan", END],
        )
        .compile()
}

/// Run the counter thread once more in `path` (a new file or an existing one).
pub async fn run_counter(path: &Path) -> R {
    let saver = Arc::new(SqliteSaver::open(path)?);
    let graph = counter_graph()?.with_checkpointer(saver.clone());
    graph
        .invoke(Counter::update(), &RunConfig::new().thread(COUNTER))
        .await?;
    saver.flush().await?;
    saver.close()?;
    Ok(())
}

/// An agent thread: the model calls `lookup`, reads its result and answers.
pub async fn run_agent(path: &Path) -> R {
    let saver: Arc<dyn Saver> = Arc::new(SqliteSaver::open(path)?);
    let model = ScriptedModel::new(
        "scripted",
        [
            AiMessage::calls([ToolCall::new("call-1", "lookup", json!({ "q": "weather" }))]),
            AiMessage::text("It is sunny."),
        ],
    );
    let lookup = FnTool::new(
        ToolSpec::new("lookup", "Look a thing up", ToolSource::Config).read_only(true),
        |call, _cx| async move { Ok(ToolMessage::new(&call.id, "lookup", "sunny, 21 C").into()) },
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(lookup)
        .assemble(RunContext::new(AGENT, "ana"))
        .await?
        .with_checkpointer(Arc::clone(&saver));
    agent.ask("What is the weather?").await?;
    model.verify()?;
    saver.flush().await?;
    Ok(())
}

/// The long thread's id.
pub const LONG: &str = "long";

/// A thread whose `log` grows to 500 items in two steps of 250 (`fill`, then `more`).
pub async fn run_long(path: &Path) -> R {
    let saver = Arc::new(SqliteSaver::open(path)?);
    let graph = StateGraph::<Counter>::new()
        .add_node("fill", |_s: Arc<Counter>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Counter::update().log((0..250).map(|i| format!("item {i}")).collect()),
            )
        })
        .add_node("more", |_s: Arc<Counter>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Counter::update().log((250..500).map(|i| format!("item {i}")).collect()),
            )
        })
        .add_edge(START, "fill")
        .add_edge("fill", "more")
        .add_edge("more", END)
        .compile()?
        .with_checkpointer(saver.clone());
    graph
        .invoke(Counter::update(), &RunConfig::new().thread(LONG))
        .await?;
    saver.flush().await?;
    saver.close()?;
    Ok(())
}

/// A file with the counter thread and the agent thread.
pub async fn write_file(path: &Path) -> R {
    run_counter(path).await?;
    run_agent(path).await?;
    Ok(())
}

/// Every checkpoint row and pending write of the file, as text: equal before and after
/// means the file's checkpoints did not change.
pub fn fingerprint(path: &Path) -> Result<String, rusqlite::Error> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let rows: String = conn.query_row(
        "SELECT COUNT(*) || ':' || COALESCE(group_concat(hex(id) || hex(body_hash), ','), '') \
         FROM (SELECT id, body_hash FROM sg_checkpoints ORDER BY seq)",
        [],
        |r| r.get(0),
    )?;
    let writes: i64 = conn.query_row("SELECT COUNT(*) FROM sg_writes", [], |r| r.get(0))?;
    Ok(format!("{rows}|{writes}"))
}

/// The nested thread's id: a graph whose steps run subgraphs.
pub const NESTED: &str = "nested";

#[derive(State, Clone, Default, Debug)]
pub struct Inner {
    pub n: i64,
    #[reduce(append)]
    pub notes: Vec<String>,
}

/// The subgraph: `double` doubles `n`, then `note` notes it.
pub fn inner_graph() -> Result<CompiledGraph<Inner>, stategraph::CompileError> {
    StateGraph::<Inner>::new()
        .add_node("double", |s: Arc<Inner>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Inner::update().n(s.n * 2))
        })
        .add_node("note", |s: Arc<Inner>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Inner::update().notes(vec![format!("doubled to {}", s.n)]))
        })
        .add_edge(START, "double")
        .add_edge("double", "note")
        .add_edge("note", END)
        .compile()
}

/// `prep` logs, the subgraph node `inner` (a history per task) doubles `count + 1`, the
/// subgraph node `tally` (one history across the steps, `Checkpointing::Own`) notes the
/// count, and the router loops back to `prep` until the count reaches 5: two rounds, so two
/// `inner:<task>` namespaces and one `tally` namespace run in two steps.
pub fn nested_graph() -> Result<CompiledGraph<Counter>, stategraph::CompileError> {
    StateGraph::<Counter>::new()
        .add_node("prep", |s: Arc<Counter>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Counter::update().log(vec![format!("prep {}", s.count)]))
        })
        .add_subgraph(
            "inner",
            inner_graph()?,
            Checkpointing::Inherit,
            |s: &Counter| Inner::update().n(s.count + 1),
            |c: &Inner| Counter::update().count(c.n).log(c.notes.clone()),
        )
        .add_subgraph(
            "tally",
            inner_graph()?,
            Checkpointing::Own,
            |s: &Counter| Inner::update().n(s.count),
            |_c: &Inner| Counter::update(),
        )
        .add_edge(START, "prep")
        .add_edge("prep", "inner")
        .add_edge("inner", "tally")
        .add_conditional_edges(
            "tally",
            |s: &Counter| if s.count < 5 { vec!["prep"] } else { vec![END] },
            ["prep", END],
        )
        .compile()
}

/// Run the nested thread on `saver`.
pub async fn run_nested_on(saver: Arc<dyn Saver>) -> R {
    let graph = nested_graph()?.with_checkpointer(Arc::clone(&saver));
    let out = graph
        .invoke(Counter::update(), &RunConfig::new().thread(NESTED))
        .await?;
    assert_eq!(out.state.count, 6, "two rounds: (0+1)*2, then (2+1)*2");
    saver.flush().await?;
    Ok(())
}

/// Run the nested thread in `path` (a new file or an existing one).
pub async fn run_nested(path: &Path) -> R {
    let saver = Arc::new(SqliteSaver::open(path)?);
    run_nested_on(saver.clone()).await?;
    saver.close()?;
    Ok(())
}

/// Status and JSON body (`null` if not JSON) of a request with the studio's token.
pub async fn send(
    studio: &Studio,
    method: Method,
    uri: &str,
    body: Option<String>,
) -> Result<(StatusCode, Value), E> {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::COOKIE, format!("sg_studio={}", studio.token()))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.map_or_else(Body::empty, Body::from))?;
    let res = studio.router().oneshot(req).await?;
    let status = res.status();
    let bytes = res.into_body().collect().await?.to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// The JSON body of a GET that must succeed.
pub async fn get(studio: &Studio, uri: &str) -> Result<Value, E> {
    let (status, body) = send(studio, Method::GET, uri, None).await?;
    assert_eq!(status, StatusCode::OK, "GET {uri}: {body}");
    Ok(body)
}

/// Writes a long-term store into the file: alice's fact and note, bob's plan.
pub async fn write_store(path: &Path) -> R {
    use stategraph_store::{Namespace, Op, PutOp, SqliteStore, Store, StoreConfig};
    let store = SqliteStore::open(path, StoreConfig::default())?;
    let put = |ns: &[&str], key: &str, value: Value| -> Result<Op, E> {
        let value = value.as_object().cloned().ok_or("an object")?;
        Ok(Op::Put(PutOp::new(
            Namespace::new(ns.iter().copied())?,
            key,
            value,
        )))
    };
    store
        .batch(vec![
            put(
                &["users", "alice"],
                "tea",
                json!({"text": "prefers green tea", "kind": "fact"}),
            )?,
            put(
                &["users", "alice", "notes"],
                "coffee",
                json!({"text": "black coffee", "kind": "note"}),
            )?,
            put(
                &["users", "bob"],
                "plan",
                json!({"text": "pro plan", "kind": "fact"}),
            )?,
        ])
        .await?;
    store.close();
    Ok(())
}
