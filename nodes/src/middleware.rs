//! The two extension points of an agent: read-only [`Observer`]s, and wrapping layers for
//! model calls ([`ModelLayer`]) and tool calls ([`ToolLayer`]), tower style: a layer gets the
//! call and a `next` it may call zero, one or several times. Registration order is outermost
//! first.
//!
//! [`ToolPolicy`] is the third, narrower kind: a rule about which tools may be used, asked
//! twice by construction — when the model's request is assembled (what it sees) and again at
//! call time, before a handler runs (what it may execute). An agent turns each policy into one
//! model layer and one tool layer, so the second check cannot be forgotten.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::context::RunContext;
use crate::mediation::{mediate_prompt, mediate_search};
use crate::message::{ToolCall, ToolMessage};
use crate::model::{ChatModel, ModelError, ModelRequest, ModelResponse};
use crate::state::ThreadState;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use crate::trace::{CapabilityTrace, Stage, TraceEntry, Verdict};

/// A read-only observer of an agent run. Every method is a no-op by default.
///
/// `before_*` hooks run in registration order, `after_*` hooks in reverse.
pub trait Observer: Send + Sync + 'static {
    /// The agent run starts (before its first model call).
    fn before_agent(&self, state: &ThreadState, run: &RunContext) {
        let _ = (state, run);
    }
    /// The agent run ends (after its last model call or tool step).
    fn after_agent(&self, state: &ThreadState, run: &RunContext) {
        let _ = (state, run);
    }
    /// A model call is about to be made with `request` (after every layer rewrote it).
    fn before_model(&self, request: &ModelRequest, run: &RunContext) {
        let _ = (request, run);
    }
    /// A model call returned.
    fn after_model(&self, response: &ModelResponse, run: &RunContext) {
        let _ = (response, run);
    }
}

/// One model call as layers see it.
#[derive(Clone)]
pub struct ModelCall {
    /// The request (layers may rewrite messages and tools).
    pub request: ModelRequest,
    /// The state at the start of the step.
    pub state: Arc<ThreadState>,
    /// The run context.
    pub run: Arc<RunContext>,
    /// The run's capability trace.
    pub trace: CapabilityTrace,
    /// Which model call of the run this is (1-based).
    pub number: u32,
    /// The engine task making the call (custom events, interrupts), if in a graph run.
    pub node: Option<stategraph::NodeContext>,
    /// Whether the model's chunks are also emitted as custom events (`{"chunk": ModelChunk}`)
    /// as they arrive. Independently, a call in a run that streams messages streams them as
    /// `messages` events ([`tokens::call_model`](crate::tokens::call_model)).
    pub stream: bool,
    /// Where a guard stamps why the run stops early (its settlement's stop reason).
    pub stop: crate::context::StopStamp,
}

impl fmt::Debug for ModelCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelCall")
            .field("request", &self.request)
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

/// A layer around model calls.
pub trait ModelLayer: Send + Sync + 'static {
    /// The layer's name (traces name it when it removes a tool).
    fn name(&self) -> &str;

    /// Handle `call`, usually by calling `next.run(call)`.
    ///
    /// # Errors
    /// The model's error or the layer's own.
    fn call<'a>(
        &'a self,
        call: ModelCall,
        next: ModelNext<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;
}

/// The rest of a model-call chain: the inner layers, then the model.
#[derive(Clone, Copy)]
pub struct ModelNext<'a> {
    rest: &'a [Arc<dyn ModelLayer>],
    observers: &'a [Arc<dyn Observer>],
    model: &'a dyn ChatModel,
}

impl std::fmt::Debug for ModelNext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelNext")
            .field("layers", &self.rest.len())
            .field("observers", &self.observers.len())
            .finish_non_exhaustive()
    }
}

impl<'a> ModelNext<'a> {
    /// A chain of `layers` (outermost first) ending at `model`.
    pub fn new(
        layers: &'a [Arc<dyn ModelLayer>],
        observers: &'a [Arc<dyn Observer>],
        model: &'a dyn ChatModel,
    ) -> Self {
        ModelNext {
            rest: layers,
            observers,
            model,
        }
    }

