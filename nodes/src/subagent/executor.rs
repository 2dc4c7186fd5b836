//! The executor: one delegation as a new agent graph with no checkpointer, run from a fresh
//! state under the parent's identity and sandbox, its events forwarded under the parent's tool
//! call, its end normalised to one [`SubagentOutcome`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use stategraph::reducers::MessagesUpdate;
use stategraph::{CancelToken, EventKind, NodeContext, RunError, RunOutcome, StreamMode};

use crate::agent::TurnLimitReached;
use crate::agent::{Agent, AgentBuilder, AgentError};
use crate::context::RunContext;
use crate::message::{Message, ToolMessage};
use crate::sandbox::{InvocationLease, SandboxRuntime};
use crate::state::{ThreadState, ThreadStateUpdate};
use crate::tool::ToolContext;
use crate::trace::TraceEntry;

use super::capacity::SubagentPermit;
use super::ledger::LedgerKey;
use super::pool::ResolvedPool;
use super::spec::{ModelChoice, SubagentSpec};
use super::status::{StatusCell, SubagentOutcome, SubagentStatus};
use super::Subagents;

/// The key of the custom stream events a delegation emits on the parent's stream:
/// `{"subagent": {"call_id", "subagent_type", "event", ...}}`.
pub const SUBAGENT_EVENT: &str = "subagent";

/// How often a running delegation looks at its parent's cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// What the delegating model asks for: the `task` tool's arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DelegationRequest {
    /// A short label (3 to 5 words).
    pub description: String,
    /// The whole task, with every detail the subagent needs: it sees nothing else.
    pub prompt: String,
    /// Which subagent type runs it.
    pub subagent_type: String,
}

/// What one delegation did: its outcome, the pool its child got, the child's own trace and
/// the time spent assembling (compile) and running.
#[derive(Clone, Debug, Serialize)]
pub struct DelegationReport {
    /// The delegation's id (the lead's call id; `<call>/<i>` inside `multi_task`).
    pub id: String,
    /// What was asked.
    pub request: DelegationRequest,
    /// How it ended.
    pub outcome: SubagentOutcome,
    /// The child's pool (`None`: no child was built — unknown type, no capacity).
    pub pool: Option<ResolvedPool>,
    /// The child's capability trace, Available → Returned.
    pub trace: Vec<TraceEntry>,
    /// The child's model.
    pub model: Option<String>,
    /// Assembling and compiling the child's graph.
    pub compile_time: Duration,
    /// Running it.
    pub run_time: Duration,
}

impl DelegationReport {
    fn early(id: &str, request: DelegationRequest, outcome: SubagentOutcome) -> Self {
        DelegationReport {
            id: id.to_owned(),
            request,
            outcome,
            pool: None,
            trace: Vec::new(),
            model: None,
            compile_time: Duration::ZERO,
            run_time: Duration::ZERO,
        }
    }

    /// The report of a delegation whose call was dropped before it ended: cancelled with the
    /// lead (its child, if one was started, is told to stop).
    pub(crate) fn abandoned(id: &str, request: DelegationRequest) -> Self {
        Self::early(id, request, SubagentOutcome::cancelled())
    }

    /// The tool message answering `call_id` of `tool`: the status contract's text, an error
    /// status unless completed, and the `subagent_*` metadata.
    pub fn tool_message(&self, call_id: &str, tool: &str) -> ToolMessage {
        let content = self.outcome.content();
        let mut m = if self.outcome.status == SubagentStatus::Completed {
            ToolMessage::new(call_id, tool, content)
        } else {
            ToolMessage::error(call_id, tool, content)
        };
        m.metadata = self.outcome.metadata();
        m.metadata
            .insert("subagent_id".into(), self.id.clone().into());
        if let Some(model) = &self.model {
            m.metadata
                .insert("subagent_model_name".into(), model.clone().into());
        }
        m
    }

