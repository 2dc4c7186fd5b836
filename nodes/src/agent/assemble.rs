//! Assembly: the stages that turn an [`AgentBuilder`] into an [`Agent`] for one run —
//! Available, Authorized, the deferred catalog, the policies, the two layer chains and the
//! system prompt — each recorded in the run's [`CapabilityTrace`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use crate::authz::Authorization;
use crate::catalog::{Catalog, ToolProvider};
use crate::context::RunContext;
use crate::deferred::{DeferredSetup, MakeDeferredSetup, TOOL_SEARCH};
use crate::guardrail::{AuthorizationGuardrail, Guardrail};
use crate::memory::MemoryGrant;
use crate::middleware::{
    ModelLayer, PolicyLayer, ToolErrorHandling, ToolLayer, ToolMap, ToolPolicy,
};
use crate::sandbox::SandboxUpdate;
use crate::secret::{SecretGrant, SecretInjection, SecretStore};
use crate::skill::{SkillStore, SkillToolPolicy};
use crate::tool::{Tool, ToolSource, ToolSpec};
use crate::trace::{CapabilityTrace, Stage};

use super::admission::AdmissionRules;
use super::batches::TurnPlans;
use super::graph::build_graph;
use super::node::{AgentCore, Invocation};
use super::{Agent, AgentBuilder, AgentError};

/// Every tool's spec by name, shared by the policy layers.
type SpecMap = Arc<HashMap<String, ToolSpec>>;

impl AgentBuilder {
    /// Assemble the agent for one run: Available (catalog from every source, first name
    /// wins), Authorized (the principal of `run` filters it), the deferred catalog over what
    /// remains, and the layer chains. Every step is recorded in the agent's trace.
    ///
    /// # Errors
    /// [`AgentError`] if the deferred catalog cannot be built or the graph does not compile.
    pub async fn assemble(self, run: RunContext) -> Result<Agent, AgentError> {
        let AgentBuilder {
            model,
            system_prompt,
            tools,
            providers,
            authorization,
            guardrails,
            skills,
            available_skills,
            secrets,
            defer,
            model_layers,
            tool_layers,
            policies,
            observers,
            max_turns,
            stream,
            groups,
            host_bash,
            sandbox,
            make_deferred,
            delegation_log,
            store,
        } = self;
        let trace = CapabilityTrace::new();
        let rules = AdmissionRules {
            reserve_tool_search: defer,
            host_bash,
            groups,
            memory: store.is_some(),
        };
        let sources = Sources {
            tools,
            providers: &providers,
            make_deferred: make_deferred.as_deref(),
        };
        let (catalog, tools, deferred) =
            executable(sources, &rules, authorization.as_ref(), &run, &trace).await?;
        let specs = spec_map(&tools);
        let skill_policy = skills.map(|store| skill_policy(store, available_skills, &tools));
        let mut policies = policy_order(skill_policy.as_ref(), deferred.as_ref(), policies);
        policies.insert(0, Arc::new(MemoryGrant::new(store.is_some())));
        let model_layers = model_chain(&policies, &specs, model_layers);
        let tool_layers = tool_chain(
            sandbox.is_some(),
            authorization
                .as_ref()
                .map(|a| authorization_guardrail(a, deferred.is_some())),
            guardrails,
            policy_layers(&policies, &specs),
            tool_layers,
            secret_layer(skill_policy.as_ref(), secrets, &specs),
        );
        let core = Arc::new(AgentCore {
            model,
            system: system_prompt_with(system_prompt, deferred.as_ref()),
            schemas: tools.iter().map(|t| t.spec().schema()).collect(),
            tools: tool_map(&tools),
            model_layers,
            tool_layers,
            observers,
            run: Arc::new(run),
            trace,
            model_calls: AtomicU32::new(0),
            stream,
            sandbox,
            store,
            max_turns,
            invocation: Invocation::default(),
            plans: TurnPlans::default(),
        });
        let graph = build_graph(&core)?;
        Ok(Agent {
            graph,
            core,
            catalog,
            deferred,
            max_turns,
            delegation_log,
        })
    }
}

/// Where the agent's tools come from: its own, its providers', and the application's maker of
/// the deferred catalog.
struct Sources<'a> {
    tools: Vec<Arc<dyn Tool>>,
    providers: &'a [Arc<dyn ToolProvider>],
    make_deferred: Option<&'a dyn MakeDeferredSetup>,
}

/// The tools the agent can execute: Available (the catalog), Authorized, then the deferred
/// catalog over them, with `tool_search` when the agent defers.
///
/// # Errors
/// As [`deferred_catalog`].
async fn executable(
    sources: Sources<'_>,
    rules: &AdmissionRules,
    authorization: Option<&Authorization>,
    run: &RunContext,
    trace: &CapabilityTrace,
) -> Result<(Catalog, Vec<Arc<dyn Tool>>, Option<DeferredSetup>), AgentError> {
    let catalog = available(sources.tools, sources.providers, rules, trace).await;
    let mut tools = authorized(&catalog, authorization, run, trace).await;
    let deferred = deferred_catalog(rules.reserve_tool_search, sources.make_deferred, &tools)?;
    if let Some(setup) = &deferred {
        tools.push(tool_search(setup, trace));
    }
    Ok((catalog, tools, deferred))
}

