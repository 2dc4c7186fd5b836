//! An [`Embedder`] answered by an OpenAI-compatible embeddings server (feature `live`).

mod answer;
mod config;

use std::fmt;

use futures::future::BoxFuture;
use futures::FutureExt;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION};
use serde_json::{json, Value};

pub use config::OpenAiEmbedderConfig;

use crate::{EmbedError, Embedder};

/// Turns texts into vectors through an OpenAI-compatible `POST /embeddings`.
///
/// It posts `{"model", "input": [texts]}` (and `dimensions` when configured) to
/// `{base_url}/embeddings`, with the API key as a bearer token, and reads `data[].embedding`
/// back in the order of `data[].index`. Many texts go in several requests of at most
/// [`OpenAiEmbedderConfig::batch_size`].
///
/// ```no_run
/// use std::sync::Arc;
/// use stategraph_store::{IndexConfig, MemoryStore, OpenAiEmbedder, OpenAiEmbedderConfig, StoreConfig};
///
/// # fn demo() -> Result<(), stategraph_store::EmbedError> {
/// let config = OpenAiEmbedderConfig::new("https://api.openai.com/v1", "text-embedding-3-small", 1536)
///     .with_api_key(std::env::var("OPENAI_API_KEY").unwrap_or_default());
/// let embedder = Arc::new(OpenAiEmbedder::new(config)?);
/// let store = MemoryStore::new(StoreConfig::default().index(IndexConfig::new(embedder)));
/// # Ok(())
/// # }
/// ```
///
/// Cloning is cheap (the HTTP connection pool is shared).
#[derive(Clone)]
pub struct OpenAiEmbedder {
    config: OpenAiEmbedderConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// A client for the server and model `config` names.
    ///
    /// # Errors
    /// [`EmbedError::Config`] when the model name is empty, `dims` or `batch_size` is 0, the
    /// base URL is not an `http` or `https` URL, the API key cannot be sent as an HTTP header,
    /// or the HTTP client cannot be built.
    pub fn new(config: OpenAiEmbedderConfig) -> Result<Self, EmbedError> {
        check(&config)?;
        let endpoint = config.endpoint();
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                    EmbedError::Config("the API key cannot be sent as an HTTP header".to_owned())
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let mut builder = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(config.timeout)
            .user_agent(concat!("stategraph-store/", env!("CARGO_PKG_VERSION")));
        if !config.use_proxy_env {
            builder = builder.no_proxy();
        }
        let client = builder
            .build()
            .map_err(|e| EmbedError::Config(format!("the HTTP client cannot be built: {e}")))?;
        Ok(Self {
            config,
            endpoint,
            client,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiEmbedderConfig {
        &self.config
    }

    /// The body of one request.
    fn body(&self, texts: &[String]) -> Value {
        let mut body = json!({"model": self.config.model, "input": texts});
        if self.config.send_dimensions {
            body["dimensions"] = json!(self.config.dims);
        }
        body
    }

    /// Embeds one batch: one request, its vectors in the texts' order.
    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let response = self
            .client
            .post(&self.endpoint)
            .json(&self.body(texts))
            .send()
            .await
            .map_err(|e| transport(&e, &self.config))?;
        let status = response.status();
        let bytes = answer::read_limited(response).await?;
        if !status.is_success() {
            return Err(EmbedError::Status {
                status: status.as_u16(),
                body: answer::error_message(&bytes, status.canonical_reason()),
            });
        }
        answer::vectors(&bytes, texts.len(), self.config.dims)
    }
}

impl Embedder for OpenAiEmbedder {
    fn dims(&self) -> usize {
        self.config.dims
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        async move {
            let mut out = Vec::with_capacity(texts.len());
            for batch in texts.chunks(self.config.batch_size.max(1)) {
                out.extend(self.embed_batch(batch).await?);
            }
            Ok(out)
        }
        .boxed()
    }
}

fn check(config: &OpenAiEmbedderConfig) -> Result<(), EmbedError> {
    if config.model.trim().is_empty() {
        return Err(EmbedError::Config("the model name is empty".to_owned()));
    }
    if config.dims == 0 || config.batch_size == 0 {
        return Err(EmbedError::Config(format!(
            "dims ({}) and batch_size ({}) must be at least 1",
            config.dims, config.batch_size
        )));
    }
    let endpoint = config.endpoint();
    let url = reqwest::Url::parse(&endpoint).map_err(|e| {
        EmbedError::Config(format!(
            "the base URL {:?} is not a URL: {e}",
            config.base_url
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(EmbedError::Config(format!(
            "the base URL {:?} is neither http nor https",
            config.base_url
        )));
    }
    Ok(())
}

/// A transport error with its causes (reqwest's own message is terse).
fn transport(error: &reqwest::Error, config: &OpenAiEmbedderConfig) -> EmbedError {
    if error.is_timeout() {
        return EmbedError::Service(format!(
            "no answer from {} within {:?}",
            config.endpoint(),
            config.timeout
        ));
    }
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    EmbedError::Service(message)
}
