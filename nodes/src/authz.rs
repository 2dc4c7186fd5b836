//! Authorized: a principal and an authorization provider filter the catalog at assembly, and
//! the same provider is asked again for every call (see [`crate::guardrail`]).

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::context::Principal;
use crate::BoxError;

/// What to do when a policy provider fails or answers with something unusable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailMode {
    /// Deny (no tools at assembly; the call refused). The default.
    #[default]
    Closed,
    /// Allow, as if the provider had not been asked.
    Open,
}

/// Decides which resources a principal may use.
pub trait AuthorizationProvider: Send + Sync + 'static {
    /// Of `names` (tools), the ones `principal` may use. Order does not matter: the caller
    /// keeps the catalog's order.
    ///
    /// # Errors
    /// Any failure; the caller applies its [`FailMode`].
    fn allowed_tools<'a>(
        &'a self,
        principal: &'a Principal,
        names: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, BoxError>>;
}

/// Authorization as an agent uses it: a provider, a fail mode and the default role.
#[derive(Clone)]
pub struct Authorization {
    /// The provider.
    pub provider: Arc<dyn AuthorizationProvider>,
    /// What a provider failure means (closed by default).
    pub fail: FailMode,
    /// The role of a principal whose context has none.
    pub default_role: String,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("fail", &self.fail)
            .field("default_role", &self.default_role)
            .finish_non_exhaustive()
    }
}

impl Authorization {
    /// Authorization by `provider`, fail-closed, default role `user`.
    pub fn new(provider: impl AuthorizationProvider) -> Self {
        Authorization {
            provider: Arc::new(provider),
            fail: FailMode::Closed,
            default_role: "user".to_owned(),
        }
    }

    /// Set the fail mode.
    pub fn fail(mut self, mode: FailMode) -> Self {
        self.fail = mode;
        self
    }

    /// Set the default role.
    pub fn default_role(mut self, role: impl Into<String>) -> Self {
        self.default_role = role.into();
        self
    }

    /// Split `names` into (allowed, denied with a reason), keeping their order.
    pub async fn filter(
        &self,
        principal: &Principal,
        names: &[String],
    ) -> (Vec<String>, Vec<(String, String)>) {
        match self.provider.allowed_tools(principal, names).await {
            Ok(allowed) => {
                let allowed: HashSet<String> = allowed.into_iter().collect();
                let mut keep = Vec::new();
                let mut denied = Vec::new();
                for n in names {
                    if allowed.contains(n) {
                        keep.push(n.clone());
                    } else {
                        denied.push((
                            n.clone(),
                            format!("not allowed for role {:?}", principal.role),
                        ));
                    }
                }
                (keep, denied)
            }
            Err(e) => match self.fail {
                FailMode::Open => (names.to_vec(), Vec::new()),
                FailMode::Closed => (
                    Vec::new(),
                    names
                        .iter()
                        .map(|n| {
                            (
                                n.clone(),
                                format!("authorization provider failed (fail-closed): {e}"),
                            )
                        })
                        .collect(),
                ),
            },
        }
    }
}

/// A provider from a table of roles to allowed tool names (a role not in the table may use
/// nothing).
///
/// ```
/// use stategraph_nodes::{RoleTable, Principal, AuthorizationProvider};
///
/// let table = RoleTable::new().allow("analyst", ["search", "read_file"]);
/// # let _ = table;
/// ```
#[derive(Clone, Debug, Default)]
pub struct RoleTable {
    roles: std::collections::BTreeMap<String, HashSet<String>>,
}

impl RoleTable {
    /// An empty table (everyone denied everything).
    pub fn new() -> Self {
        Self::default()
    }

    /// Let `role` use `tools`.
    pub fn allow(
        mut self,
        role: impl Into<String>,
        tools: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.roles
            .entry(role.into())
            .or_default()
            .extend(tools.into_iter().map(Into::into));
        self
    }
}

impl AuthorizationProvider for RoleTable {
    fn allowed_tools<'a>(
        &'a self,
        principal: &'a Principal,
        names: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, BoxError>> {
        let allowed = self.roles.get(&principal.role);
        let out = names
            .iter()
            .filter(|n| allowed.is_some_and(|a| a.contains(*n)))
            .cloned()
            .collect();
        Box::pin(async move { Ok(out) })
    }
}
