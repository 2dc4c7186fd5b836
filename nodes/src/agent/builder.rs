//! The agent's configuration: what [`AgentBuilder`] collects before it is assembled for a run.

use std::fmt;
use std::sync::Arc;

use crate::authz::Authorization;
use crate::catalog::ToolProvider;
use crate::deferred::MakeDeferredSetup;
use crate::guardrail::Guardrail;
use crate::middleware::{ModelLayer, Observer, ToolLayer, ToolPolicy};
use crate::model::ChatModel;
use crate::sandbox::{SandboxOptions, SandboxProvider, SandboxRuntime};
use crate::secret::SecretStore;
use crate::skill::SkillStore;
use crate::subagent::Subagents;
use crate::subagent_tools::{DelegationLog, MultiTaskTool, TaskTool};
use crate::tool::Tool;
use stategraph::store::Store;

/// Configures an agent; [`AgentBuilder::assemble`] builds it for one run.
pub struct AgentBuilder {
    pub(super) model: Arc<dyn ChatModel>,
    pub(super) system_prompt: Option<String>,
    pub(super) tools: Vec<Arc<dyn Tool>>,
    pub(super) providers: Vec<Arc<dyn ToolProvider>>,
    pub(super) authorization: Option<Authorization>,
    pub(super) guardrails: Vec<Guardrail>,
    pub(super) skills: Option<Arc<dyn SkillStore>>,
    pub(super) available_skills: Option<Vec<String>>,
    pub(super) secrets: Option<Arc<dyn SecretStore>>,
    pub(super) defer: bool,
    pub(super) model_layers: Vec<Arc<dyn ModelLayer>>,
    pub(super) tool_layers: Vec<Arc<dyn ToolLayer>>,
    pub(super) policies: Vec<Arc<dyn ToolPolicy>>,
    pub(super) observers: Vec<Arc<dyn Observer>>,
    pub(super) max_turns: usize,
    pub(super) stream: bool,
    pub(super) groups: Option<Vec<String>>,
    pub(super) host_bash: bool,
    pub(super) sandbox: Option<Arc<SandboxRuntime>>,
    pub(super) make_deferred: Option<Arc<dyn MakeDeferredSetup>>,
    pub(super) delegation_log: Option<DelegationLog>,
    pub(super) store: Option<Arc<dyn Store>>,
}

