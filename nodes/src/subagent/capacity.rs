//! Capacity: the process-wide limit on concurrent subagents ([`SubagentLimiter`], a bounded
//! wait, never an unbounded spawn) and the per-run limits on delegation calls
//! ([`DelegationLimit`], a model layer rewriting the lead's AI message).

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::message::{FinishReason, ToolCall};
use crate::middleware::{ModelCall, ModelLayer, ModelNext};
use crate::model::{ModelError, ModelResponse};
use crate::state::ThreadState;

use super::pool::{MULTI_TASK_TOOL, TASK_TOOL};

/// The notice appended to the lead's answer when its delegation budget is spent.
pub const LIMIT_NOTICE: &str = "[SUBAGENT LIMIT REACHED] This run has used all of its \
     delegations; the remaining task calls were not started. Finish with what you have.";

/// No subagent slot became free within the wait bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no subagent slot free: all {limit} are in use and none was released within {waited:?}")]
pub struct CapacityError {
    /// The global limit.
    pub limit: usize,
    /// How long the call waited.
    pub waited: Duration,
}

/// The process-wide limit on concurrent subagents, shared by every run that clones it: a
/// delegation waits up to `wait` for a slot, then fails with a [`CapacityError`].
#[derive(Clone, Debug)]
pub struct SubagentLimiter {
    slots: Arc<Semaphore>,
    limit: usize,
    wait: Duration,
}

/// A held subagent slot (released on drop).
#[derive(Debug)]
pub struct SubagentPermit(#[allow(dead_code)] OwnedSemaphorePermit);

impl SubagentLimiter {
    /// At most `limit` (at least 1) concurrent subagents; a delegation waits up to `wait`.
    pub fn new(limit: usize, wait: Duration) -> Self {
        let limit = limit.max(1);
        SubagentLimiter {
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            wait,
        }
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Slots free now.
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }

    /// Take a slot, waiting up to the bound.
    ///
    /// # Errors
    /// [`CapacityError`] when no slot is free in time.
    pub async fn acquire(&self) -> Result<SubagentPermit, CapacityError> {
        let err = CapacityError {
            limit: self.limit,
            waited: self.wait,
        };
        match tokio::time::timeout(self.wait, Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(SubagentPermit(permit)),
            _ => Err(err),
        }
    }
}

impl Default for SubagentLimiter {
    /// 3 concurrent subagents, a 60 s wait.
    fn default() -> Self {
        SubagentLimiter::new(3, Duration::from_secs(60))
    }
}

/// Why a lead's run stopped delegating.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStopReason {
    /// The run's total delegation limit was reached.
    SubagentLimitCapped,
}

impl RunStopReason {
    /// The snake-case name (`subagent_limit_capped`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStopReason::SubagentLimitCapped => "subagent_limit_capped",
        }
    }
}

/// The per-run delegation limits, as a model layer on the lead: of each AI message it keeps
/// the first `per_turn` `task` calls and every other call, and no delegation beyond `total`
/// per run (counted from the run's ledger entries). When the total cut a call, the message
/// gets [`LIMIT_NOTICE`] and the run's stop reason becomes
/// [`RunStopReason::SubagentLimitCapped`], stamped on the run's own
/// [`StopStamp`](crate::StopStamp): read it from that run's settlement
/// ([`Settlement::stop_reason`](crate::Settlement::stop_reason)). The layer itself keeps no state
/// of a run, so one layer serves every run of a reused agent.
/// A `multi_task` call counts as one delegation per task and is kept only whole.
#[derive(Clone)]
pub struct DelegationLimit {
    per_turn: usize,
    total: usize,
}

impl fmt::Debug for DelegationLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationLimit")
            .field("per_turn", &self.per_turn)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl DelegationLimit {
    /// At most `per_turn` task calls per model turn and `total` delegations per run (each at
    /// least 1).
    pub fn new(per_turn: usize, total: usize) -> Self {
        DelegationLimit {
            per_turn: per_turn.max(1),
            total: total.max(1),
        }
    }

    /// Rewrite `calls` for a run that already made `prior` delegations: the kept calls, and
    /// whether the total cut one.
    pub fn keep(&self, calls: Vec<ToolCall>, prior: usize) -> (Vec<ToolCall>, bool) {
        let mut remaining = self.total.saturating_sub(prior);
        let mut tasks_this_turn = 0;
        let mut capped = false;
        let mut kept = Vec::with_capacity(calls.len());
        for call in calls {
            let cost = match call.name.as_str() {
                TASK_TOOL => 1,
                MULTI_TASK_TOOL => multi_task_size(&call),
                _ => {
                    kept.push(call);
                    continue;
                }
            };
            if cost > remaining {
                capped = true;
                continue;
            }
            if call.name == TASK_TOOL {
                if tasks_this_turn >= self.per_turn {
                    continue;
                }
                tasks_this_turn += 1;
            }
            remaining -= cost;
            kept.push(call);
        }
        (kept, capped)
    }
}

