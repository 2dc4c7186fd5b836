//! [`RunContext`]: who is running the agent and where; [`Principal`]: the identity that
//! authorization decides on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use stategraph::checkpoints::sync::Unpoisoned;

use serde::{Deserialize, Serialize};

/// The per-run context: identity and coordinates of one agent run. It is fixed for the run;
/// every layer and tool sees the same value.
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunContext {
    /// The thread.
    pub thread_id: Option<String>,
    /// The run (one invocation of the agent).
    pub run_id: Option<String>,
    /// The user.
    pub user_id: Option<String>,
    /// The user's role (`None` or empty: the authorization's default role).
    pub user_role: Option<String>,
    /// The OAuth provider the user signed in with.
    pub oauth_provider: Option<String>,
    /// The user's id at that provider.
    pub oauth_id: Option<String>,
    /// The user's id on the channel the request came from.
    pub channel_user_id: Option<String>,
    /// Whether the caller is an internal service.
    pub is_internal: bool,
    /// Whether this run is a subagent's.
    pub is_subagent: bool,
    /// Free-form attributes for authorization policies.
    pub attributes: BTreeMap<String, serde_json::Value>,
    /// The skill the user activated with a slash command for this run (its container path).
    pub slash_skill: Option<String>,
}

impl RunContext {
    /// A context for `thread` run by `user`.
    pub fn new(thread: impl Into<String>, user: impl Into<String>) -> Self {
        RunContext {
            thread_id: Some(thread.into()),
            user_id: Some(user.into()),
            ..RunContext::default()
        }
    }

    /// Set the run id.
    pub fn run(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// Set the role.
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.user_role = Some(role.into());
        self
    }

    /// Slash-activate a skill for this run.
    pub fn slash_skill(mut self, path: impl Into<String>) -> Self {
        self.slash_skill = Some(path.into());
        self
    }

    /// The principal authorization sees, with `default_role` for a missing or empty role.
    pub fn principal(&self, default_role: &str) -> Principal {
        let role = match self.user_role.as_deref() {
            Some(r) if !r.is_empty() => r.to_owned(),
            _ => default_role.to_owned(),
        };
        Principal {
            user_id: self.user_id.clone(),
            role,
            run_id: self.run_id.clone(),
            oauth_provider: self.oauth_provider.clone(),
            oauth_id: self.oauth_id.clone(),
            channel_user_id: self.channel_user_id.clone(),
            is_internal: self.is_internal,
            attributes: self.attributes.clone(),
        }
    }
}

/// The identity an authorization provider decides on: user, role, run and attributes.
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    /// The user.
    pub user_id: Option<String>,
    /// The role (never empty: a default applies).
    pub role: String,
    /// The run.
    pub run_id: Option<String>,
    /// The OAuth provider.
    pub oauth_provider: Option<String>,
    /// The id at the OAuth provider.
    pub oauth_id: Option<String>,
    /// The channel user id.
    pub channel_user_id: Option<String>,
    /// Whether the caller is internal.
    pub is_internal: bool,
    /// Free-form attributes.
    pub attributes: BTreeMap<String, serde_json::Value>,
}

/// Where a run's guards stamp why it stopped early (`subagent_limit_capped`, `loop_capped`,
/// ...): the first stamp wins, and the run's settlement stores it as the run's stop reason.
/// Clones share one stamp; an agent gives each invocation a fresh one.
///
/// ```
/// use stategraph_nodes::StopStamp;
///
/// let stamp = StopStamp::default();
/// stamp.stamp("subagent_limit_capped");
/// stamp.stamp("loop_capped");
/// assert_eq!(stamp.get().as_deref(), Some("subagent_limit_capped"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct StopStamp(Arc<Mutex<Option<String>>>);

impl StopStamp {
    /// Stamps `reason`, unless the run already has a stop reason.
    pub fn stamp(&self, reason: impl Into<String>) {
        let mut stop = self.0.lock().unpoisoned();
        if stop.is_none() {
            *stop = Some(reason.into());
        }
    }

    /// The stop reason stamped, if any.
    pub fn get(&self) -> Option<String> {
        self.0.lock().unpoisoned().clone()
    }
}
