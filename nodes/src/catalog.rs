//! Available: assembling the candidate catalog from tool sources in a fixed priority order.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::tool::{Tool, ToolSource};
use crate::BoxError;

/// A source of tools that must be asked for its list (an MCP server, a plugin registry).
pub trait ToolProvider: Send + Sync + 'static {
    /// The provider's name (reports name it).
    fn name(&self) -> &str;
    /// Which source its tools count as.
    fn source(&self) -> ToolSource;
    /// List the tools.
    ///
    /// # Errors
    /// Any failure to reach or read the source; assembly reports it and goes on without it.
    fn list(&self) -> BoxFuture<'_, Result<Vec<Arc<dyn Tool>>, BoxError>>;
}

/// A tool left out of the catalog because an earlier source had one of the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedDuplicate {
    /// The name.
    pub name: String,
    /// The source of the tool skipped.
    pub skipped: ToolSource,
    /// The source of the tool kept.
    pub kept: ToolSource,
    /// The provider that listed the tool skipped (`None`: registered directly).
    pub skipped_provider: Option<String>,
    /// The provider that listed the tool kept (`None`: registered directly).
    pub kept_provider: Option<String>,
}

impl fmt::Display for SkippedDuplicate {
    /// `duplicate name: the mcp tool of "a" was kept, this mcp one of "b" skipped`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let of = |provider: &Option<String>| match provider {
            Some(p) => format!(" of {p:?}"),
            None => String::new(),
        };
        write!(
            f,
            "duplicate name: the {} tool{} was kept, this {} one{} skipped",
            self.kept,
            of(&self.kept_provider),
            self.skipped,
            of(&self.skipped_provider)
        )
    }
}

/// A provider that failed to list its tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFailure {
    /// The provider.
    pub provider: String,
    /// Its error.
    pub error: String,
}

/// A tool an admission rule kept out of the catalog (before duplicates are resolved, so it
/// never shadows a tool of the same name from a later source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilteredTool {
    /// The name.
    pub name: String,
    /// The source it came from.
    pub source: ToolSource,
    /// The rule that kept it out.
    pub by: AdmissionRule,
    /// Why.
    pub reason: String,
}

/// The admission rules that can keep a candidate out of the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdmissionRule {
    /// The catalog's own reserved names (the agent's `tool_search`); reported as `catalog`.
    ReservedName,
    /// Config tools of group `bash` need [`AgentBuilder::allow_host_bash`]; `host_bash`.
    ///
    /// [`AgentBuilder::allow_host_bash`]: crate::AgentBuilder::allow_host_bash
    HostBash,
    /// Config tools outside [`AgentBuilder::tool_groups`]; `tool_groups`.
    ///
    /// [`AgentBuilder::tool_groups`]: crate::AgentBuilder::tool_groups
    ToolGroups,
    /// Memory tools of an agent not granted a store ([`AgentBuilder::memory`]);
    /// `memory_grant`.
    ///
    /// [`AgentBuilder::memory`]: crate::AgentBuilder::memory
    MemoryGrant,
}

impl AdmissionRule {
    /// The name the trace reports for the rule (`catalog`, `host_bash`, `tool_groups`,
    /// `memory_grant`).
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionRule::ReservedName => "catalog",
            AdmissionRule::HostBash => "host_bash",
            AdmissionRule::ToolGroups => "tool_groups",
            AdmissionRule::MemoryGrant => crate::memory::MEMORY_GRANT,
        }
    }
}

