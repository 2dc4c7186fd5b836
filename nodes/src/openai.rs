//! A thin client for OpenAI-compatible chat-completions servers: [`OpenAiModel`], configured
//! by [`OpenAiConfig`].
//!
//! It speaks the `POST {base_url}/chat/completions` protocol that OpenAI and many compatible
//! servers (vLLM, llama.cpp, Ollama, LM Studio, gateways) implement, whole or as a server-sent
//! event stream. It is tolerant of the ways compatible servers differ: tool-call arguments as a
//! JSON object instead of a string, tool calls without an id, `content: null`, missing usage or
//! finish reason, keep-alive comments and CRLF line endings in streams, a usage-only final
//! stream chunk, an error object inside a stream.
//!
//! ```no_run
//! use stategraph_nodes::{ChatModel, Message, ModelRequest, OpenAiConfig, OpenAiModel};
//!
//! # async fn demo() -> Result<(), stategraph_nodes::ModelError> {
//! // OPENAI_MODEL is required; OPENAI_BASE_URL and OPENAI_API_KEY are optional.
//! let model = OpenAiModel::new(OpenAiConfig::from_env()?)?;
//! let reply = model
//!     .invoke(ModelRequest::new(vec![Message::human("hello")]))
//!     .await?;
//! println!("{}", reply.message.content);
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Map, Value};

use crate::message::{AiMessage, FinishReason, Message, ToolCall, Usage};
use crate::model::{ChatModel, ModelChunk, ModelError, ModelRequest, ModelResponse};

/// The base URL used when none is configured: OpenAI's own API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The timeout used when none is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How many characters of an error body or unreadable answer an error message keeps.
const SNIPPET_CHARS: usize = 500;

/// How long a stream line may grow without a line break before the stream is refused.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

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
    /// The model to ask for (also the [`ChatModel::name`] of the client).
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
                    .to_string(),
            )
        })?;
        let base_url = get("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        let mut config = OpenAiConfig::new(base_url.trim(), model.trim());
        config.api_key = get("OPENAI_API_KEY").map(|k| k.trim().to_string());
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

    /// The URL requests are posted to: the base URL, without trailing slashes, followed by
    /// `/chat/completions` (unless the base URL already ends so).
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
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
            .finish()
    }
}

/// A [`ChatModel`] answered by an OpenAI-compatible chat-completions server.
///
/// Cloning is cheap (the HTTP connection pool is shared).
#[derive(Clone)]
pub struct OpenAiModel {
    config: OpenAiConfig,
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
            return Err(ModelError::Config("the model name is empty".to_string()));
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
                    ModelError::Config("the API key cannot be sent as an HTTP header".to_string())
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

    /// The request body for `request`.
    fn body(&self, request: &ModelRequest, stream: bool) -> Value {
        let mut body = self.config.extra_body.clone();
        body.insert("model".into(), Value::String(self.config.model.clone()));
        body.insert(
            "messages".into(),
            Value::Array(request.all_messages().map(|m| wire_message(&m)).collect()),
        );
        if request.tools.is_empty() {
            body.remove("tools");
        } else {
            body.insert(
                "tools".into(),
                Value::Array(request.tools.iter().map(|t| t.to_openai()).collect()),
            );
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
            if self.config.stream_usage {
                body.insert("stream_options".into(), json!({"include_usage": true}));
            }
        } else {
            body.remove("stream");
            body.remove("stream_options");
        }
        Value::Object(body)
    }

    fn transport(&self, error: &reqwest::Error) -> ModelError {
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

    fn decode(&self, message: impl Into<String>) -> ModelError {
        ModelError::Decode {
            model: self.config.model.clone(),
            message: message.into(),
        }
    }

    fn timed_out(&self, waiting_for: &str) -> ModelError {
        ModelError::Transport {
            model: self.config.model.clone(),
            message: format!(
                "no {waiting_for} within {:?} (the configured timeout)",
                self.config.timeout
            ),
        }
    }

    /// Post `body`; a non-success status becomes [`ModelError::Status`].
    async fn post(&self, body: &Value, stream: bool) -> Result<reqwest::Response, ModelError> {
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
            body = status.canonical_reason().unwrap_or("no body").to_string();
        }
        Err(ModelError::Status {
            model: self.config.model.clone(),
            status: status.as_u16(),
            body,
        })
    }

