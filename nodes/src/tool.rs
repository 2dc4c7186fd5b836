//! The [`Tool`] trait, its [`ToolSpec`], and what a call returns.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use stategraph::store::Store;
use stategraph::{Command, Interrupted, NodeContext};

use crate::context::RunContext;
use crate::message::{ToolCall, ToolMessage};
use crate::model::ToolSchema;
use crate::sandbox::{
    OpenSandbox, SandboxAccess, SandboxAccessError, SandboxOptions, SandboxProvider, SandboxRuntime,
};
use crate::secret::{SecretAccess, SecretEnv, SecretGrant};
use crate::state::ThreadState;
use crate::trace::CapabilityTrace;
use crate::BoxError;

/// Where a tool comes from. Catalog assembly takes sources in this order (config-loaded first)
/// and keeps the first tool of each name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// Declared in the agent's configuration.
    Config,
    /// Built into the runtime (`present_files`, `task`, ...).
    BuiltIn,
    /// Listed by an MCP server.
    Mcp,
    /// Any other source (an agent-to-agent bridge, a plugin).
    Other,
}

impl ToolSource {
    /// Every source, in priority order.
    pub const ALL: [ToolSource; 4] = [
        ToolSource::Config,
        ToolSource::BuiltIn,
        ToolSource::Mcp,
        ToolSource::Other,
    ];
}

impl fmt::Display for ToolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolSource::Config => "config",
            ToolSource::BuiltIn => "built-in",
            ToolSource::Mcp => "mcp",
            ToolSource::Other => "other",
        })
    }
}

/// What the runtime knows about a tool besides its code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
    /// Whether it only reads (no side effects).
    pub read_only: bool,
    /// Where it comes from.
    pub source: ToolSource,
    /// Its group (config tools are filtered by group).
    pub group: Option<String>,
    /// Whether it goes into the deferred catalog (found through `tool_search` instead of being
    /// shown up front). MCP tools are deferrable by default.
    pub deferrable: bool,
    /// The secrets the tool may receive in its environment (its manifest; see
    /// [`crate::secret`]): a secret it does not name here never reaches it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// A human-readable title (an MCP tool's `title`, or its annotations' title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool's source says about its behaviour, as it said it (hints: see
    /// [`ToolAnnotations`]; policies read [`read_only`](Self::read_only)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// JSON Schema of the tool's structured result, if its source declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
}

/// What a tool's source says about its behaviour: the hints of an MCP tool's annotations, kept
/// as the source sent them (`None`: not said).
///
/// Hints are claims, not facts: a source that is not trusted may claim anything. They never
/// decide policy by themselves; [`ToolSpec::read_only`] does, and an MCP server sets it from
/// `read_only` only when it is trusted or configured to (see
/// [`HintTrust`](crate::mcp::HintTrust) with the `mcp` feature).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolAnnotations {
    /// The tool does not modify its environment (MCP `readOnlyHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The tool may destroy or overwrite (MCP `destructiveHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Repeating a call with the same arguments has no further effect (MCP `idempotentHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// The tool reaches an open world of outside entities (MCP `openWorldHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl ToolSpec {
    /// A spec with an empty-object parameter schema, from `source`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        source: ToolSource,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
            read_only: false,
            source,
            group: None,
            deferrable: source == ToolSource::Mcp,
            secrets: Vec::new(),
            title: None,
            annotations: None,
            output_schema: None,
        }
    }

    /// Set the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Set the annotations (hints; they do not change [`read_only`](Self::read_only)).
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// Set the schema of the tool's structured result.
    pub fn output_schema(mut self, schema: serde_json::Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Set the parameter schema.
    pub fn parameters(mut self, schema: serde_json::Value) -> Self {
        self.parameters = schema;
        self
    }

    /// Set the parameter schema from a type (schemars).
    pub fn params_of<T: schemars::JsonSchema>(mut self) -> Self {
        self.parameters = schema_of::<T>();
        self
    }

    /// Mark read-only.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Set the group.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Set whether the tool is deferred.
    pub fn deferrable(mut self, yes: bool) -> Self {
        self.deferrable = yes;
        self
    }

    /// Declare the secrets the tool may receive ([`ToolSpec::secrets`]).
    pub fn secrets(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.secrets = names.into_iter().map(Into::into).collect();
        self
    }

    /// The schema a model receives.
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

/// The JSON Schema of `T`'s serde form, as a tool parameter schema.
pub fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    let mut value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
    }
    value
}

