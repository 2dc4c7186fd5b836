//! [`SubagentSpec`]: a subagent type declared in Rust — its name, prompt, model, limits and its
//! own (agent-local) [`Capabilities`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::model::ChatModel;
use crate::tool::Tool;

/// The default most model turns of a subagent.
pub const DEFAULT_MAX_TURNS: usize = 50;
/// The default wall-clock timeout of a subagent.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(900);

/// Which model a subagent runs on.
#[derive(Clone, Default)]
pub enum ModelChoice {
    /// The runtime's model (the parent's): the model is runtime-global.
    #[default]
    Inherit,
    /// A model of its own.
    Model(Arc<dyn ChatModel>),
}

impl fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelChoice::Inherit => f.write_str("Inherit"),
            ModelChoice::Model(m) => f.debug_tuple("Model").field(&m.name()).finish(),
        }
    }
}

/// What one agent may use besides the runtime's built-in tools. Every field is agent-local:
/// an unset field is this agent's own empty value, never the parent's (no inheritance, no
/// fallback), and siblings never see each other's.
#[derive(Clone, Default)]
pub struct Capabilities {
    /// Tools materialised from MCP or other connections (default empty).
    pub connection_tools: Vec<Arc<dyn Tool>>,
    /// The agent's custom tools (default empty).
    pub custom_tools: Vec<Arc<dyn Tool>>,
    /// The skills the agent may activate, by name (default empty: none).
    pub skills: Vec<String>,
    /// An allow list over the **built-in** tools only (`None`: every built-in tool).
    pub allowed_tools: Option<Vec<String>>,
    /// A deny list over the whole merged pool.
    pub disallowed_tools: Vec<String>,
    /// The long-term store, granted (default `false`: none). With it the agent gets the
    /// runtime's store ([`Subagents::store`](super::Subagents::store)) and the memory tools,
    /// over the run's user's namespace; without it, neither.
    pub memory: bool,
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |tools: &[Arc<dyn Tool>]| -> Vec<String> {
            tools.iter().map(|t| t.spec().name.clone()).collect()
        };
        f.debug_struct("Capabilities")
            .field("connection_tools", &names(&self.connection_tools))
            .field("custom_tools", &names(&self.custom_tools))
            .field("skills", &self.skills)
            .field("allowed_tools", &self.allowed_tools)
            .field("disallowed_tools", &self.disallowed_tools)
            .field("memory", &self.memory)
            .finish()
    }
}

/// A subagent type: what the `task` tool's `subagent_type` names.
///
/// ```
/// use std::time::Duration;
/// use stategraph_nodes::subagent::SubagentSpec;
///
/// let spec = SubagentSpec::new("researcher", "Finds facts", "You research one question.")
///     .max_turns(10)
///     .timeout(Duration::from_secs(60))
///     .exploring(true)
///     .deny(["bash"]);
/// assert_eq!(spec.max_turns, 10);
/// assert!(spec.capabilities.custom_tools.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct SubagentSpec {
    /// The type's name.
    pub name: String,
    /// What it is for (shown to the delegating model).
    pub description: String,
    /// Its system prompt.
    pub prompt: String,
    /// Its model.
    pub model: ModelChoice,
    /// The most model turns per delegation.
    pub max_turns: usize,
    /// The wall-clock limit per delegation.
    pub timeout: Duration,
    /// Its own capabilities.
    pub capabilities: Capabilities,
    /// An exploring agent keeps only read-only tools and the shell.
    pub exploring: bool,
    /// The type runs host shell commands: a delegation to it fails unless the runtime allows
    /// host bash ([`Subagents::allow_host_bash`](super::Subagents::allow_host_bash)).
    pub needs_host_bash: bool,
}

impl SubagentSpec {
    /// A type named `name` with `prompt`, the inherited model, 50 turns, 900 s, no
    /// capabilities of its own, not exploring.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        SubagentSpec {
            name: name.into(),
            description: description.into(),
            prompt: prompt.into(),
            model: ModelChoice::Inherit,
            max_turns: DEFAULT_MAX_TURNS,
            timeout: DEFAULT_TIMEOUT,
            capabilities: Capabilities::default(),
            exploring: false,
            needs_host_bash: false,
        }
    }

    /// Run on `model` instead of the runtime's.
    pub fn model(mut self, model: impl ChatModel) -> Self {
        self.model = ModelChoice::Model(Arc::new(model));
        self
    }

    /// The most model turns (at least 1).
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns.max(1);
        self
    }

    /// The wall-clock limit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether the agent is exploring (read-only tools and the shell only).
    pub fn exploring(mut self, yes: bool) -> Self {
        self.exploring = yes;
        self
    }

    /// Add a custom tool of its own.
    pub fn custom_tool(mut self, tool: impl Tool) -> Self {
        self.capabilities.custom_tools.push(Arc::new(tool));
        self
    }

    /// Add a connection (MCP, ...) tool of its own.
    pub fn connection_tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.capabilities.connection_tools.push(tool);
        self
    }

    /// Allow only these built-in tools.
    pub fn allow(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.capabilities.allowed_tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Deny these tools (any source).
    pub fn deny(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.capabilities
            .disallowed_tools
            .extend(names.into_iter().map(Into::into));
        self
    }

    /// Grant (or not) the runtime's long-term store and the memory tools.
    pub fn memory(mut self, granted: bool) -> Self {
        self.capabilities.memory = granted;
        self
    }

    /// The skills it may activate.
    pub fn skills(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.capabilities.skills = names.into_iter().map(Into::into).collect();
        self
    }
}
