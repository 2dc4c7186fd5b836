//! Executed: the call-time guardrail. Every tool call is put to a provider before its handler
//! runs; a denial becomes an error tool message and the handler never runs.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::authz::{Authorization, FailMode};
use crate::middleware::{ToolInvocation, ToolLayer, ToolNext};
use crate::tool::{ToolError, ToolOutput};
use crate::BoxError;

/// What a guardrail provider decides on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuardrailRequest {
    /// The tool called.
    pub tool_name: String,
    /// Its arguments.
    pub tool_args: serde_json::Value,
    /// The call id.
    pub tool_call_id: String,
    /// The agent's configured identity ("passport").
    pub agent_id: Option<String>,
    /// The thread.
    pub thread_id: Option<String>,
    /// The run.
    pub run_id: Option<String>,
    /// Whether a subagent makes the call.
    pub is_subagent: bool,
    /// The user.
    pub user_id: Option<String>,
    /// The user's role as the context has it.
    pub user_role: Option<String>,
    /// The OAuth provider the user signed in with.
    pub oauth_provider: Option<String>,
    /// The user's id at that provider.
    pub oauth_id: Option<String>,
    /// The user's id on the channel the request came from.
    pub channel_user_id: Option<String>,
    /// When the call was made (ms since the Unix epoch).
    pub timestamp_ms: u64,
    /// Whether the caller is internal.
    pub is_internal: bool,
    /// Authorization attributes.
    pub attributes: BTreeMap<String, serde_json::Value>,
}

/// One reason of a decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardrailReason {
    /// A machine-readable code (`oap.denied`, ...).
    pub code: String,
    /// A sentence for people (and the model).
    pub message: String,
}

/// A provider's decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardrailDecision {
    /// Whether the call may run.
    pub allow: bool,
    /// Why (the first reason is reported).
    pub reasons: Vec<GuardrailReason>,
    /// The policy that decided.
    pub policy_id: Option<String>,
}

impl GuardrailDecision {
    /// Allow.
    pub fn allow() -> Self {
        GuardrailDecision {
            allow: true,
            ..Self::default()
        }
    }

    /// Deny with one reason.
    pub fn deny(code: impl Into<String>, message: impl Into<String>) -> Self {
        GuardrailDecision {
            allow: false,
            reasons: vec![GuardrailReason {
                code: code.into(),
                message: message.into(),
            }],
            policy_id: None,
        }
    }
}

/// Decides whether a tool call may run.
pub trait GuardrailProvider: Send + Sync + 'static {
    /// The provider's name (traces name it).
    fn name(&self) -> &str;
    /// Decide on `request`.
    ///
    /// # Errors
    /// Any failure; the guardrail applies its [`FailMode`].
    fn evaluate<'a>(
        &'a self,
        request: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>>;
}

/// The error tool message text of a denial.
pub fn denial_message(tool: &str, reason: Option<&GuardrailReason>) -> String {
    let (code, message) = reason.map_or(("oap.denied", "blocked by guardrail policy"), |r| {
        (r.code.as_str(), r.message.as_str())
    });
    format!(
        "Guardrail denied: tool '{tool}' was blocked ({code}). Reason: {message}. Choose an alternative approach."
    )
}

/// A tool layer asking a [`GuardrailProvider`] about every call before it runs.
pub struct Guardrail {
    provider: Arc<dyn GuardrailProvider>,
    fail: FailMode,
    agent_id: Option<String>,
    name: String,
}

impl std::fmt::Debug for Guardrail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guardrail")
            .field("name", &self.name)
            .field("fail", &self.fail)
            .field("agent_id", &self.agent_id)
            .finish_non_exhaustive()
    }
}

impl Guardrail {
    /// A fail-closed guardrail around `provider`.
    pub fn new(provider: impl GuardrailProvider) -> Self {
        Self::from_arc(Arc::new(provider))
    }

    /// A fail-closed guardrail around a shared provider.
    pub fn from_arc(provider: Arc<dyn GuardrailProvider>) -> Self {
        let name = format!("guardrail:{}", provider.name());
        Guardrail {
            provider,
            fail: FailMode::Closed,
            agent_id: None,
            name,
        }
    }

    /// Set the fail mode.
    pub fn fail(mut self, mode: FailMode) -> Self {
        self.fail = mode;
        self
    }

    /// Set the agent identity sent with each request.
    pub fn agent_id(mut self, id: impl Into<String>) -> Self {
        self.agent_id = Some(id.into());
        self
    }

    fn request(&self, inv: &ToolInvocation) -> GuardrailRequest {
        let run = &inv.cx.run;
        GuardrailRequest {
            tool_name: inv.call.name.clone(),
            tool_args: inv.call.args.clone(),
            tool_call_id: inv.call.id.clone(),
            agent_id: self.agent_id.clone(),
            thread_id: run.thread_id.clone(),
            run_id: run.run_id.clone(),
            is_subagent: run.is_subagent,
            user_id: run.user_id.clone(),
            user_role: run.user_role.clone(),
            oauth_provider: run.oauth_provider.clone(),
            oauth_id: run.oauth_id.clone(),
            channel_user_id: run.channel_user_id.clone(),
            timestamp_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            is_internal: run.is_internal,
            attributes: run.attributes.clone(),
        }
    }
}