    /// Read and parse a whole (non-streamed) answer.
    async fn whole_answer(&self, response: reqwest::Response) -> Result<ModelResponse, ModelError> {
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

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let body = self.body(&request, false);
            let response = self.post(&body, false).await?;
            self.whole_answer(response).await
        })
    }

    fn stream(&self, request: ModelRequest) -> BoxStream<'_, Result<ModelChunk, ModelError>> {
        let state = StreamState {
            model: self,
            phase: Phase::Start(self.body(&request, true)),
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

// ---------------------------------------------------------------------------------------------
// Request encoding
// ---------------------------------------------------------------------------------------------

/// One message in the chat-completions wire format.
fn wire_message(message: &Message) -> Value {
    match message {
        Message::System { content, .. } => json!({"role": "system", "content": content}),
        Message::Human { content, .. } => json!({"role": "user", "content": content}),
        Message::Ai(ai) => {
            let mut out = Map::new();
            out.insert("role".into(), json!("assistant"));
            if ai.tool_calls.is_empty() {
                out.insert("content".into(), json!(ai.content));
            } else {
                let content = if ai.content.is_empty() {
                    Value::Null
                } else {
                    json!(ai.content)
                };
                out.insert("content".into(), content);
                let calls: Vec<Value> = ai
                    .tool_calls
                    .iter()
                    .map(|call| {
                        let arguments = match &call.args {
                            Value::Null => "{}".to_string(),
                            args => args.to_string(),
                        };
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": arguments},
                        })
                    })
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(out)
        }
        Message::Tool(tool) => json!({
            "role": "tool",
            "tool_call_id": tool.tool_call_id,
            "content": tool.content,
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Answer decoding (shared by whole answers and streams)
// ---------------------------------------------------------------------------------------------

/// Parse a whole chat-completions answer.
fn parse_completion(model: &str, status: u16, value: &Value) -> Result<ModelResponse, ModelError> {
    let decode = |message: String| ModelError::Decode {
        model: model.to_string(),
        message,
    };
    let Some(choice) = first_choice(value) else {
        if let Some(error) = error_object(value) {
            return Err(ModelError::Status {
                model: model.to_string(),
                status,
                body: error,
            });
        }
        return Err(decode(format!(
            "the answer has no choices: {}",
            snippet(&value.to_string())
        )));
    };
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| decode("the answer's first choice has no message".to_string()))?;
    let content = text_of(message.get("content")).map_err(|what| decode(what.to_string()))?;
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (index, call) in calls.iter().enumerate() {
            let function = call.get("function");
            let name = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| decode(format!("tool call {index} has no function name")))?;
            let args = parse_arguments(model, name, function.and_then(|f| f.get("arguments")))?;
            tool_calls.push(ToolCall {
                id: id_of(call.get("id")).unwrap_or_else(|| generated_id(index)),
                name: name.to_string(),
                args,
            });
        }
    }
    // The legacy single `function_call`, still sent by some servers.
    if tool_calls.is_empty() {
        if let Some(function) = message.get("function_call").filter(|f| f.is_object()) {
            if let Some(name) = function
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                let args = parse_arguments(model, name, function.get("arguments"))?;
                tool_calls.push(ToolCall {
                    id: generated_id(0),
                    name: name.to_string(),
                    args,
                });
            }
        }
    }
    Ok(ModelResponse {
        message: AiMessage {
            content,
            tool_calls,
            finish_reason: finish_reason_of(choice.get("finish_reason")),
            usage: usage_of(value.get("usage")),
            ..AiMessage::default()
        },
    })
}

/// The first choice (the one with index 0, or the first listed).
fn first_choice(value: &Value) -> Option<&Value> {
    let choices = value.get("choices")?.as_array()?;
    choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
        .or_else(|| choices.first())
}

/// The id of a call generated when the server sent none.
fn generated_id(index: usize) -> String {
    format!("call_{index}")
}

/// A call id: a non-empty string (or a number, written out).
fn id_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Message content: a string, `null`/absent (no text), or an array of text parts.
fn text_of(value: Option<&Value>) -> Result<String, &'static str> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect()),
        Some(_) => Err("the message content is neither text, null nor a list of parts"),
    }
}

/// Tool-call arguments: a JSON string (the standard), an object (some servers), or nothing.
fn parse_arguments(model: &str, tool: &str, value: Option<&Value>) -> Result<Value, ModelError> {
    match value {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(Value::String(text)) => parse_argument_text(model, tool, text),
        Some(other) => Ok(other.clone()),
    }
}

