//! Test helpers (feature `test-util`): state-diff assertions, running one node, trajectories,
//! and history snapshots with ids and times made deterministic.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph::prelude::*;
//! use stategraph::testing::{run_node, trajectory};
//! use stategraph::assert_state_diff;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Chat { #[reduce(append)] log: Vec<String>, turns: u32 }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let graph = StateGraph::<Chat>::new()
//!     .add_node("greet", |s: Arc<Chat>, _c: NodeContext| async move {
//!         Ok::<_, BoxError>(Chat::update().log(vec![format!("hi {}", s.turns)]).turns(s.turns + 1))
//!     })
//!     .add_edge(START, "greet")
//!     .compile()?;
//!
//! // One node against a state, no graph run:
//! let before = Chat { log: vec![], turns: 4 };
//! let ran = run_node(&graph, "greet", before.clone()).await?;
//! assert_state_diff!(before, ran.state, "
//!     + log[0]: \"hi 4\"
//!     ~ turns: 4 -> 5
//! ");
//!
//! // The node sequence of a whole run:
//! let (out, nodes) = trajectory(&graph, Chat::update(), &RunConfig::new()).await?;
//! assert_eq!(nodes, ["greet"]);
//! assert_eq!(out.state.turns, 1);
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use stategraph_checkpoints::{ListOptions, Namespace, TaskId};

use crate::command::Goto;
use crate::diff::{diff_states, StateDiff};
use crate::event::EventKind;
use crate::graph::TaskOutput;
use crate::node::{CancelToken, CheckpointScope, NodeResult, ResumeCursor, ResumeInput, TaskInfo};
use crate::run::RunShared;
use crate::state::ReduceCtx;
use crate::{
    CompiledGraph, Durability, Input, Interrupted, NodeContext, RunConfig, RunError, RunOutcome,
    State, StreamMode,
};

/// What one node did when run on its own by [`run_node`].
#[derive(Debug, Clone)]
pub struct NodeRun<S: State> {
    /// The updates it returned.
    pub updates: Vec<S::Update>,
    /// Where it routed (its `goto`s).
    pub goto: Vec<Goto>,
    /// The state after its updates went through the reducers.
    pub state: S,
}

/// Run node `name` of `graph` once against `state`, outside any graph run: no edges, no
/// checkpoint. The node's updates are applied through the reducers to give `state`.
///
/// # Errors
/// [`RunError::UnknownNode`] for a node the graph does not have; the node's own error; a
/// reducer error.
pub async fn run_node<S: State>(
    graph: &CompiledGraph<S>,
    name: &str,
    state: S,
) -> Result<NodeRun<S>, RunError> {
    run_node_in(graph, name, state, None).await
}

/// [`run_node`], the node's run given `context` ([`NodeContext::context`] reads it).
///
/// ```
/// use std::sync::Arc;
/// use stategraph::prelude::*;
/// use stategraph::testing::run_node_with_context;
/// use stategraph::ContextValue;
///
/// #[derive(State, Clone, Default, Debug)]
/// struct S { user: String }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let graph = StateGraph::<S>::new()
///     .add_node("who", |_s: Arc<S>, cx: NodeContext| async move {
///         Ok::<_, BoxError>(S::update().user(cx.context::<String>()?.clone()))
///     })
///     .add_edge(START, "who")
///     .add_edge("who", END)
///     .compile()?;
/// let run = run_node_with_context(&graph, "who", S::default(), ContextValue::new("ada".to_owned())).await?;
/// assert_eq!(run.state.user, "ada");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// As [`run_node`].
pub async fn run_node_with_context<S: State>(
    graph: &CompiledGraph<S>,
    name: &str,
    state: S,
    context: crate::ContextValue,
) -> Result<NodeRun<S>, RunError> {
    run_node_in(graph, name, state, Some(context)).await
}