impl ToolLayer for Guardrail {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(
        &'a self,
        invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let request = self.request(&invocation);
            let mut provider_error = None;
            let decision = match self.provider.evaluate(&request).await {
                Ok(d) => d,
                Err(e) => {
                    // An interrupt or a cancellation raised inside a provider is a signal, not
                    // a failure: no fail mode applies, the handler does not run.
                    let e = ToolError::failed(&request.tool_name, e);
                    if e.is_control_flow() {
                        return Err(e);
                    }
                    tracing::warn!(tool = %request.tool_name, error = %e, fail = ?self.fail, "guardrail provider failed");
                    provider_error = Some(e.to_string());
                    match self.fail {
                        FailMode::Open => GuardrailDecision::allow(),
                        FailMode::Closed => GuardrailDecision::deny(
                            "oap.evaluator_error",
                            "guardrail provider failed (fail-closed)",
                        ),
                    }
                }
            };
            if decision.allow {
                return next.run(invocation).await;
            }
            let reason = decision.reasons.first();
            let text = denial_message(&request.tool_name, reason);
            let mut why = reason.map_or("oap.denied".to_owned(), |r| {
                format!("{}: {}", r.code, r.message)
            });
            // The model reads a generic message; the trace keeps the provider's error.
            if let Some(e) = provider_error {
                why = format!("{why}: {e}");
            }
            tracing::info!(tool = %request.tool_name, reason = %why, "guardrail denied a tool call");
            Ok(invocation.deny(&self.name, why, text))
        })
    }
}

/// The built-in allowlist provider: `allowed = None` allows everything, an explicit empty
/// list denies everything; the denylist is checked after.
#[derive(Clone, Debug, Default)]
pub struct AllowlistProvider {
    allowed: Option<HashSet<String>>,
    denied: HashSet<String>,
}

impl AllowlistProvider {
    /// Allow every tool (until [`AllowlistProvider::deny`] says otherwise).
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// Allow only `tools`.
    pub fn only(tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        AllowlistProvider {
            allowed: Some(tools.into_iter().map(Into::into).collect()),
            denied: HashSet::new(),
        }
    }

    /// Deny `tools`.
    pub fn deny(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.denied.extend(tools.into_iter().map(Into::into));
        self
    }
}

impl GuardrailProvider for AllowlistProvider {
    fn name(&self) -> &str {
        "allowlist"
    }

    fn evaluate<'a>(
        &'a self,
        request: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>> {
        let name = &request.tool_name;
        let decision = if self.allowed.as_ref().is_some_and(|a| !a.contains(name)) {
            GuardrailDecision::deny(
                "oap.tool_not_allowed",
                format!("tool '{name}' is not in the allowlist"),
            )
        } else if self.denied.contains(name) {
            GuardrailDecision::deny(
                "oap.tool_denied",
                format!("tool '{name}' is in the denylist"),
            )
        } else {
            GuardrailDecision::allow()
        };
        Box::pin(async move { Ok(decision) })
    }
}

/// The authorization provider asked again at call time (the second of the two layers from one
/// policy): resource `tool`, action `call`. The build's own `tool_search` is infrastructure and
/// always allowed.
pub struct AuthorizationGuardrail {
    authz: Authorization,
    infrastructure: HashSet<String>,
}

impl std::fmt::Debug for AuthorizationGuardrail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationGuardrail")
            .field("authz", &self.authz)
            .field("infrastructure", &self.infrastructure)
            .finish()
    }
}

impl AuthorizationGuardrail {
    /// Check calls with `authz`; `infrastructure` names tools allowed without asking.
    pub fn new(authz: Authorization, infrastructure: impl IntoIterator<Item = String>) -> Self {
        AuthorizationGuardrail {
            authz,
            infrastructure: infrastructure.into_iter().collect(),
        }
    }
}

impl GuardrailProvider for AuthorizationGuardrail {
    fn name(&self) -> &str {
        "authorization"
    }

    fn evaluate<'a>(
        &'a self,
        request: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, BoxError>> {
        Box::pin(async move {
            if self.infrastructure.contains(&request.tool_name) {
                return Ok(GuardrailDecision {
                    allow: true,
                    reasons: vec![GuardrailReason {
                        code: "authz.infrastructure_tool".to_owned(),
                        message: "infrastructure tool".to_owned(),
                    }],
                    policy_id: None,
                });
            }
            let run = crate::RunContext {
                user_id: request.user_id.clone(),
                user_role: request.user_role.clone(),
                oauth_provider: request.oauth_provider.clone(),
                oauth_id: request.oauth_id.clone(),
                channel_user_id: request.channel_user_id.clone(),
                run_id: request.run_id.clone(),
                is_internal: request.is_internal,
                attributes: request.attributes.clone(),
                ..crate::RunContext::default()
            };
            let principal = run.principal(&self.authz.default_role);
            let names = [request.tool_name.clone()];
            let allowed = self
                .authz
                .provider
                .allowed_tools(&principal, &names)
                .await?;
            Ok(if allowed.contains(&request.tool_name) {
                GuardrailDecision::allow()
            } else {
                GuardrailDecision::deny(
                    "authz.denied",
                    format!("role {:?} may not call this tool", principal.role),
                )
            })
        })
    }
}
