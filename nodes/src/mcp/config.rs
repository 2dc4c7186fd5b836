//! How to start one MCP server and how far to believe it: [`McpServerConfig`], [`HintTrust`],
//! [`ToolOverride`], [`ToolPrefix`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Whether a server's tool annotations may decide policy.
///
/// The MCP specification calls annotations hints that a client must treat as untrusted unless
/// the server is trusted. A server's `readOnlyHint` is always kept in the tool's
/// [`annotations`](crate::ToolSpec::annotations); it makes the tool
/// [`read_only`](crate::ToolSpec::read_only) — what an exploring subagent and the read-only
/// batch admit — only under [`HintTrust::Trusted`] or a [`ToolOverride`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HintTrust {
    /// The hints are recorded, and no policy acts on them (the default).
    #[default]
    Untrusted,
    /// The server's `readOnlyHint` counts as the tool's read-only flag.
    Trusted,
}

/// What the configuration says about one tool of the server, whatever its hints say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolOverride {
    /// The tool's read-only flag for policy (`None`: from the hints, if trusted).
    pub read_only: Option<bool>,
}

impl ToolOverride {
    /// An override that sets the tool's read-only flag.
    pub fn read_only(yes: bool) -> Self {
        ToolOverride {
            read_only: Some(yes),
        }
    }
}

/// How a server's tools are named in the catalog.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolPrefix {
    /// As the server names them (the default).
    #[default]
    Off,
    /// `server__tool`: the server's name, two underscores, the tool's name. Calls still reach
    /// the server under the tool's own name.
    Server,
}

/// The variables a server receives from the agent's environment without being configured to
/// (the set the MCP TypeScript SDK passes on Unix).
pub const DEFAULT_INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How to reach one MCP server: a program started as a child process speaking over stdio
/// ([`McpServerConfig::new`]), or a URL speaking Streamable HTTP ([`McpServerConfig::http`],
/// crate feature `mcp-http`).
///
/// A stdio server starts with a minimal environment: the variables of [`DEFAULT_INHERITED_ENV`] that
/// the agent has, the ones [`inherit_env`](Self::inherit_env) names, and the ones
/// [`env`](Self::env) sets — never the rest of the agent's environment.
#[derive(Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The server's name: reports name it, and its tools are grouped under it.
    pub name: String,
    /// The program to run (stdio; empty for an HTTP server).
    pub command: String,
    /// The endpoint of a Streamable HTTP server (`None`: a stdio server).
    pub url: Option<String>,
    /// HTTP headers sent with every request to an HTTP server (e.g. `Authorization`).
    pub headers: BTreeMap<String, String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it.
    pub env: BTreeMap<String, String>,
    /// Variables of the agent's environment passed on to it besides the defaults.
    pub inherit_env: Vec<String>,
    /// Its working directory (default: the current one).
    pub cwd: Option<PathBuf>,
    /// How long starting, initializing and listing the tools may take together.
    pub startup_timeout: Duration,
    /// How long one tool call may take without a progress notification from the server.
    pub call_timeout: Duration,
    /// How long one tool call may take in all, however often the server reports progress.
    pub max_call_time: Duration,
    /// The largest attachment (image, audio or file; decoded bytes) of a result passed on to
    /// the model; a larger one is only described in the text.
    pub max_attachment_bytes: usize,
    /// The most attachments of one result passed on to the model; the rest are only described.
    pub max_attachments: usize,
    /// After a failed start, how long to report the failure again instead of retrying; it
    /// doubles with each further failure, up to [`MAX_RESTART_BACKOFF`](Self::MAX_RESTART_BACKOFF).
    pub restart_backoff: Duration,
    /// Whether the server's annotations decide policy.
    pub trust: HintTrust,
    /// Per-tool overrides, by the tool's name on the server.
    pub tool_overrides: BTreeMap<String, ToolOverride>,
    /// How its tools are named in the catalog.
    pub prefix: ToolPrefix,
    /// Whether to add a `read_resource` tool (named like the server's tools) when the server
    /// offers resources, so a model can read the resources its tools link to.
    pub read_resources: bool,
}

impl McpServerConfig {
    /// The default [`startup_timeout`](Self::startup_timeout): 30 seconds.
    pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default [`call_timeout`](Self::call_timeout): 60 seconds.
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
    /// The default [`max_call_time`](Self::max_call_time): 10 minutes.
    pub const DEFAULT_MAX_CALL_TIME: Duration = Duration::from_secs(600);
    /// The default [`max_attachment_bytes`](Self::max_attachment_bytes): 5 MiB.
    pub const DEFAULT_MAX_ATTACHMENT_BYTES: usize = 5 << 20;
    /// The default [`max_attachments`](Self::max_attachments): 4.
    pub const DEFAULT_MAX_ATTACHMENTS: usize = 4;
    /// The default [`restart_backoff`](Self::restart_backoff): 5 seconds.
    pub const DEFAULT_RESTART_BACKOFF: Duration = Duration::from_secs(5);
    /// The longest back-off after repeated failures: 5 minutes.
    pub const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(300);