async fn run_node_in<S: State>(
    graph: &CompiledGraph<S>,
    name: &str,
    state: S,
    context: Option<crate::ContextValue>,
) -> Result<NodeRun<S>, RunError> {
    let &i = graph
        .inner
        .index
        .get(name)
        .ok_or_else(|| RunError::UnknownNode {
            name: name.to_owned(),
            from: "run_node".to_owned(),
            step: 0,
        })?;
    let node = &graph.inner.nodes[i];
    let task = TaskId::derive(&[b"run_node", name.as_bytes()]);
    let shared = Arc::new(RunShared {
        resume: Arc::new(Mutex::new(ResumeInput::default())),
        cancel: CancelToken::new(),
        sink: None,
        thread: None,
        durability: Durability::Sync,
        recursion_limit: crate::DEFAULT_RECURSION_LIMIT,
        metadata: BTreeMap::new(),
        interrupt_before: Vec::new(),
        interrupt_after: Vec::new(),
        until_step: None,
        answers: Mutex::default(),
        usage: crate::run::RunUsage::default(),
        cache: None,
        context,
    });
    let ctx = NodeContext {
        inner: Arc::new(TaskInfo {
            node: node.name.clone(),
            task,
            step: 0,
            stop: i64::try_from(crate::DEFAULT_RECURSION_LIMIT).unwrap_or(i64::MAX),
            ns: Namespace::root(),
            thread: None,
            arg: None,
            sink: None,
            cursor: Mutex::new(ResumeCursor::default()),
            message_ids: Default::default(),
            resumed: false,
            resume: shared.resume.clone(),
            cancel: shared.cancel.clone(),
            run: shared,
            scope: CheckpointScope {
                ns: Namespace::root(),
                saver: None,
                ephemeral: true,
                store: graph.store.clone(),
            },
            heartbeat: None,
            subtasks: None,
        }),
    };
    let snapshot = Arc::new(state);
    let source: crate::BoxError = match node.run.run(snapshot.clone(), ctx).await {
        NodeResult::Output(out) => return finish_node_run(name, snapshot, out),
        NodeResult::Interrupted(interrupts) => Box::new(Interrupted { interrupts }),
        NodeResult::Child(e) => Box::new(e),
        NodeResult::Failed(e) => e,
    };
    Err(RunError::Node {
        node: name.to_owned(),
        step: 0,
        task,
        source,
    })
}

/// The result of [`run_node`] for a node that returned `out` on `snapshot`.
fn finish_node_run<S: State>(
    name: &str,
    snapshot: Arc<S>,
    out: TaskOutput<S>,
) -> Result<NodeRun<S>, RunError> {
    let mut after = Arc::try_unwrap(snapshot).unwrap_or_else(|shared| (*shared).clone());
    after
        .apply(out.updates.clone(), &mut ReduceCtx::new(0))
        .map_err(|(field, source)| RunError::Reduce {
            field: crate::state::Field::name(field),
            writers: vec![name.to_owned()],
            step: 0,
            source,
        })?;
    Ok(NodeRun {
        updates: out.updates,
        goto: out.goto,
        state: after,
    })
}

/// Run the graph and return its outcome with the names of the nodes its tasks ran, in the
/// order they started. A subgraph's nodes are included under the node that runs the
/// subgraph: `sub/inner` for node `inner` of the subgraph node `sub` (one `/` per level; task
/// ids are left out).
///
/// # Errors
/// The run's [`RunError`].
pub async fn trajectory<S: State>(
    graph: &CompiledGraph<S>,
    input: impl Into<Input<S>>,
    config: &RunConfig,
) -> Result<(RunOutcome<S>, Vec<String>), RunError> {
    let mode = StreamMode {
        tasks: true,
        subgraphs: true,
        ..StreamMode::none()
    };
    let mut run = graph.stream(input, config, mode);
    let mut started = Vec::new();
    while let Some(ev) = run.next().await {
        match ev.kind {
            EventKind::TaskStart { node, task, .. } => {
                let levels: Vec<&str> = ev
                    .ns
                    .levels()
                    .iter()
                    .map(|l| l.split(':').next().unwrap_or(""))
                    .collect();
                let name = if levels.is_empty() {
                    node.to_string()
                } else {
                    format!("{}/{node}", levels.join("/"))
                };
                started.push((ev.ns, task, name));
            }
            // A task whose recorded writes were reused did not run.
            EventKind::TaskEnd {
                task,
                status: crate::TaskStatus::Reused,
                ..
            } => started.retain(|(ns, t, _)| !(*t == task && *ns == ev.ns)),
            _ => {}
        }
    }
    let nodes = started.into_iter().map(|(_, _, name)| name).collect();
    Ok((run.outcome().await?, nodes))
}

/// A thread's history as JSON, oldest first, with checkpoint ids replaced by `cp0`, `cp1`, …
/// (in order of appearance) and creation times left out, so it can be compared with a golden
/// file: step, source, parent, next nodes, metadata, values, interrupts and errors.
///
/// # Errors
/// Storage and decode errors.
pub async fn history_snapshot<S: State>(
    graph: &CompiledGraph<S>,
    thread: &str,
) -> Result<serde_json::Value, RunError> {
    let mut history = graph
        .get_state_history(thread, ListOptions::default())
        .await?;
    history.reverse();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut name = |id: String| -> String {
        let n = names.len();
        names.entry(id).or_insert_with(|| format!("cp{n}")).clone()
    };
    let mut out = Vec::new();
    for h in history {
        let id = name(h.checkpoint.id.to_string());
        let parent = h.checkpoint.parent.map(|p| name(p.to_string()));
        out.push(serde_json::json!({
            "id": id,
            "parent": parent,
            "step": h.checkpoint.step,
            "source": h.checkpoint.source.as_str(),
            "next": h.next,
            "metadata": h.checkpoint.metadata,
            "values": crate::diff::state_to_json(&*h.values)?,
            "interrupts": h.interrupts.iter().map(|i| serde_json::json!({ "node": i.node, "value": i.value })).collect::<Vec<_>>(),
            "errors": h.errors,
        }));
    }
    Ok(serde_json::Value::Array(out))
}