impl fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model", &self.model.name())
            .field("tools", &self.tools.len())
            .field("providers", &self.providers.len())
            .field("defer", &self.defer)
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// An agent around `model`, with no tools, deferral on, 50 turns.
    pub fn new(model: impl ChatModel) -> Self {
        Self::with_model(Arc::new(model))
    }

    /// An agent around a shared model.
    pub fn with_model(model: Arc<dyn ChatModel>) -> Self {
        AgentBuilder {
            model,
            system_prompt: None,
            tools: Vec::new(),
            providers: Vec::new(),
            authorization: None,
            guardrails: Vec::new(),
            skills: None,
            available_skills: None,
            secrets: None,
            defer: true,
            model_layers: Vec::new(),
            tool_layers: Vec::new(),
            policies: Vec::new(),
            observers: Vec::new(),
            max_turns: 50,
            stream: false,
            groups: None,
            host_bash: false,
            sandbox: None,
            make_deferred: None,
            delegation_log: None,
            store: None,
        }
    }

    /// The system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Add a tool (its spec's source decides its priority).
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Let the agent delegate to `subagents`, wired in one call: the `task` and `multi_task`
    /// tools over its types, sharing one [`DelegationLog`] (read it with
    /// [`Agent::delegation_log`](super::Agent::delegation_log)), and the [`DelegationLimit`]
    /// layer with its per-turn and per-run limits
    /// ([`Subagents::delegation_limit`]). Register DeerFlow's general-purpose and bash types
    /// with [`Subagents::builtin_types`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph_nodes::prelude::*;
    /// use stategraph_nodes::subagent::Subagents;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let child = ScriptedModel::new("child", [AiMessage::text("found it")]);
    /// let task = ToolCall::new("c1", "task", serde_json::json!({
    ///     "description": "look", "prompt": "find it", "subagent_type": "general-purpose"}));
    /// let lead = ScriptedModel::new("lead", [AiMessage::calls([task]), AiMessage::text("done")]);
    /// let agent = AgentBuilder::new(lead)
    ///     .subagents(Subagents::new(Arc::new(child)).builtin_types())
    ///     .assemble(RunContext::default())
    ///     .await?;
    /// assert!(agent.tool_names().contains(&"task".to_owned()));
    /// agent.ask("go").await?;
    /// let reports = agent.delegation_log().map(|log| log.reports()).unwrap_or_default();
    /// assert_eq!(reports[0].outcome.result.as_deref(), Some("found it"));
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// [`DelegationLimit`]: crate::subagent::DelegationLimit
    pub fn subagents(mut self, subagents: Subagents) -> Self {
        let limit = subagents.delegation_limit.clone();
        let subagents = Arc::new(subagents);
        let log = DelegationLog::new();
        self.tools
            .push(Arc::new(TaskTool::new(Arc::clone(&subagents), log.clone())));
        self.tools
            .push(Arc::new(MultiTaskTool::new(subagents, log.clone())));
        self.model_layers.push(Arc::new(limit));
        self.delegation_log = Some(log);
        self
    }

    /// Add a shared tool.
    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Add a tool source listed at assembly (an MCP server, ...).
    pub fn provider(mut self, provider: impl ToolProvider) -> Self {
        self.providers.push(Arc::new(provider));
        self
    }

    /// Add a shared tool source.
    pub fn provider_arc(mut self, provider: Arc<dyn ToolProvider>) -> Self {
        self.providers.push(provider);
        self
    }

    /// Filter the catalog by `authz` at assembly, and ask it again for every call.
    pub fn authorization(mut self, authz: Authorization) -> Self {
        self.authorization = Some(authz);
        self
    }

    /// Add a call-time guardrail (after the authorization check, before the other layers).
    pub fn guardrail(mut self, guardrail: Guardrail) -> Self {
        self.guardrails.push(guardrail);
        self
    }

    /// Apply the skill tool policy over `store`'s skills.
    pub fn skills(mut self, store: impl SkillStore) -> Self {
        self.skills = Some(Arc::new(store));
        self
    }

    /// Restrict which skills this agent may activate (by name).
    pub fn available_skills(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.available_skills = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Supply secret values from `store`. A tool receives secret `NAME` in its environment
    /// only while a skill declaring `NAME` is enabled, available to this agent and active,
    /// `store` supplies it and the tool's spec declares it; both stores are read again on
    /// every call (see [`crate::secret`]). Without [`AgentBuilder::skills`] no secret is
    /// ever given.
    pub fn secrets(mut self, store: impl SecretStore) -> Self {
        self.secrets = Some(Arc::new(store));
        self
    }

    /// Whether deferrable tools go into a deferred catalog behind `tool_search` (default on).
    pub fn defer_tools(mut self, on: bool) -> Self {
        self.defer = on;
        self
    }

    /// Build the deferred catalog with `make` instead of [`DeferredSetup::build`] (used only
    /// while [`defer_tools`](Self::defer_tools) is on). Assembly still fails closed: a
    /// deferrable tool the setup leaves out fails it with [`AgentError::DeferredSetup`]
    /// rather than binding the tool's schema.
    ///
    /// ```
    /// use stategraph_nodes::prelude::*;
    /// use stategraph_nodes::{AgentError, DeferredSetup};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let spec = ToolSpec::new("mcp_weather", "Weather", ToolSource::Mcp);
    /// let weather = FnTool::new(spec, |call, _cx| async move {
    ///     Ok(ToolMessage::new(call.id, "mcp_weather", "sunny").into())
    /// });
    /// let assembled = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
    ///     .tool(weather)
    ///     .deferred_setup(|_: &[ToolSpec]| None::<DeferredSetup>)
    ///     .assemble(RunContext::new("t", "u"))
    ///     .await;
    /// assert!(matches!(assembled, Err(AgentError::DeferredSetup(names)) if names == ["mcp_weather"]));
    /// # });
    /// ```
    ///
    /// [`DeferredSetup::build`]: crate::DeferredSetup::build
    /// [`AgentError::DeferredSetup`]: crate::AgentError::DeferredSetup
    pub fn deferred_setup(mut self, make: impl MakeDeferredSetup) -> Self {
        self.make_deferred = Some(Arc::new(make));
        self
    }

    /// Add a model-call layer (registration order: outermost first).
    pub fn model_layer(mut self, layer: impl ModelLayer) -> Self {
        self.model_layers.push(Arc::new(layer));
        self
    }

    /// Add a tool-call layer (registration order: outermost first).
    pub fn tool_layer(mut self, layer: impl ToolLayer) -> Self {
        self.tool_layers.push(Arc::new(layer));
        self
    }

    /// Add a tool policy, applied both to what the model sees and to every call.
    pub fn policy(mut self, policy: impl ToolPolicy) -> Self {
        self.policies.push(Arc::new(policy));
        self
    }

    /// Add an observer.
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// Stream model answers: the model node calls [`ChatModel::stream`] and emits every chunk
    /// as a custom stream event `{"chunk": ModelChunk}` while the answer arrives.
    pub fn stream_tokens(mut self, on: bool) -> Self {
        self.stream = on;
        self
    }

    /// Keep only the config-sourced tools of these groups (tools of other sources are not
    /// filtered by group). Default: every group.
    pub fn tool_groups(mut self, groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.groups = Some(groups.into_iter().map(Into::into).collect());
        self
    }

    /// Allow config tools of group `bash` (a shell on the host). Off by default: such tools
    /// are dropped from the catalog unless allowed.
    pub fn allow_host_bash(mut self, allow: bool) -> Self {
        self.host_bash = allow;
        self
    }

    /// Give the agent's tools a sandbox from `provider` ([`ToolContext::sandbox`]), acquired
    /// lazily (by the first tool that needs it) or eagerly (before the first step), as
    /// `options` say. The id a run acquired is released exactly once when the run ends
    /// (success, error or cancellation); release keeps the files.
    ///
    /// [`ToolContext::sandbox`]: crate::ToolContext::sandbox
    pub fn sandbox(mut self, provider: impl SandboxProvider, options: SandboxOptions) -> Self {
        self.sandbox = Some(Arc::new(SandboxRuntime::new(Arc::new(provider), options)));
        self
    }

    /// Use an existing sandbox runtime (a subagent opens its parent's sandbox through a
    /// runtime of its own over the same provider).
    pub(crate) fn sandbox_runtime(mut self, runtime: Arc<SandboxRuntime>) -> Self {
        self.sandbox = Some(runtime);
        self
    }

    /// Grant the agent the long-term `store`: its memory tools ([`remember`], [`recall`],
    /// [`forget`]) join its built-in tools, and their calls reach the store, always in the
    /// run's user's namespace ([`user_namespace`]). Without this grant an agent has no memory
    /// tools: the [`MemoryGrant`] admission keeps them out of its catalog and its policy
    /// refuses their calls, so a subagent reaches memory only when its spec grants it
    /// ([`SubagentSpec::memory`](crate::subagent::SubagentSpec::memory)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::store::MemoryStore;
    /// use stategraph_nodes::prelude::*;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let model = ScriptedModel::new("m", [AiMessage::text("ok")]);
    /// let agent = AgentBuilder::new(model)
    ///     .memory(Arc::new(MemoryStore::default()))
    ///     .defer_tools(false)
    ///     .assemble(RunContext::new("t1", "alice"))
    ///     .await?;
    /// assert!(agent.tool_names().contains(&"recall".to_owned()));
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// [`remember`]: crate::memory::remember
    /// [`recall`]: crate::memory::recall
    /// [`forget`]: crate::memory::forget
    /// [`user_namespace`]: crate::memory::user_namespace
    /// [`MemoryGrant`]: crate::memory::MemoryGrant
    pub fn memory(mut self, store: Arc<dyn Store>) -> Self {
        self.tools.extend(crate::memory::memory_tools());
        self.store = Some(store);
        self
    }

    /// Grant `store` without adding the memory tools (a subagent's come through its pool).
    pub(crate) fn grant_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The most model calls per run (per `Agent::invoke`; a run of the graph driven directly
    /// counts the AI messages since the last human message). The next call fails the run with
    /// [`TurnLimitReached`](crate::TurnLimitReached).
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns.max(1);
        self
    }
}