fn parse_argument_text(model: &str, tool: &str, text: &str) -> Result<Value, ModelError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(text).map_err(|e| ModelError::Decode {
        model: model.to_string(),
        message: format!(
            "the arguments of the call of tool {tool:?} are not JSON ({e}): {}",
            snippet(text)
        ),
    })
}

/// The finish reason a server named (`None` when it named none).
fn finish_reason_of(value: Option<&Value>) -> Option<FinishReason> {
    let reason = value?.as_str()?;
    Some(match reason {
        "" => return None,
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    })
}

/// Token usage (`prompt_tokens`/`completion_tokens`/`total_tokens`, or the
/// `input_tokens`/`output_tokens` spelling); `None` when absent.
fn usage_of(value: Option<&Value>) -> Option<Usage> {
    let usage = value?.as_object()?;
    let count = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| usage.get(*n).and_then(Value::as_u64))
    };
    let input = count(&["prompt_tokens", "input_tokens"]);
    let output = count(&["completion_tokens", "output_tokens"]);
    let total = count(&["total_tokens"]);
    if input.is_none() && output.is_none() && total.is_none() {
        return None;
    }
    let input_tokens = input.unwrap_or(0);
    let output_tokens = output.unwrap_or(0);
    Some(Usage {
        input_tokens,
        output_tokens,
        total_tokens: total.unwrap_or(input_tokens.saturating_add(output_tokens)),
    })
}

/// The message of an `{"error": ...}` object, if `value` is one.
fn error_object(value: &Value) -> Option<String> {
    let error = value.get("error")?;
    let message = match error {
        Value::String(s) => s.clone(),
        Value::Object(fields) => {
            let mut message = fields
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            let detail: Vec<String> = ["type", "code"]
                .iter()
                .filter_map(|k| match fields.get(*k)? {
                    Value::String(s) if !s.is_empty() => Some(format!("{k}: {s}")),
                    Value::Number(n) => Some(format!("{k}: {n}")),
                    _ => None,
                })
                .collect();
            if !detail.is_empty() {
                message = format!("{message} ({})", detail.join(", "));
            }
            message
        }
        Value::Null => return None,
        other => other.to_string(),
    };
    Some(snippet(&message))
}

/// A readable message from an error body: the JSON error's message when there is one, else
/// the body itself, cut to a readable length.
fn error_message(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        if let Some(message) = error_object(&value) {
            return message;
        }
        for key in ["message", "detail"] {
            if let Some(message) = value.get(key).and_then(Value::as_str) {
                return snippet(message);
            }
        }
    }
    snippet(body)
}

/// `text`, trimmed, with its whitespace runs folded, cut to [`SNIPPET_CHARS`] characters.
fn snippet(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match folded.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}… ({} more bytes)", &folded[..cut], folded.len() - cut),
        None => folded,
    }
}

/// An error and its sources, joined (reqwest's own message is terse).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// The chunks a whole answer streams as (when a server answers a stream request whole).
fn answer_chunks(response: ModelResponse) -> Vec<ModelChunk> {
    let mut out = Vec::new();
    if !response.message.content.is_empty() {
        out.push(ModelChunk::Text {
            delta: response.message.content.clone(),
        });
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        out.push(ModelChunk::ToolCall {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            args_delta: call.args.to_string(),
        });
    }
    out.push(ModelChunk::Done(response));
    out
}

// ---------------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------------

/// The state of one streamed call.
struct StreamState<'a> {
    model: &'a OpenAiModel,
    phase: Phase,
    pending: VecDeque<Result<ModelChunk, ModelError>>,
}

enum Phase {
    /// Not sent yet; the body to send.
    Start(Value),
    /// Reading events.
    Reading(Box<Reading>),
    /// Everything is queued.
    Finished,
}