/// The agent's tools by name, for the tool node.
fn tool_map(tools: &[Arc<dyn Tool>]) -> ToolMap {
    tools
        .iter()
        .map(|t| (t.spec().name.clone(), Arc::clone(t)))
        .collect()
}

/// The specs of the agent's tools, by name.
fn spec_map(tools: &[Arc<dyn Tool>]) -> SpecMap {
    Arc::new(
        tools
            .iter()
            .map(|t| (t.spec().name.clone(), t.spec().clone()))
            .collect(),
    )
}

/// Available: the catalog from every source (first name wins), with what the admission rules
/// kept out, the duplicates skipped and the sources that failed (as `provider/*`) recorded as
/// removals.
async fn available(
    tools: Vec<Arc<dyn Tool>>,
    providers: &[Arc<dyn ToolProvider>],
    rules: &AdmissionRules,
    trace: &CapabilityTrace,
) -> Catalog {
    let catalog = Catalog::assemble_with(tools, providers, &|spec| rules.admit(spec)).await;
    for f in &catalog.filtered {
        trace.remove(&f.name, Stage::Available, f.by.as_str(), f.reason.clone());
    }
    for t in &catalog.tools {
        trace.pass(&t.spec().name, Stage::Available);
    }
    for d in &catalog.skipped {
        trace.remove(&d.name, Stage::Available, "catalog", d.to_string());
    }
    // A source that failed has no tool names to show: its line is `provider/*`.
    for f in &catalog.failures {
        trace.remove(
            &format!("{}/*", f.provider),
            Stage::Available,
            "tool_source",
            format!("the source failed: {}", f.error),
        );
    }
    catalog
}

/// Authorized: the catalog's tools the principal of `run` may use (all of them without an
/// authorization), the others recorded as removed by `authorization`.
async fn authorized(
    catalog: &Catalog,
    authorization: Option<&Authorization>,
    run: &RunContext,
    trace: &CapabilityTrace,
) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = catalog.tools.clone();
    if let Some(authz) = authorization {
        let principal = run.principal(&authz.default_role);
        let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
        let (allowed, denied) = authz.filter(&principal, &names).await;
        for (name, reason) in &denied {
            trace.remove(name, Stage::Authorized, "authorization", reason.clone());
        }
        let allowed: HashSet<String> = allowed.into_iter().collect();
        tools.retain(|t| allowed.contains(&t.spec().name));
    }
    for t in &tools {
        trace.pass(&t.spec().name, Stage::Authorized);
    }
    tools
}

/// The deferred catalog over the authorized tools only, made by the application's `make` or
/// [`DeferredSetup::build`] (`None` when deferral is off or nothing is deferred).
///
/// # Errors
/// Fail closed rather than bind a deferrable tool's schema: [`AgentError::DeferredSetup`]
/// naming the deferrable tools the setup left out (all of them when it came back empty), and
/// [`AgentError::DeferredNotCandidates`] naming the tools it defers that the agent does not
/// have.
fn deferred_catalog(
    defer: bool,
    make: Option<&dyn MakeDeferredSetup>,
    tools: &[Arc<dyn Tool>],
) -> Result<Option<DeferredSetup>, AgentError> {
    if !defer {
        return Ok(None);
    }
    let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec().clone()).collect();
    let setup = match make {
        Some(make) => make.make(&specs),
        None => DeferredSetup::build(&specs),
    };
    let deferred: HashSet<&str> = setup
        .iter()
        .flat_map(|s| s.catalog())
        .map(|s| s.name.as_str())
        .collect();
    let left_out: Vec<String> = specs
        .iter()
        .filter(|s| s.deferrable && !deferred.contains(s.name.as_str()))
        .map(|s| s.name.clone())
        .collect();
    if !left_out.is_empty() {
        return Err(AgentError::DeferredSetup(left_out));
    }
    let candidates: HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let foreign: Vec<String> = setup
        .iter()
        .flat_map(|s| s.catalog())
        .filter(|s| !candidates.contains(s.name.as_str()))
        .map(|s| s.name.clone())
        .collect();
    if !foreign.is_empty() {
        return Err(AgentError::DeferredNotCandidates(foreign));
    }
    Ok(setup)
}

/// The deferred catalog's `tool_search`, recorded as Available and Authorized.
fn tool_search(setup: &DeferredSetup, trace: &CapabilityTrace) -> Arc<dyn Tool> {
    let search = setup.tool_search();
    trace.pass(TOOL_SEARCH, Stage::Available);
    trace.pass(TOOL_SEARCH, Stage::Authorized);
    search
}

