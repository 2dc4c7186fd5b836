//! Where and how to reach an embeddings server: [`OpenAiEmbedderConfig`].

use std::fmt;
use std::time::Duration;

/// How many texts one request carries at most, unless configured (OpenAI accepts 2,048).
const DEFAULT_BATCH_SIZE: usize = 512;

/// How long one request may take, unless configured.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where and how to reach an OpenAI-compatible embeddings server.
///
/// The `Debug` output never shows the API key.
///
/// ```
/// use stategraph_store::OpenAiEmbedderConfig;
///
/// let config = OpenAiEmbedderConfig::new("http://localhost:8000/v1", "text-embedding-3-small", 384)
///     .with_api_key("sk-secret")
///     .with_dimensions_sent(true);
/// assert_eq!(config.endpoint(), "http://localhost:8000/v1/embeddings");
/// assert!(!format!("{config:?}").contains("sk-secret"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiEmbedderConfig {
    /// The API's base URL, e.g. `https://api.openai.com/v1` (a trailing slash is fine).
    pub base_url: String,
    /// The bearer token, if the server needs one.
    pub api_key: Option<String>,
    /// The embedding model to ask for.
    pub model: String,
    /// The length of the vectors the model returns; an answer of another length is an error.
    pub dims: usize,
    /// Whether each request asks for `dims` dimensions (the `dimensions` field, which models
    /// that can shorten their vectors accept and others refuse); off by default.
    pub send_dimensions: bool,
    /// At most this many texts per request (512 unless configured; OpenAI accepts 2,048);
    /// more are sent in several requests, one after
    /// the other.
    pub batch_size: usize,
    /// How long one request may take, connecting and reading included (60 s unless
    /// configured).
    pub timeout: Duration,
    /// Whether the `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` environment variables apply; on by
    /// default.
    pub use_proxy_env: bool,
}

impl OpenAiEmbedderConfig {
    /// A configuration for `model` at `base_url`, whose vectors have `dims` numbers.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, dims: usize) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dims,
            send_dimensions: false,
            batch_size: DEFAULT_BATCH_SIZE,
            timeout: DEFAULT_TIMEOUT,
            use_proxy_env: true,
        }
    }

    /// Use `key` as the bearer token.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Whether requests carry `dimensions` (see [`OpenAiEmbedderConfig::send_dimensions`]).
    pub fn with_dimensions_sent(mut self, on: bool) -> Self {
        self.send_dimensions = on;
        self
    }

    /// At most `size` texts per request.
    pub fn with_batch_size(mut self, size: usize) -> Self {
        self.batch_size = size;
        self
    }

    /// Set the timeout of one request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether the proxy environment variables apply.
    pub fn with_proxy_env(mut self, on: bool) -> Self {
        self.use_proxy_env = on;
        self
    }

    /// The URL requests are posted to: the base URL, without trailing slashes, followed by
    /// `/embeddings` (unless the base URL already ends so).
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        if base.ends_with("/embeddings") {
            base.to_owned()
        } else {
            format!("{base}/embeddings")
        }
    }
}

impl fmt::Debug for OpenAiEmbedderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedderConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("dims", &self.dims)
            .field("send_dimensions", &self.send_dimensions)
            .field("batch_size", &self.batch_size)
            .field("timeout", &self.timeout)
            .field("use_proxy_env", &self.use_proxy_env)
            .finish()
    }
}
