//! Supersteps: parallel writes merge in the order the nodes were declared, where LangGraph
//! merges them in node-name order (decision 0029). Compared with
//! `fixtures/langgraph/parallel_merge_order.json`.
#![allow(missing_docs)]

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph_tests::langgraph::{recorded, strings};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    #[reduce(append)]
    pub log: Vec<String>,
}

/// Nodes declared in `names` order, all from START, each appending its name.
fn parallel(names: &[String]) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let mut g = StateGraph::<Log>::new();
    for name in names {
        let n = name.clone();
        g = g.add_node(name.as_str(), move |_s: Arc<Log>, _c: NodeContext| {
            let n = n.clone();
            async move { Ok::<_, BoxError>(Log::update().log(vec![n])) }
        });
    }
    for name in names {
        g = g
            .add_edge(START, name.as_str())
            .add_edge(name.as_str(), END);
    }
    g.compile()
}

#[tokio::test]
async fn parallel_appends_merge_in_declaration_order_not_name_order() -> TestResult {
    let lg = recorded("parallel_merge_order")?;
    let declared = strings(&lg, "/declared")?;
    let lg_log = strings(&lg, "/final_log")?;
    let mut by_name = declared.clone();
    by_name.sort();
    assert_eq!(lg_log, by_name, "LangGraph merges in name order");

    let out = parallel(&declared)?
        .invoke(Log::update(), &RunConfig::new())
        .await?;
    assert_eq!(out.state.log, declared, "ours: in declaration order");
    assert_ne!(out.state.log, lg_log, "the fixture's orders differ");
    Ok(())
}

#[tokio::test]
async fn nodes_declared_in_name_order_merge_as_langgraph_does() -> TestResult {
    let lg = recorded("parallel_merge_order")?;
    let mut by_name = strings(&lg, "/declared")?;
    by_name.sort();
    let out = parallel(&by_name)?
        .invoke(Log::update(), &RunConfig::new())
        .await?;
    assert_eq!(out.state.log, strings(&lg, "/final_log")?);
    Ok(())
}
