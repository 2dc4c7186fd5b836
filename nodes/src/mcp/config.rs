//! How to start one MCP server: [`McpServerConfig`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

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
