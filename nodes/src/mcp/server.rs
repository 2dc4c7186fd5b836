//! [`McpServer`]: one stdio MCP server as a tool provider, its tools listed once and cached.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;

use crate::catalog::ToolProvider;
use crate::tool::{Tool, ToolSource};
use crate::BoxError;

use super::connection::{connect, Shared};
use super::tool::{spec_of, McpTool};
use super::{McpError, McpServerConfig};

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
