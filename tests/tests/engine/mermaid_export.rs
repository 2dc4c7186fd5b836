//! Mermaid export: deterministic text, snapshot-tested against a golden file.

use std::path::PathBuf;
use std::sync::Arc;

use stategraph::prelude::*;

use crate::subgraph_checkpointing::Child;
use crate::superstep_semantics::{Log, LogUpdate};
use crate::TestResult;

fn noop() -> impl Fn(Arc<Log>, NodeContext) -> futures::future::Ready<Result<LogUpdate, BoxError>>
       + Send
       + Sync
       + 'static {
    |_s, _c| futures::future::ready(Ok(Log::update()))
}

pub(crate) fn sample() -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    let child = StateGraph::<Child>::new()
        .add_node("research", |_s: Arc<Child>, _c: NodeContext| async {
            Ok::<_, BoxError>(Child::update())
        })
        .add_node("write up", |_s: Arc<Child>, _c: NodeContext| async {
            Ok::<_, BoxError>(Child::update())
        })
        .add_edge(START, "research")
        .add_edge("research", "write up")
        .add_edge("write up", END)
        .compile()?;
    StateGraph::<Log>::new()
        .add_node("plan", noop())
        .add_node("search", noop())
        .add_node("browse", noop())
        .add_subgraph(
            "team",
            child,
            Checkpointing::Inherit,
            |_p: &Log| Child::update(),
            |_c: &Child| Log::update(),
        )
        .add_node_with(
            "review",
            noop(),
            NodeOptions::new().destinations(["plan", END]),
        )
        .add_edge(START, "plan")
        .add_conditional_edges(
            "plan",
            |_s: &Log| vec!["search", "browse"],
            ["search", "browse", "team"],
        )
        .add_join(["search", "browse"], "review")
        .add_edge("team", "review")
        .compile()
}

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("mermaid")
        .join(name)
}

#[test]
fn mermaid_export_matches_the_golden_file() -> TestResult {
    let text = sample()?.to_mermaid();
    let path = golden("research_team.mmd");
    if std::env::var_os("STATEGRAPH_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
        std::fs::write(&path, &text)?;
    }
    let expected = std::fs::read_to_string(&path)?;
    assert_eq!(
        text, expected,
        "set STATEGRAPH_UPDATE_GOLDEN=1 to accept a deliberate change"
    );
    Ok(())
}

#[test]
fn mermaid_export_is_deterministic() -> TestResult {
    assert_eq!(sample()?.to_mermaid(), sample()?.to_mermaid());
    Ok(())
}

#[test]
fn node_names_that_differ_only_in_punctuation_get_distinct_ids() -> TestResult {
    let g = StateGraph::<Log>::new()
        .add_node("a-b", noop())
        .add_node("a_b", noop())
        .add_node("a b", noop())
        .add_edge(START, "a-b")
        .add_edge(START, "a_b")
        .add_edge(START, "a b")
        .compile()?;
    let text = g.to_mermaid();
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().split('[').next())
        .filter(|l| l.starts_with('a'))
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(ids.len(), 3, "{text}");
    assert_eq!(unique.len(), 3, "{text}");
    Ok(())
}
