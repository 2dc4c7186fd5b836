//! A run's token usage: what nodes record is summed per run, over its subgraphs, shown on
//! its outcome, and fed to the config's meters also when the run fails.

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::{Checkpointing, Node, RunError, TokenUsage, UsageMeter};

use crate::TestResult;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Doc {
    pub text: String,
}

/// A node that records one model call of `input` and `output` tokens.
fn calls_model(input: u64, output: u64) -> impl Node<Doc> {
    move |_s: Arc<Doc>, cx: NodeContext| async move {
        cx.record_usage(TokenUsage::of_call(input, output, input + output));
        Ok::<_, BoxError>(Doc::update())
    }
}

fn child() -> Result<CompiledGraph<Doc>, stategraph::CompileError> {
    StateGraph::<Doc>::new()
        .add_node("inner", calls_model(5, 1))
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()
}

#[tokio::test]
async fn a_runs_usage_sums_its_nodes_and_its_subgraphs_calls() -> TestResult {
    let graph = StateGraph::<Doc>::new()
        .add_node("a", calls_model(100, 20))
        .add_node("b", calls_model(15, 9))
        .add_subgraph(
            "sub",
            child()?,
            Checkpointing::Disabled,
            |_p: &Doc| Doc::update(),
            |_c: &Doc| Doc::update(),
        )
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "sub")
        .add_edge("sub", END)
        .compile()?;
    let outcome = graph.invoke(Doc::update(), &RunConfig::new()).await?;
    assert_eq!(
        outcome.usage,
        TokenUsage {
            input_tokens: 120,
            output_tokens: 30,
            total_tokens: 150,
            model_calls: 3,
        }
    );
    // A second run counts its own calls only.
    let again = graph.invoke(Doc::update(), &RunConfig::new()).await?;
    assert_eq!(again.usage.model_calls, 3);
    Ok(())
}

#[tokio::test]
async fn a_failed_runs_usage_reaches_its_configs_meter() -> TestResult {
    let graph = StateGraph::<Doc>::new()
        .add_node("a", calls_model(7, 3))
        .add_node("fail", |_s: Arc<Doc>, _cx: NodeContext| async move {
            Err::<DocUpdate, BoxError>("the model is gone".into())
        })
        .add_edge(START, "a")
        .add_edge("a", "fail")
        .add_edge("fail", END)
        .compile()?;
    let meter = UsageMeter::new();
    let config = RunConfig::new().usage_meter(meter.clone());
    let result = graph.invoke(Doc::update(), &config).await;
    assert!(matches!(result, Err(RunError::Node { .. })), "{result:?}");
    assert_eq!(meter.total(), TokenUsage::of_call(7, 3, 10));
    Ok(())
}