    /// Pass `call` on to the next layer (or the model).
    ///
    /// # Errors
    /// What the inner layers or the model return.
    pub fn run(self, call: ModelCall) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        match self.rest.split_first() {
            Some((layer, rest)) => layer.call(
                call,
                ModelNext {
                    rest,
                    observers: self.observers,
                    model: self.model,
                },
            ),
            None => Box::pin(async move {
                for tool in &call.request.tools {
                    call.trace.record(
                        TraceEntry::new(&tool.name, Stage::Visible, Verdict::Passed)
                            .on_model_call(call.number),
                    );
                }
                for o in self.observers {
                    o.before_model(&call.request, &call.run);
                }
                let response = match &call.node {
                    Some(cx) => {
                        crate::tokens::call_in_node(cx, self.model, call.request, call.stream)
                            .await?
                    }
                    None => self.model.invoke(call.request).await?,
                };
                for o in self.observers.iter().rev() {
                    o.after_model(&response, &call.run);
                }
                Ok(response)
            }),
        }
    }
}

/// One tool call as layers see it.
///
/// Layers may rewrite the arguments, but not the tool: the call is dispatched only if its name
/// is still the one the chain received (the name every check was made on).
#[derive(Clone, Debug)]
pub struct ToolInvocation {
    /// The call.
    pub call: ToolCall,
    /// What the tool will see.
    pub cx: ToolContext,
    /// The run's capability trace.
    pub trace: CapabilityTrace,
    checked: Arc<str>,
}

impl ToolInvocation {
    /// An invocation of `call` with context `cx`, recording into `trace`.
    pub fn new(call: ToolCall, cx: ToolContext, trace: CapabilityTrace) -> Self {
        let checked = Arc::from(call.name.as_str());
        ToolInvocation {
            call,
            cx,
            trace,
            checked,
        }
    }

    /// Record that `by` refused this call, and the error tool message answering it.
    pub fn deny(
        &self,
        by: &str,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> ToolOutput {
        self.trace.record(
            TraceEntry::new(
                &self.call.name,
                Stage::Executed,
                Verdict::denied(by, reason),
            )
            .for_call(&self.call.id),
        );
        ToolOutput::Message(ToolMessage::error(self.call_id(), &self.call.name, message))
    }

    /// The id a tool message answering this call carries (see [`ToolCall::reply_id`]).
    pub fn call_id(&self) -> &str {
        self.call.reply_id()
    }
}

/// A layer around tool calls.
pub trait ToolLayer: Send + Sync + 'static {
    /// The layer's name (traces name it when it denies a call).
    fn name(&self) -> &str;

    /// Handle `invocation`, usually by calling `next.run(invocation)`; a layer may instead
    /// answer with its own tool message (the handler then never runs).
    ///
    /// # Errors
    /// The tool's error or the layer's own. Control-flow signals
    /// ([`ToolError::is_control_flow`]) must be passed on unchanged.
    fn call<'a>(
        &'a self,
        invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// The tools of an agent by name.
pub type ToolMap = HashMap<String, Arc<dyn Tool>>;

/// The rest of a tool-call chain: the inner layers, then the tool's handler.
#[derive(Clone, Copy)]
pub struct ToolNext<'a> {
    rest: &'a [Arc<dyn ToolLayer>],
    tools: &'a ToolMap,
}

impl std::fmt::Debug for ToolNext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolNext")
            .field("layers", &self.rest.len())
            .finish_non_exhaustive()
    }
}

impl<'a> ToolNext<'a> {
    /// A chain of `layers` (outermost first) ending at the handler found in `tools`.
    pub fn new(layers: &'a [Arc<dyn ToolLayer>], tools: &'a ToolMap) -> Self {
        ToolNext {
            rest: layers,
            tools,
        }
    }

    /// Pass `invocation` on to the next layer (or the handler).
    ///
    /// # Errors
    /// What the inner layers or the handler return; [`ToolError::Unknown`] for a name the
    /// agent has no tool for.
    pub fn run(self, invocation: ToolInvocation) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        match self.rest.split_first() {
            Some((layer, rest)) => layer.call(
                invocation,
                ToolNext {
                    rest,
                    tools: self.tools,
                },
            ),
            None => Box::pin(async move {
                let ToolInvocation {
                    call,
                    cx,
                    trace,
                    checked,
                } = invocation;
                if *call.name != *checked {
                    return Err(ToolError::failed(
                        checked.to_string(),
                        format!(
                            "a layer renamed the call to {:?}; calls are dispatched only under the name that was checked",
                            call.name
                        ),
                    ));
                }
                let Some(tool) = self.tools.get(&call.name) else {
                    return Err(ToolError::Unknown { tool: call.name });
                };
                trace.record(
                    TraceEntry::new(&call.name, Stage::Executed, Verdict::Passed)
                        .for_call(&call.id),
                );
                tool.call(call, cx).await
            }),
        }
    }
}