impl fmt::Display for AdmissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for AdmissionRule {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for AdmissionRule {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Why a candidate was kept out of the catalog: the rule, and the reason it gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The rule that refused the candidate.
    pub by: AdmissionRule,
    /// Why.
    pub reason: String,
}

/// A candidate: its source, the provider that listed it (`None`: registered directly), the tool.
type Candidate = (ToolSource, Option<String>, Arc<dyn Tool>);

/// An admission rule: `Ok(())` admits a candidate, `Err(rejection)` keeps it out.
pub type Admit<'a> = &'a (dyn Fn(&crate::ToolSpec) -> Result<(), Rejection> + Sync);

/// The candidate catalog: tools in priority order, one per name, with what was left out.
#[derive(Clone, Default)]
pub struct Catalog {
    /// The tools, by source priority then registration order.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Candidates an admission rule kept out (tool groups, host bash, reserved names).
    pub filtered: Vec<FilteredTool>,
    /// Duplicates skipped (first occurrence wins).
    pub skipped: Vec<SkippedDuplicate>,
    /// Providers that failed (skipped, never fatal).
    pub failures: Vec<SourceFailure>,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &self.names())
            .field("filtered", &self.filtered)
            .field("skipped", &self.skipped)
            .field("failures", &self.failures)
            .finish()
    }
}

impl Catalog {
    /// The tool names, in order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.spec().name.clone()).collect()
    }

    /// Assemble a catalog from `tools` (registered directly) and `providers` (asked for their
    /// lists concurrently). Sources are taken in [`ToolSource::ALL`] order, each in
    /// registration order; of several tools with one name the first is kept and each other is
    /// reported in [`Catalog::skipped`]. A provider that fails is reported in
    /// [`Catalog::failures`] and contributes nothing.
    pub async fn assemble(
        tools: Vec<Arc<dyn Tool>>,
        providers: &[Arc<dyn ToolProvider>],
    ) -> Catalog {
        Self::assemble_with(tools, providers, &|_| Ok(())).await
    }

    /// [`Catalog::assemble`], with every candidate (registered or listed by a provider) put to
    /// `admit` before duplicates are resolved; refused ones are reported in
    /// [`Catalog::filtered`].
    pub async fn assemble_with(
        tools: Vec<Arc<dyn Tool>>,
        providers: &[Arc<dyn ToolProvider>],
        admit: Admit<'_>,
    ) -> Catalog {
        let listed = futures::future::join_all(providers.iter().map(|p| p.list())).await;
        let mut candidates: Vec<Candidate> = tools
            .into_iter()
            .map(|t| (t.spec().source, None, t))
            .collect();
        let mut failures = Vec::new();
        for (provider, result) in providers.iter().zip(listed) {
            match result {
                Ok(list) => candidates.extend(
                    list.into_iter()
                        .map(|t| (provider.source(), Some(provider.name().to_owned()), t)),
                ),
                Err(e) => {
                    tracing::warn!(provider = provider.name(), error = %e, "tool source failed; skipped");
                    failures.push(SourceFailure {
                        provider: provider.name().to_owned(),
                        error: e.to_string(),
                    });
                }
            }
        }
        // Stable: registration order within one source.
        candidates.sort_by_key(|(source, _, _)| *source);
        let mut filtered = Vec::new();
        candidates.retain(|(source, _, tool)| match admit(tool.spec()) {
            Ok(()) => true,
            Err(Rejection { by, reason }) => {
                filtered.push(FilteredTool {
                    name: tool.spec().name.clone(),
                    source: *source,
                    by,
                    reason,
                });
                false
            }
        });
        // The source and provider each kept name came from.
        let mut kept: HashMap<String, (ToolSource, Option<String>)> = HashMap::new();
        let mut catalog = Catalog {
            failures,
            filtered,
            ..Catalog::default()
        };
        for (source, provider, tool) in candidates {
            let name = tool.spec().name.clone();
            if let Some((kept, kept_provider)) = kept.get(&name) {
                let skipped = SkippedDuplicate {
                    name,
                    skipped: source,
                    kept: *kept,
                    skipped_provider: provider,
                    kept_provider: kept_provider.clone(),
                };
                tracing::warn!(tool = %skipped.name, "{skipped}");
                catalog.skipped.push(skipped);
            } else {
                kept.insert(name, (source, provider));
                catalog.tools.push(tool);
            }
        }
        catalog
    }
}
