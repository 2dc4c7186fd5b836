//! The agent builder: a model node, a tool node and the routing between them, over
//! [`ThreadState`], assembled for one run (catalog → authorization → deferred catalog → policy
//! layers) and recorded in a [`CapabilityTrace`].

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use stategraph::reducers::MessagesUpdate;
use stategraph::{
    BoxError, Command, CompileError, CompiledGraph, Input, NodeContext, RunConfig, RunError,
    RunOutcome, Send, StateGraph, END, START,
};

use crate::authz::Authorization;
use crate::catalog::{Catalog, ToolProvider};
use crate::context::RunContext;
use crate::deferred::{DeferredSetup, TOOL_SEARCH};
use crate::guardrail::{AuthorizationGuardrail, Guardrail};
use crate::message::{Message, ToolCall};
use crate::middleware::{
    ModelCall, ModelLayer, ModelNext, Observer, PolicyLayer, ToolErrorHandling, ToolInvocation,
    ToolLayer, ToolMap, ToolNext, ToolPolicy,
};
use crate::model::{ChatModel, ModelRequest};
use crate::skill::{SkillStore, SkillToolPolicy};
use crate::state::{ThreadState, ThreadStateUpdate};
use crate::tool::{Tool, ToolContext, ToolOutput, ToolSpec};
use crate::trace::{CapabilityTrace, Stage, TraceEntry, Verdict};

/// The model node's name.
pub const MODEL_NODE: &str = "model";
/// The tool node's name.
pub const TOOL_NODE: &str = "tools";
/// The node running `before_agent` observers (present when the agent has observers).
pub const BEFORE_AGENT_NODE: &str = "before_agent";
/// The node running `after_agent` observers (present when the agent has observers).
pub const AFTER_AGENT_NODE: &str = "after_agent";

/// Building an agent failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent's graph did not compile (a bug of this crate if it ever happens).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// Deferral is enabled and deferrable tools exist, but no deferred setup could be built:
    /// fail closed rather than bind their schemas.
    #[error("deferred tools {0:?} exist but the deferred catalog could not be built")]
    DeferredSetup(Vec<String>),
}

/// Configures an agent; [`AgentBuilder::assemble`] builds it for one run.
pub struct AgentBuilder {
    model: Arc<dyn ChatModel>,
    system_prompt: Option<String>,
    tools: Vec<Arc<dyn Tool>>,
    providers: Vec<Arc<dyn ToolProvider>>,
    authorization: Option<Authorization>,
    guardrails: Vec<Guardrail>,
    skills: Option<Arc<dyn SkillStore>>,
    available_skills: Option<Vec<String>>,
    defer: bool,
    model_layers: Vec<Arc<dyn ModelLayer>>,
    tool_layers: Vec<Arc<dyn ToolLayer>>,
    policies: Vec<Arc<dyn ToolPolicy>>,
    observers: Vec<Arc<dyn Observer>>,
    max_turns: usize,
    stream: bool,
    groups: Option<Vec<String>>,
    host_bash: bool,
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
            defer: true,
            model_layers: Vec::new(),
            tool_layers: Vec::new(),
            policies: Vec::new(),
            observers: Vec::new(),
            max_turns: 50,
            stream: false,
            groups: None,
            host_bash: false,
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

    /// Whether deferrable tools go into a deferred catalog behind `tool_search` (default on).
    pub fn defer_tools(mut self, on: bool) -> Self {
        self.defer = on;
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

    /// The most model turns per run (the run's recursion limit is derived from it).
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns.max(1);
        self
    }