/// A refused tool call: who refused, why, and the text of the error tool message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// Why (for the trace).
    pub reason: String,
    /// The content of the error tool message the model reads.
    pub message: String,
}

impl Denial {
    /// A denial whose tool message is `message` and whose trace reason is `reason`.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Denial {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// A rule about which tools may be used, asked at every place a tool can reach the model or
/// run: which tools the model sees ([`ToolPolicy::visible`]), which ones a `tool_search` may
/// return and promote ([`ToolPolicy::search_visible`], the same answer by default), and
/// whether a call may run ([`ToolPolicy::check_call`]).
///
/// The answers must come from the same rule: a tool `visible` would hide must be refused by
/// `check_call` (the property tests of the crate hold every built-in policy to this).
///
/// ```
/// use stategraph_nodes::{Denial, RunContext, ThreadState, ToolCall, ToolPolicy, ToolSpec};
///
/// /// Hides and refuses every tool that is not read-only.
/// struct ReadOnly;
///
/// impl ToolPolicy for ReadOnly {
///     fn name(&self) -> &str {
///         "read_only"
///     }
///
///     fn visible(&self, tools: &[&ToolSpec], _: &ThreadState, _: &RunContext) -> Vec<Option<String>> {
///         tools.iter().map(|t| (!t.read_only).then(|| "writes".to_owned())).collect()
///     }
///
///     fn check_call(
///         &self,
///         call: &ToolCall,
///         spec: Option<&ToolSpec>,
///         _: &ThreadState,
///         _: &RunContext,
///     ) -> Result<(), Denial> {
///         match spec {
///             Some(spec) if spec.read_only => Ok(()),
///             _ => Err(Denial::new("writes", format!("Error: {} may write", call.name))),
///         }
///     }
/// }
/// ```
pub trait ToolPolicy: Send + Sync + 'static {
    /// The policy's name (traces name it).
    fn name(&self) -> &str;

    /// For each of `tools` (the request's tools, in order), `None` to keep it or `Some(reason)`
    /// to hide it from the model.
    fn visible(
        &self,
        tools: &[&ToolSpec],
        state: &ThreadState,
        run: &RunContext,
    ) -> Vec<Option<String>>;

    /// Whether `call` may run now. `spec` is the spec of the tool it calls (`None`: the agent
    /// has no tool of that name).
    ///
    /// # Errors
    /// A [`Denial`] when it may not; the handler then never runs.
    fn check_call(
        &self,
        call: &ToolCall,
        spec: Option<&ToolSpec>,
        state: &ThreadState,
        run: &RunContext,
    ) -> Result<(), Denial>;

    /// For each of `found` (the tools a `tool_search` call matched), `None` to let the search
    /// return its schema and promote it, `Some(reason)` to leave it out. The default is
    /// [`ToolPolicy::visible`]: what a policy hides from the model, a search does not reveal.
    /// (The deferred-tool filter answers differently: promoting hidden tools is what a search
    /// is for.)
    fn search_visible(
        &self,
        found: &[&ToolSpec],
        state: &ThreadState,
        run: &RunContext,
    ) -> Vec<Option<String>> {
        self.visible(found, state, run)
    }

    /// Post-process the output of an allowed call (the skill policy narrows `tool_search`
    /// results with it). The default returns it unchanged.
    fn filter_output(
        &self,
        call: &ToolCall,
        output: ToolOutput,
        state: &ThreadState,
        run: &RunContext,
    ) -> ToolOutput {
        let _ = (call, state, run);
        output
    }
}

impl<P: ToolPolicy + ?Sized> ToolPolicy for Arc<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn visible(
        &self,
        tools: &[&ToolSpec],
        state: &ThreadState,
        run: &RunContext,
    ) -> Vec<Option<String>> {
        (**self).visible(tools, state, run)
    }

    fn check_call(
        &self,
        call: &ToolCall,
        spec: Option<&ToolSpec>,
        state: &ThreadState,
        run: &RunContext,
    ) -> Result<(), Denial> {
        (**self).check_call(call, spec, state, run)
    }

    fn search_visible(
        &self,
        found: &[&ToolSpec],
        state: &ThreadState,
        run: &RunContext,
    ) -> Vec<Option<String>> {
        (**self).search_visible(found, state, run)
    }

    fn filter_output(
        &self,
        call: &ToolCall,
        output: ToolOutput,
        state: &ThreadState,
        run: &RunContext,
    ) -> ToolOutput {
        (**self).filter_output(call, output, state, run)
    }
}

