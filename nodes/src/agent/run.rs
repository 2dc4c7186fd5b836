//! One invocation of an agent as a run: recorded as running before the graph starts, its
//! outputs captured, and settled exactly once when it ends — finished, failed, or dropped
//! (cancelled) before it finished.

use std::sync::Arc;

use stategraph::checkpoints::{CheckpointError, RunId, RunStatus, Saver, ThreadId};
use stategraph::{CompiledGraph, RunConfig, RunError, RunOutcome, UsageMeter};
use tokio::sync::OwnedMutexGuard;

use super::delivered::{self, Checked};
use super::node::AgentCore;
use super::outcome::{
    AgentOutcome, AgentRunError, DeliveryFailure, Recorded, Settlement, RECEIPT_NOT_STORED,
};
use super::outputs::OutputsWatch;
use super::record::RunStore;
use crate::context::RunContext;
use crate::delivery::{settle, DeliveryFacts, DeliveryReceipt};
use crate::sandbox::InvocationLease;
use crate::state::{Delegation, ThreadState};

/// The reason stored for an invocation dropped before it finished.
pub const DROPPED_REASON: &str = "the invocation was dropped before it finished";

/// How the graph part of a run ended.
enum Ended<'a> {
    Finished(&'a RunOutcome<crate::ThreadState>),
    Failed(&'a RunError),
    /// A step's tool handed control to the enclosing graph ([`stategraph::Command::to_parent`]).
    Handed,
    Dropped,
}

/// A run in progress; settled by [`RunScope::finish`], or on drop.
pub(super) struct RunScope {
    pending: Option<PendingRun>,
}

/// What settling a run needs.
struct PendingRun {
    core: Arc<AgentCore>,
    run_id: RunId,
    store: Option<RunStore>,
    /// The agent's graph, when the run is stored: the ledger entries of delegations the run
    /// left unanswered are written into the thread through it.
    graph: Option<CompiledGraph<ThreadState>>,
    outputs: OutputsWatch,
    lease: InvocationLease,
    /// The run's token usage, when its config was [`RunScope::metered`].
    usage: UsageMeter,
    // Held until the run is settled: the agent's next invocation waits for it.
    _turn: OwnedMutexGuard<()>,
}

impl RunScope {
    /// Starts a run of `core` under `config`: waits for the agent's previous invocation to be
    /// settled, records the run as running (when the agent has a checkpointer and the config
    /// a valid thread) and captures the outputs.
    ///
    /// # Errors
    /// [`AgentRunError::Start`]: an invalid run id in the run context, or the run record could
    /// not be stored; nothing ran.
    pub(super) async fn begin(
        core: &Arc<AgentCore>,
        graph: &CompiledGraph<ThreadState>,
        config: &RunConfig,
    ) -> Result<RunScope, AgentRunError> {
        Self::begin_run(core, graph, config, None).await
    }

    /// [`RunScope::begin`] as run `run` when given.
    ///
    /// # Errors
    /// As [`RunScope::begin`].
    pub(super) async fn begin_run(
        core: &Arc<AgentCore>,
        graph: &CompiledGraph<ThreadState>,
        config: &RunConfig,
        run: Option<RunId>,
    ) -> Result<RunScope, AgentRunError> {
        let mut scope = Self::begin_as(core, graph.checkpointer(), config, run).await?;
        if let Some(pending) = &mut scope.pending {
            pending.graph = pending.store.as_ref().map(|_| graph.clone());
        }
        Ok(scope)
    }

    /// [`RunScope::begin`] for the run `run` (instead of the run context's id, or a
    /// generated one).
    ///
    /// # Errors
    /// As [`RunScope::begin`].
    pub(super) async fn begin_as(
        core: &Arc<AgentCore>,
        saver: Option<&Arc<dyn Saver>>,
        config: &RunConfig,
        run: Option<RunId>,
    ) -> Result<RunScope, AgentRunError> {
        let turn = Arc::clone(&core.invocation.turn).lock_owned().await;
        let (run_id, context) = invocation_context(&core.run, config, run)?;
        core.begin_invocation(context);
        let thread = config.thread_name().and_then(|t| ThreadId::new(t).ok());
        let store = match (saver, thread) {
            (Some(saver), Some(thread)) => RunStore::start(Arc::clone(saver), thread, &run_id)
                .await
                .map_err(AgentRunError::Start)?,
            _ => None,
        };
        let outputs = OutputsWatch::before(core).await;
        Ok(RunScope {
            pending: Some(PendingRun {
                lease: InvocationLease::begin(core.sandbox.as_ref()),
                usage: UsageMeter::new(),
                core: Arc::clone(core),
                run_id,
                store,
                graph: None,
                outputs,
                _turn: turn,
            }),
        })
    }

    /// `config` with this run's usage meter: the graph run made with it has its token usage
    /// settled with the run (also when it fails or is dropped).
    pub(super) fn metered(&self, config: &RunConfig) -> RunConfig {
        match &self.pending {
            Some(pending) => config.clone().usage_meter(pending.usage.clone()),
            None => config.clone(),
        }
    }

    /// Settles the run with the graph's `result`.
    ///
    /// # Errors
    /// [`AgentRunError::Run`] when the graph failed; [`AgentRunError::Delivery`] when it
    /// finished but its delivery failed.
    pub(super) async fn finish(
        mut self,
        result: Result<RunOutcome<crate::ThreadState>, RunError>,
    ) -> Result<AgentOutcome, AgentRunError> {
        let Some(pending) = self.pending.take() else {
            unreachable!("`begin` sets the pending run; only this consuming call and drop take it")
        };
        match result {
            Ok(outcome) => {
                let (settlement, failure) = pending.settle(Ended::Finished(&outcome)).await;
                let outcome = AgentOutcome::new(outcome, settlement);
                match failure {
                    None => Ok(outcome),
                    Some(failure) => Err(AgentRunError::Delivery {
                        failure,
                        outcome: Box::new(outcome),
                    }),
                }
            }
            Err(error) => {
                let (settlement, _) = pending.settle(Ended::Failed(&error)).await;
                Err(AgentRunError::Run {
                    error,
                    settlement: Box::new(settlement),
                })
            }
        }
    }
}

impl RunScope {
    /// Settles a run whose tool handed control to the enclosing graph: a success whose
    /// delivery is checked as a finished run's is.
    ///
    /// # Errors
    /// [`AgentRunError::HandedOff`] when its delivery failed.
    pub(super) async fn finish_handed(mut self) -> Result<Settlement, AgentRunError> {
        let Some(pending) = self.pending.take() else {
            unreachable!("`begin` sets the pending run; only this consuming call and drop take it")
        };
        match pending.settle(Ended::Handed).await {
            (settlement, None) => Ok(settlement),
            (settlement, Some(failure)) => Err(AgentRunError::HandedOff {
                failure,
                settlement: Box::new(settlement),
            }),
        }
    }
}

impl Drop for RunScope {
    fn drop(&mut self) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        // Dropped before `finish`: the invocation's future was cancelled.
        settle_dropped(pending);
    }
}