    /// Assemble the agent for one run: Available (catalog from every source, first name
    /// wins), Authorized (the principal of `run` filters it), the deferred catalog over what
    /// remains, and the layer chains. Every step is recorded in the agent's trace.
    ///
    /// # Errors
    /// [`AgentError`] if the deferred catalog cannot be built or the graph does not compile.
    pub async fn assemble(self, run: RunContext) -> Result<Agent, AgentError> {
        let trace = CapabilityTrace::new();
        let (host_bash, groups, defer) = (self.host_bash, self.groups.clone(), self.defer);
        let admit = move |spec: &ToolSpec| -> Result<(), (String, String)> {
            let config = spec.source == crate::ToolSource::Config;
            if defer && spec.name == TOOL_SEARCH {
                return Err((
                    "catalog".to_string(),
                    "reserved name: the agent's own tool search".to_string(),
                ));
            }
            if !host_bash && config && spec.group.as_deref() == Some("bash") {
                return Err((
                    "host_bash".to_string(),
                    "host bash is not allowed for this agent".to_string(),
                ));
            }
            if let Some(groups) = &groups {
                if config && !spec.group.as_ref().is_some_and(|g| groups.contains(g)) {
                    return Err((
                        "tool_groups".to_string(),
                        format!("group {:?} is not among {groups:?}", spec.group),
                    ));
                }
            }
            Ok(())
        };
        let catalog = Catalog::assemble_with(self.tools, &self.providers, &admit).await;
        for f in &catalog.filtered {
            trace.remove(&f.name, Stage::Available, &f.by, f.reason.clone());
        }
        for t in &catalog.tools {
            trace.pass(&t.spec().name, Stage::Available);
        }
        for d in &catalog.skipped {
            trace.remove(
                &d.name,
                Stage::Available,
                "catalog",
                format!(
                    "duplicate name: the {} tool was kept, this {} one skipped",
                    d.kept, d.skipped
                ),
            );
        }

        // Authorized.
        let mut tools: Vec<Arc<dyn Tool>> = catalog.tools.clone();
        if let Some(authz) = &self.authorization {
            let principal = run.principal(&authz.default_role);
            let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
            let (allowed, denied) = authz.filter(&principal, &names).await;
            for (name, reason) in &denied {
                trace.remove(name, Stage::Authorized, "authorization", reason.clone());
            }
            let allowed: std::collections::HashSet<String> = allowed.into_iter().collect();
            tools.retain(|t| allowed.contains(&t.spec().name));
        }
        for t in &tools {
            trace.pass(&t.spec().name, Stage::Authorized);
        }

        // Deferred catalog over the authorized tools only.
        let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec().clone()).collect();
        let deferred = if self.defer {
            let setup = DeferredSetup::build(&specs);
            if setup.is_none() && specs.iter().any(|s| s.deferrable) {
                return Err(AgentError::DeferredSetup(
                    specs
                        .iter()
                        .filter(|s| s.deferrable)
                        .map(|s| s.name.clone())
                        .collect(),
                ));
            }
            setup
        } else {
            None
        };
        if let Some(setup) = &deferred {
            let search = setup.tool_search();
            trace.pass(TOOL_SEARCH, Stage::Available);
            trace.pass(TOOL_SEARCH, Stage::Authorized);
            tools.push(search);
        }

        let spec_map: Arc<HashMap<String, ToolSpec>> = Arc::new(
            tools
                .iter()
                .map(|t| (t.spec().name.clone(), t.spec().clone()))
                .collect(),
        );
        let mut policies: Vec<Arc<dyn ToolPolicy>> = Vec::new();
        if let Some(store) = &self.skills {
            // Only the runtime's own tools get the framework exemption: a server tool that
            // happens to be named `read_file` does not.
            let trusted = tools
                .iter()
                .map(|t| t.spec())
                .filter(|s| s.source == crate::ToolSource::BuiltIn)
                .map(|s| s.name.clone());
            policies.push(Arc::new(
                SkillToolPolicy::new(Arc::clone(store), self.available_skills.clone())
                    .trusted_framework_tools(trusted),
            ));
        }
        if let Some(setup) = &deferred {
            policies.push(Arc::new(setup.filter()));
        }
        policies.extend(self.policies);

        // Model chain: policies, then the user's layers, then the model.
        let mut model_layers: Vec<Arc<dyn ModelLayer>> = policies
            .iter()
            .map(|p| {
                Arc::new(PolicyLayer::new(Arc::clone(p), Arc::clone(&spec_map)))
                    as Arc<dyn ModelLayer>
            })
            .collect();
        model_layers.extend(self.model_layers);

        // Tool chain: authorization re-check, guardrails, error handling, policies, the
        // user's layers, then the handler.
        let mut tool_layers: Vec<Arc<dyn ToolLayer>> = Vec::new();
        if let Some(authz) = &self.authorization {
            let infra = deferred.as_ref().map(|_| TOOL_SEARCH.to_string());
            tool_layers.push(Arc::new(
                Guardrail::new(AuthorizationGuardrail::new(authz.clone(), infra)).fail(authz.fail),
            ));
        }
        tool_layers.extend(
            self.guardrails
                .into_iter()
                .map(|g| Arc::new(g) as Arc<dyn ToolLayer>),
        );
        tool_layers.push(Arc::new(ToolErrorHandling));
        tool_layers.extend(policies.iter().map(|p| {
            Arc::new(PolicyLayer::new(Arc::clone(p), Arc::clone(&spec_map))) as Arc<dyn ToolLayer>
        }));
        tool_layers.extend(self.tool_layers);