/// What a tool call produced: a tool message, or a command whose update carries one.
// A value lives for one call and is moved, never stored in bulk: boxing the command would
// cost an allocation per call for nothing.
#[allow(clippy::large_enum_variant)]
pub enum ToolOutput {
    /// A plain result, appended to `messages`.
    Message(ToolMessage),
    /// A state update (and routing). Its `messages` should carry the tool message answering the
    /// call.
    Command(Command<ThreadState>),
}

impl fmt::Debug for ToolOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolOutput::Message(m) => f.debug_tuple("Message").field(m).finish(),
            ToolOutput::Command(c) => f.debug_tuple("Command").field(c).finish(),
        }
    }
}

impl ToolOutput {
    /// The tool message this output carries (for a command: the first tool message of its
    /// update's messages).
    pub fn message(&self) -> Option<&ToolMessage> {
        match self {
            ToolOutput::Message(m) => Some(m),
            ToolOutput::Command(c) => {
                c.update_ref()
                    .and_then(|u| u.messages.as_ref())
                    .and_then(|m| {
                        m.ops().iter().find_map(|op| match op {
                            stategraph::reducers::MessageOp::Upsert(crate::Message::Tool(t)) => {
                                Some(t)
                            }
                            _ => None,
                        })
                    })
            }
        }
    }

    /// Whether the output is an error tool message.
    pub fn is_error(&self) -> bool {
        self.message().is_some_and(ToolMessage::is_error)
    }
}

impl From<ToolMessage> for ToolOutput {
    fn from(m: ToolMessage) -> Self {
        ToolOutput::Message(m)
    }
}

impl From<Command<ThreadState>> for ToolOutput {
    fn from(c: Command<ThreadState>) -> Self {
        ToolOutput::Command(c)
    }
}

/// A tool call that did not produce a result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool (or a layer) paused the run for an answer: a control-flow signal every
    /// error-handling layer must let through.
    #[error(transparent)]
    Interrupted(Interrupted),
    /// The run was cancelled.
    #[error("tool {tool:?}: cancelled")]
    Cancelled {
        /// The tool.
        tool: String,
    },
    /// The model called a tool the agent does not have.
    #[error("tool {tool:?} does not exist")]
    Unknown {
        /// The name called.
        tool: String,
    },
    /// The arguments do not fit the tool's parameters.
    #[error("tool {tool:?}: invalid arguments: {message}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// What was wrong.
        message: String,
    },
    /// The tool's handler failed.
    #[error("tool {tool:?} failed: {source}")]
    Failed {
        /// The tool.
        tool: String,
        /// Its error.
        source: BoxError,
    },
}

impl ToolError {
    /// A handler failure of `tool`. A control-flow signal inside `source` stays one: an
    /// [`Interrupted`], a boxed control-flow `ToolError`, or the engine's
    /// `RunError::Cancelled` (which becomes [`ToolError::Cancelled`]).
    pub fn failed(tool: impl Into<String>, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        let source = match source.downcast::<Interrupted>() {
            Ok(i) => return ToolError::Interrupted(*i),
            Err(source) => source,
        };
        // A control-flow signal passed on as an error stays a signal.
        let source = match source.downcast::<ToolError>() {
            Ok(e) if e.is_control_flow() => return *e,
            Ok(e) => e,
            Err(source) => source,
        };
        if matches!(
            source.downcast_ref::<stategraph::RunError>(),
            Some(stategraph::RunError::Cancelled { .. })
        ) {
            return ToolError::Cancelled { tool: tool.into() };
        }
        ToolError::Failed {
            tool: tool.into(),
            source,
        }
    }

    /// Whether this is a control-flow signal (interrupt, cancellation) that must propagate
    /// instead of becoming an error tool message.
    pub fn is_control_flow(&self) -> bool {
        matches!(
            self,
            ToolError::Interrupted(_) | ToolError::Cancelled { .. }
        )
    }

    /// Convert to the error the engine sees (an interrupt stays recognisable).
    pub fn into_box(self) -> BoxError {
        match self {
            ToolError::Interrupted(i) => Box::new(i),
            ToolError::Failed { source, .. } if source.is::<Interrupted>() => source,
            other => Box::new(other),
        }
    }
}