    /// A server called `name`, started by running `command` with no arguments, untrusted and
    /// unprefixed.
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        McpServerConfig {
            name: name.into(),
            command: command.into(),
            url: None,
            headers: BTreeMap::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            inherit_env: Vec::new(),
            cwd: None,
            startup_timeout: Self::DEFAULT_STARTUP_TIMEOUT,
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
            max_call_time: Self::DEFAULT_MAX_CALL_TIME,
            max_attachment_bytes: Self::DEFAULT_MAX_ATTACHMENT_BYTES,
            max_attachments: Self::DEFAULT_MAX_ATTACHMENTS,
            restart_backoff: Self::DEFAULT_RESTART_BACKOFF,
            trust: HintTrust::Untrusted,
            tool_overrides: BTreeMap::new(),
            prefix: ToolPrefix::Off,
            read_resources: false,
        }
    }

    /// A server called `name` at the Streamable HTTP endpoint `url` (crate feature
    /// `mcp-http`; without it, starting the server fails with
    /// [`McpError::Transport`](super::McpError::Transport)).
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServerConfig {
            url: Some(url.into()),
            ..McpServerConfig::new(name, "")
        }
    }

    /// Send the HTTP header `name: value` with every request (HTTP servers).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
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

    /// Pass on the agent's value of the variable `key` (if it has one).
    pub fn inherit_env(mut self, key: impl Into<String>) -> Self {
        self.inherit_env.push(key.into());
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

    /// Set the overall limit of one call (progress notifications never extend a call past it;
    /// a limit shorter than the call timeout counts as the call timeout).
    pub fn max_call_time(mut self, limit: Duration) -> Self {
        self.max_call_time = limit;
        self
    }

    /// Set the largest attachment (image, audio or file; decoded bytes) and the most
    /// attachments of one result passed on to the model (`0` attachments: none; each is then
    /// only described in the text).
    pub fn attachment_limits(mut self, max_bytes: usize, max_attachments: usize) -> Self {
        self.max_attachment_bytes = max_bytes;
        self.max_attachments = max_attachments;
        self
    }

    /// Set the first back-off after a failed start.
    pub fn restart_backoff(mut self, backoff: Duration) -> Self {
        self.restart_backoff = backoff;
        self
    }

    /// Set whether the server's annotations decide policy.
    pub fn trust(mut self, trust: HintTrust) -> Self {
        self.trust = trust;
        self
    }

    /// Override what the server says about its tool `tool` (its name on the server).
    pub fn tool_override(mut self, tool: impl Into<String>, over: ToolOverride) -> Self {
        self.tool_overrides.insert(tool.into(), over);
        self
    }

    /// Add a `read_resource` tool when the server offers resources (off by default).
    pub fn read_resources(mut self, yes: bool) -> Self {
        self.read_resources = yes;
        self
    }

    /// Set how the server's tools are named in the catalog.
    pub fn prefix(mut self, prefix: ToolPrefix) -> Self {
        self.prefix = prefix;
        self
    }

    /// The catalog name of the server's tool `tool`.
    ///
    /// ```
    /// use stategraph_nodes::mcp::{McpServerConfig, ToolPrefix};
    ///
    /// let config = McpServerConfig::new("files", "mcp-server-filesystem");
    /// assert_eq!(config.tool_name("read"), "read");
    /// assert_eq!(config.prefix(ToolPrefix::Server).tool_name("read"), "files__read");
    /// ```
    pub fn tool_name(&self, tool: &str) -> String {
        match self.prefix {
            ToolPrefix::Off => tool.to_owned(),
            ToolPrefix::Server => format!("{}__{tool}", self.name),
        }
    }

    /// Whether the server receives the agent's variable `key`: one of
    /// [`DEFAULT_INHERITED_ENV`] or of [`inherit_env`](Self::inherit_env). (Variables set with
    /// [`env`](Self::env) are added on top.)
    ///
    /// ```
    /// use stategraph_nodes::mcp::McpServerConfig;
    ///
    /// let config = McpServerConfig::new("s", "server").inherit_env("NODE_OPTIONS");
    /// assert!(config.inherits("PATH"));
    /// assert!(config.inherits("NODE_OPTIONS"));
    /// assert!(!config.inherits("OPENAI_API_KEY"));
    /// ```
    pub fn inherits(&self, key: &str) -> bool {
        DEFAULT_INHERITED_ENV.contains(&key) || self.inherit_env.iter().any(|k| k == key)
    }
}

impl std::fmt::Debug for McpServerConfig {
    /// Every field, with the values of `env` and `headers` redacted (they hold credentials).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |map: &BTreeMap<String, String>| -> Vec<String> {
            map.keys().map(|k| format!("{k}=<redacted>")).collect()
        };
        f.debug_struct("McpServerConfig")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("url", &self.url)
            .field("headers", &redacted(&self.headers))
            .field("args", &self.args)
            .field("env", &redacted(&self.env))
            .field("inherit_env", &self.inherit_env)
            .field("cwd", &self.cwd)
            .field("startup_timeout", &self.startup_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("max_call_time", &self.max_call_time)
            .field("max_attachment_bytes", &self.max_attachment_bytes)
            .field("max_attachments", &self.max_attachments)
            .field("restart_backoff", &self.restart_backoff)
            .field("trust", &self.trust)
            .field("tool_overrides", &self.tool_overrides)
            .field("prefix", &self.prefix)
            .field("read_resources", &self.read_resources)
            .finish()
    }
}
