//! Streaming: the input is not an update. LangGraph streams no `updates` event for
//! `__start__`, only the nodes' updates; the input shows as the first `values` event.
//! Compared with `fixtures/langgraph/stream_updates_start.json`.
#![allow(missing_docs)]

use std::sync::Arc;

use futures::StreamExt;
use stategraph::prelude::*;
use stategraph::EventKind;
use stategraph_tests::langgraph::{recorded, strings, update_nodes};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    pub x: i64,
    #[reduce(append)]
    pub log: Vec<String>,
}

fn one_node() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("a", |_s: Arc<Log>, _c: NodeContext| async {
            Ok::<_, BoxError>(Log::update().log(vec!["a".into()]))
        })
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
}

#[tokio::test]
async fn no_updates_event_is_streamed_for_the_input() -> TestResult {
    let lg = recorded("stream_updates_start")?;
    let mode = StreamMode {
        values: true,
        ..StreamMode::updates()
    };
    let mut run = one_node()?.stream(Log::update().x(1), &RunConfig::new(), mode);
    let mut updates = Vec::new();
    let mut values = Vec::new();
    while let Some(ev) = run.next().await {
        match &ev.kind {
            EventKind::Updates { node, .. } => updates.push(node.to_string()),
            EventKind::Values(v) => {
                let s = v.get::<Log>().ok_or("values of another type")?;
                values.push((s.x, s.log.clone()));
            }
            _ => {}
        }
    }
    run.outcome().await?;
    assert_eq!(
        updates,
        update_nodes(&lg, "/updates")?,
        "as LangGraph: only a"
    );
    let first = lg.pointer("/values/0/x").and_then(|x| x.as_i64());
    assert_eq!(
        values.first().map(|(x, log)| (Some(*x), log.clone())),
        Some((first, strings(&lg, "/values/0/log")?)),
        "the input shows as the first values event"
    );
    assert_eq!(values.len(), 2, "the input, then a's step");
    Ok(())
}