impl ToolCall {
    /// The call's arguments as an `A` (read in place, not copied).
    ///
    /// # Errors
    /// [`ToolError::InvalidArgs`] naming the tool and what did not fit.
    pub fn args_as<A: DeserializeOwned>(&self) -> Result<A, ToolError> {
        A::deserialize(&self.args).map_err(|e| ToolError::InvalidArgs {
            tool: self.name.clone(),
            message: e.to_string(),
        })
    }
}

/// What a tool call can see: the step's state snapshot, the run context, the task (for
/// interrupts, custom events and its idempotency key).
#[derive(Clone)]
pub struct ToolContext {
    /// The state at the start of the step (shared, not copied).
    pub state: Arc<ThreadState>,
    /// The run's context.
    pub run: Arc<RunContext>,
    /// The engine task running this call (its `task_id` is stable across re-executions).
    pub node: Option<NodeContext>,
    /// This call's access to the agent's sandbox (`None`: the agent has none).
    pub(crate) sandbox: Option<Arc<SandboxAccess>>,
    /// The calling agent's capability trace (`None` outside an agent).
    pub(crate) trace: Option<CapabilityTrace>,
    /// This call's access to secrets (`None`: the tool declares none or the agent has no
    /// secret store).
    pub(crate) secrets: Option<SecretAccess>,
    /// Where a delegation tool leaves the ledger entries of delegations it started and did not
    /// answer (`None` outside an agent's invocation).
    pub(crate) unanswered: Option<crate::subagent::ledger::Unanswered>,
    /// The long-term store the agent was granted ([`AgentBuilder::memory`]); `None`: no grant.
    ///
    /// [`AgentBuilder::memory`]: crate::AgentBuilder::memory
    pub(crate) store: Option<Arc<dyn Store>>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("run", &self.run)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// The graph run's context ([`RunConfig::context`](stategraph::RunConfig::context)) as a
    /// `T`, as LangGraph's `ToolRuntime.context` gives it: the same value the run's nodes see
    /// (a subagent's tools see their lead's run's).
    ///
    /// ```
    /// use stategraph_nodes::{RunContext, ThreadState, ToolContext};
    ///
    /// let cx = ToolContext::detached(ThreadState::default(), RunContext::default());
    /// assert!(cx.context::<String>().is_err(), "outside a graph run there is none");
    /// ```
    ///
    /// # Errors
    /// [`ContextError::Missing`](stategraph::ContextError::Missing) outside a graph run or
    /// when the run has none; [`ContextError::WrongType`](stategraph::ContextError::WrongType)
    /// when it is not a `T`.
    pub fn context<T: std::any::Any>(&self) -> Result<&T, stategraph::ContextError> {
        match &self.node {
            Some(node) => node.context::<T>(),
            None => Err(stategraph::ContextError::Missing {
                expected: std::any::type_name::<T>(),
            }),
        }
    }

    /// A context outside any graph run (for unit tests of tools and layers).
    pub fn detached(state: ThreadState, run: RunContext) -> Self {
        ToolContext {
            state: Arc::new(state),
            run: Arc::new(run),
            node: None,
            sandbox: None,
            trace: None,
            secrets: None,
            unanswered: None,
            store: None,
        }
    }