/// A [`ToolPolicy`] applied as both a model layer and a tool layer.
pub struct PolicyLayer<P> {
    policy: P,
    specs: Arc<HashMap<String, ToolSpec>>,
}

impl<P> std::fmt::Debug for PolicyLayer<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyLayer")
            .field("tools", &self.specs.len())
            .finish_non_exhaustive()
    }
}

impl<P: ToolPolicy> PolicyLayer<P> {
    /// Apply `policy` to the tools of `specs`.
    pub fn new(policy: P, specs: Arc<HashMap<String, ToolSpec>>) -> Self {
        PolicyLayer { policy, specs }
    }
}

impl<P: ToolPolicy> ModelLayer for PolicyLayer<P> {
    fn name(&self) -> &str {
        self.policy.name()
    }

    fn call<'a>(
        &'a self,
        mut call: ModelCall,
        next: ModelNext<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        // The agent's own specs are lent, not copied; a tool a layer added is described from
        // its schema.
        let added: Vec<ToolSpec> = call
            .request
            .tools
            .iter()
            .filter(|schema| !self.specs.contains_key(&schema.name))
            .map(|schema| ToolSpec {
                parameters: schema.parameters.clone(),
                ..ToolSpec::new(&schema.name, &schema.description, crate::ToolSource::Other)
            })
            .collect();
        let mut added_iter = added.iter();
        let specs: Vec<&ToolSpec> = call
            .request
            .tools
            .iter()
            .filter_map(|schema| self.specs.get(&schema.name).or_else(|| added_iter.next()))
            .collect();
        let verdicts = self.policy.visible(&specs, &call.state, &call.run);
        let mut kept = Vec::with_capacity(call.request.tools.len());
        for (i, schema) in std::mem::take(&mut call.request.tools)
            .into_iter()
            .enumerate()
        {
            match verdicts.get(i).cloned().flatten() {
                None => kept.push(schema),
                Some(reason) => call.trace.record(
                    TraceEntry::new(
                        schema.name,
                        Stage::Visible,
                        Verdict::removed(self.policy.name(), reason),
                    )
                    .on_model_call(call.number),
                ),
            }
        }
        call.request.tools = kept;
        mediate_prompt(&self.policy, &self.specs, &mut call);
        next.run(call)
    }
}

impl<P: ToolPolicy> ToolLayer for PolicyLayer<P> {
    fn name(&self) -> &str {
        self.policy.name()
    }

    fn call<'a>(
        &'a self,
        invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let state = Arc::clone(&invocation.cx.state);
            let run = Arc::clone(&invocation.cx.run);
            let spec = self.specs.get(&invocation.call.name);
            if let Err(d) = self.policy.check_call(&invocation.call, spec, &state, &run) {
                return Ok(invocation.deny(self.policy.name(), d.reason, d.message));
            }
            let call = invocation.call.clone();
            let trace = invocation.trace.clone();
            let output = next.run(invocation).await?;
            let output = mediate_search(
                (&self.policy, &self.specs),
                &call,
                output,
                &trace,
                (&state, &run),
            );
            Ok(self.policy.filter_output(&call, output, &state, &run))
        })
    }
}

/// Turns tool failures into error tool messages the model can read (`Error: ...`), and lets
/// control-flow signals through untouched.
#[derive(Debug, Default, Clone, Copy)]
pub struct ToolErrorHandling;

impl ToolLayer for ToolErrorHandling {
    fn name(&self) -> &str {
        "tool_error_handling"
    }

    fn call<'a>(
        &'a self,
        invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let id = invocation.call_id().to_owned();
            let call_id = invocation.call.id.clone();
            let name = invocation.call.name.clone();
            let trace = invocation.trace.clone();
            match next.run(invocation).await {
                Err(e) if !e.is_control_flow() => {
                    if let ToolError::Unknown { .. } = e {
                        trace.record(
                            TraceEntry::new(
                                &name,
                                Stage::Executed,
                                Verdict::denied("catalog", "no such tool in this agent"),
                            )
                            .for_call(call_id),
                        );
                    }
                    Ok(ToolOutput::Message(ToolMessage::error(
                        id,
                        name,
                        format!("Error: {e}"),
                    )))
                }
                other => other,
            }
        })
    }
}
