//! MCP servers as a tool source: a stdio server's tools, listed once and called over one shared
//! connection (through the official Rust SDK, `rmcp`).
//!
//! An [`McpServer`] is a [`ToolProvider`]: on the first [`list`](ToolProvider::list) it starts
//! the server as a child process, initializes the MCP session, lists every tool (following the
//! pagination cursor) and caches the list; later lists return the cache while the server runs.
//! Each tool's spec is tagged [`ToolSource::Mcp`], grouped under the server's name and
//! deferrable; its read-only flag is the server's `readOnlyHint`.
//!
//! Failures never take other sources down: a server that cannot start, exits, or does not
//! answer within its startup timeout makes `list` fail with an error naming the server, which
//! [`Catalog::assemble`](crate::Catalog::assemble) reports and skips. A call on a server that
//! is gone, or that takes longer than the call timeout, fails with a [`ToolError::Failed`]
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

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    ErrorCode, Implementation, ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientCacheConfig, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};

use crate::catalog::ToolProvider;
use crate::message::{ToolCall, ToolMessage};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};
use crate::BoxError;

/// How many of a server's last stderr lines are kept for error reports.
const STDERR_TAIL: usize = 8;

/// How to start one MCP server that speaks over stdio.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The server's name: reports name it, and its tools are grouped under it.
    pub name: String,
    /// The program to run.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it (on top of the inherited environment).
    pub env: BTreeMap<String, String>,
    /// Its working directory (default: the current one).
    pub cwd: Option<PathBuf>,
    /// How long starting, initializing and listing the tools may take together.
    pub startup_timeout: Duration,
    /// How long one tool call may take.
    pub call_timeout: Duration,
}

impl McpServerConfig {
    /// The default [`startup_timeout`](Self::startup_timeout): 30 seconds.
    pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default [`call_timeout`](Self::call_timeout): 60 seconds.
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

    /// A server called `name`, started by running `command` with no arguments.
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        McpServerConfig {
            name: name.into(),
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            startup_timeout: Self::DEFAULT_STARTUP_TIMEOUT,
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
        }
    }

    /// Add an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Add arguments.
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Set the working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Set the startup timeout.
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Set the call timeout.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }
}

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

/// The session with a running server.
struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    pid: Option<u32>,
}

impl Connection {
    fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }
}

/// What the provider and its tools share: the configuration and the current connection.
struct Shared {
    config: McpServerConfig,
    connection: Mutex<Option<Arc<Connection>>>,
}

impl Shared {
    /// The live connection, if any.
    fn live(&self) -> Option<Arc<Connection>> {
        let slot = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().filter(|c| c.is_alive()).cloned()
    }

    fn set(&self, connection: Option<Arc<Connection>>) {
        *self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = connection;
    }
}

/// One MCP server over stdio, as a [`ToolProvider`] with source [`ToolSource::Mcp`].
///
/// The first [`list`](ToolProvider::list) starts the server and caches its tools; later ones
/// return the cache while the server runs (a server that has exited is started again). Use
/// [`refresh`](McpServer::refresh) to list again.
pub struct McpServer {
    shared: Arc<Shared>,
    cache: tokio::sync::Mutex<Option<Vec<Arc<dyn Tool>>>>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("config", &self.shared.config)
            .field("running", &self.shared.live().is_some())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A provider for the server `config` describes. Nothing is started until the first list.
    pub fn new(config: McpServerConfig) -> Self {
        McpServer {
            shared: Arc::new(Shared {
                config,
                connection: Mutex::new(None),
            }),
            cache: tokio::sync::Mutex::new(None),
        }
    }