    /// The ledger key of this delegation for run `run_id`.
    pub fn ledger_key(&self, run_id: Option<String>) -> LedgerKey {
        LedgerKey {
            id: self.id.clone(),
            run_id,
            description: self.request.description.clone(),
            subagent_type: self.request.subagent_type.clone(),
        }
    }
}

impl Subagents {
    /// Run one delegation with id `id` for the parent call whose context is `parent`: resolve
    /// the type, take a global slot (bounded wait), resolve the pool, build the child, run it.
    /// Never fails: every end is an outcome.
    ///
    /// The child's agent holds the slot for as long as it lives. Dropping this future (the
    /// lead was cancelled, or its step failed) cancels the child's run, which stops on its own
    /// task; the slot is released when it has, not when this future is dropped.
    pub async fn delegate(
        &self,
        id: &str,
        request: DelegationRequest,
        parent: &ToolContext,
    ) -> DelegationReport {
        let Some(spec) = self.spec(&request.subagent_type).cloned() else {
            let outcome = SubagentOutcome::failed(format!(
                "Unknown subagent type '{}'. Available: {}",
                request.subagent_type,
                self.type_names().join(", ")
            ));
            return DelegationReport::early(id, request, outcome);
        };
        if spec.needs_host_bash && !self.host_bash {
            let outcome = SubagentOutcome::failed(format!(
                "Subagent type '{}' is disabled: it runs host shell commands, and this \
                 runtime does not allow host bash",
                spec.name
            ));
            return DelegationReport::early(id, request, outcome);
        }
        let permit = match self.limiter.acquire().await {
            Ok(p) => p,
            Err(e) => {
                return DelegationReport::early(id, request, SubagentOutcome::failed(e.to_string()))
            }
        };
        let pool = self.pool_for(&spec);
        let started = Instant::now();
        let built = self
            .build_child(&spec, &pool, child_context(&parent.run))
            .await;
        let compile_time = started.elapsed();
        let (agent, sandbox) = match built {
            Ok(b) => b,
            Err(e) => {
                let mut report =
                    DelegationReport::early(id, request, SubagentOutcome::failed(e.to_string()));
                report.pool = Some(pool);
                return report;
            }
        };
        let events = Forward {
            node: parent.node.clone(),
            id: id.to_owned(),
            subagent_type: spec.name.clone(),
        };
        events.assembly(&agent).await;
        let model = agent_model(&spec, self);
        let child = Child {
            agent,
            sandbox,
            spec,
            events,
        };
        let input = child_input(&request.prompt, &parent.state);
        let ended = child.run_holding(permit, input).await;
        DelegationReport {
            id: id.to_owned(),
            request,
            outcome: ended.outcome,
            pool: Some(pool),
            trace: ended.trace,
            model: Some(model),
            compile_time,
            run_time: ended.run_time,
        }
    }

    /// A new agent for `spec` over `pool`: its own catalog, deferred registry and trace; no
    /// checkpointer (none is ever attached to a child).
    async fn build_child(
        &self,
        spec: &SubagentSpec,
        pool: &ResolvedPool,
        run: RunContext,
    ) -> Result<(Agent, Option<Arc<SandboxRuntime>>), AgentError> {
        let model = match &spec.model {
            ModelChoice::Inherit => Arc::clone(&self.model),
            ModelChoice::Model(m) => Arc::clone(m),
        };
        let mut builder = AgentBuilder::with_model(model)
            .system_prompt(spec.prompt.clone())
            .max_turns(spec.max_turns)
            .defer_tools(self.defer)
            .allow_host_bash(self.host_bash);
        for tool in pool.tools() {
            builder = builder.tool_arc(Arc::clone(tool));
        }
        if let Some(store) = &self.skills {
            builder = builder
                .skills(Arc::clone(store))
                .available_skills(spec.capabilities.skills.clone());
        }
        if let Some(authz) = &self.authorization {
            builder = builder.authorization(authz.clone());
        }
        // The memory tools are in the pool when the spec grants memory; the store goes with
        // them (without a runtime store they are not admitted).
        if let (true, Some(store)) = (spec.capabilities.memory, &self.store) {
            builder = builder.grant_store(Arc::clone(store));
        }
        let sandbox = self.sandbox.as_ref().map(|(provider, options)| {
            Arc::new(SandboxRuntime::new(Arc::clone(provider), options.clone()))
        });
        if let Some(rt) = &sandbox {
            builder = builder.sandbox_runtime(Arc::clone(rt));
        }
        Ok((builder.assemble(run).await?, sandbox))
    }
}

