//! Subgraph namespaces: `GET /api/threads/{thread}/namespaces` lists a thread's root graph
//! and every subgraph's history, and the history of any namespace links each step to the
//! subgraphs it ran and a subgraph to the parent step that ran it.
//!
//! The link is read from checkpoint ids, which are time-ordered (decision 0067): a
//! subgraph's checkpoints are made while its parent's step runs, after the checkpoint the
//! step started from and before the one it ended at.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_checkpoints::{
    Checkpoint, CheckpointId, ListOptions, Namespace, NamespaceInfo, Source, ThreadId,
};

use super::{thread_id, ApiError};
use crate::server::AppState;

/// How the root namespace is shown.
const ROOT_LABEL: &str = "(root)";

/// `GET /api/threads/{thread}/namespaces`.
#[derive(Debug, Serialize)]
pub(crate) struct NamespaceList {
    thread: String,
    /// The root namespace first, then each subgraph's, by namespace text (a parent before
    /// its children).
    namespaces: Vec<NamespaceEntry>,
}

/// One namespace of a thread.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NamespaceEntry {
    /// The namespace as stored (`""` for the root); the `ns` parameter of the other routes.
    pub(crate) ns: String,
    /// How the page shows it: `(root)`, or the nodes down to it, `outer › inner`.
    pub(crate) label: String,
    /// The namespace it runs under (`None` for the root).
    pub(crate) parent: Option<String>,
    /// Subgraph levels below the root (0 for the root).
    pub(crate) depth: usize,
    /// The parent graph's node that runs it (`None` for the root).
    pub(crate) node: Option<String>,
    /// The parent task that ran it, for a subgraph with a history per task (`None` for one
    /// that keeps its own history across the parent's steps).
    pub(crate) task: Option<String>,
    /// How many checkpoints it holds.
    pub(crate) checkpoints: usize,
    /// Its oldest checkpoint.
    pub(crate) first: String,
    /// Its newest checkpoint.
    pub(crate) last: String,
    /// When it was last written (ISO-8601 UTC).
    pub(crate) updated_at: String,
}

/// A subgraph a step ran, as a history row names it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SubgraphRef {
    /// The subgraph's namespace.
    ns: String,
    /// The node that ran it.
    node: String,
    /// The task, when the subgraph keeps a history per task.
    task: Option<String>,
    /// The checkpoints its namespace holds.
    checkpoints: usize,
}

/// The parent step that ran a subgraph (its first run, for one that keeps its own history).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ParentStep {
    /// The parent's namespace (`""` for the root).
    ns: String,
    /// The step's number in the parent.
    step: i64,
    /// The parent checkpoint the step started from.
    from: String,
    /// The parent checkpoint the step ended at; `None` while it has not (an interrupt inside
    /// the subgraph, a failure, or a run still going).
    to: Option<String>,
}

/// The list.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
) -> Result<Json<NamespaceList>, ApiError> {
    let thread = thread_id(&thread)?;
    let infos = namespaces_of(&state, &thread).await?;
    if !infos.iter().any(|i| i.ns.is_root()) {
        return Err(ApiError::NotFound(format!(
            "no thread {thread} in the file"
        )));
    }
    Ok(Json(NamespaceList {
        thread: thread.as_str().to_owned(),
        namespaces: infos.iter().map(entry).collect(),
    }))
}

/// Every namespace of `thread`, by namespace text.
pub(crate) async fn namespaces_of(
    state: &AppState,
    thread: &ThreadId,
) -> Result<Vec<NamespaceInfo>, ApiError> {
    Ok(state.saver.list_namespaces(thread).await?)
}

/// A namespace's list entry.
fn entry(info: &NamespaceInfo) -> NamespaceEntry {
    let levels = info.ns.levels();
    let (node, task) = match levels.last() {
        Some(level) => {
            let (node, task) = split_level(level);
            (Some(node.to_owned()), task.map(str::to_owned))
        }
        None => (None, None),
    };
    NamespaceEntry {
        ns: info.ns.as_str().to_owned(),
        label: label(&info.ns),
        parent: parent_of(&info.ns).map(|p| p.as_str().to_owned()),
        depth: levels.len(),
        node,
        task,
        checkpoints: info.checkpoints,
        first: info.first.to_string(),
        last: info.last.to_string(),
        updated_at: format_utc_ms(info.last.created_at_ms()),
    }
}

/// A level's node and task: `node:<32 hex digits>` is a per-task history, anything else a
/// node's own.
pub(crate) fn split_level(level: &str) -> (&str, Option<&str>) {
    match level.rsplit_once(':') {
        Some((node, task)) if task.len() == 32 && task.bytes().all(|b| b.is_ascii_hexdigit()) => {
            (node, Some(task))
        }
        _ => (level, None),
    }
}

/// `(root)`, or the nodes of the levels, `outer › inner`.
fn label(ns: &Namespace) -> String {
    if ns.is_root() {
        return ROOT_LABEL.to_owned();
    }
    ns.levels()
        .iter()
        .map(|l| split_level(l).0)
        .collect::<Vec<_>>()
        .join(" › ")
}

