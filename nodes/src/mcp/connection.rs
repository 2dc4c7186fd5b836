//! The connection to a running server: starting the child process, initializing the session,
//! and the connection the provider and its tools share.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientCacheConfig, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};

use super::{McpError, McpServerConfig};

/// How many of a server's last stderr lines are kept for error reports.
const STDERR_TAIL: usize = 8;

/// The session with a running server.
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, ClientConfig>,
    pub(super) pid: Option<u32>,
}

impl Connection {
    pub(super) fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }
}

/// What the provider and its tools share: the configuration and the current connection.
pub(super) struct Shared {
    pub(super) config: McpServerConfig,
    pub(super) connection: Mutex<Option<Arc<Connection>>>,
}

impl Shared {
    /// The live connection, if any.
    pub(super) fn live(&self) -> Option<Arc<Connection>> {
        let slot = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().filter(|c| c.is_alive()).cloned()
    }

    pub(super) fn set(&self, connection: Option<Arc<Connection>>) {
        *self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = connection;
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
pub(super) async fn connect(
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
                let line = String::from_utf8_lossy(&buf).trim_end().to_owned();
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
