//! Where and how to reach a server: [`OpenAiConfig`], from code or the environment.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{DEFAULT_BASE_URL, DEFAULT_TIMEOUT};
use crate::media::{MediaKind, MediaKinds};
use crate::model::ModelError;

/// Where and how to reach an OpenAI-compatible server.
///
/// The `Debug` output never shows the API key or the values of extra headers.
///
/// ```
/// use std::time::Duration;
/// use stategraph_nodes::OpenAiConfig;
///
/// let config = OpenAiConfig::new("http://localhost:8000/v1", "qwen3")
///     .with_api_key("sk-secret")
///     .with_timeout(Duration::from_secs(30))
///     .with_body_field("temperature", serde_json::json!(0.2));
/// assert_eq!(config.endpoint(), "http://localhost:8000/v1/chat/completions");
/// assert!(!format!("{config:?}").contains("sk-secret"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// The API's base URL, e.g. `https://api.openai.com/v1` (a trailing slash is fine).
    pub base_url: String,
    /// The bearer token, if the server needs one (local servers often do not).
    pub api_key: Option<String>,
    /// The model to ask for (also the [`ChatModel::name`](crate::ChatModel::name) of the client).
    pub model: String,
    /// How long a whole answer may take; for streams, how long the server may stay silent
    /// (connecting, before the first byte, between two reads).
    pub timeout: Duration,
    /// More HTTP headers sent with every request (e.g. an organisation or a gateway key).
    pub headers: Vec<(String, String)>,
    /// More top-level fields of every request body (e.g. `temperature`, `max_tokens`).
    /// The client's own fields (`model`, `messages`, `tools`, `stream`) take precedence.
    pub extra_body: Map<String, Value>,
    /// Whether a streamed request asks for a final usage chunk
    /// (`stream_options: {"include_usage": true}`); on by default.
    pub stream_usage: bool,
    /// Whether the `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` environment variables apply; on by
    /// default.
    pub use_proxy_env: bool,
    /// Which kinds of media tool messages carry
    /// ([`ToolMessage::attachments`](crate::ToolMessage::attachments)) are sent to the model
    /// (images only by default; also the client's [`ChatModel::media`](crate::ChatModel::media)).
    /// The chat-completions format accepts media parts in user messages only, so they follow
    /// the turn's tool messages as one user message: images as `image_url` parts, audio as
    /// `input_audio` parts (WAV or MP3 only), files as `file` parts (PDF only). Whatever is
    /// not sent is named in the tool message's text with the reason. A human message's media
    /// ([`Message::Human`](crate::Message::Human)`.attachments`) go by the same kinds, as parts
    /// of that user message after its text.
    pub tool_media: MediaKinds,
}

impl OpenAiConfig {
    /// A configuration for `model` at `base_url`, with no API key and the default timeout.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            timeout: DEFAULT_TIMEOUT,
            headers: Vec::new(),
            extra_body: Map::new(),
            stream_usage: true,
            use_proxy_env: true,
            tool_media: MediaKinds::NONE.with(MediaKind::Image),
        }
    }

    /// The configuration the environment describes: `OPENAI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`]), `OPENAI_API_KEY` (optional), `OPENAI_MODEL` (required) and
    /// `OPENAI_TIMEOUT_SECS` (optional, default [`DEFAULT_TIMEOUT`]). Empty values count as unset.
    ///
    /// # Errors
    /// [`ModelError::Config`] naming the variable when `OPENAI_MODEL` is unset, or when
    /// `OPENAI_TIMEOUT_SECS` is not a positive number.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`OpenAiConfig::from_env`], reading the variables through `lookup` (a map in
    /// tests, a secrets store in applications).
    ///
    /// # Errors
    /// As [`OpenAiConfig::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let model = get("OPENAI_MODEL").ok_or_else(|| {
            ModelError::Config(
                "the environment variable OPENAI_MODEL is not set (it names the model to use)"
                    .to_owned(),
            )
        })?;
        let base_url = get("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let mut config = OpenAiConfig::new(base_url.trim(), model.trim());
        config.api_key = get("OPENAI_API_KEY").map(|k| k.trim().to_owned());
        if let Some(secs) = get("OPENAI_TIMEOUT_SECS") {
            config.timeout = secs
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0)
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .ok_or_else(|| {
                    ModelError::Config(format!(
                        "the environment variable OPENAI_TIMEOUT_SECS is {secs:?}, \
                         not a positive number of seconds"
                    ))
                })?;
        }
        Ok(config)
    }

    /// Use `key` as the bearer token.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Set the timeout (see [`OpenAiConfig::timeout`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Send header `name: value` with every request.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Add the top-level field `name: value` to every request body.
    pub fn with_body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.extra_body.insert(name.into(), value);
        self
    }

    /// Whether streamed requests ask for a final usage chunk (some strict servers refuse the
    /// `stream_options` field).
    pub fn with_stream_usage(mut self, on: bool) -> Self {
        self.stream_usage = on;
        self
    }

    /// Whether the proxy environment variables apply.
    pub fn with_proxy_env(mut self, on: bool) -> Self {
        self.use_proxy_env = on;
        self
    }

    /// Which kinds of tool-message media are sent (see [`OpenAiConfig::tool_media`]):
    /// [`MediaKinds::NONE`] for a text-only model, `ALL` for one that takes images, audio and
    /// PDF files.
    ///
    /// ```
    /// use stategraph_nodes::media::{MediaKind, MediaKinds};
    /// use stategraph_nodes::OpenAiConfig;
    ///
    /// let config = OpenAiConfig::new("http://localhost:8000/v1", "gpt-4o-audio-preview")
    ///     .with_tool_media(MediaKinds::NONE.with(MediaKind::Image).with(MediaKind::Audio));
    /// assert!(config.tool_media.contains(MediaKind::Audio));
    /// ```
    pub fn with_tool_media(mut self, kinds: MediaKinds) -> Self {
        self.tool_media = kinds;
        self
    }

    /// The URL requests are posted to: the base URL, without trailing slashes, followed by
    /// `/chat/completions` (unless the base URL already ends so).
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_owned()
        } else {
            format!("{base}/chat/completions")
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, _)| format!("{name}: <redacted>"))
            .collect();
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("headers", &headers)
            .field("extra_body", &self.extra_body)
            .field("stream_usage", &self.stream_usage)
            .field("use_proxy_env", &self.use_proxy_env)
            .field("tool_media", &self.tool_media)
            .finish()
    }
}