/// The namespace one level up; `None` for the root.
pub(crate) fn parent_of(ns: &Namespace) -> Option<Namespace> {
    let levels = ns.levels();
    let (_, up) = levels.split_last()?;
    Some(Namespace::parse(&up.join("|")))
}

/// Whether `child` is one level below `ns`.
fn is_child_of(child: &Namespace, ns: &Namespace) -> bool {
    parent_of(child).is_some_and(|p| &p == ns)
}

fn subgraph_ref(info: &NamespaceInfo) -> SubgraphRef {
    let e = entry(info);
    SubgraphRef {
        ns: e.ns,
        node: e.node.unwrap_or_default(),
        task: e.task,
        checkpoints: e.checkpoints,
    }
}

/// For each of `rows` (checkpoints of `ns`, any order), the subgraphs directly below `ns`
/// that ran in the step that made it: those with a checkpoint made after the row's parent
/// and before the row. Only a step (`loop`) runs nodes.
pub(crate) async fn ran_by_rows(
    state: &AppState,
    thread: &ThreadId,
    ns: &Namespace,
    infos: &[NamespaceInfo],
    rows: &[Checkpoint],
) -> Result<Vec<Vec<SubgraphRef>>, ApiError> {
    let children: Vec<&NamespaceInfo> = infos.iter().filter(|i| is_child_of(&i.ns, ns)).collect();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut ran = Vec::new();
        if let (Source::Loop, Some(from)) = (row.source, row.parent) {
            for c in &children {
                if made_between(state, thread, c, from, row.id).await? {
                    ran.push(subgraph_ref(c));
                }
            }
        }
        out.push(ran);
    }
    Ok(out)
}

/// Whether subgraph `c` has a checkpoint made after `from` and before `to`: at once when
/// its whole history lies between, else by its newest checkpoint before `to` (a subgraph
/// that keeps its own history runs in many steps).
async fn made_between(
    state: &AppState,
    thread: &ThreadId,
    c: &NamespaceInfo,
    from: CheckpointId,
    to: CheckpointId,
) -> Result<bool, ApiError> {
    if c.last <= from || c.first >= to {
        return Ok(false);
    }
    if c.first > from && c.last < to {
        return Ok(true);
    }
    let options = ListOptions {
        limit: Some(1),
        before: Some(to),
        ..ListOptions::default()
    };
    let newest = state.saver.list(thread, &c.ns, options).await?;
    Ok(newest.first().is_some_and(|n| n.id > from))
}

/// The subgraphs directly below `ns` started after its newest checkpoint `head`: what the
/// step planned there is running (or stopped inside: an interrupt, a failure).
pub(crate) fn running_after(
    ns: &Namespace,
    infos: &[NamespaceInfo],
    head: CheckpointId,
) -> Vec<SubgraphRef> {
    infos
        .iter()
        .filter(|i| is_child_of(&i.ns, ns) && i.last > head)
        .map(subgraph_ref)
        .collect()
}

/// The parent step that ran subgraph `info` first: the parent's newest checkpoint made
/// before the subgraph's first, and the step's result (a `loop` checkpoint one step on
/// whose parent it is), if made yet.
pub(crate) async fn parent_step(
    state: &AppState,
    thread: &ThreadId,
    info: &NamespaceInfo,
) -> Result<Option<ParentStep>, ApiError> {
    let Some(up) = parent_of(&info.ns) else {
        return Ok(None);
    };
    let options = ListOptions {
        limit: Some(1),
        before: Some(info.first),
        ..ListOptions::default()
    };
    let Some(from) = state.saver.list(thread, &up, options).await?.pop() else {
        return Ok(None);
    };
    let step = from.step + 1;
    let options = ListOptions {
        filter: [("step".to_owned(), serde_json::json!(step))].into(),
        ..ListOptions::default()
    };
    let to = state
        .saver
        .list(thread, &up, options)
        .await?
        .into_iter()
        .filter(|c| c.parent == Some(from.id) && c.source == Source::Loop && c.id > info.first)
        .map(|c| c.id)
        .min();
    Ok(Some(ParentStep {
        ns: up.as_str().to_owned(),
        step,
        from: from.id.to_string(),
        to: to.map(|t| t.to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_with_a_task_id_splits_into_node_and_task_and_one_without_does_not() {
        let task = "0123456789abcdef0123456789abcdef";
        assert_eq!(split_level(&format!("inner:{task}")), ("inner", Some(task)));
        assert_eq!(split_level("inner"), ("inner", None));
        assert_eq!(split_level("a:b"), ("a:b", None));
    }

    #[test]
    fn a_namespace_is_labelled_by_its_nodes_and_knows_its_parent() {
        let task = "0123456789abcdef0123456789abcdef";
        let ns = Namespace::parse(&format!("outer:{task}|inner"));
        assert_eq!(label(&ns), "outer › inner");
        assert_eq!(
            parent_of(&ns).map(|p| p.as_str().to_owned()),
            Some(format!("outer:{task}"))
        );
        assert_eq!(parent_of(&Namespace::root()), None);
        assert!(is_child_of(
            &ns,
            &Namespace::parse(&format!("outer:{task}"))
        ));
        assert!(!is_child_of(&ns, &Namespace::root()));
    }
}