    /// The server's configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.shared.config
    }

    /// Whether the server is running (started, and its connection open).
    pub fn is_running(&self) -> bool {
        self.shared.live().is_some()
    }

    /// The server process's id, while it runs.
    pub fn process_id(&self) -> Option<u32> {
        self.shared.live().and_then(|c| c.pid)
    }

    /// The server's tools: the cached list while the server runs, else the server is started
    /// (again) and listed.
    ///
    /// # Errors
    /// An [`McpError`] naming the server if it cannot be started, initialized or listed within
    /// the startup timeout.
    pub async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let mut cache = self.cache.lock().await;
        if let Some(tools) = cache.as_ref() {
            if self.shared.live().is_some() {
                return Ok(tools.clone());
            }
        }
        let tools = self.load().await?;
        *cache = Some(tools.clone());
        Ok(tools)
    }

    /// List the tools again (on the running server, or after starting it), replacing the
    /// cache. Tools handed out earlier keep working as long as the server still has them.
    ///
    /// # Errors
    /// As [`McpServer::tools`]; the cache is then empty.
    pub async fn refresh(&self) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let mut cache = self.cache.lock().await;
        *cache = None;
        let tools = self.load().await?;
        *cache = Some(tools.clone());
        Ok(tools)
    }

    /// Stop the server (its tools fail until the next list starts it again) and empty the
    /// cache.
    pub async fn shutdown(&self) {
        let mut cache = self.cache.lock().await;
        *cache = None;
        let connection = self
            .shared
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(connection) = connection {
            connection.service.cancellation_token().cancel();
        }
    }

    /// Connect if needed and list, all within the startup timeout.
    async fn load(&self) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let config = &self.shared.config;
        let deadline = tokio::time::Instant::now() + config.startup_timeout;
        let connection = match self.shared.live() {
            Some(connection) => connection,
            None => {
                // Drop a dead connection before starting anew.
                self.shared.set(None);
                let connection = connect(config, deadline).await?;
                self.shared.set(Some(Arc::clone(&connection)));
                connection
            }
        };
        let listed =
            tokio::time::timeout_at(deadline, connection.service.peer().list_all_tools()).await;
        let listed = match listed {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                return Err(McpError::List {
                    server: config.name.clone(),
                    message: e.to_string(),
                })
            }
            Err(_) => {
                return Err(McpError::StartupTimeout {
                    server: config.name.clone(),
                    timeout: config.startup_timeout,
                    stderr: String::new(),
                })
            }
        };
        tracing::debug!(server = %config.name, tools = listed.len(), "MCP server listed");
        Ok(listed
            .into_iter()
            .map(|tool| {
                Arc::new(McpTool {
                    spec: spec_of(&config.name, &tool),
                    shared: Arc::clone(&self.shared),
                }) as Arc<dyn Tool>
            })
            .collect())
    }
}

impl ToolProvider for McpServer {
    fn name(&self) -> &str {
        &self.shared.config.name
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Arc<dyn Tool>>, BoxError>> {
        Box::pin(async move { self.tools().await.map_err(BoxError::from) })
    }
}

/// The last lines a server wrote to stderr.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_TAIL {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The lines, formatted to follow an error message (empty if there are none).
    fn render(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.is_empty() {
            String::new()
        } else {
            let joined: Vec<&str> = lines.iter().map(String::as_str).collect();
            format!("; stderr: {}", joined.join(" | "))
        }
    }
}

/// Start the server and initialize the session by `deadline`.
async fn connect(
    config: &McpServerConfig,
    deadline: tokio::time::Instant,
) -> Result<Arc<Connection>, McpError> {
    let mut command = tokio::process::Command::new(&config.command);
    command
        .args(&config.args)
        .envs(&config.env)
        // The child dies with its handle, whatever path drops it.
        .kill_on_drop(true);
    if let Some(dir) = &config.cwd {
        command.current_dir(dir);
    }
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| McpError::Spawn {
            server: config.name.clone(),
            command: config.command.clone(),
            source,
        })?;
    let pid = transport.id();
    let tail = StderrTail::default();
    if let Some(stderr) = stderr {
        let tail = tail.clone();
        let server = config.name.clone();
        tokio::spawn(async move {
            // Keep draining whatever the server writes (so it never blocks on a full pipe):
            // lines are cut at 8 KiB and read lossily, so neither a huge line nor bad UTF-8
            // stops the reader.
            let mut reader = tokio::io::BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match (&mut reader)
                    .take(8 << 10)
                    .read_until(b'\n', &mut buf)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                tracing::debug!(server = %server, "MCP server stderr: {line}");
                tail.push(line);
            }
        });
    }
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("stategraph", env!("CARGO_PKG_VERSION")),
    );
    let service = match tokio::time::timeout_at(deadline, client.serve(transport)).await {
        Ok(Ok(service)) => service,
        Ok(Err(e)) => {
            // Give the stderr reader a moment to collect the server's last words.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(McpError::Initialize {
                server: config.name.clone(),
                message: e.to_string(),
                stderr: tail.render(),
            });
        }
        Err(_) => {
            return Err(McpError::StartupTimeout {
                server: config.name.clone(),
                timeout: config.startup_timeout,
                stderr: tail.render(),
            })
        }
    };
    // The provider caches the list itself; the SDK's response cache would only hide a refresh.
    service
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    tracing::debug!(server = %config.name, pid, "MCP server started");
    Ok(Arc::new(Connection { service, pid }))
}

/// The spec of a listed tool.
fn spec_of(server: &str, tool: &rmcp::model::Tool) -> ToolSpec {
    let description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default();
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false);
    ToolSpec::new(tool.name.to_string(), description, ToolSource::Mcp)
        .parameters(Value::Object(tool.input_schema.as_ref().clone()))
        .read_only(read_only)
        .group(server)
        .deferrable(true)
}

