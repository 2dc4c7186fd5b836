//! The token check every request passes: the `token` query parameter or the `sg_studio`
//! cookie must hold the session's token. A valid query token sets the cookie (so the page's
//! own requests need not carry it) and, on the page itself, redirects to the URL without it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::server::AppState;

/// The cookie's name.
const COOKIE_NAME: &str = "sg_studio";

/// Equal, comparing every byte whatever the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The `token` query parameter, if any.
fn query_token(req: &Request) -> Option<&str> {
    req.uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
}

/// The cookie's value, if any.
fn cookie_token(req: &Request) -> Option<&str> {
    req.headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('='))
}

/// Refuse a request without the token (401, nothing run).
pub(crate) async fn require_token(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let by_query = query_token(&req).is_some_and(|t| same(t, &state.token));
    let by_cookie = cookie_token(&req).is_some_and(|t| same(t, &state.token));
    if !by_query && !by_cookie {
        let body = serde_json::json!({
            "error": "missing or wrong token: open the URL `stategraph studio` printed"
        });
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    if by_query && req.method() == Method::GET && req.uri().path() == "/" {
        // Take the token out of the address bar and history.
        let mut res = StatusCode::SEE_OTHER.into_response();
        res.headers_mut()
            .insert(LOCATION, HeaderValue::from_static("/"));
        if let Ok(v) = cookie(&state.token) {
            res.headers_mut().insert(SET_COOKIE, v);
        }
        return res;
    }
    let mut res = next.run(req).await;
    if by_query {
        if let Ok(v) = cookie(&state.token) {
            res.headers_mut().insert(SET_COOKIE, v);
        }
    }
    res
}

fn cookie(token: &str) -> Result<HeaderValue, axum::http::header::InvalidHeaderValue> {
    HeaderValue::from_str(&format!(
        "{COOKIE_NAME}={token}; HttpOnly; SameSite=Strict; Path=/"
    ))
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_equal_only_when_identical() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
        assert!(!same("", "a"));
    }
}
