//! The chat page at `/ui/`: the files `.ci/chat-page.sh` builds (LangGraph's `useStream` on
//! React, bundled), read from the directory the server was given. Only those three names are
//! served; anything else under `/ui/` is a 404.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::Shared;

/// The page's files and their media types.
const FILES: [(&str, &str); 3] = [
    ("index.html", "text/html; charset=utf-8"),
    ("chat.js", "text/javascript; charset=utf-8"),
    ("chat.css", "text/css; charset=utf-8"),
];

/// The first of the page's files `dir` lacks, if any.
pub(crate) fn missing_file(dir: &Path) -> Option<&'static str> {
    FILES
        .iter()
        .map(|(name, _)| *name)
        .find(|name| !dir.join(name).is_file())
}

/// `/ui` → `/ui/`, keeping the query (the page reads its parameters from it).
pub(crate) async fn redirect(uri: axum::http::Uri) -> Response {
    let to = match uri.query() {
        Some(q) => format!("/ui/?{q}"),
        None => "/ui/".to_owned(),
    };
    (StatusCode::PERMANENT_REDIRECT, [(LOCATION, to)]).into_response()
}

/// The page.
pub(crate) async fn index(State(shared): State<Arc<Shared>>) -> Result<Response, ApiError> {
    serve(&shared, "index.html").await
}

/// One of its files.
pub(crate) async fn file(
    State(shared): State<Arc<Shared>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Response, ApiError> {
    serve(&shared, &name).await
}

async fn serve(shared: &Shared, name: &str) -> Result<Response, ApiError> {
    let (Some(dir), Some((name, kind))) = (
        shared.options.ui.as_ref(),
        FILES.iter().find(|(n, _)| *n == name),
    ) else {
        return Err(ApiError::not_found("page file", name));
    };
    let bytes = tokio::fs::read(dir.join(name))
        .await
        .map_err(|e| ApiError::Internal(format!("the chat page's {name}: {e}")))?;
    Ok(([(CONTENT_TYPE, *kind), (CACHE_CONTROL, "no-cache")], bytes).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_the_built_page_names_the_file_it_lacks() {
        let dir = std::env::temp_dir().join(format!("sg-ui-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        assert_eq!(missing_file(&dir), Some("index.html"));
        for (name, _) in FILES {
            let _ = std::fs::write(dir.join(name), "x");
        }
        assert_eq!(missing_file(&dir), None);
        let _ = std::fs::remove_file(dir.join("chat.js"));
        assert_eq!(missing_file(&dir), Some("chat.js"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
