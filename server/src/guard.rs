//! What every request passes before a handler: the API key, CORS (an allowlist of origins,
//! exposing `Content-Location` and `Location`), and bodies read as bounded JSON.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS, ORIGIN,
    VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::Shared;

/// Check the API key and answer CORS.
pub(crate) async fn guard(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let allowed = allowed_origin(&shared, req.headers());
    if req.method() == Method::OPTIONS && req.headers().contains_key(ORIGIN) {
        let mut resp = StatusCode::NO_CONTENT.into_response();
        if let Some(origin) = allowed {
            let asked = req.headers().get(ACCESS_CONTROL_REQUEST_HEADERS).cloned();
            let h = resp.headers_mut();
            h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            h.insert(
                ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
            );
            h.insert(
                ACCESS_CONTROL_ALLOW_HEADERS,
                asked.unwrap_or(HeaderValue::from_static("content-type, x-api-key")),
            );
            h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
            h.insert(VARY, HeaderValue::from_static("Origin"));
        }
        return resp;
    }
    let refused = shared.options.api_key.as_ref().is_some_and(|key| {
        let given = req.headers().get("x-api-key").map(HeaderValue::as_bytes);
        let path = req.uri().path();
        // The chat page's own files hold no data; the page sends the key with its calls.
        let public = path == "/ok" || path == "/ui" || path.starts_with("/ui/");
        !public && !given.is_some_and(|g| same(g, key.as_bytes()))
    });
    // A refusal carries the CORS headers too, so a page sees the 401, not a CORS failure.
    let mut resp = if refused {
        ApiError::Unauthorized.into_response()
    } else {
        next.run(req).await
    };
    if let Some(origin) = allowed {
        let h = resp.headers_mut();
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("Content-Location, Location"),
        );
        h.insert(VARY, HeaderValue::from_static("Origin"));
    }
    resp
}

fn allowed_origin(shared: &Shared, headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(ORIGIN)?;
    let text = origin.to_str().ok()?;
    shared
        .options
        .cors_origins
        .iter()
        .any(|o| o == text)
        .then(|| origin.clone())
}

/// Compare keys in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A JSON body: an empty one reads as `{}`; one that is not JSON of the expected shape is a
/// 422 saying why; one larger than the limit a 413.
#[derive(Debug)]
pub(crate) struct Body<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<Arc<Shared>> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<Shared>) -> Result<Self, ApiError> {
        let limit = state.options.body_limit;
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge(limit)
            } else {
                ApiError::BadRequest(format!("reading the request body: {e}"))
            }
        })?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(text)
            .map(Body)
            .map_err(|e| ApiError::Invalid(format!("request body: {e}")))
    }
}