/// Render a diff for comparison with expected text: one change per line, lines trimmed.
#[doc(hidden)]
pub fn normalize_diff_text(text: &str) -> String {
    diff_lines(text).join("\n")
}

/// The change lines of a diff's text (trimmed, blank lines dropped), in order.
#[doc(hidden)]
pub fn diff_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The diff of two states, for [`assert_state_diff!`](crate::assert_state_diff).
#[doc(hidden)]
pub fn diff_for_assert<S: State>(before: &S, after: &S) -> StateDiff {
    diff_states(before, after)
        .unwrap_or_else(|e| panic!("assert_state_diff!: cannot encode the states: {e}"))
}

/// The diff of two states restricted to `fields`, for
/// [`assert_state_diff!`](crate::assert_state_diff)`(.., fields = [..], ..)`.
#[doc(hidden)]
pub fn diff_for_assert_fields<S: State>(before: &S, after: &S, fields: &[&str]) -> StateDiff {
    let mut diff = diff_for_assert(before, after);
    diff.fields.retain(|d| fields.contains(&d.field.as_str()));
    diff
}

/// How an expected change compares with the actual one.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffMatch {
    /// The same change lines, in any order.
    Exactly,
    /// Every expected line is a change; other changes may happen too.
    Includes,
}

/// Compares `expected` (diff text) with `actual`; the failure message when they differ.
#[doc(hidden)]
pub fn check_diff(actual: &StateDiff, expected: &str, how: DiffMatch) -> Result<(), String> {
    let actual = diff_lines(&actual.to_string());
    let expected = diff_lines(expected);
    let ok = match how {
        DiffMatch::Exactly => {
            let (mut a, mut e) = (actual.clone(), expected.clone());
            a.sort();
            e.sort();
            a == e
        }
        DiffMatch::Includes => expected.iter().all(|l| actual.contains(l)),
    };
    if ok {
        return Ok(());
    }
    let show = |lines: &[String]| {
        if lines.is_empty() {
            "(nothing)".to_owned()
        } else {
            lines.join("\n")
        }
    };
    let missing: Vec<String> = expected
        .iter()
        .filter(|l| !actual.contains(l))
        .cloned()
        .collect();
    let mut text = format!(
        "state diff mismatch\n--- expected change ---\n{}\n--- actual change ---\n{}\n",
        show(&expected),
        show(&actual)
    );
    if !missing.is_empty() {
        text.push_str(&format!(
            "--- expected, not seen ---\n{}\n",
            missing.join("\n")
        ));
    }
    Err(text)
}

/// Assert that going from `before` to `after` changed exactly what `expected` says, written as
/// [`StateDiff`]'s text (one change per line: `+` added or appended, `-` removed, `~`
/// replaced; indentation, blank lines and the order of the lines are ignored). On failure it
/// prints the expected and the actual change one under the other, and the expected lines not
/// seen.
///
/// Two partial forms:
/// - `assert_state_diff!(before, after, fields = ["checksum"], "~ checksum: 1 -> 33")`: the
///   exact change of these fields only (the others may change or not);
/// - `assert_state_diff!(before, after, includes "~ checksum: 1 -> 33")`: these changes
///   happened, and maybe others.
///
/// ```
/// use stategraph::{assert_state_diff, State};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Tally { #[reduce(append)] items: Vec<u64>, checksum: u64 }
///
/// let before = Tally { items: vec![0, 1], checksum: 1 };
/// let after = Tally { items: vec![0, 1, 2], checksum: 33 };
/// assert_state_diff!(before, after, "+ items[2]: 2\n~ checksum: 1 -> 33");
/// assert_state_diff!(before, after, fields = ["checksum"], "~ checksum: 1 -> 33");
/// assert_state_diff!(before, after, includes "+ items[2]: 2");
/// ```
#[macro_export]
macro_rules! assert_state_diff {
    ($before:expr, $after:expr, fields = [$($field:expr),* $(,)?], $expected:expr $(,)?) => {{
        let diff = $crate::testing::diff_for_assert_fields(&$before, &$after, &[$($field),*]);
        if let Err(text) =
            $crate::testing::check_diff(&diff, $expected, $crate::testing::DiffMatch::Exactly)
        {
            panic!("{text}");
        }
    }};
    ($before:expr, $after:expr, includes $expected:expr $(,)?) => {{
        let diff = $crate::testing::diff_for_assert(&$before, &$after);
        if let Err(text) =
            $crate::testing::check_diff(&diff, $expected, $crate::testing::DiffMatch::Includes)
        {
            panic!("{text}");
        }
    }};
    ($before:expr, $after:expr, $expected:expr $(,)?) => {{
        let diff = $crate::testing::diff_for_assert(&$before, &$after);
        if let Err(text) =
            $crate::testing::check_diff(&diff, $expected, $crate::testing::DiffMatch::Exactly)
        {
            panic!("{text}");
        }
    }};
}