/// How long a drop with no runtime current waits for its run to be settled.
const DROP_SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Settles a dropped run as cancelled, holding the agent's turn until the receipt and status
/// are stored: on the current runtime in the background; with none current, before the drop
/// returns, on a runtime of its own (a runtime's worker cannot block, a plain thread can). A
/// settlement that never ends (its runtime shut down first, or none could be made) leaves
/// the run `running` and no longer held: the thread's next opening cancels it.
fn settle_dropped(pending: PendingRun) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(async move {
                pending.settle(Ended::Dropped).await;
            });
        }
        // At thread exit no runtime can be entered any more.
        Err(e) if e.is_thread_local_destroyed() => {
            let run = &pending.run_id;
            tracing::warn!(run = %run, "a dropped run left to the thread's next opening");
        }
        Err(_) => settle_here(pending),
    }
}

/// [`settle_dropped`] with no runtime current: settles on a current-thread runtime, blocking.
fn settle_here(pending: PendingRun) {
    let run = pending.run_id.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let settled = match runtime {
        Ok(runtime) => runtime.block_on(async {
            tokio::time::timeout(DROP_SETTLE_LIMIT, pending.settle(Ended::Dropped))
                .await
                .is_ok()
        }),
        Err(e) => {
            tracing::warn!(run = %run, error = %e, "no runtime to settle a dropped run");
            false
        }
    };
    if !settled {
        tracing::warn!(run = %run, "a dropped run left to the thread's next opening");
    }
}

/// The run's id and the context its nodes, tools and layers see: the agent's context with the
/// run's id (`run`, else the context's, else a generated one) and the thread the config runs
/// on (a context assembled for another thread, or for none, follows the real thread).
fn invocation_context(
    agent: &Arc<RunContext>,
    config: &RunConfig,
    run: Option<RunId>,
) -> Result<(RunId, Arc<RunContext>), AgentRunError> {
    let run_id = match (run, agent.run_id.as_deref()) {
        (Some(run), _) => run,
        (None, Some(id)) => RunId::new(id).map_err(AgentRunError::Start)?,
        (None, None) => RunId::generate(),
    };
    let thread = config.thread_name().map(str::to_owned);
    if agent.run_id.as_deref() == Some(run_id.as_str())
        && (thread.is_none() || thread == agent.thread_id)
    {
        return Ok((run_id, Arc::clone(agent)));
    }
    let context = RunContext {
        run_id: Some(run_id.to_string()),
        thread_id: thread.or_else(|| agent.thread_id.clone()),
        ..(**agent).clone()
    };
    Ok((run_id, Arc::new(context)))
}

