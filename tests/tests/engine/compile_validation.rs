//! `compile()` reports every problem at once, with typed problems.

use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::GraphProblem;

use crate::superstep_semantics::{Log, LogUpdate};

fn noop() -> impl Fn(Arc<Log>, NodeContext) -> futures::future::Ready<Result<LogUpdate, BoxError>>
       + Send
       + Sync
       + 'static {
    |_s, _c| futures::future::ready(Ok(Log::update()))
}

#[test]
fn compile_reports_every_problem_at_once() {
    let err = StateGraph::<Log>::new()
        .add_node("a", noop())
        .add_node("a", noop())
        .add_node("island", noop())
        .add_node("loop", noop())
        .add_edge(START, "a")
        .add_edge("a", "ghost")
        .add_edge(END, "a")
        .add_edge("a", "loop")
        .add_edge("loop", "loop")
        .add_conditional_edges("a", |_s: &Log| END, ["nowhere", END])
        .interrupt_before(["phantom"])
        .compile()
        .err()
        .map(|e| e.problems)
        .unwrap_or_default();
    let expect = [
        GraphProblem::DuplicateNode { name: "a".into() },
        GraphProblem::MissingNode {
            from: "a".into(),
            to: "ghost".into(),
        },
        GraphProblem::InvalidEdge {
            from: END.into(),
            to: "a".into(),
            reason: "edges cannot leave END",
        },
        GraphProblem::UndeclaredTarget {
            kind: "conditional edge",
            from: "a".into(),
            target: "nowhere".into(),
        },
        GraphProblem::Unreachable {
            name: "island".into(),
        },
        GraphProblem::NoPathToEnd {
            name: "loop".into(),
        },
        GraphProblem::UnknownInterruptNode {
            when: "before",
            name: "phantom".into(),
        },
    ];
    for p in &expect {
        assert!(err.contains(p), "missing {p:?} in {err:?}");
    }
    assert_eq!(err.len(), expect.len(), "{err:?}");
}

#[test]
fn a_graph_without_an_entry_edge_does_not_compile() {
    let err = StateGraph::<Log>::new()
        .add_node("a", noop())
        .compile()
        .err()
        .map(|e| e.problems)
        .unwrap_or_default();
    assert!(err.contains(&GraphProblem::NoEntry), "{err:?}");
}

#[test]
fn reserved_names_and_edges_into_start_are_rejected() {
    let err = StateGraph::<Log>::new()
        .add_node(END, noop())
        .add_node("a", noop())
        .add_edge(START, "a")
        .add_edge("a", START)
        .compile()
        .err()
        .map(|e| e.problems)
        .unwrap_or_default();
    assert!(
        err.contains(&GraphProblem::ReservedName { name: END.into() }),
        "{err:?}"
    );
    assert!(
        err.iter().any(|p| matches!(
            p,
            GraphProblem::InvalidEdge {
                reason: "edges cannot enter START",
                ..
            }
        )),
        "{err:?}"
    );
}

#[test]
fn a_node_reached_only_by_goto_compiles_when_its_destinations_are_declared() {
    let undeclared = StateGraph::<Log>::new()
        .add_node("router", noop())
        .add_node("target", noop())
        .add_edge(START, "router")
        .compile();
    assert!(undeclared.is_err());
    let declared = StateGraph::<Log>::new()
        .add_node_with(
            "router",
            noop(),
            NodeOptions::new().destinations(["target", END]),
        )
        .add_node("target", noop())
        .add_edge(START, "router")
        .compile();
    assert!(declared.is_ok(), "{:?}", declared.err());
}

#[test]
fn compile_error_message_names_each_problem() {
    let err = StateGraph::<Log>::new()
        .add_node("a", noop())
        .add_edge(START, "b")
        .compile()
        .err();
    let text = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("\"b\""), "{text}");
    assert!(text.contains("unreachable"), "{text}");
}
