//! Subgraph namespaces in the studio's API, over a file written by a real graph whose steps
//! run subgraphs (one with a history per task, one with its own history across steps): the
//! thread lists every namespace, each has its own history, states and graph, each root step
//! names the subgraphs it ran, and each subgraph names the parent step that ran it.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod support;

use axum::http::{Method, StatusCode};
use serde_json::Value;
use stategraph_studio::{Studio, StudioOptions};
use support::*;

struct Fixture {
    _dir: tempfile::TempDir,
    studio: Studio,
}

async fn fixture() -> Result<Fixture, E> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    run_counter(&path).await?;
    run_nested(&path).await?;
    let studio = Studio::open(StudioOptions::new(&path))?;
    Ok(Fixture { _dir: dir, studio })
}

/// Status and JSON body of a GET with the token.
async fn get_raw(studio: &Studio, uri: &str) -> Result<(StatusCode, Value), E> {
    send(studio, Method::GET, uri, None).await
}

impl Fixture {
    async fn get(&self, uri: &str) -> Result<Value, E> {
        get(&self.studio, uri).await
    }
}

/// `text` as a query value.
fn q(text: &str) -> String {
    text.replace('|', "%7C").replace(':', "%3A")
}

/// The namespaces of the nested thread, by their `ns`.
async fn namespaces(f: &Fixture) -> Result<Vec<Value>, E> {
    let list = f.get(&format!("/api/threads/{NESTED}/namespaces")).await?;
    assert_eq!(list["thread"], NESTED);
    Ok(list["namespaces"]
        .as_array()
        .ok_or("no namespaces")?
        .clone())
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_thread_lists_its_root_graph_and_every_subgraph_namespace() -> R {
    let f = fixture().await?;
    let list = namespaces(&f).await?;
    let names: Vec<&str> = list.iter().map(|n| str_of(&n["ns"])).collect();
    assert_eq!(list.len(), 4, "root, two inner runs, one tally: {names:?}");
    let root = &list[0];
    assert_eq!(root["ns"], "");
    assert_eq!(root["label"], "(root)");
    assert_eq!(root["depth"], 0);
    assert!(root["parent"].is_null() && root["node"].is_null());
    let inner: Vec<&Value> = list.iter().filter(|n| n["node"] == "inner").collect();
    assert_eq!(inner.len(), 2, "one namespace per parent task: {names:?}");
    for n in &inner {
        let task = str_of(&n["task"]);
        assert_eq!(task.len(), 32, "{n}");
        assert_eq!(str_of(&n["ns"]), format!("inner:{task}"));
        assert_eq!(n["label"], "inner");
        assert_eq!(n["parent"], "");
        assert_eq!(n["depth"], 1);
        assert!(
            n["checkpoints"].as_u64() >= Some(3),
            "input, double, note: {n}"
        );
    }
    let tally = list.iter().find(|n| n["ns"] == "tally").ok_or("no tally")?;
    assert!(
        tally["task"].is_null(),
        "its own history has no task: {tally}"
    );
    assert_eq!(
        tally["checkpoints"].as_u64(),
        Some(2 * inner[0]["checkpoints"].as_u64().unwrap_or(0)),
        "one history across both steps: {tally}"
    );
    // A thread without subgraphs lists its root graph alone; an unknown thread is a 404.
    let counter = f.get(&format!("/api/threads/{COUNTER}/namespaces")).await?;
    assert_eq!(counter["namespaces"].as_array().map(Vec::len), Some(1));
    let (status, body) = get_raw(&f.studio, "/api/threads/nobody/namespaces").await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    Ok(())
}

#[tokio::test]
async fn a_subgraph_has_its_own_history_state_diff_and_graph() -> R {
    let f = fixture().await?;
    let list = namespaces(&f).await?;
    let inner = list
        .iter()
        .find(|n| n["node"] == "inner")
        .ok_or("no inner")?;
    let ns = q(str_of(&inner["ns"]));
    let page = f
        .get(&format!("/api/threads/{NESTED}/history?ns={ns}"))
        .await?;
    assert_eq!(page["ns"], inner["ns"]);
    let rows = page["rows"].as_array().ok_or("no rows")?;
    assert_eq!(
        rows.len() as u64,
        inner["checkpoints"].as_u64().unwrap_or(0)
    );
    let wrote: Vec<String> = rows
        .iter()
        .flat_map(|r| r["writes"].as_array().cloned().unwrap_or_default())
        .map(|w| str_of(&w).to_owned())
        .collect();
    assert!(wrote.contains(&"notes".to_owned()), "{wrote:?}");
    assert!(
        !wrote.contains(&"log".to_owned()),
        "the parent's field: {wrote:?}"
    );
    let head = str_of(&page["head"]).to_owned();
    assert_eq!(head, str_of(&inner["last"]));
    let cp = f
        .get(&format!("/api/threads/{NESTED}/checkpoints/{head}?ns={ns}"))
        .await?;
    assert_eq!(cp["state"]["n"], 2, "(0 + 1) * 2: {}", cp["state"]);
    assert_eq!(cp["state"]["notes"], serde_json::json!(["doubled to 2"]));
    let diff = f
        .get(&format!("/api/threads/{NESTED}/diff?to={head}&ns={ns}"))
        .await?;
    assert!(str_of(&diff["text"]).contains("doubled to 2"), "{diff}");
    let polled = f
        .get(&format!("/api/threads/{NESTED}/head?ns={ns}"))
        .await?;
    assert_eq!(polled["head"], page["head"]);
    // The subgraph's graph is its own shape, not the parent's.
    let graph = f
        .get(&format!(
            "/api/threads/{NESTED}/graph?checkpoint={head}&ns={ns}"
        ))
        .await?;
    let svg = str_of(&graph["svg"]);
    assert!(svg.contains("data-node=\"double\"") && svg.contains("data-node=\"note\""));
    assert!(!svg.contains("data-node=\"prep\""), "{svg}");
    let root = f.get(&format!("/api/threads/{NESTED}/graph")).await?;
    let root_svg = str_of(&root["svg"]);
    assert!(root_svg.contains("data-node=\"prep\"") && root_svg.contains("data-node=\"inner\""));
    Ok(())
}

#[tokio::test]
async fn each_root_step_names_the_subgraphs_it_ran_and_each_subgraph_its_parent_step() -> R {
    let f = fixture().await?;
    let list = namespaces(&f).await?;
    let page = f.get(&format!("/api/threads/{NESTED}/history")).await?;
    let rows = page["rows"].as_array().ok_or("no rows")?;
    let ran = |ns: &str| -> Vec<&Value> {
        rows.iter()
            .filter(|r| {
                r["subgraphs"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|x| x["ns"] == ns))
            })
            .collect()
    };
    for n in list.iter().filter(|n| n["node"] == "inner") {
        let ns = str_of(&n["ns"]);
        let steps = ran(ns);
        assert_eq!(steps.len(), 1, "{ns} ran in one step");
        let step = steps[0];
        assert!(
            step["writes"]
                .as_array()
                .is_some_and(|w| w.contains(&"count".into())),
            "the step that ran inner wrote its output: {step}"
        );
        let sub = f
            .get(&format!("/api/threads/{NESTED}/history?ns={}", q(ns)))
            .await?;
        let parent = &sub["parent_step"];
        assert_eq!(parent["ns"], "");
        assert_eq!(parent["to"], step["id"], "{parent}");
        assert_eq!(parent["from"], step["parent"], "{parent}");
        assert_eq!(parent["step"], step["step"], "{parent}");
    }
    let tally_steps = ran("tally");
    assert_eq!(tally_steps.len(), 2, "its own history runs in both rounds");
    assert!(tally_steps
        .iter()
        .all(|r| r["subgraphs"].as_array().map(Vec::len) == Some(1)));
    // The steps that ran no subgraph name none; the root graph has no parent step.
    assert!(rows
        .iter()
        .filter(|r| r["source"] != "loop")
        .all(|r| r["subgraphs"].as_array().is_some_and(Vec::is_empty)));
    assert!(page["parent_step"].is_null());
    assert_eq!(page["running"], serde_json::json!([]));
    Ok(())
}

#[tokio::test]
async fn a_checkpoint_is_found_only_in_its_own_namespace() -> R {
    let f = fixture().await?;
    let list = namespaces(&f).await?;
    let inner = list
        .iter()
        .find(|n| n["node"] == "inner")
        .ok_or("no inner")?;
    let id = str_of(&inner["last"]);
    let (status, body) = get_raw(
        &f.studio,
        &format!("/api/threads/{NESTED}/checkpoints/{id}"),
    )
    .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = get_raw(
        &f.studio,
        &format!("/api/threads/{NESTED}/history?ns=nowhere"),
    )
    .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        str_of(&body["error"]).contains("namespace nowhere"),
        "{body}"
    );
    let long = "x".repeat(5000);
    let (status, body) = get_raw(
        &f.studio,
        &format!("/api/threads/{NESTED}/history?ns={long}"),
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    Ok(())
}
