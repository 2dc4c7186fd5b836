//! The client: [`OpenAiModel`] posts a request and reads the answer, whole or streamed.

use std::collections::VecDeque;
use std::fmt;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;

use super::answer::parse_completion;
use super::config::OpenAiConfig;
use super::error_text::{error_chain, error_message, snippet};
use super::request::request_body;
use super::stream::{Phase, StreamState};
use crate::media::MediaKinds;
use crate::model::{ChatModel, ModelChunk, ModelError, ModelRequest, ModelResponse};

/// A [`ChatModel`] answered by an OpenAI-compatible chat-completions server.
///
/// Cloning is cheap (the HTTP connection pool is shared).
#[derive(Clone)]
pub struct OpenAiModel {
    pub(super) config: OpenAiConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("config", &self.config)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// A client for the server and model `config` names.
    ///
    /// # Errors
    /// [`ModelError::Config`] when the model name is empty, the base URL is not an `http` or
    /// `https` URL, the API key or an extra header cannot be sent as an HTTP header, or the
    /// HTTP client cannot be built.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        if config.model.trim().is_empty() {
            return Err(ModelError::Config("the model name is empty".to_owned()));
        }
        let endpoint = config.endpoint();
        let url = reqwest::Url::parse(&endpoint).map_err(|e| {
            ModelError::Config(format!(
                "the base URL {:?} is not a URL: {e}",
                config.base_url
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ModelError::Config(format!(
                "the base URL {:?} is neither http nor https",
                config.base_url
            )));
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                    ModelError::Config("the API key cannot be sent as an HTTP header".to_owned())
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &config.headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ModelError::Config(format!("{name:?} is not a valid HTTP header name"))
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                ModelError::Config(format!(
                    "the value of header {name:?} is not a valid header value"
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let mut builder = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.timeout)
            .user_agent(concat!("stategraph-nodes/", env!("CARGO_PKG_VERSION")));
        if !config.use_proxy_env {
            builder = builder.no_proxy();
        }
        let client = builder
            .build()
            .map_err(|e| ModelError::Config(format!("the HTTP client cannot be built: {e}")))?;
        Ok(OpenAiModel {
            config,
            endpoint,
            client,
        })
    }

    /// A client configured by the environment (see [`OpenAiConfig::from_env`]).
    ///
    /// # Errors
    /// As [`OpenAiConfig::from_env`] and [`OpenAiModel::new`].
    pub fn from_env() -> Result<Self, ModelError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    pub(super) fn transport(&self, error: &reqwest::Error) -> ModelError {
        let message = if error.is_timeout() {
            format!("timed out after {:?}", self.config.timeout)
        } else {
            error_chain(error)
        };
        ModelError::Transport {
            model: self.config.model.clone(),
            message,
        }
    }

    pub(super) fn decode(&self, message: impl Into<String>) -> ModelError {
        ModelError::Decode {
            model: self.config.model.clone(),
            message: message.into(),
        }
    }

    pub(super) fn timed_out(&self, waiting_for: &str) -> ModelError {
        ModelError::Transport {
            model: self.config.model.clone(),
            message: format!(
                "no {waiting_for} within {:?} (the configured timeout)",
                self.config.timeout
            ),
        }
    }

    /// Post `body`; a non-success status becomes [`ModelError::Status`].
    pub(super) async fn post(
        &self,
        body: &Value,
        stream: bool,
    ) -> Result<reqwest::Response, ModelError> {
        let mut request = self.client.post(&self.endpoint).json(body);
        if stream {
            request = request.header(ACCEPT, "text/event-stream");
            let sent = tokio::time::timeout(self.config.timeout, request.send()).await;
            let response = match sent {
                Ok(sent) => sent.map_err(|e| self.transport(&e))?,
                Err(_) => return Err(self.timed_out("response")),
            };
            self.check_status(response).await
        } else {
            request = request
                .header(ACCEPT, "application/json")
                .timeout(self.config.timeout);
            let response = request.send().await.map_err(|e| self.transport(&e))?;
            self.check_status(response).await
        }
    }

    async fn check_status(
        &self,
        response: reqwest::Response,
    ) -> Result<reqwest::Response, ModelError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = match tokio::time::timeout(self.config.timeout, read_limited(response)).await {
            Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Err(_)) | Err(_) => String::new(),
        };
        let mut body = error_message(&text);
        if body.is_empty() {
            body = status.canonical_reason().unwrap_or("no body").to_owned();
        }
        Err(ModelError::Status {
            model: self.config.model.clone(),
            status: status.as_u16(),
            body,
        })
    }

    /// Read and parse a whole (non-streamed) answer.
    pub(super) async fn whole_answer(
        &self,
        response: reqwest::Response,
    ) -> Result<ModelResponse, ModelError> {
        let status = response.status().as_u16();
        let bytes = match tokio::time::timeout(self.config.timeout, read_limited(response)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(message)) => {
                return Err(ModelError::Transport {
                    model: self.config.model.clone(),
                    message: format!("reading the answer failed: {message}"),
                })
            }
            Err(_) => return Err(self.timed_out("answer")),
        };
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            self.decode(format!(
                "the answer is not JSON ({e}): {}",
                snippet(&String::from_utf8_lossy(&bytes))
            ))
        })?;
        parse_completion(&self.config.model, status, &value)
    }
}

impl ChatModel for OpenAiModel {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn media(&self) -> MediaKinds {
        self.config.tool_media
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let body = request_body(&self.config, &request, false);
            let response = self.post(&body, false).await?;
            self.whole_answer(response).await
        })
    }

    fn stream(&self, request: ModelRequest) -> BoxStream<'_, Result<ModelChunk, ModelError>> {
        let state = StreamState {
            model: self,
            phase: Phase::Start(request_body(&self.config, &request, true)),
            pending: VecDeque::new(),
        };
        Box::pin(futures::stream::unfold(state, |mut state| async move {
            loop {
                if let Some(item) = state.pending.pop_front() {
                    return Some((item, state));
                }
                if matches!(state.phase, Phase::Finished) {
                    return None;
                }
                state.advance().await;
            }
        }))
    }
}

/// Whether a response is a JSON document rather than an event stream.
pub(super) fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("json"))
}

/// The longest whole (non-streamed) answer or error body accepted, in bytes.
const MAX_BODY: usize = 32 << 20;

/// Read a body up to [`MAX_BODY`] bytes.
pub(super) async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("the body is longer than {MAX_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
