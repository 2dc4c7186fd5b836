//! The connection to a running server: starting the child process in a process group of its
//! own with a minimal environment, initializing the session, and the connection the provider
//! and its tools share.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientCacheConfig, ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use super::progress::ProgressRoutes;
use super::sniff::{Sniffer, TaskOnly};
use super::{McpError, McpServerConfig};

/// How many of a server's last stderr lines are kept for error reports.
const STDERR_TAIL: usize = 8;

/// The client side of a session: our identity, and where the server's notifications go.
pub(super) struct Client {
    config: ClientConfig,
    notices: Notices,
}

/// Where a server's notifications go: a flag `notifications/tools/list_changed` raises, and
/// the routes of `notifications/progress` to the calls they belong to.
#[derive(Clone, Default)]
pub(super) struct Notices {
    pub(super) stale: Arc<AtomicBool>,
    pub(super) progress: Arc<ProgressRoutes>,
    /// What the server's list answers said that the SDK drops: the task-only tools.
    pub(super) task_only: TaskOnly,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notices.stale.store(true, Ordering::SeqCst);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.notices.progress.deliver(params);
    }
}

/// The session with a running server.
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, Client>,
    pub(super) pid: Option<u32>,
    /// The server's process (stdio), killed when the connection is dropped.
    _child: Option<tokio::process::Child>,
}

impl Connection {
    pub(super) fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    /// The server's instructions, from its answer to `initialize`.
    pub(super) fn instructions(&self) -> Option<String> {
        self.service.peer().peer_info()?.instructions.clone()
    }

    /// End the session and kill every process of the server's group.
    pub(super) fn stop(&self) {
        self.service.cancellation_token().cancel();
        kill_group(self.pid);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The direct child dies with its handle (`kill_on_drop`); what it started (a server
        // behind `sh -c` or `npx`) is in its group.
        kill_group(self.pid);
    }
}

/// Kill the process group led by `pid` (the server was started as the leader of a group of its
/// own). A group that is already gone is no error.
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    {
        let pid = pid
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// What the provider and its tools share: the configuration, the current connection, and
/// what the server's notifications said.
pub(super) struct Shared {
    pub(super) config: McpServerConfig,
    pub(super) connection: Mutex<Option<Arc<Connection>>>,
    pub(super) notices: Notices,
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

/// The command starting the server: a minimal environment (the agent's variables the config
/// lets through, then its own), the leader of a new process group, killed with its handle.
fn command(config: &McpServerConfig) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).env_clear();
    for (key, value) in std::env::vars_os() {
        if key.to_str().is_some_and(|k| config.inherits(k)) {
            command.env(key, value);
        }
    }
    command
        .envs(&config.env)
        // The child dies with its handle, whatever path drops it.
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    if let Some(dir) = &config.cwd {
        command.current_dir(dir);
    }
    command
}

/// A started server: its process, and its end of the session's pipes.
struct Spawned {
    child: tokio::process::Child,
    pid: Option<u32>,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

/// Start the server's process, its stderr drained into `tail`.
fn spawn(config: &McpServerConfig, tail: &StderrTail) -> Result<Spawned, McpError> {
    let spawn_error = |source| McpError::Spawn {
        server: config.name.clone(),
        command: config.command.clone(),
        source,
    };
    let mut child = command(config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    let pipe = |what| spawn_error(std::io::Error::other(format!("no {what} pipe")));
    let stdin = child.stdin.take().ok_or_else(|| pipe("stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| pipe("stdout"))?;
    if let Some(stderr) = child.stderr.take() {
        drain(stderr, tail.clone(), config.name.clone());
    }
    let pid = child.id();
    Ok(Spawned {
        child,
        pid,
        stdin,
        stdout,
    })
}

/// Keep draining whatever the server writes to stderr (so it never blocks on a full pipe),
/// keeping the last lines: lines are cut at 8 KiB and read lossily, so neither a huge line nor
/// bad UTF-8 stops the reader.
fn drain(stderr: ChildStderr, tail: StderrTail, server: String) {
    tokio::spawn(async move {
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

/// Start (or reach) the server and initialize the session by `deadline`.
pub(super) async fn connect(
    config: &McpServerConfig,
    notices: &Notices,
    deadline: tokio::time::Instant,
) -> Result<Arc<Connection>, McpError> {
    let client = Client {
        config: ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("stategraph", env!("CARGO_PKG_VERSION")),
        ),
        notices: notices.clone(),
    };
    let tail = StderrTail::default();
    let (served, child, pid) = match &config.url {
        Some(url) => (serve_http(client, config, url, deadline).await?, None, None),
        None => {
            let Spawned {
                child,
                pid,
                stdin,
                stdout,
            } = spawn(config, &tail)?;
            let transport = (Sniffer::new(stdout, notices.task_only.clone()), stdin);
            let served = tokio::time::timeout_at(deadline, client.serve(transport)).await;
            (served, Some(child), pid)
        }
    };
    let service = match served {
        Ok(Ok(service)) => service,
        Ok(Err(e)) => {
            kill_group(pid);
            // Give the stderr reader a moment to collect the server's last words.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(McpError::Initialize {
                server: config.name.clone(),
                message: e.to_string(),
                stderr: tail.render(),
            });
        }
        Err(_) => {
            kill_group(pid);
            return Err(McpError::StartupTimeout {
                server: config.name.clone(),
                timeout: config.startup_timeout,
                stderr: tail.render(),
            });
        }
    };
    // The provider caches the list itself; the SDK's response cache would only hide a refresh.
    service
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    tracing::debug!(server = %config.name, pid, "MCP server started");
    Ok(Arc::new(Connection {
        service,
        pid,
        _child: child,
    }))
}

/// What serving a session by the deadline gives.
type Served = Result<
    Result<RunningService<RoleClient, Client>, rmcp::service::ClientInitializeError>,
    tokio::time::error::Elapsed,
>;

/// Initialize a session with the Streamable HTTP server at `url` by `deadline`.
#[cfg(feature = "mcp-http")]
async fn serve_http(
    client: Client,
    config: &McpServerConfig,
    url: &str,
    deadline: tokio::time::Instant,
) -> Result<Served, McpError> {
    let transport = super::http::transport(config, url)?;
    Ok(tokio::time::timeout_at(deadline, client.serve(transport)).await)
}

/// Without the `mcp-http` feature, an HTTP server cannot be reached.
#[cfg(not(feature = "mcp-http"))]
async fn serve_http(
    _client: Client,
    config: &McpServerConfig,
    url: &str,
    _deadline: tokio::time::Instant,
) -> Result<Served, McpError> {
    Err(McpError::Transport {
        server: config.name.clone(),
        message: format!(
            "{url} speaks Streamable HTTP, which needs the `mcp-http` feature of stategraph-nodes"
        ),
    })
}