/// The status, reason and stop reason a graph's end gives a run (before delivery).
fn status_of(ended: &Ended<'_>) -> (RunStatus, Option<String>, Option<String>) {
    match ended {
        Ended::Finished(o) if o.is_interrupted() => (RunStatus::Interrupted, None, None),
        Ended::Finished(_) | Ended::Handed => (RunStatus::Success, None, None),
        Ended::Dropped => (RunStatus::Cancelled, Some(DROPPED_REASON.to_owned()), None),
        Ended::Failed(e) => {
            let reason = Some(e.to_string());
            match e {
                RunError::Cancelled { .. } => (RunStatus::Cancelled, reason, None),
                RunError::Timeout { .. } => (RunStatus::Timeout, reason, None),
                RunError::RecursionLimit { .. } => {
                    (RunStatus::Error, reason, Some("recursion_limit".to_owned()))
                }
                e if super::TurnLimitReached::in_run_error(e).is_some() => (
                    RunStatus::Error,
                    reason,
                    Some(super::TURN_CAPPED.to_owned()),
                ),
                _ => (RunStatus::Error, reason, None),
            }
        }
    }
}

/// Writes the ledger entries of the delegations `run` started and did not answer (their tool
/// calls were dropped: the run was cancelled, or the step failed) into the thread, keeping
/// what it had left to run. A failure is logged: the run's own status is not changed by it.
async fn record_unanswered(
    graph: &CompiledGraph<ThreadState>,
    store: &RunStore,
    run: &RunId,
    entries: Vec<Delegation>,
) {
    if entries.is_empty() {
        return;
    }
    let update = ThreadState::update().delegations(entries);
    if let Err(e) = graph.amend_state(store.thread().as_str(), update).await {
        tracing::warn!(run = %run, error = %e, "unanswered delegations not recorded in the ledger");
    }
}

/// Store `receipt` (nothing to do without a store). A receipt with a verdict that cannot be
/// stored for a run that succeeded makes the run an error. The failed attempts' errors.
async fn store_receipt(
    store: Option<&RunStore>,
    run_id: &RunId,
    receipt: &DeliveryReceipt,
    status: &mut RunStatus,
    reason: &mut Option<String>,
    failure: &mut Option<DeliveryFailure>,
) -> Vec<CheckpointError> {
    let Some(store) = store else {
        return Vec::new();
    };
    match store.put_receipt(run_id, receipt).await {
        Ok(()) => Vec::new(),
        Err(errors) => {
            if *status == RunStatus::Success && receipt.verdict.is_some() {
                *status = RunStatus::Error;
                *reason = Some(RECEIPT_NOT_STORED.to_owned());
                *failure = Some(DeliveryFailure::ReceiptNotStored);
            }
            errors
        }
    }
}

impl PendingRun {
    /// Releases what the invocation acquired, decides delivery, records the Delivered trace,
    /// then stores the receipt and, after it, the terminal status.
    async fn settle(self, ended: Ended<'_>) -> (Settlement, Option<DeliveryFailure>) {
        let PendingRun {
            core,
            run_id,
            store,
            graph,
            outputs,
            lease,
            usage,
            _turn,
        } = self;
        let usage = usage.total();
        lease.end().await;
        if let (Some(graph), Some(store)) = (&graph, &store) {
            record_unanswered(graph, store, &run_id, core.take_unanswered()).await;
        }
        let (mut status, mut reason, stop_reason) = status_of(&ended);
        let completed = status == RunStatus::Success;
        let presented = core.take_presented();
        let mut facts = DeliveryFacts::default();
        for p in &presented {
            facts.record(Some(&p.tool), [p.path.clone()]);
        }
        let (produced, outputs_error) = if completed {
            outputs.produced(&core).await
        } else {
            (Vec::new(), outputs.abandon(&core))
        };
        // The invocation's context is needed until the outputs are captured.
        let stop_reason = stop_reason.or(core.end_invocation());
        let receipt = settle(facts, produced);
        let mut failure = None;
        if completed {
            if let Err(incomplete) = receipt.check() {
                status = RunStatus::Error;
                reason = Some(incomplete.to_string());
                failure = Some(DeliveryFailure::Incomplete(incomplete));
            }
        }
        let errors = store_receipt(
            store.as_ref(),
            &run_id,
            &receipt,
            &mut status,
            &mut reason,
            &mut failure,
        )
        .await;
        let checked = match failure {
            _ if !completed => Checked::NotRun(status),
            Some(DeliveryFailure::ReceiptNotStored) => Checked::Lost,
            _ => Checked::Done(&receipt),
        };
        delivered::record(&core.trace, &presented, checked);
        let recorded = match &store {
            None => Recorded::NotStored,
            Some(store) => {
                let reasons = (reason.clone(), stop_reason.clone());
                let trace = core.trace.for_run(run_id.as_str());
                let ended = super::record::RunEnding {
                    status,
                    reasons,
                    usage,
                };
                store.finish(&run_id, ended, &trace, errors).await
            }
        };
        core.trace.enter_run(None, None);
        let settlement = Settlement {
            run_id,
            status,
            reason,
            stop_reason,
            receipt,
            outputs_error,
            recorded,
            usage,
        };
        (settlement, failure)
    }
}
