//! The agent's two nodes: a model turn and a tool call, over what the nodes share.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use stategraph::checkpoints::sync::Unpoisoned;

use stategraph::reducers::{MessagesUpdate, SandboxState};
use stategraph::{BoxError, Command, NodeContext, SendTo, END};

use super::delivered::Presented;
use crate::context::{RunContext, StopStamp};
use crate::delivery::Snapshot;
use crate::message::{Message, ToolCall};
use crate::middleware::{
    ModelCall, ModelLayer, ModelNext, Observer, ToolInvocation, ToolLayer, ToolMap, ToolNext,
};
use crate::model::{ChatModel, ModelRequest};
use crate::sandbox::{SandboxAccess, SandboxRuntime};
use crate::state::{ThreadState, ThreadStateUpdate};
use crate::subagent::ledger::Unanswered;
use crate::tool::{ToolContext, ToolOutput};
use crate::trace::{CapabilityTrace, Stage, TraceEntry, Verdict};

use super::batches::{batches, AfterCall, TurnPlans};
use super::{AFTER_AGENT_NODE, MODEL_NODE, TOOL_NODE};

/// What the agent's nodes share.
pub(super) struct AgentCore {
    pub(super) model: Arc<dyn ChatModel>,
    pub(super) system: Option<String>,
    pub(super) schemas: Vec<crate::model::ToolSchema>,
    pub(super) tools: ToolMap,
    pub(super) model_layers: Vec<Arc<dyn ModelLayer>>,
    pub(super) tool_layers: Vec<Arc<dyn ToolLayer>>,
    pub(super) observers: Vec<Arc<dyn Observer>>,
    pub(super) run: Arc<RunContext>,
    pub(super) trace: CapabilityTrace,
    pub(super) model_calls: AtomicU32,
    pub(super) stream: bool,
    pub(super) sandbox: Option<Arc<SandboxRuntime>>,
    /// The long-term store the agent was granted (its memory tools' only way to it).
    pub(super) store: Option<Arc<dyn stategraph::store::Store>>,
    /// The most model turns since the last human message.
    pub(super) max_turns: usize,
    /// What the invocation in progress keeps beside the graph.
    pub(super) invocation: Invocation,
    /// The plan of the turn whose tool calls are running.
    pub(super) plans: TurnPlans,
}

/// What an agent keeps about its invocation in progress (one at a time).
#[derive(Default)]
pub(super) struct Invocation {
    /// Held by the invocation in progress: one invocation of an agent at a time.
    pub(super) turn: Arc<tokio::sync::Mutex<()>>,
    /// The artifacts tool calls of the current invocation returned, in order.
    presented: Mutex<Vec<Presented>>,
    /// The outputs as the previous invocation left them (their hashes are reused).
    outputs: Mutex<Option<(PathBuf, Snapshot)>>,
    /// The run context of the invocation in progress (the agent's, with the run's id).
    context: Mutex<Option<Arc<RunContext>>>,
    /// The stop reason the invocation's guards stamp.
    stop: Mutex<StopStamp>,
    /// Model calls the invocation made so far.
    turns: AtomicUsize,
    /// The ledger entries of delegations the invocation's tool calls started and did not
    /// answer (their calls were dropped), for its settlement.
    unanswered: Unanswered,
    /// A subagent's global slot, held while the agent (its graph, on any task running it)
    /// lives.
    pub(super) slot: Mutex<Option<crate::subagent::SubagentPermit>>,
}