fn agent_model(spec: &SubagentSpec, subagents: &Subagents) -> String {
    match &spec.model {
        ModelChoice::Inherit => subagents.model.name().to_owned(),
        ModelChoice::Model(m) => m.name().to_owned(),
    }
}

/// The child's identity: the parent's user and run, the parent's thread id as context only
/// (the child's run has no thread and no checkpointer), marked as a subagent.
fn child_context(parent: &RunContext) -> RunContext {
    RunContext {
        is_subagent: true,
        slash_skill: None,
        ..parent.clone()
    }
}

/// The child's fresh state: the task prompt as its only message, the parent's sandbox and
/// thread data. (Its one system prompt is the agent's, sent first on every model call.)
fn child_input(prompt: &str, parent: &ThreadState) -> ThreadStateUpdate {
    let mut input = ThreadState::update().messages(MessagesUpdate::from(Message::human(prompt)));
    if let Some(sandbox) = &parent.sandbox {
        input = input.sandbox(sandbox.clone());
    }
    if let Some(data) = &parent.thread_data {
        input = input.thread_data(Some(data.clone()));
    }
    input
}

/// A built child and what its run needs.
struct Child {
    agent: Agent,
    sandbox: Option<Arc<SandboxRuntime>>,
    spec: Arc<SubagentSpec>,
    events: Forward,
}

/// How a child's run ended.
struct ChildResult {
    outcome: SubagentOutcome,
    run_time: Duration,
    trace: Vec<TraceEntry>,
}

impl Child {
    /// Runs the child, which holds `permit` (the global slot) for as long as its agent lives:
    /// past this call when the delegation is dropped early (the lead was cancelled, or its
    /// step failed), until the child's run — on the task its stream runs on, which the drop
    /// cancels — has stopped and let go of its graph.
    async fn run_holding(self, permit: SubagentPermit, input: ThreadStateUpdate) -> ChildResult {
        self.agent.hold_slot(permit);
        let started = Instant::now();
        let outcome = run_child(&self, input).await;
        let run_time = started.elapsed();
        self.events.ended(&outcome).await;
        ChildResult {
            outcome,
            run_time,
            trace: self.agent.trace().entries(),
        }
    }
}