    /// The same context granted `store` (for unit tests of tools; an agent built with
    /// [`AgentBuilder::memory`](crate::AgentBuilder::memory) gives every call its grant).
    pub fn with_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The long-term store this call may use: the agent's grant, `None` without one (a
    /// subagent whose spec does not grant memory has none, whatever its parent has).
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The same context with access to sandboxes of `provider` (for unit tests of tools; an
    /// agent built with [`AgentBuilder::sandbox`](crate::AgentBuilder::sandbox) gives every
    /// call its access).
    pub fn with_sandbox(
        mut self,
        provider: Arc<dyn SandboxProvider>,
        options: SandboxOptions,
    ) -> Self {
        let runtime = Arc::new(SandboxRuntime::new(provider, options));
        self.sandbox = Some(Arc::new(SandboxAccess::new(runtime)));
        self
    }

    /// The calling agent's capability trace (a delegating tool records its child's entries
    /// there, under its call).
    pub fn trace(&self) -> Option<&CapabilityTrace> {
        self.trace.as_ref()
    }

    /// The same context giving the tool `tool` describes the secrets `grant` allows (for unit
    /// tests of tools; an agent built with
    /// [`AgentBuilder::secrets`](crate::AgentBuilder::secrets) gives every call of a tool
    /// declaring secrets its access).
    pub fn with_secrets(mut self, grant: Arc<SecretGrant>, tool: &ToolSpec) -> Self {
        self.secrets = Some(SecretAccess::new(grant, tool));
        self
    }

    /// The secrets this call receives, read now from the live skill and secret stores (empty
    /// when the tool declares none or the agent has no secret store). Read it when the value
    /// is needed, not earlier: a secret revoked before that moment is not in it.
    pub fn secret_env(&self) -> SecretEnv {
        match &self.secrets {
            Some(access) => access.env(&self.state, &self.run),
            None => SecretEnv::default(),
        }
    }

    /// This call's sandbox access, if the agent has a sandbox.
    pub fn sandbox_access(&self) -> Option<&Arc<SandboxAccess>> {
        self.sandbox.as_ref()
    }

    /// The thread's sandbox: the one whose id the state holds, or else acquired now for the
    /// run's user and thread (the id then reaches the state through this call's update).
    /// Only a call that passed every layer runs its handler, so only an authorized call can
    /// acquire a sandbox.
    ///
    /// # Errors
    /// [`SandboxAccessError`]: no sandbox configured, no thread, a provider failure.
    pub async fn sandbox(&self) -> Result<OpenSandbox, SandboxAccessError> {
        match &self.sandbox {
            Some(access) => access.open(&self.state, &self.run).await,
            None => Err(SandboxAccessError::NotConfigured),
        }
    }

    /// Pause the run and ask for a value (see [`NodeContext::interrupt`]).
    ///
    /// # Errors
    /// The interrupt signal (propagate it with `?`), or a resume value that is not a `T`, or
    /// no engine task (a detached context).
    pub fn interrupt<T: DeserializeOwned>(&self, value: impl Serialize) -> Result<T, BoxError> {
        match &self.node {
            Some(node) => node.interrupt(value),
            None => Err("interrupt needs a running graph (the tool context is detached)".into()),
        }
    }
}

/// A tool: a spec the model sees, and a handler the runtime calls.
pub trait Tool: Send + Sync + 'static {
    /// The tool's spec.
    fn spec(&self) -> &ToolSpec;

    /// Run one call.
    ///
    /// # Errors
    /// A [`ToolError`]; the tool node turns a failure into an error tool message and lets
    /// control-flow signals through.
    fn call(
        &self,
        call: ToolCall,
        cx: ToolContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>>;
}

type Handler = dyn Fn(ToolCall, ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
    + Send
    + Sync;

/// A tool made from a spec and an async function.
///
/// ```
/// use stategraph_nodes::{FnTool, ToolSource, ToolSpec, ToolMessage};
///
/// let echo = FnTool::new(
///     ToolSpec::new("echo", "Repeat the text", ToolSource::Config).read_only(true),
///     |call, _cx| async move { Ok(ToolMessage::new(&call.id, "echo", call.args.to_string()).into()) },
/// );
/// # let _ = echo;
/// ```
pub struct FnTool {
    spec: ToolSpec,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl FnTool {
    /// A tool running `handler` for each call.
    pub fn new<F, Fut>(spec: ToolSpec, handler: F) -> Self
    where
        F: Fn(ToolCall, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        FnTool {
            spec,
            handler: Arc::new(move |call, cx| Box::pin(handler(call, cx))),
        }
    }

    /// A tool whose arguments are a typed `A` (its JSON Schema comes from schemars) and whose
    /// handler returns the text of the tool message.
    pub fn typed<A, F, Fut>(spec: ToolSpec, handler: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, BoxError>> + Send + 'static,
    {
        let spec = spec.params_of::<A>();
        let handler = Arc::new(handler);
        let name = spec.name.clone();
        FnTool::new(spec, move |call: ToolCall, cx| {
            let handler = Arc::clone(&handler);
            let name = name.clone();
            async move {
                let args: A = call.args_as()?;
                let text = handler(args, cx)
                    .await
                    .map_err(|e| ToolError::failed(name.clone(), e))?;
                Ok(ToolOutput::Message(ToolMessage::new(call.id, name, text)))
            }
        })
    }
}

impl Tool for FnTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        call: ToolCall,
        cx: ToolContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        (self.handler)(call, cx)
    }
}