impl AgentCore {
    /// The model node: one model call through the model chain, then route to the tools or
    /// the end.
    pub(super) async fn model_step(
        &self,
        state: Arc<ThreadState>,
        ctx: NodeContext,
    ) -> Result<Command<ThreadState>, BoxError> {
        if self.turns_before(&state) >= self.max_turns {
            return Err(Box::new(super::TurnLimitReached {
                max_turns: self.max_turns,
            }));
        }
        // The thread's list, shared (not copied) with the request.
        let messages = state.messages.clone();
        let number = self.model_calls.fetch_add(1, Ordering::Relaxed) + 1;
        let stop = self.invocation.stop.lock().unpoisoned().clone();
        let call = ModelCall {
            request: ModelRequest {
                system: self.system.clone(),
                messages,
                tools: self.schemas.clone(),
            },
            state: Arc::clone(&state),
            run: self.run_context(),
            trace: self.trace.clone(),
            number,
            node: Some(ctx.clone()),
            stream: self.stream,
            stop,
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
        let mut ai = response.message;
        let mut calls = ai.tool_calls.clone();
        let turn = batches(&calls, |c| self.is_read_only(c));
        if !calls.is_empty() && crate::last_step::out_of_steps(&ctx, turn.len()) {
            ai = crate::last_step::need_more_steps(&ai);
            calls.clear();
        }
        let mut cmd = Command::new()
            .update(ThreadState::update().messages(MessagesUpdate::from(Message::Ai(ai))));
        if calls.is_empty() {
            cmd = cmd.goto(if self.observers.is_empty() {
                END
            } else {
                AFTER_AGENT_NODE
            });
        } else {
            // The turn's first batch: its leading read-only calls together, or one call.
            let first = turn.into_iter().next().unwrap_or_default();
            for i in first {
                cmd = cmd.goto(SendTo::new(TOOL_NODE, calls[i].clone()));
            }
        }
        Ok(cmd)
    }

    /// The tool node: one tool call through the tool chain, recorded as Returned when its
    /// handler ran.
    pub(super) async fn tool_step(
        &self,
        state: Arc<ThreadState>,
        ctx: NodeContext,
    ) -> Result<Command<ThreadState>, BoxError> {
        let call: ToolCall = ctx.arg()?;
        let invocation = ToolInvocation::new(
            call.clone(),
            ToolContext {
                state: Arc::clone(&state),
                run: self.run_context(),
                node: Some(ctx.clone()),
                sandbox: self
                    .sandbox
                    .as_ref()
                    .map(|rt| Arc::new(SandboxAccess::new(Arc::clone(rt)))),
                trace: Some(self.trace.clone()),
                secrets: None,
                unanswered: Some(self.invocation.unanswered.clone()),
                store: self.store.clone(),
            },
            self.trace.clone(),
        );
        let before = self.trace.len();
        let output = match ToolNext::new(&self.tool_layers, &self.tools)
            .run(invocation)
            .await
        {
            Ok(output) => output,
            // A cancellation from any layer ends the run as cancelled (not as a failed node):
            // cancel it and wait to be dropped.
            Err(crate::ToolError::Cancelled { .. }) => {
                ctx.cancel_run();
                return std::future::pending().await;
            }
            Err(e) => return Err(e.into_box()),
        };
        self.record_returned(&ctx, &call, before, &output).await;
        if let ToolOutput::Command(c) = &output {
            self.note_presented(&call, c);
        }
        let command = match output {
            ToolOutput::Message(m) => {
                let mut message = Message::Tool(m);
                crate::tokens::emit_whole(&ctx, &mut message).await;
                Command::new().update(ThreadState::update().messages(MessagesUpdate::from(message)))
            }
            ToolOutput::Command(c) => c,
        };
        Ok(
            match self
                .plans
                .after_call(&state, &call.id, |c| self.is_read_only(c))
            {
                AfterCall::Nothing => command,
                AfterCall::Model => command.goto(MODEL_NODE),
                AfterCall::Next(calls) => {
                    command.goto_all(calls.into_iter().map(|c| SendTo::new(TOOL_NODE, c)))
                }
            },
        )
    }

    /// Record that `call` returned `output` (only if its handler ran: a denied call's error
    /// message is the layer's, not the tool's), and emit this call's trace entries since
    /// `before`.
    async fn record_returned(
        &self,
        ctx: &NodeContext,
        call: &ToolCall,
        before: usize,
        output: &ToolOutput,
    ) {
        let verdict = match output.message() {
            Some(m) if m.is_error() => Verdict::Failed {
                reason: m.content.clone(),
            },
            _ => Verdict::Passed,
        };
        // This call's entries only: sibling calls of the step record concurrently.
        let own =
            |e: &TraceEntry| e.call_id.as_deref() == Some(call.id.as_str()) && e.tool == call.name;
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
        emit_trace(ctx, self.trace.entries_since(before, own)).await;
    }
}

impl AgentCore {
    /// The run context of the invocation in progress (the agent's own outside one).
    pub(super) fn run_context(&self) -> Arc<RunContext> {
        self.invocation
            .context
            .lock()
            .unpoisoned()
            .clone()
            .unwrap_or_else(|| Arc::clone(&self.run))
    }

    /// The model turns the run made before this one: counted by the invocation (O(1)) when
    /// the agent runs through [`Agent::invoke`](super::Agent::invoke); for a run of its graph
    /// driven directly, the AI messages since the last human message.
    fn turns_before(&self, state: &ThreadState) -> usize {
        if self.invocation.context.lock().unpoisoned().is_some() {
            self.invocation.turns.fetch_add(1, Ordering::Relaxed)
        } else {
            turns_since_human(state, self.max_turns)
        }
    }

