//! The same job on a real model (feature `live`, `OPENAI_MODEL` set; `OPENAI_BASE_URL` and
//! `OPENAI_API_KEY` as the server needs): the same tools, policies and settlement, the
//! analyst inheriting the lead's model. `web_search` asks a SearXNG-compatible API when
//! `SEARXNG_URL` is set, the local corpus otherwise. A model that never presents the report
//! ends its run in `error`, and the receipt printed says why.

use std::path::Path;
use std::sync::Arc;

use stategraph_nodes::{ChatModel, OpenAiModel};

use super::http_search::HttpSearch;
use super::{follow_up_with, review_with, summary, Models, Review, Workspace, PDF};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The workspace in `folder`, searching over HTTP when `SEARXNG_URL` is set.
fn workspace(folder: &Path) -> Result<Workspace, Error> {
    match std::env::var("SEARXNG_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
    {
        Some(url) => {
            println!("web_search: the search API at {url}");
            Workspace::open_with(folder, Arc::new(HttpSearch::new(&url)?))
        }
        None => Workspace::open(folder),
    }
}

/// The review and the follow-up on the model the environment names.
///
/// # Errors
/// The model's configuration, then as [`with_model`].
pub(crate) async fn sales_review(folder: &Path) -> Result<(), Error> {
    let model: Arc<dyn ChatModel> = Arc::new(OpenAiModel::from_env()?);
    with_model(&workspace(folder)?, model).await.map(|_| ())
}

/// The review and the follow-up in `ws` on `model` (the analyst inherits it), printed as the
/// offline example prints them.
///
/// # Errors
/// An unreadable PDF, storage, or a run that failed (a run that finished without
/// delivering is a [`Review`] with status `error`, printed with its receipt).
pub(crate) async fn with_model(
    ws: &Workspace,
    model: Arc<dyn ChatModel>,
) -> Result<(Review, Review), Error> {
    println!("model: {}", model.name());
    println!("== run 1: the review (one line per step)");
    let first = review_with(ws, PDF, Models::Live(Arc::clone(&model))).await?;
    summary::print_run(ws, &first)?;
    println!("\n== run 2: a follow-up on the same thread");
    let second = follow_up_with(ws, Models::Live(model)).await?;
    summary::print_run(ws, &second)?;
    summary::print_commands(ws, &first)?;
    Ok((first, second))
}