/// The skill tool policy over `store`. Only the runtime's own tools get the framework
/// exemption: a server tool that happens to be named `read_file` does not.
fn skill_policy(
    store: Arc<dyn SkillStore>,
    available_skills: Option<Vec<String>>,
    tools: &[Arc<dyn Tool>],
) -> SkillToolPolicy {
    let trusted = tools
        .iter()
        .map(|t| t.spec())
        .filter(|s| s.source == ToolSource::BuiltIn)
        .map(|s| s.name.clone());
    SkillToolPolicy::new(store, available_skills).trusted_framework_tools(trusted)
}

/// The layer giving calls of tools that declare secrets their access, over the skill
/// policy's resolution of active skills and the application's store (`None` without both).
fn secret_layer(
    skills: Option<&SkillToolPolicy>,
    store: Option<Arc<dyn SecretStore>>,
    specs: &SpecMap,
) -> Option<Arc<dyn ToolLayer>> {
    let grant = SecretGrant::new(skills?.clone(), store?);
    Some(Arc::new(SecretInjection::new(grant, Arc::clone(specs))))
}

/// The policies in the order they apply: the skill policy, the deferred filter, then the
/// user's.
fn policy_order(
    skill_policy: Option<&SkillToolPolicy>,
    deferred: Option<&DeferredSetup>,
    user: Vec<Arc<dyn ToolPolicy>>,
) -> Vec<Arc<dyn ToolPolicy>> {
    let mut policies: Vec<Arc<dyn ToolPolicy>> = Vec::new();
    policies.extend(skill_policy.map(|p| Arc::new(p.clone()) as Arc<dyn ToolPolicy>));
    if let Some(setup) = deferred {
        policies.push(Arc::new(setup.filter()));
    }
    policies.extend(user);
    policies
}

/// The model chain: the policies, then the user's layers, then the model.
fn model_chain(
    policies: &[Arc<dyn ToolPolicy>],
    specs: &SpecMap,
    user: Vec<Arc<dyn ModelLayer>>,
) -> Vec<Arc<dyn ModelLayer>> {
    let mut layers: Vec<Arc<dyn ModelLayer>> = policies
        .iter()
        .map(|p| {
            Arc::new(PolicyLayer::new(Arc::clone(p), Arc::clone(specs))) as Arc<dyn ModelLayer>
        })
        .collect();
    layers.extend(user);
    layers
}

/// The policies as tool layers.
fn policy_layers(policies: &[Arc<dyn ToolPolicy>], specs: &SpecMap) -> Vec<Arc<dyn ToolLayer>> {
    policies
        .iter()
        .map(|p| Arc::new(PolicyLayer::new(Arc::clone(p), Arc::clone(specs))) as Arc<dyn ToolLayer>)
        .collect()
}

/// The call-time authorization re-check (`tool_search` is infrastructure it always lets by
/// when the agent has one).
fn authorization_guardrail(authz: &Authorization, has_tool_search: bool) -> Arc<dyn ToolLayer> {
    let infra = has_tool_search.then(|| TOOL_SEARCH.to_owned());
    Arc::new(Guardrail::new(AuthorizationGuardrail::new(authz.clone(), infra)).fail(authz.fail))
}

/// The tool chain: the sandbox update (outermost, when the agent has a sandbox), the
/// authorization re-check, the guardrails, error handling, the policies, the user's layers,
/// the secret injection (innermost, when the agent has skills and a secret store), then the
/// handler.
fn tool_chain(
    sandbox: bool,
    authorization: Option<Arc<dyn ToolLayer>>,
    guardrails: Vec<Guardrail>,
    policies: Vec<Arc<dyn ToolLayer>>,
    user: Vec<Arc<dyn ToolLayer>>,
    secrets: Option<Arc<dyn ToolLayer>>,
) -> Vec<Arc<dyn ToolLayer>> {
    let mut layers: Vec<Arc<dyn ToolLayer>> = Vec::new();
    if sandbox {
        layers.push(Arc::new(SandboxUpdate));
    }
    layers.extend(authorization);
    layers.extend(
        guardrails
            .into_iter()
            .map(|g| Arc::new(g) as Arc<dyn ToolLayer>),
    );
    layers.push(Arc::new(ToolErrorHandling));
    layers.extend(policies);
    layers.extend(user);
    layers.extend(secrets);
    layers
}

/// The system prompt: the user's, then the deferred catalog's section; `None` when both are
/// empty.
fn system_prompt_with(prompt: Option<String>, deferred: Option<&DeferredSetup>) -> Option<String> {
    let mut system = prompt.unwrap_or_default();
    if let Some(setup) = deferred {
        let section = setup.prompt_section();
        if !section.is_empty() {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(&section);
        }
    }
    (!system.is_empty()).then_some(system)
}