        let mut system = self.system_prompt.unwrap_or_default();
        if let Some(setup) = &deferred {
            let section = setup.prompt_section();
            if !section.is_empty() {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&section);
            }
        }

        let core = Arc::new(AgentCore {
            model: self.model,
            system: (!system.is_empty()).then_some(system),
            schemas: tools.iter().map(|t| t.spec().schema()).collect(),
            tools: tools
                .iter()
                .map(|t| (t.spec().name.clone(), Arc::clone(t)))
                .collect(),
            model_layers,
            tool_layers,
            observers: self.observers,
            run: Arc::new(run),
            trace: trace.clone(),
            model_calls: AtomicU32::new(0),
            stream: self.stream,
        });
        let graph = build_graph(&core)?;
        Ok(Agent {
            graph,
            core,
            catalog,
            deferred,
            max_turns: self.max_turns,
        })
    }
}

/// What the agent's nodes share.
struct AgentCore {
    model: Arc<dyn ChatModel>,
    system: Option<String>,
    schemas: Vec<crate::model::ToolSchema>,
    tools: ToolMap,
    model_layers: Vec<Arc<dyn ModelLayer>>,
    tool_layers: Vec<Arc<dyn ToolLayer>>,
    observers: Vec<Arc<dyn Observer>>,
    run: Arc<RunContext>,
    trace: CapabilityTrace,
    model_calls: AtomicU32,
    stream: bool,
}

impl AgentCore {
    async fn model_step(
        &self,
        state: Arc<ThreadState>,
        ctx: NodeContext,
    ) -> Result<Command<ThreadState>, BoxError> {
        // The thread's list, shared (not copied) with the request.
        let messages = state.messages.clone();
        let number = self.model_calls.fetch_add(1, Ordering::Relaxed) + 1;
        let call = ModelCall {
            request: ModelRequest {
                system: self.system.clone(),
                messages,
                tools: self.schemas.clone(),
            },
            state: Arc::clone(&state),
            run: Arc::clone(&self.run),
            trace: self.trace.clone(),
            number,
            node: Some(ctx.clone()),
            stream: self.stream,
        };
        let before = self.trace.len();
        let next = ModelNext::new(&self.model_layers, &self.observers, self.model.as_ref());
        let response = next.run(call).await.map_err(|e| match e {
            crate::ModelError::Control(signal) => signal,
            // An interrupt a layer raised as its own error is still a signal, not a failure.
            crate::ModelError::Other(e) if e.is::<stategraph::Interrupted>() => e,
            other => Box::new(other) as BoxError,
        })?;
        let mine = self
            .trace
            .entries_since(before, |e| e.model_call == Some(number));
        emit_trace(&ctx, mine).await;
        let ai = response.message;
        let calls = ai.tool_calls.clone();
        let mut cmd = Command::new()
            .update(ThreadState::update().messages(MessagesUpdate::from(Message::Ai(ai))));
        if calls.is_empty() {
            cmd = cmd.goto(if self.observers.is_empty() {
                END
            } else {
                AFTER_AGENT_NODE
            });
        } else {
            for call in calls {
                cmd = cmd.goto(Send::new(TOOL_NODE, call));
            }
        }
        Ok(cmd)
    }

    async fn tool_step(
        &self,
        state: Arc<ThreadState>,
        ctx: NodeContext,
    ) -> Result<Command<ThreadState>, BoxError> {
        let call: ToolCall = ctx.arg()?;
        let invocation = ToolInvocation::new(
            call.clone(),
            ToolContext {
                state,
                run: Arc::clone(&self.run),
                node: Some(ctx.clone()),
            },
            self.trace.clone(),
        );
        let before = self.trace.len();
        let output = ToolNext::new(&self.tool_layers, &self.tools)
            .run(invocation)
            .await
            .map_err(crate::ToolError::into_box)?;
        let verdict = match output.message() {
            Some(m) if m.is_error() => Verdict::Failed {
                reason: m.content.clone(),
            },
            _ => Verdict::Passed,
        };
        // This call's entries only: sibling calls of the step record concurrently.
        let own =
            |e: &TraceEntry| e.call_id.as_deref() == Some(call.id.as_str()) && e.tool == call.name;
        // Only a call whose handler ran (or failed) returns a result; a denied call's error
        // message is the layer's, not the tool's.
        if !self
            .trace
            .entries_since(before, |e| {
                own(e) && e.stage == Stage::Executed && e.passed()
            })
            .is_empty()
        {
            self.trace
                .record(TraceEntry::new(&call.name, Stage::Returned, verdict).for_call(&call.id));
        }
        emit_trace(&ctx, self.trace.entries_since(before, own)).await;
        Ok(match output {
            ToolOutput::Message(m) => Command::new()
                .update(ThreadState::update().messages(MessagesUpdate::from(Message::Tool(m)))),
            ToolOutput::Command(c) => c,
        })
    }
}

/// Emit trace entries as custom stream events (`{"capability": entry}`).
async fn emit_trace(ctx: &NodeContext, entries: Vec<TraceEntry>) {
    for entry in entries {
        ctx.emit(serde_json::json!({ "capability": entry })).await;
    }
}