/// One tool of an MCP server, called over the server's shared connection.
struct McpTool {
    spec: ToolSpec,
    shared: Arc<Shared>,
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        call: ToolCall,
        _cx: ToolContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let shared = Arc::clone(&self.shared);
        let tool = self.spec.name.clone();
        Box::pin(async move {
            let server = shared.config.name.clone();
            let arguments = match call.args {
                Value::Object(map) => Some(map),
                Value::Null => None,
                other => {
                    return Err(ToolError::InvalidArgs {
                        tool,
                        message: format!("arguments must be a JSON object, not {other}"),
                    })
                }
            };
            let Some(connection) = shared.live() else {
                return Err(ToolError::failed(
                    tool.clone(),
                    McpError::NotRunning { server, tool },
                ));
            };
            let mut params = CallToolRequestParams::new(tool.clone());
            if let Some(arguments) = arguments {
                params = params.with_arguments(arguments);
            }
            let timeout = shared.config.call_timeout;
            let answer =
                tokio::time::timeout(timeout, connection.service.peer().call_tool(params)).await;
            match answer {
                Ok(Ok(result)) => Ok(ToolOutput::Message(tool_message(
                    &call.id, &tool, &server, result,
                ))),
                Ok(Err(e)) => Err(call_error(e, &connection, server, tool)),
                Err(_) => Err(ToolError::failed(
                    tool.clone(),
                    McpError::CallTimeout {
                        server,
                        tool,
                        timeout,
                    },
                )),
            }
        })
    }
}

/// A failed call, as the tool node sees it.
fn call_error(
    error: ServiceError,
    connection: &Connection,
    server: String,
    tool: String,
) -> ToolError {
    let mcp = match error {
        ServiceError::McpError(data) if data.code == ErrorCode::INVALID_PARAMS => {
            return ToolError::InvalidArgs {
                tool,
                message: format!("MCP server {server:?}: {}", data.message),
            };
        }
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::NotRunning {
            server,
            tool: tool.clone(),
        },
        _ if !connection.is_alive() => McpError::NotRunning {
            server,
            tool: tool.clone(),
        },
        other => McpError::Call {
            server,
            tool: tool.clone(),
            message: other.to_string(),
        },
    };
    ToolError::failed(tool, mcp)
}

/// The tool message for a call's result: its text blocks joined, other blocks summarised,
/// structured content kept in the metadata; `isError` makes it an error message.
fn tool_message(call_id: &str, tool: &str, server: &str, result: CallToolResult) -> ToolMessage {
    let mut parts: Vec<String> = result.content.iter().map(describe_block).collect();
    if parts.is_empty() {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    let content = parts.join("\n");
    let mut message = if result.is_error == Some(true) {
        ToolMessage::error(call_id, tool, content)
    } else {
        ToolMessage::new(call_id, tool, content)
    };
    message
        .metadata
        .insert("mcp_server".to_string(), Value::String(server.to_string()));
    if let Some(structured) = result.structured_content {
        message
            .metadata
            .insert("structured_content".to_string(), structured);
    }
    message
}

/// One content block as text for the model.
fn describe_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image: {}, {} bytes of base64]",
            image.mime_type,
            image.data.len()
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {} bytes of base64]",
            audio.mime_type,
            audio.data.len()
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}: {}, {} bytes of base64]",
                mime_type.as_deref().unwrap_or("binary"),
                blob.len()
            ),
            _ => "[resource]".to_string(),
        },
        ContentBlock::ResourceLink(link) => {
            format!("[resource link: {} ({})]", link.uri, link.name)
        }
        _ => "[unsupported content]".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_summarised_and_structured_content_kept() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::text("two"),
        ]);
        result.structured_content = Some(serde_json::json!({"n": 1}));
        let message = tool_message("c1", "t", "srv", result);
        assert_eq!(
            message.content,
            "one\n[image: image/png, 4 bytes of base64]\ntwo"
        );
        assert!(!message.is_error());
        assert_eq!(
            message.metadata.get("structured_content"),
            Some(&serde_json::json!({"n": 1}))
        );
        assert_eq!(
            message.metadata.get("mcp_server"),
            Some(&serde_json::json!("srv"))
        );
    }

    #[test]
    fn error_results_become_error_messages_and_empty_text_falls_back_to_structured() {
        let message = tool_message(
            "c1",
            "t",
            "srv",
            CallToolResult::error(vec![ContentBlock::text("bad")]),
        );
        assert!(message.is_error());
        assert_eq!(message.content, "bad");

        let mut result = CallToolResult::success(Vec::new());
        result.structured_content = Some(serde_json::json!({"sum": 3}));
        let message = tool_message("c2", "t", "srv", result);
        assert_eq!(message.content, r#"{"sum":3}"#);
    }

    #[test]
    fn spec_takes_schema_hint_and_group() {
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), Value::String("object".into()));
        let tool = rmcp::model::Tool::new("look", "Look around", schema)
            .annotate(rmcp::model::ToolAnnotations::new().read_only(true));
        let spec = spec_of("srv", &tool);
        assert_eq!(spec.name, "look");
        assert_eq!(spec.description, "Look around");
        assert_eq!(spec.parameters, serde_json::json!({"type": "object"}));
        assert!(spec.read_only);
        assert!(spec.deferrable);
        assert_eq!(spec.source, ToolSource::Mcp);
        assert_eq!(spec.group.as_deref(), Some("srv"));
    }
}
