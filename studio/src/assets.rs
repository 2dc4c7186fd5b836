//! The page, its script and its style, compiled into the binary (hand-written HTML, CSS and
//! JavaScript; nothing is fetched from anywhere else).

use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::IntoResponse;

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");
/// Only the studio's own origin: no remote script, style, image or connection.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; \
                   script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/// `GET /`.
pub(crate) async fn index() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CONTENT_SECURITY_POLICY, CSP),
            (CACHE_CONTROL, "no-store"),
        ],
        INDEX,
    )
}

/// `GET /app.js`.
pub(crate) async fn script() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        SCRIPT,
    )
}

/// `GET /app.css`.
pub(crate) async fn style() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        STYLE,
    )
}
