//! The real clients, unmodified: `langgraph-sdk` from PyPI and `@langchain/langgraph-sdk`
//! from npm drive a server on loopback through every scenario of `tests/sdk/client.py` and
//! `tests/sdk/client.mjs` (the same scripts pass against LangGraph's own `langgraph dev`).
//!
//! The clients are installed by `.ci/sdk-clients.sh` (into `target/sdk-clients`, or where
//! `STATEGRAPH_SDK_CLIENTS` says). Without them these tests skip, except under `CI=true`,
//! where a missing client fails.

// The scenario runner fails its test when the server or the client cannot start.
#![allow(clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{clients_dir, installed, run_scenario, Served};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk")
        .join(name)
}

/// The interpreter and script of one SDK, or `None` (skip) when it is not installed.
fn sdk(lang: &str) -> Option<(PathBuf, PathBuf)> {
    let dir = clients_dir();
    match lang {
        "python" => {
            let python = installed("the Python langgraph-sdk", dir.join("py/bin/python"))?;
            Some((python, script("client.py")))
        }
        _ => {
            let package = dir.join("js/node_modules/@langchain/langgraph-sdk/package.json");
            installed("the JS langgraph-sdk", package)?;
            Some((PathBuf::from("node"), script("client.mjs")))
        }
    }
}

/// Run one scenario of one SDK's script against a fresh server; fail with what it printed.
async fn scenario(lang: &str, name: &str) {
    let Some((program, script)) = sdk(lang) else {
        return;
    };
    let served = Served::start().await.expect("server starts");
    run_scenario(&program, &script, &served.server.url(), name).await;
}

/// [`scenario`] against a server on PostgreSQL: the backends' conformance, as the clients
/// see it.
async fn scenario_on_postgres(lang: &str, name: &str) {
    let Some((program, script)) = sdk(lang) else {
        return;
    };
    let schema = common::fresh_schema(&format!("{}_{name}", &lang[..2]));
    let Some(served) = Served::start_postgres(&schema).await else {
        return;
    };
    run_scenario(&program, &script, &served.server.url(), name).await;
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        mod python {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::scenario("python", stringify!($name)).await;
                }
            )*
        }
        mod javascript {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::scenario("javascript", stringify!($name)).await;
                }
            )*
        }
        mod python_on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::scenario_on_postgres("python", stringify!($name)).await;
                }
            )*
        }
        mod javascript_on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::scenario_on_postgres("javascript", stringify!($name)).await;
                }
            )*
        }
    };
}

// Each is a behaviour the script states and checks: thread CRUD and search; streams in each
// mode; subgraph namespaces; an error event; an interrupt resumed by `Command(resume=…)`;
// the edit/regenerate fork; state updates; history; wait and join; cancel; reject while busy;
// enqueue order; a stream resumed from `Last-Event-ID`; 4xx answers; a model's tokens in the
// `messages-tuple` and `messages` modes; the long-term store's items, searches and namespaces;
// the `checkpoints`, `tasks` and `debug` modes through an interrupt and its resume.
scenarios!(
    threads,
    stream_values,
    stream_updates,
    stream_custom,
    stream_subgraphs,
    stream_error,
    interrupt_resume,
    fork,
    update_state,
    history,
    wait_join,
    context,
    cancel,
    reject_busy,
    enqueue,
    resume_stream,
    errors,
    stream_messages,
    store,
    stream_debug,
);
