//! MCP servers as a tool source: a stdio server's tools, listed once and called over one shared
//! connection (through the official Rust SDK, `rmcp`).
//!
//! An [`McpServer`] is a [`ToolProvider`](crate::ToolProvider): on the first [`list`](crate::ToolProvider::list) it starts
//! the server as a child process, initializes the MCP session, lists every tool (following the
//! pagination cursor) and caches the list; later lists return the cache while the server runs.
//! Each tool's spec is tagged [`ToolSource::Mcp`](crate::ToolSource::Mcp), grouped under the server's name and
//! deferrable; its read-only flag is the server's `readOnlyHint`.
//!
//! Failures never take other sources down: a server that cannot start, exits, or does not
//! answer within its startup timeout makes `list` fail with an error naming the server, which
//! [`Catalog::assemble`](crate::Catalog::assemble) reports and skips. A call on a server that
//! is gone, or that takes longer than the call timeout, fails with a [`ToolError::Failed`](crate::ToolError::Failed)
//! naming the tool and the server.
//!
//! The child process lives as long as the provider or any of its tools: when the last of them
//! is dropped the session is closed and the process is killed.
//!
//! ```no_run
//! use std::time::Duration;
//! use stategraph_nodes::mcp::{McpServer, McpServerConfig};
//! use stategraph_nodes::ToolProvider;
//!
//! # async fn demo() -> Result<(), stategraph_nodes::BoxError> {
//! let files = McpServer::new(
//!     McpServerConfig::new("files", "mcp-server-filesystem")
//!         .arg("/srv/data")
//!         .startup_timeout(Duration::from_secs(10)),
//! );
//! let tools = files.list().await?;
//! # let _ = tools;
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

mod config;
mod connection;
mod progress;
mod server;
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
