//! The HTTP API: LangGraph's paths, shapes and status codes.
//!
//! Inside: `meta` `/ok` and `/info`; `assistants` one assistant per graph; `threads`
//! threads, their state and history; `runs` runs and their streams; `store`
//! the long-term store's items and namespaces; `ui` the chat page.

mod assistants;
mod meta;
mod runs;
pub(crate) mod store;
mod threads;
pub(crate) mod ui;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use axum::Router;

use crate::error::ApiError;
use crate::guard::guard;
use crate::Shared;

/// Every route, behind the guard.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let limit = shared.options.body_limit;
    Router::new()
        .route("/ok", get(meta::ok))
        .route("/info", get(meta::info))
        .route("/assistants/search", post(assistants::search))
        .route("/assistants/{id}", get(assistants::get_one))
        .route("/assistants/{id}/graph", get(assistants::graph))
        .route("/assistants/{id}/schemas", get(assistants::schemas))
        .route("/assistants/{id}/subgraphs", get(assistants::subgraphs))
        .route("/threads", post(threads::create))
        .route("/threads/search", post(threads::search))
        .route(
            "/threads/{id}",
            get(threads::get_one)
                .patch(threads::patch)
                .delete(threads::delete),
        )
        .route("/threads/{id}/copy", post(threads::copy))
        .route(
            "/threads/{id}/state",
            get(threads::state).post(threads::update_state),
        )
        .route(
            "/threads/{id}/state/checkpoint",
            post(threads::state_at_body),
        )
        .route("/threads/{id}/state/{checkpoint}", get(threads::state_at))
        .route(
            "/threads/{id}/history",
            post(threads::history).get(threads::history_get),
        )
        .route(
            "/threads/{id}/runs",
            post(runs::create_background).get(runs::list),
        )
        .route("/threads/{id}/runs/stream", post(runs::create_stream))
        .route("/threads/{id}/runs/wait", post(runs::create_wait))
        .route(
            "/threads/{id}/runs/{run}",
            get(runs::get_one).delete(runs::delete),
        )
        .route("/threads/{id}/runs/{run}/join", get(runs::join))
        .route("/threads/{id}/runs/{run}/stream", get(runs::join_stream))
        .route("/threads/{id}/runs/{run}/cancel", post(runs::cancel))
        .route("/runs", post(runs::stateless_background))
        .route("/runs/stream", post(runs::stateless_stream))
        .route("/runs/wait", post(runs::stateless_wait))
        .route(
            "/store/items",
            put(store::put).get(store::get).delete(store::delete),
        )
        .route("/store/items/search", post(store::search))
        .route("/store/namespaces", post(store::namespaces))
        .route("/ui", get(ui::redirect))
        .route("/ui/", get(ui::index))
        .route("/ui/{file}", get(ui::file))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(shared)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found("route", uri.path())
}