impl StreamState<'_> {
    /// Move the stream on: queue chunks or an error, or finish.
    async fn advance(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Finished => {}
            Phase::Start(body) => match self.model.post(&body, true).await {
                Err(e) => self.pending.push_back(Err(e)),
                Ok(response) => {
                    if is_json(&response) {
                        // A server that ignores `stream: true` answers whole.
                        match self.model.whole_answer(response).await {
                            Ok(answer) => self
                                .pending
                                .extend(answer_chunks(answer).into_iter().map(Ok)),
                            Err(e) => self.pending.push_back(Err(e)),
                        }
                    } else {
                        self.phase = Phase::Reading(Box::new(Reading {
                            status: response.status().as_u16(),
                            response,
                            lines: SseDecoder::default(),
                            answer: StreamedAnswer::default(),
                        }));
                    }
                }
            },
            Phase::Reading(reading) => self.read(reading).await,
        }
    }

    /// Read the next piece of the stream.
    async fn read(&mut self, mut reading: Box<Reading>) {
        let model = self.model;
        let Reading {
            response,
            status,
            lines,
            answer,
        } = &mut *reading;
        let read = tokio::time::timeout(model.config.timeout, response.chunk()).await;
        let mut events = Vec::new();
        let ended = match read {
            Err(_) => {
                self.pending.push_back(Err(model.timed_out("stream data")));
                return;
            }
            Ok(Err(e)) => {
                self.pending.push_back(Err(model.transport(&e)));
                return;
            }
            Ok(Ok(Some(bytes))) => {
                if let Err(message) = lines.push(&bytes, &mut events) {
                    self.pending.push_back(Err(model.decode(message)));
                    return;
                }
                false
            }
            Ok(Ok(None)) => {
                lines.finish(&mut events);
                true
            }
        };
        for event in events {
            match answer.apply(&model.config.model, *status, event) {
                Ok(Some(chunks)) => self.pending.extend(chunks.into_iter().map(Ok)),
                Ok(None) => {
                    self.pending.push_back(answer.finish(&model.config.model));
                    return;
                }
                Err(e) => {
                    self.pending.push_back(Err(e));
                    return;
                }
            }
        }
        if ended {
            if answer.finish_reason.is_none() {
                self.pending.push_back(Err(ModelError::Transport {
                    model: model.config.model.clone(),
                    message: "the stream ended before the answer was finished \
                              (no finish reason and no [DONE])"
                        .to_string(),
                }));
            } else {
                self.pending.push_back(answer.finish(&model.config.model));
            }
            return;
        }
        self.phase = Phase::Reading(reading);
    }
}

/// A stream being read.
struct Reading {
    response: reqwest::Response,
    status: u16,
    lines: SseDecoder,
    answer: StreamedAnswer,
}

/// Whether a response is a JSON document rather than an event stream.
fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("json"))
}

/// The longest server-sent event accepted, in bytes.
const MAX_SSE_EVENT: usize = 8 << 20;

/// The longest whole (non-streamed) answer or error body accepted, in bytes.
const MAX_BODY: usize = 32 << 20;