/// How many delegations a `multi_task` call asks for (at least 1).
fn multi_task_size(call: &ToolCall) -> usize {
    call.args
        .get("tasks")
        .and_then(|t| t.as_array())
        .map_or(1, |t| t.len().max(1))
}

/// Distinct delegations of `run_id` in the ledger (every delegation when the run has no id:
/// fail restrictive).
pub fn prior_delegations(state: &ThreadState, run_id: Option<&str>) -> usize {
    state
        .delegations
        .iter()
        .filter(|d| run_id.is_none() || d.run_id.as_deref() == run_id)
        .map(|d| d.id.as_str())
        .collect::<HashSet<_>>()
        .len()
}

impl ModelLayer for DelegationLimit {
    fn name(&self) -> &str {
        "delegation_limit"
    }

    fn call<'a>(
        &'a self,
        call: ModelCall,
        next: ModelNext<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let prior = prior_delegations(&call.state, call.run.run_id.as_deref());
            let stop = call.stop.clone();
            let mut response = next.run(call).await?;
            let calls = std::mem::take(&mut response.message.tool_calls);
            let had_calls = !calls.is_empty();
            let (kept, capped) = self.keep(calls, prior);
            response.message.tool_calls = kept;
            if capped {
                if !response.message.content.is_empty() {
                    response.message.content.push_str("\n\n");
                }
                response.message.content.push_str(LIMIT_NOTICE);
                stop.stamp(RunStopReason::SubagentLimitCapped.as_str());
            }
            if had_calls && response.message.tool_calls.is_empty() {
                response.message.finish_reason = Some(FinishReason::Stop);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calls(names: &[&str]) -> Vec<ToolCall> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| ToolCall::new(format!("c{i}"), *n, json!({})))
            .collect()
    }

    fn ids(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn five_task_calls_with_a_per_turn_limit_of_3_keep_the_first_3_and_the_other_call() {
        let limit = DelegationLimit::new(3, 50);
        let (kept, capped) = limit.keep(calls(&["task", "task", "web", "task", "task", "task"]), 0);
        assert_eq!(ids(&kept), ["c0", "c1", "c2", "c3"]);
        assert!(!capped);
    }

    #[test]
    fn the_total_limit_counts_prior_delegations_and_reports_the_cut() {
        let limit = DelegationLimit::new(3, 4);
        let (kept, capped) = limit.keep(calls(&["task", "task", "web"]), 3);
        assert_eq!(ids(&kept), ["c0", "c2"]);
        assert!(capped);
        let multi = ToolCall::new("m", "multi_task", json!({"tasks": [{}, {}]}));
        let (kept, capped) = limit.keep(vec![multi], 3);
        assert!(kept.is_empty());
        assert!(capped);
    }

    #[tokio::test]
    async fn the_fourth_of_four_waits_for_a_slot_then_runs() -> Result<(), CapacityError> {
        let limiter = SubagentLimiter::new(3, Duration::from_secs(5));
        let held = [
            limiter.acquire().await?,
            limiter.acquire().await?,
            limiter.acquire().await?,
        ];
        assert_eq!(limiter.available(), 0);
        let l = limiter.clone();
        let fourth = tokio::spawn(async move { l.acquire().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!fourth.is_finished());
        drop(held);
        let got = fourth.await;
        assert!(matches!(got, Ok(Ok(()))));
        Ok(())
    }

    #[tokio::test]
    async fn at_the_limit_a_call_fails_clearly_after_the_bound() -> Result<(), CapacityError> {
        let limiter = SubagentLimiter::new(1, Duration::from_millis(20));
        let _held = limiter.acquire().await?;
        let err = limiter.acquire().await.err();
        assert_eq!(
            err.map(|e| e.to_string()),
            Some(
                "no subagent slot free: all 1 are in use and none was released within 20ms".into()
            )
        );
        Ok(())
    }
}
