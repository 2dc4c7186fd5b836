//! [`McpServer`]: one MCP server as a tool provider, its tools listed once and cached,
//! listed again when the server says they changed, and not restarted at every assembly after
//! it failed.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use futures::future::BoxFuture;

use crate::catalog::ToolProvider;
use crate::tool::{Tool, ToolSource};
use crate::BoxError;

use super::connection::{connect, Notices, Shared};
use super::resource::ResourceReader;
use super::tool::{spec_of, McpTool};
use super::{McpError, McpServerConfig};

/// One MCP server (over stdio, or Streamable HTTP with the `mcp-http` feature), as a
/// [`ToolProvider`] with source [`ToolSource::Mcp`].
///
/// The first [`list`](ToolProvider::list) starts the server and caches its tools; later ones
/// return the cache while the server runs, and list again after the server sent
/// `notifications/tools/list_changed` (a server that has exited is started again). Use
/// [`refresh`](McpServer::refresh) to list again at any time.
///
/// A server that failed to start is not started again at once: for
/// [`restart_backoff`](McpServerConfig::restart_backoff) (doubling with each further failure)
/// every list fails at once with [`McpError::BackingOff`], naming the last failure.
pub struct McpServer {
    shared: Arc<Shared>,
    cache: tokio::sync::Mutex<Option<Vec<Arc<dyn Tool>>>>,
    failures: Mutex<Option<Failures>>,
}

/// The failed starts since the last good one.
struct Failures {
    /// How many in a row.
    count: u32,
    /// No new start before this.
    until: Instant,
    /// The last one.
    error: String,
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
                notices: Notices::default(),
            }),
            cache: tokio::sync::Mutex::new(None),
            failures: Mutex::new(None),
        }
    }

    /// The instructions the server gave when the session started (`None` before it runs, or
    /// when it gave none).
    pub fn instructions(&self) -> Option<String> {
        self.shared.live().and_then(|c| c.instructions())
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

    /// The tools the server listed that are left out because they can only be called as
    /// tasks (`execution.taskSupport: "required"`; task augmentation is not supported, so
    /// every call of them would fail), by their names on the server, sorted.
    pub fn task_only_tools(&self) -> Vec<String> {
        self.shared.notices.task_only.names()
    }

    /// The server's tools: the cached list while the server runs and has not said its list
    /// changed, else the server is started (again) if needed and listed.
    ///
    /// # Errors
    /// An [`McpError`] naming the server if it cannot be started, initialized or listed within
    /// the startup timeout, or [`McpError::BackingOff`] while a failed start is recent.
    pub async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let mut cache = self.cache.lock().await;
        if let Some(tools) = cache.as_ref() {
            if self.shared.live().is_some() && !self.shared.notices.stale.load(Ordering::SeqCst) {
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
            connection.stop();
        }
    }

    /// Connect if needed and list, all within the startup timeout; a failure starts (or
    /// lengthens) the back-off, a success ends it.
    async fn load(&self) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let result = self.connect_and_list().await;
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Ok(_) => *failures = None,
            Err(McpError::BackingOff { .. }) => {}
            Err(e) => {
                let count = failures.as_ref().map_or(0, |f| f.count).saturating_add(1);
                let backoff = backoff(self.shared.config.restart_backoff, count);
                tracing::warn!(server = %self.shared.config.name, error = %e, ?backoff, "MCP server failed; backing off");
                *failures = Some(Failures {
                    count,
                    until: Instant::now() + backoff,
                    error: e.to_string(),
                });
            }
        }
        result
    }

    /// The back-off error while a failed start is recent.
    fn backing_off(&self) -> Option<McpError> {
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let f = failures.as_ref()?;
        let now = Instant::now();
        (now < f.until).then(|| McpError::BackingOff {
            server: self.shared.config.name.clone(),
            retry_in: f.until - now,
            failures: f.count,
            last_error: f.error.clone(),
        })
    }

    async fn connect_and_list(&self) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let config = &self.shared.config;
        let deadline = Instant::now() + config.startup_timeout;
        let connection = match self.shared.live() {
            Some(connection) => connection,
            None => {
                if let Some(e) = self.backing_off() {
                    return Err(e);
                }
                // Drop a dead connection before starting anew.
                self.shared.set(None);
                let connection = connect(config, &self.shared.notices, deadline).await?;
                self.shared.set(Some(Arc::clone(&connection)));
                connection
            }
        };
        // A change notified from here on is a change after this list, and this list's answer
        // alone says which tools are task-only.
        self.shared.notices.stale.store(false, Ordering::SeqCst);
        self.shared.notices.task_only.clear();
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
        let task_only = &self.shared.notices.task_only;
        let offers_resources = connection
            .service
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.resources.is_some());
        let reader = (config.read_resources && offers_resources)
            .then(|| Arc::new(ResourceReader::new(Arc::clone(&self.shared))) as Arc<dyn Tool>);
        let tools = listed
            .into_iter()
            .filter(|tool| {
                // Callable only as a task, which this client does not do: every call would fail.
                let hidden = task_only.contains(&tool.name);
                if hidden {
                    tracing::info!(server = %config.name, tool = %tool.name, "MCP tool requires task augmentation; left out");
                }
                !hidden
            })
            .map(|tool| {
                Arc::new(McpTool {
                    spec: spec_of(config, &tool),
                    remote: tool.name.to_string(),
                    shared: Arc::clone(&self.shared),
                }) as Arc<dyn Tool>
            })
            .chain(reader)
            .collect();
        Ok(tools)
    }
}

/// The back-off after `count` failed starts in a row: `first`, doubled for each further one,
/// at most [`McpServerConfig::MAX_RESTART_BACKOFF`].
fn backoff(first: Duration, count: u32) -> Duration {
    let doublings = count.saturating_sub(1).min(16);
    first
        .saturating_mul(1 << doublings)
        .min(McpServerConfig::MAX_RESTART_BACKOFF.max(first))
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
