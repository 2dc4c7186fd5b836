//! What a request can get wrong, and how it is answered: `{"detail": …}` with the status
//! LangGraph's server gives (404, 409, 422), never a 500 for a bad request.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use stategraph::RunError;
use stategraph_checkpoints::CheckpointError;

/// An error answered to a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// No such thread, run, assistant or checkpoint.
    #[error("{what} {id} not found")]
    NotFound {
        /// What was looked for (`thread`, `run`, `assistant`, `checkpoint`).
        what: &'static str,
        /// Its id as the request gave it.
        id: String,
    },
    /// The request conflicts with the thread's state (busy under `reject`, exists already).
    #[error("{0}")]
    Conflict(String),
    /// The request is well-formed JSON but a value does not fit (names the field).
    #[error("{0}")]
    Invalid(String),
    /// The body is not JSON, or too large.
    #[error("{0}")]
    BadRequest(String),
    /// The body is larger than the server takes.
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    /// No API key, or a wrong one.
    #[error("missing or wrong x-api-key")]
    Unauthorized,
    /// The server failed (storage); the request may be retried.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A 404 for `what` `id`.
    pub(crate) fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        let id: String = id.into();
        ApiError::NotFound {
            what,
            id: id.chars().take(80).collect(),
        }
    }

    /// The error's kind, as an `error` event names it.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } => "NotFound",
            ApiError::Conflict(_) => "Conflict",
            ApiError::Invalid(_) => "ValidationError",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::TooLarge(_) => "PayloadTooLarge",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Internal(_) => "InternalError",
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "detail": self.to_string() });
        (self.status(), axum::Json(body)).into_response()
    }
}

impl From<CheckpointError> for ApiError {
    fn from(e: CheckpointError) -> Self {
        match e {
            CheckpointError::InvalidThreadId { .. }
            | CheckpointError::InvalidRunId { .. }
            | CheckpointError::InvalidCheckpointId { .. }
            | CheckpointError::InvalidFilterKey { .. } => ApiError::Invalid(e.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Checkpoint(c) => c.into(),
            RunError::UnknownNode { .. }
            | RunError::UnknownRouteTarget { .. }
            | RunError::SendArg { .. }
            | RunError::NoPendingInterrupt { .. }
            | RunError::AmbiguousResume { .. }
            | RunError::UnknownInterruptId { .. }
            | RunError::EmptyResume
            | RunError::Reduce { .. }
            | RunError::RecordedWrites { .. } => ApiError::Invalid(e.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<stategraph_store::StoreError> for ApiError {
    fn from(e: stategraph_store::StoreError) -> Self {
        use stategraph_store::StoreError;
        match e {
            StoreError::Namespace(_) | StoreError::Filter(_) | StoreError::Invalid { .. } => {
                ApiError::Invalid(e.to_string())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<rusqlite::Error> for ApiError {
    fn from(e: rusqlite::Error) -> Self {
        ApiError::Internal(format!("server storage: {e}"))
    }
}

/// A request's result.
pub(crate) type ApiResult<T> = Result<T, ApiError>;