    /// Starts an invocation under `context`: a fresh stop stamp, no artifacts recorded.
    pub(super) fn begin_invocation(&self, context: Arc<RunContext>) {
        self.trace
            .enter_run(context.run_id.as_deref(), context.thread_id.as_deref());
        self.model_calls.store(0, Ordering::Relaxed);
        self.invocation.turns.store(0, Ordering::Relaxed);
        *self.invocation.context.lock().unpoisoned() = Some(context);
        *self.invocation.stop.lock().unpoisoned() = StopStamp::default();
        self.take_presented();
        self.invocation.unanswered.take();
    }

    /// The ledger entries of delegations this invocation started and did not answer (taken).
    pub(super) fn take_unanswered(&self) -> Vec<crate::state::Delegation> {
        self.invocation.unanswered.take()
    }

    /// Ends the invocation: its stop reason, if a guard stamped one.
    pub(super) fn end_invocation(&self) -> Option<String> {
        *self.invocation.context.lock().unpoisoned() = None;
        self.plans.clear();
        self.invocation.stop.lock().unpoisoned().get()
    }

    /// Whether `call` is of a read-only tool (an unknown tool is not).
    fn is_read_only(&self, call: &ToolCall) -> bool {
        self.tools
            .get(&call.name)
            .is_some_and(|t| t.spec().read_only)
    }

    /// Records the artifacts a tool call's command adds, for run settlement: those of its own
    /// update and of every command it carries for an enclosing graph over [`ThreadState`]
    /// ([`Command::to_parent`], at any depth).
    fn note_presented(&self, call: &ToolCall, command: &Command<ThreadState>) {
        let mut paths = Vec::new();
        let mut next = Some(command);
        while let Some(c) = next {
            if let Some(artifacts) = c.update_ref().and_then(|u| u.artifacts.as_ref()) {
                paths.extend(artifacts);
            }
            next = c.parent_ref::<ThreadState>();
        }
        if paths.is_empty() {
            return;
        }
        let mut presented = self.invocation.presented.lock().unpoisoned();
        for path in paths {
            let p = Presented {
                tool: call.name.clone(),
                call_id: call.id.clone(),
                path: path.clone(),
            };
            if !presented.contains(&p) {
                presented.push(p);
            }
        }
    }

    /// The artifacts recorded since the last call (taken).
    pub(super) fn take_presented(&self) -> Vec<Presented> {
        std::mem::take(&mut *self.invocation.presented.lock().unpoisoned())
    }

    /// The outputs the previous invocation left at `root`, if it captured that root.
    pub(super) fn last_outputs(&self, root: &Path) -> Option<Snapshot> {
        let mut kept = self.invocation.outputs.lock().unpoisoned();
        match kept.take() {
            Some((dir, snapshot)) if dir == root => Some(snapshot),
            other => {
                *kept = other;
                None
            }
        }
    }

    /// Keeps the outputs this invocation left at `root` for the next one.
    pub(super) fn keep_outputs(&self, root: PathBuf, snapshot: Snapshot) {
        *self.invocation.outputs.lock().unpoisoned() = Some((root, snapshot));
    }

    /// The eager sandbox node: acquires the thread's sandbox before the first step when the
    /// state has none and the run names a thread; the id enters the state.
    pub(super) async fn acquire_sandbox_step(
        &self,
        state: Arc<ThreadState>,
    ) -> Result<ThreadStateUpdate, BoxError> {
        let Some(runtime) = &self.sandbox else {
            return Ok(ThreadStateUpdate::default());
        };
        let run = self.run_context();
        if crate::sandbox::stored_id(&state).is_some() || run.thread_id.is_none() {
            return Ok(ThreadStateUpdate::default());
        }
        let id = crate::sandbox::acquire(runtime, &run).await?;
        Ok(ThreadState::update().sandbox(SandboxState::with_id(id.as_str())))
    }
}

/// The model turns since the last human message (AI messages after it), counted up to
/// `limit` (the walk back stops there, so a long run does not rescan its whole history on
/// every model call).
fn turns_since_human(state: &ThreadState, limit: usize) -> usize {
    state
        .messages
        .iter()
        .rev()
        .take_while(|m| !matches!(m, Message::Human { .. }))
        .filter(|m| matches!(m, Message::Ai(_)))
        .take(limit)
        .count()
}

/// Emit trace entries as custom stream events (`{"capability": entry}`).
async fn emit_trace(ctx: &NodeContext, entries: Vec<TraceEntry>) {
    /// The event's payload, serialised only if a listener takes custom events.
    #[derive(serde::Serialize)]
    struct CapabilityEvent<'a> {
        capability: &'a TraceEntry,
    }
    for entry in &entries {
        ctx.emit(CapabilityEvent { capability: entry }).await;
    }
}
