//! [`SecretGrant`]: which secrets a tool call receives, decided from the live skill registry
//! and secret store at call time, and the layer that hands each call its access.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{SecretEnv, SecretStore};
use crate::middleware::{ToolInvocation, ToolLayer, ToolNext};
use crate::skill::SkillToolPolicy;
use crate::tool::{ToolError, ToolOutput, ToolSpec};
use crate::{RunContext, ThreadState};

/// Decides which secrets a call receives. Secret `NAME` reaches a tool only when all five
/// hold, each checked again on every call:
///
/// 1. a skill declaring `NAME` (`secrets:` in its SKILL.md) is **enabled**,
/// 2. it is in the agent's **available skills** (when the agent restricts them),
/// 3. it is **active**: the run's slash skill, or else read into `skill_context` (the same
///    resolution as the skill tool policy: [`SkillToolPolicy::active_skills`]),
/// 4. the [`SecretStore`] **supplies** a value for `NAME`,
/// 5. the tool **declares** `NAME` ([`ToolSpec::secrets`]).
///
/// A store or registry failure gives nothing (fail closed).
#[derive(Clone)]
pub struct SecretGrant {
    skills: SkillToolPolicy,
    store: Arc<dyn SecretStore>,
}

impl fmt::Debug for SecretGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretGrant")
            .field("skills", &self.skills)
            .finish_non_exhaustive()
    }
}

impl SecretGrant {
    /// A grant over `skills` (the agent's skill store and available skills) and `store`.
    pub fn new(skills: SkillToolPolicy, store: Arc<dyn SecretStore>) -> Self {
        SecretGrant { skills, store }
    }

    /// The secrets a tool that declares `declared` receives now, for `state` and `run`, in
    /// the order declared. Reads the skill store and the secret store (nothing when
    /// `declared` is empty).
    pub fn env_for(&self, declared: &[String], state: &ThreadState, run: &RunContext) -> SecretEnv {
        if declared.is_empty() {
            return SecretEnv::default();
        }
        let active = match self.skills.active_skills(state, run) {
            Ok(active) => active,
            Err(e) => {
                tracing::warn!(error = %e, "skill store failed: no secrets given");
                return SecretEnv::default();
            }
        };
        let wanted = declared
            .iter()
            .filter(|name| active.iter().any(|s| s.secrets.contains(name)));
        let env = SecretEnv::new(wanted.filter_map(|name| match self.store.get(name) {
            Ok(Some(value)) => Some((name.clone(), value)),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(secret = %name, error = %e, "secret store failed: secret not given");
                None
            }
        }));
        tracing::debug!(given = ?env.names().collect::<Vec<_>>(), "secrets given to a tool call");
        env
    }
}

/// One call's access to secrets: the grant and what the called tool declares.
#[derive(Clone, Debug)]
pub(crate) struct SecretAccess {
    grant: Arc<SecretGrant>,
    declared: Arc<[String]>,
}

impl SecretAccess {
    /// Access for a call of the tool `spec` describes.
    pub(crate) fn new(grant: Arc<SecretGrant>, spec: &ToolSpec) -> Self {
        SecretAccess {
            grant,
            declared: Arc::from(spec.secrets.as_slice()),
        }
    }

    /// The secrets the call receives now.
    pub(crate) fn env(&self, state: &ThreadState, run: &RunContext) -> SecretEnv {
        self.grant.env_for(&self.declared, state, run)
    }
}

/// The tool layer that gives each call of a tool declaring secrets its [`SecretAccess`]
/// (the innermost layer: only a call every other layer let through gets it).
pub(crate) struct SecretInjection {
    grant: Arc<SecretGrant>,
    specs: Arc<HashMap<String, ToolSpec>>,
}

impl SecretInjection {
    pub(crate) fn new(grant: SecretGrant, specs: Arc<HashMap<String, ToolSpec>>) -> Self {
        SecretInjection {
            grant: Arc::new(grant),
            specs,
        }
    }
}

impl ToolLayer for SecretInjection {
    fn name(&self) -> &str {
        "secret_injection"
    }

    fn call<'a>(
        &'a self,
        mut invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        if let Some(spec) = self.specs.get(&invocation.call.name) {
            if !spec.secrets.is_empty() {
                invocation.cx.secrets = Some(SecretAccess::new(Arc::clone(&self.grant), spec));
            }
        }
        next.run(invocation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::{MemorySecrets, SecretValue};
    use crate::skill::{SkillRegistry, SkillStore};
    use crate::{BoxError, ToolContext, ToolSource};

    const SALES: &str = "/mnt/skills/public/sales/SKILL.md";

    fn registry() -> SkillRegistry {
        SkillRegistry::from_skill_mds([(
            SALES,
            "---\nname: sales\ndescription: d\nsecrets: [B, A]\n---\n",
            true,
        )])
    }

    fn grant(skills: impl SkillStore, store: impl SecretStore) -> Arc<SecretGrant> {
        Arc::new(SecretGrant::new(
            SkillToolPolicy::new(Arc::new(skills), None),
            Arc::new(store),
        ))
    }

    fn names(env: &SecretEnv) -> Vec<&str> {
        env.names().collect()
    }

    struct Failing;

    impl SecretStore for Failing {
        fn get(&self, _: &str) -> Result<Option<SecretValue>, BoxError> {
            Err("vault unreachable".into())
        }
    }

    impl SkillStore for Failing {
        fn load_all(&self) -> Result<Vec<crate::skill::Skill>, BoxError> {
            Err("registry unreachable".into())
        }
    }

    fn slash() -> RunContext {
        RunContext::new("t", "u").slash_skill(SALES)
    }

    #[test]
    fn a_call_receives_the_granted_secrets_in_the_order_the_tool_declares_them() {
        let store = MemorySecrets::new().with("A", "a").with("B", "b");
        let spec = ToolSpec::new("t", "d", ToolSource::Config).secrets(["A", "B", "A"]);
        let cx = ToolContext::detached(ThreadState::default(), slash())
            .with_secrets(grant(registry(), store), &spec);
        assert_eq!(names(&cx.secret_env()), ["A", "B"]);
    }

    #[test]
    fn a_failing_secret_store_or_skill_store_gives_nothing() {
        let declared = ["A".to_owned()];
        let state = ThreadState::default();
        let from_failing_secrets = grant(registry(), Failing).env_for(&declared, &state, &slash());
        assert!(from_failing_secrets.is_empty());
        let store = MemorySecrets::new().with("A", "a");
        let from_failing_skills = grant(Failing, store).env_for(&declared, &state, &slash());
        assert!(from_failing_skills.is_empty());
    }

    #[test]
    fn a_context_without_a_grant_has_no_secrets() {
        let cx = ToolContext::detached(ThreadState::default(), slash());
        assert!(cx.secret_env().is_empty());
    }
}