fn build_graph(core: &Arc<AgentCore>) -> Result<CompiledGraph<ThreadState>, CompileError> {
    let m = Arc::clone(core);
    let t = Arc::clone(core);
    let model_targets: Vec<&str> = if core.observers.is_empty() {
        vec![TOOL_NODE, END]
    } else {
        vec![TOOL_NODE, AFTER_AGENT_NODE]
    };
    let mut g = StateGraph::<ThreadState>::new()
        .add_node_with(
            MODEL_NODE,
            move |s: Arc<ThreadState>, ctx: NodeContext| {
                let core = Arc::clone(&m);
                async move { core.model_step(s, ctx).await }
            },
            stategraph::NodeOptions::new().destinations(model_targets),
        )
        .add_node(TOOL_NODE, move |s: Arc<ThreadState>, ctx: NodeContext| {
            let core = Arc::clone(&t);
            async move { core.tool_step(s, ctx).await }
        })
        .add_edge(TOOL_NODE, MODEL_NODE);
    if core.observers.is_empty() {
        g = g.add_edge(START, MODEL_NODE);
    } else {
        let b = Arc::clone(core);
        let a = Arc::clone(core);
        g = g
            .add_node(
                BEFORE_AGENT_NODE,
                move |s: Arc<ThreadState>, _ctx: NodeContext| {
                    let core = Arc::clone(&b);
                    async move {
                        for o in &core.observers {
                            o.before_agent(&s, &core.run);
                        }
                        Ok::<_, BoxError>(ThreadStateUpdate::default())
                    }
                },
            )
            .add_node(
                AFTER_AGENT_NODE,
                move |s: Arc<ThreadState>, _ctx: NodeContext| {
                    let core = Arc::clone(&a);
                    async move {
                        for o in core.observers.iter().rev() {
                            o.after_agent(&s, &core.run);
                        }
                        Ok::<_, BoxError>(ThreadStateUpdate::default())
                    }
                },
            )
            .add_edge(START, BEFORE_AGENT_NODE)
            .add_edge(BEFORE_AGENT_NODE, MODEL_NODE)
            .add_edge(AFTER_AGENT_NODE, END);
    }
    g.compile()
}

/// An agent assembled for one run: its graph, catalog and capability trace.
pub struct Agent {
    graph: CompiledGraph<ThreadState>,
    core: Arc<AgentCore>,
    catalog: Catalog,
    deferred: Option<DeferredSetup>,
    max_turns: usize,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("catalog", &self.catalog)
            .field("tools", &self.tool_names())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Start configuring an agent around `model`.
    pub fn builder(model: impl ChatModel) -> AgentBuilder {
        AgentBuilder::new(model)
    }

    /// The compiled graph (attach a checkpointer with
    /// [`CompiledGraph::with_checkpointer`], or embed it as a subgraph).
    pub fn graph(&self) -> &CompiledGraph<ThreadState> {
        &self.graph
    }

    /// The candidate catalog (before authorization), with skipped duplicates and failed sources.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The deferred catalog, if the agent has one.
    pub fn deferred(&self) -> Option<&DeferredSetup> {
        self.deferred.as_ref()
    }

    /// The names of the tools the agent can execute (authorized, plus `tool_search`).
    pub fn tool_names(&self) -> Vec<String> {
        self.core.schemas.iter().map(|s| s.name.clone()).collect()
    }

    /// The run's capability trace.
    pub fn trace(&self) -> &CapabilityTrace {
        &self.core.trace
    }

    /// The run context the agent was assembled for.
    pub fn run_context(&self) -> &RunContext {
        &self.core.run
    }

    /// A run configuration whose recursion limit allows `max_turns` model turns.
    pub fn run_config(&self) -> RunConfig {
        RunConfig::new().recursion_limit(self.max_turns.saturating_mul(2).saturating_add(2))
    }

    /// Run the agent on `input` with `config`.
    ///
    /// # Errors
    /// The engine's [`RunError`]: a model failure, a reducer conflict, the recursion limit.
    pub async fn invoke(
        &self,
        input: impl Into<Input<ThreadState>>,
        config: &RunConfig,
    ) -> Result<RunOutcome<ThreadState>, RunError> {
        self.graph.invoke(input, config).await
    }

    /// Run the agent on one human message, with [`Agent::run_config`] (and the context's
    /// thread, if any).
    ///
    /// # Errors
    /// As [`Agent::invoke`].
    pub async fn ask(&self, text: impl Into<String>) -> Result<RunOutcome<ThreadState>, RunError> {
        let mut config = self.run_config();
        if let Some(thread) = &self.core.run.thread_id {
            config = config.thread(thread.clone());
        }
        self.invoke(ThreadState::human_input(text), &config).await
    }
}
