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

use std::time::Duration;

mod answer;
mod client;
mod config;
mod error_text;
mod parts;
mod request;
mod sse;
mod stream;
mod streamed;

pub use client::OpenAiModel;
pub use config::OpenAiConfig;

/// The base URL used when none is configured: OpenAI's own API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The timeout used when none is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
