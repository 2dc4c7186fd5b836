//! `GET /api/threads/{thread}/history?before=ID&limit=N&ns=NS`: one page of a thread's
//! checkpoints in a namespace (the root graph's by default), newest first from the
//! database, drawn as the branch tree of the page, each row with the subgraphs its step ran;
//! and `GET /api/threads/{thread}/head?ns=NS`, what the page polls to update in place.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};
use stategraph_checkpoints::tree::BranchTree;
use stategraph_checkpoints::ListOptions;

use super::namespaces::{self, namespaces_of};
use super::{
    checkpoint_id, cut, header_json, namespace, newest, thread_id, ApiError, ApiResult, Params,
};
use crate::server::AppState;

/// Checkpoints on a page when the request does not say.
const DEFAULT_PAGE: usize = 100;
/// The most checkpoints one page may ask for.
pub(crate) const MAX_PAGE: usize = 500;

/// A page: `rows` in tree order (oldest first, each under its parent when the parent is on
/// the page; each with `subgraphs`, the subgraph namespaces its step ran), `older` the
/// cursor for the next page (or `null`), `running` the subgraphs started after the head
/// (the step planned there is running or stopped inside one), and for a subgraph's
/// namespace `parent_step`, the parent's step that ran it.
pub(crate) async fn page(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let limit = match params.get("limit") {
        None => DEFAULT_PAGE,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "limit `{}`: expected a number from 1 to {MAX_PAGE}",
                    cut(text)
                )))
            }
        },
    };
    let before = params.get("before").map(|b| checkpoint_id(b)).transpose()?;
    let ns = namespace(&params)?;
    let head = newest(&state, &thread, &ns).await?;
    let options = ListOptions {
        limit: Some(limit + 1),
        before,
        ..ListOptions::default()
    };
    let mut list = state.saver.list(&thread, &ns, options).await?;
    let more = list.len() > limit;
    list.truncate(limit);
    let older = if more {
        list.last().map(|c| c.id.to_string())
    } else {
        None
    };
    let changes = state
        .saver
        .changes_many(&thread, &ns, list.iter().map(|c| c.id).collect())
        .await?;
    let written: std::collections::HashMap<_, Vec<String>> = list
        .iter()
        .zip(&changes)
        .map(|(c, ch)| (c.id, ch.fields.iter().map(|(f, _)| f.clone()).collect()))
        .collect();
    let infos = namespaces_of(&state, &thread).await?;
    let ran = namespaces::ran_by_rows(&state, &thread, &ns, &infos, &list).await?;
    let ran: std::collections::HashMap<_, _> = list.iter().map(|c| c.id).zip(ran).collect();
    let running = namespaces::running_after(&ns, &infos, head.id);
    let parent_step = match infos.iter().find(|i| i.ns == ns) {
        Some(info) => namespaces::parent_step(&state, &thread, info).await?,
        None => None,
    };
    let tree = BranchTree::new(list);
    let rows: Vec<Value> = tree
        .rows()
        .iter()
        .filter_map(|r| {
            let cp = tree.checkpoint(r.id)?;
            let mut row = header_json(cp);
            row["branch"] = json!(r.branch);
            row["prefix"] = json!(r.prefix);
            row["branch_end"] = json!(r.head);
            row["head"] = json!(r.id == head.id);
            row["writes"] = json!(written.get(&r.id));
            row["subgraphs"] = json!(ran.get(&r.id));
            Some(row)
        })
        .collect();
    Ok(Json(json!({
        "thread": thread.as_str(),
        "ns": ns.as_str(),
        "head": head.id.to_string(),
        "rows": rows,
        "older": older,
        "running": running,
        "parent_step": parent_step,
    })))
}

/// The newest checkpoint of the thread's namespace: the page reloads when it changes.
pub(crate) async fn head(
    State(state): State<Arc<AppState>>,
    Path(thread): Path<String>,
    params: Params,
) -> ApiResult {
    let thread = thread_id(&thread)?;
    let head = newest(&state, &thread, &namespace(&params)?).await?;
    Ok(Json(
        json!({ "head": head.id.to_string(), "step": head.step }),
    ))
}
