//! MCP servers as a tool source: a server's tools, listed once and called over one shared
//! connection (through the official Rust SDK, `rmcp`). A server is a program speaking over
//! stdio, or (crate feature `mcp-http`) a URL speaking Streamable HTTP
//! ([`McpServerConfig::http`], with headers from its config).
//!
//! An [`McpServer`] is a [`ToolProvider`](crate::ToolProvider): on the first [`list`](crate::ToolProvider::list) it starts
//! the server as a child process, initializes the MCP session, lists every tool (following the
//! pagination cursor) and caches the list; later lists return the cache while the server runs,
//! and list again after the server sends `notifications/tools/list_changed`. Each tool's spec
//! is tagged [`ToolSource::Mcp`](crate::ToolSource::Mcp), grouped under the server's name and deferrable.
//!
//! What a server is given, and how far it is believed:
//!
//! - **Environment.** A server starts with a minimal environment: the agent's `HOME`,
//!   `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, the variables its config passes on
//!   ([`McpServerConfig::inherit_env`]) and the ones it sets ([`McpServerConfig::env`]) —
//!   never the agent's other variables, so never its secrets.
//! - **Annotations.** Every annotation (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
//!   `openWorldHint`), the title and the output schema are kept in the spec as sent
//!   ([`ToolSpec::annotations`](crate::ToolSpec::annotations)); the server's instructions are
//!   [`McpServer::instructions`]. They are claims: a tool is
//!   [`read_only`](crate::ToolSpec::read_only) for policy (an exploring subagent's pool, the
//!   read-only batch) only when its server is [`HintTrust::Trusted`] or a [`ToolOverride`]
//!   says so.
//! - **Names.** [`ToolPrefix::Server`] names tools `server__tool`, so two servers with one tool
//!   name can coexist; calls reach the server under the tool's own name.
//! - **Media.** An image, audio or embedded blob in a result is kept in
//!   [`ToolMessage::attachments`](crate::ToolMessage::attachments) for models that take that
//!   kind (the text still describes it), within [`McpServerConfig::attachment_limits`]; a
//!   client whose model does not take one says in the tool message what it left out and why.
//! - **Resources.** With [`McpServerConfig::read_resources`], a server that offers resources
//!   also gets a `read_resource` tool, so a model can read what a resource link names.
//! - **Task-only tools.** A tool marked `execution.taskSupport: "required"` can only be called
//!   as a task, which this client does not do; it is left out of the list
//!   ([`McpServer::task_only_tools`]).
//!
//! Failures never take other sources down: a server that cannot start, exits, or does not
//! answer within its startup timeout makes `list` fail with an error naming the server, which
//! [`Catalog::assemble`](crate::Catalog::assemble) reports and skips (and an agent's capability
//! trace shows as `server/*`, removed at Available). After a failed start the server is not
//! started again before its [`restart_backoff`](McpServerConfig::restart_backoff) ends: lists
//! fail at once with [`McpError::BackingOff`]. A call on a server that is gone, or that waits
//! longer than the call timeout without a progress notification (or longer than
//! [`max_call_time`](McpServerConfig::max_call_time) in all), fails with a
//! [`ToolError::Failed`](crate::ToolError::Failed) naming the tool and the server; progress
//! notifications are streamed as custom events (`{"mcp_progress": ...}`).
//!
//! The server runs as the leader of a process group of its own; it lives as long as the
//! provider or any of its tools: when the last of them is dropped, or on
//! [`McpServer::shutdown`], the session is closed and the whole group is killed (so a server
//! started through `sh -c` or `npx` goes with its wrapper).
//!
//! ```no_run
//! use std::time::Duration;
//! use stategraph_nodes::mcp::{HintTrust, McpServer, McpServerConfig, ToolOverride, ToolPrefix};
//! use stategraph_nodes::ToolProvider;
//!
//! # async fn demo() -> Result<(), stategraph_nodes::BoxError> {
//! let files = McpServer::new(
//!     McpServerConfig::new("files", "mcp-server-filesystem")
//!         .arg("/srv/data")
//!         .inherit_env("NODE_OPTIONS")
//!         .prefix(ToolPrefix::Server)
//!         .trust(HintTrust::Untrusted)
//!         .tool_override("read_text_file", ToolOverride::read_only(true))
//!         .startup_timeout(Duration::from_secs(10)),
//! );
//! let tools = files.list().await?;
//! assert!(tools.iter().all(|t| t.spec().name.starts_with("files__")));
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

mod config;
mod connection;
#[cfg(feature = "mcp-http")]
mod http;
mod progress;
mod resource;
mod server;
mod sniff;
mod tool;

pub use config::{HintTrust, McpServerConfig, ToolOverride, ToolPrefix, DEFAULT_INHERITED_ENV};
pub use server::McpServer;

/// What went wrong with an MCP server. Every variant names the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The process could not be started.
    #[error("MCP server {server:?}: cannot start {command:?}: {source}")]
    Spawn {
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The server's transport could not be set up (an HTTP server without the `mcp-http`
    /// feature, or a header that is not valid HTTP).
    #[error("MCP server {server:?}: {message}")]
    Transport {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// Starting, initializing and listing took longer than the startup timeout.
    #[error("MCP server {server:?}: no answer within the startup timeout of {timeout:?}{stderr}")]
    StartupTimeout {
        /// The server.
        server: String,
        /// The timeout.
        timeout: Duration,
        /// The last lines the server wrote to stderr (formatted for the message, may be empty).
        stderr: String,
    },
    /// The MCP handshake failed (the server exited, or answered something else).
    #[error("MCP server {server:?}: initialization failed: {message}{stderr}")]
    Initialize {
        /// The server.
        server: String,
        /// Why.
        message: String,
        /// The last lines the server wrote to stderr (formatted for the message, may be empty).
        stderr: String,
    },
    /// The server failed to start a moment ago, and is not started again before its back-off
    /// ends.
    #[error("MCP server {server:?}: not started again for {retry_in:?} after {failures} failed start(s); last: {last_error}")]
    BackingOff {
        /// The server.
        server: String,
        /// How long until the next start is tried.
        retry_in: Duration,
        /// The failed starts in a row.
        failures: u32,
        /// The last failure.
        last_error: String,
    },
    /// Listing the tools failed.
    #[error("MCP server {server:?}: listing tools failed: {message}")]
    List {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// The server is not running: it exited, or its connection closed.
    #[error(
        "MCP tool {tool:?}: server {server:?} is not running (it exited or closed the connection)"
    )]
    NotRunning {
        /// The server.
        server: String,
        /// The tool called.
        tool: String,
    },
    /// A call took longer than the call timeout.
    #[error(
        "MCP tool {tool:?} on server {server:?}: no answer within the call timeout of {timeout:?}"
    )]
    CallTimeout {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The timeout.
        timeout: Duration,
    },
    /// A call failed at the protocol level (the server refused it, or sent something that is
    /// not a tool result).
    #[error("MCP tool {tool:?} on server {server:?}: {message}")]
    Call {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
}