/// Read a body up to [`MAX_BODY`] bytes.
async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("the body is longer than {MAX_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// One server-sent event's data.
#[derive(Debug)]
enum SseEvent {
    /// `data: [DONE]`.
    Done,
    /// A JSON payload.
    Json(Value),
    /// A payload that is not JSON.
    Invalid(String),
}

/// Splits a byte stream into server-sent events: `\n` or `\r\n` line ends, `:` comments,
/// `data:` fields joined until a blank line (or until they form a whole JSON value, for
/// servers that leave out the blank line), other fields ignored.
#[derive(Default)]
struct SseDecoder {
    buffer: Vec<u8>,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    /// Take in more bytes; complete events go to `out`.
    fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        self.buffer.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) = self.buffer[start..].iter().position(|b| *b == b'\n') {
            let end = start + offset;
            let line = &self.buffer[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = String::from_utf8_lossy(line).into_owned();
            self.line(&line, out);
            start = end + 1;
        }
        self.buffer.drain(..start);
        if self.buffer.len() > MAX_LINE_BYTES {
            return Err(format!(
                "a stream line grew past {MAX_LINE_BYTES} bytes without a line break"
            ));
        }
        Ok(())
    }

    /// The stream ended: flush what is left.
    fn finish(&mut self, out: &mut Vec<SseEvent>) {
        let rest = std::mem::take(&mut self.buffer);
        let rest = String::from_utf8_lossy(&rest);
        let rest = rest.trim_end_matches('\r');
        if !rest.is_empty() {
            self.line(rest, out);
        }
        self.dispatch(out);
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        if line.starts_with('{') {
            // A bare JSON line (no `data:` field), as a few servers write.
            self.dispatch(out);
            self.data.push_str(line);
            self.has_data = true;
            self.dispatch(out);
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field != "data" {
            return;
        }
        if self.has_data {
            self.data.push('\n');
        }
        if self.data.len() + value.len() > MAX_SSE_EVENT {
            // An event that never ends is a broken stream, not a reason to run out of memory.
            self.data.clear();
            self.has_data = false;
            out.push(SseEvent::Invalid(format!(
                "an event longer than {MAX_SSE_EVENT} bytes"
            )));
            return;
        }
        self.data.push_str(value);
        self.has_data = true;
        let trimmed = self.data.trim();
        if trimmed == "[DONE]" {
            self.dispatch(out);
        } else if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
            self.data.clear();
            self.has_data = false;
            out.push(SseEvent::Json(value));
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data {
            return;
        }
        let data = std::mem::take(&mut self.data);
        self.has_data = false;
        let data = data.trim();
        if data.is_empty() {
            return;
        }
        out.push(if data == "[DONE]" {
            SseEvent::Done
        } else {
            match serde_json::from_str(data) {
                Ok(value) => SseEvent::Json(value),
                Err(_) => SseEvent::Invalid(data.to_string()),
            }
        });
    }
}

/// One tool call being streamed.
#[derive(Default)]
struct PartialCall {
    /// The server's index for it, when it gave one.
    key: Option<u64>,
    id: Option<String>,
    name: String,
    args: String,
}

/// The answer a stream has told so far.
#[derive(Default)]
struct StreamedAnswer {
    content: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
}

impl StreamedAnswer {
    /// Take in one event: the chunks it yields, or `None` at `[DONE]`.
    fn apply(
        &mut self,
        model: &str,
        status: u16,
        event: SseEvent,
    ) -> Result<Option<Vec<ModelChunk>>, ModelError> {
        let value = match event {
            SseEvent::Done => return Ok(None),
            SseEvent::Json(value) => value,
            SseEvent::Invalid(data) => {
                return Err(ModelError::Decode {
                    model: model.to_string(),
                    message: format!("a stream event is not JSON: {}", snippet(&data)),
                })
            }
        };
        if let Some(usage) = usage_of(value.get("usage")) {
            self.usage = Some(usage);
        }
        let mut chunks = Vec::new();
        let Some(choice) = first_choice(&value) else {
            // An error object instead of choices: the server gave up mid-stream.
            if let Some(error) = error_object(&value) {
                return Err(ModelError::Status {
                    model: model.to_string(),
                    status,
                    body: error,
                });
            }
            return Ok(Some(chunks));
        };
        if let Some(reason) = finish_reason_of(choice.get("finish_reason")) {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice
            .get("delta")
            .or_else(|| choice.get("message"))
            .filter(|d| d.is_object())
        else {
            return Ok(Some(chunks));
        };
        let text = text_of(delta.get("content")).map_err(|what| ModelError::Decode {
            model: model.to_string(),
            message: what.to_string(),
        })?;
        if !text.is_empty() {
            self.content.push_str(&text);
            chunks.push(ModelChunk::Text { delta: text });
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let function = call.get("function");
                if let Some(chunk) = self.call_fragment(
                    call.get("index").and_then(Value::as_u64),
                    id_of(call.get("id")),
                    function.and_then(|f| f.get("name")),
                    function.and_then(|f| f.get("arguments")),
                ) {
                    chunks.push(chunk);
                }
            }
        } else if let Some(function) = delta.get("function_call").filter(|f| f.is_object()) {
            if let Some(chunk) = self.call_fragment(
                Some(0),
                None,
                function.get("name"),
                function.get("arguments"),
            ) {
                chunks.push(chunk);
            }
        }
        Ok(Some(chunks))
    }

    /// Take in a fragment of a tool call; the chunk announcing what it added, if anything.
    fn call_fragment(
        &mut self,
        key: Option<u64>,
        id: Option<String>,
        name: Option<&Value>,
        arguments: Option<&Value>,
    ) -> Option<ModelChunk> {
        let name = name.and_then(Value::as_str).filter(|n| !n.is_empty());
        let position = match key {
            // The latest call with this index, unless a different id says a new call begins
            // (a few servers give every call index 0).
            Some(key) => self
                .calls
                .iter()
                .rposition(|c| c.key == Some(key))
                .filter(|&i| match (&id, &self.calls[i].id) {
                    (Some(new), Some(old)) => new == old,
                    _ => true,
                }),
            // No index: the call with this id, or the last call unless this starts a new one.
            None => match &id {
                Some(id) => self
                    .calls
                    .iter()
                    .position(|c| c.id.as_deref() == Some(id.as_str())),
                None if name.is_some() => None,
                None => self.calls.len().checked_sub(1),
            },
        };
        let (index, fresh) = match position {
            Some(index) => (index, false),
            None => {
                self.calls.push(PartialCall {
                    key,
                    ..PartialCall::default()
                });
                (self.calls.len() - 1, true)
            }
        };
        let call = &mut self.calls[index];
        let mut id_delta = None;
        match id {
            Some(id) if call.id.as_deref() != Some(id.as_str()) => {
                call.id = Some(id.clone());
                id_delta = Some(id);
            }
            Some(_) => {}
            None if fresh => id_delta = Some(generated_id(index)),
            None => {}
        }
        let mut name_delta = None;
        if let Some(name) = name {
            // Most servers send the name once; some repeat it whole, a few split it.
            if call.name != name {
                call.name.push_str(name);
                name_delta = Some(name.to_string());
            }
        }
        let args_delta = match arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        call.args.push_str(&args_delta);
        if !fresh && id_delta.is_none() && name_delta.is_none() && args_delta.is_empty() {
            return None;
        }
        Some(ModelChunk::ToolCall {
            index,
            id: id_delta,
            name: name_delta,
            args_delta,
        })
    }

    /// The whole answer.
    fn finish(&mut self, model: &str) -> Result<ModelChunk, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in std::mem::take(&mut self.calls).into_iter().enumerate() {
            if call.name.is_empty() {
                return Err(ModelError::Decode {
                    model: model.to_string(),
                    message: format!("streamed tool call {index} has no function name"),
                });
            }
            let args = parse_argument_text(model, &call.name, &call.args)?;
            tool_calls.push(ToolCall {
                id: call.id.unwrap_or_else(|| generated_id(index)),
                name: call.name,
                args,
            });
        }
        Ok(ModelChunk::Done(ModelResponse {
            message: AiMessage {
                content: std::mem::take(&mut self.content),
                tool_calls,
                finish_reason: self.finish_reason.take(),
                usage: self.usage,
                ..AiMessage::default()
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(parts: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for part in parts {
            decoder.push(part, &mut out).unwrap();
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn sse_lines_split_anywhere_decode_the_same() {
        let text = ": keep-alive\r\n\r\ndata: {\"a\":\"é\"}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let got = events(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(got.len(), 2, "cut at {cut}: {got:?}");
            assert!(
                matches!(&got[0], SseEvent::Json(v) if v["a"] == "é"),
                "cut at {cut}"
            );
            assert!(matches!(got[1], SseEvent::Done), "cut at {cut}");
        }
    }

    #[test]
    fn multi_line_data_joins_and_bare_json_lines_count() {
        let got = events(&[b"data: {\"a\":\ndata: 1}\n\n{\"b\":2}\ndata: nonsense\n\n"]);
        assert!(matches!(&got[0], SseEvent::Json(v) if v["a"] == 1));
        assert!(matches!(&got[1], SseEvent::Json(v) if v["b"] == 2));
        assert!(matches!(&got[2], SseEvent::Invalid(s) if s == "nonsense"));
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn snippets_are_cut_on_char_boundaries() {
        let long = "é".repeat(SNIPPET_CHARS + 10);
        let cut = snippet(&long);
        assert!(cut.starts_with(&"é".repeat(SNIPPET_CHARS)));
        assert!(cut.ends_with("(20 more bytes)"));
        assert_eq!(snippet("  a \n b  "), "a b");
    }

    #[test]
    fn error_messages_come_from_the_usual_shapes() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"auth","code":null}}"#),
            "bad key (type: auth)"
        );
        assert_eq!(error_message(r#"{"error":"overloaded"}"#), "overloaded");
        assert_eq!(error_message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(error_message("<html>oops</html>"), "<html>oops</html>");
    }

    #[test]
    fn calls_sharing_an_index_are_told_apart_by_id() {
        let mut answer = StreamedAnswer::default();
        let name = json!("f");
        for (id, args) in [(Some("a"), "{\"x\":"), (None, "1}"), (Some("b"), "{}")] {
            answer.call_fragment(
                Some(0),
                id.map(String::from),
                Some(&name),
                Some(&json!(args)),
            );
        }
        let Ok(ModelChunk::Done(done)) = answer.finish("m") else {
            panic!("not done");
        };
        assert_eq!(
            done.message.tool_calls,
            vec![
                ToolCall::new("a", "f", json!({"x": 1})),
                ToolCall::new("b", "f", json!({})),
            ]
        );
    }

    #[test]
    fn usage_total_is_summed_when_missing() {
        let usage = usage_of(Some(&json!({"prompt_tokens": 3, "completion_tokens": 4})));
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 3,
                output_tokens: 4,
                total_tokens: 7
            })
        );
        assert_eq!(usage_of(Some(&Value::Null)), None);
        assert_eq!(usage_of(Some(&json!({}))), None);
    }
}