/// Run the child to its end: its events forwarded, its wall-clock limit and the parent's
/// cancellation watched; the first terminal status wins.
async fn run_child(child: &Child, input: ThreadStateUpdate) -> SubagentOutcome {
    let Child {
        agent,
        sandbox,
        spec,
        events,
    } = child;
    let token = CancelToken::new();
    // The child's model calls are the lead's run's too: each counts there as it is made, so
    // none is lost when the child fails, times out, or is dropped with a cancelled lead.
    let mut config = agent.run_config().cancel_token(token.clone());
    for meter in events.node.iter().flat_map(NodeContext::usage_meters) {
        config = config.usage_meter(meter);
    }
    // The child runs for the lead's caller: it sees the lead's run context (docs/decisions/0095).
    if let Some(lead) = &events.node {
        config = config.inherit_context(lead);
    }
    // The child's tokens stream when its lead passes them on, under the lead task's namespace.
    let messages = events
        .node
        .as_ref()
        .is_some_and(NodeContext::forwards_messages);
    let mode = StreamMode {
        values: true,
        custom: true,
        messages,
        ..StreamMode::none()
    };
    let lease = InvocationLease::begin(sandbox.as_ref());
    let mut stream = agent.graph().stream(input, &config, mode);
    let cell = StatusCell::new();
    let deadline = tokio::time::sleep(spec.timeout);
    tokio::pin!(deadline);
    let mut poll = tokio::time::interval(CANCEL_POLL);
    let mut last_text: Option<String> = None;
    let mut stopping = false;
    loop {
        tokio::select! {
            event = stream.next() => match event {
                Some(event) => match event.kind {
                    EventKind::Values(v) => {
                        if let Some(s) = v.get::<ThreadState>() {
                            last_text = s.last_ai().map(|a| a.content.clone());
                        }
                    }
                    EventKind::Custom { node, payload } => events.child_event(&node, payload).await,
                    EventKind::Messages { .. } => {
                        if let Some(lead) = &events.node {
                            lead.forward_message(event).await;
                        }
                    }
                    _ => {}
                },
                None => break,
            },
            () = &mut deadline, if !stopping => {
                cell.settle(SubagentOutcome::timed_out(spec.timeout.as_secs()));
                token.cancel();
                stopping = true;
            }
            _ = poll.tick(), if !stopping && events.node.is_some() => {
                if events.node.as_ref().is_some_and(NodeContext::is_cancelled) {
                    cell.settle(SubagentOutcome::cancelled());
                    token.cancel();
                    stopping = true;
                }
            }
        }
    }
    let result = stream.outcome().await;
    cell.settle(outcome_of(result, last_text, spec.max_turns));
    lease.end().await;
    cell.get()
        .unwrap_or_else(|| SubagentOutcome::failed("the subagent ended without a status"))
}

/// The outcome of the child's run result.
fn outcome_of(
    result: Result<RunOutcome<ThreadState>, RunError>,
    last_text: Option<String>,
    max_turns: usize,
) -> SubagentOutcome {
    match result {
        Ok(out) if out.is_interrupted() => {
            SubagentOutcome::failed("the subagent paused for input, which a delegation cannot give")
        }
        Ok(out) => {
            let text = out
                .state
                .last_ai()
                .map(|a| a.content.clone())
                .filter(|t| !t.trim().is_empty())
                .or_else(|| out.state.messages.last().map(|m| m.text().to_owned()))
                .unwrap_or_default();
            SubagentOutcome::completed(text)
        }
        Err(RunError::RecursionLimit { .. }) => SubagentOutcome::turn_capped(last_text, max_turns),
        Err(e) if TurnLimitReached::in_run_error(&e).is_some() => {
            SubagentOutcome::turn_capped(last_text, max_turns)
        }
        Err(RunError::Cancelled { .. }) => SubagentOutcome::cancelled(),
        Err(e) => SubagentOutcome::failed(e.to_string()),
    }
}

/// Forwards a delegation's progress to the parent's stream, namespaced under the parent's
/// tool call.
struct Forward {
    node: Option<NodeContext>,
    id: String,
    subagent_type: String,
}

impl Forward {
    async fn emit(&self, event: &str, body: serde_json::Value) {
        if let Some(node) = &self.node {
            node.emit(serde_json::json!({ SUBAGENT_EVENT: {
                "call_id": self.id,
                "subagent_type": self.subagent_type,
                "event": event,
                "data": body,
            }}))
            .await;
        }
    }

    /// The child's assembly entries (Available, Authorized), as `task_started`.
    async fn assembly(&self, agent: &Agent) {
        let entries = agent.trace().entries();
        self.emit("task_started", serde_json::json!({ "capability": entries }))
            .await;
    }

    /// One custom event of the child's nodes (its trace entries, model chunks).
    async fn child_event(&self, node: &str, payload: serde_json::Value) {
        self.emit(
            "task_running",
            serde_json::json!({ "node": node, "payload": payload }),
        )
        .await;
    }

    /// The terminal event.
    async fn ended(&self, outcome: &SubagentOutcome) {
        self.emit(
            outcome.status.as_str(),
            serde_json::to_value(outcome).unwrap_or_default(),
        )
        .await;
    }
}
