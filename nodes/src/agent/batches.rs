//! How one model turn's tool calls run: each maximal run of consecutive read-only calls
//! together (one step, concurrently), every other call alone, in the model's order — except
//! `tool_search`, which runs after every other call of its turn: a promotion takes effect from
//! the next model call, so a deferred tool called in the same message as its promotion is
//! still refused. A call that changes something therefore never overlaps another call of its
//! turn, and sees the effects of every call the model listed before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use stategraph::checkpoints::sync::Unpoisoned;
use stategraph::List;

use crate::deferred::TOOL_SEARCH;
use crate::message::{Message, ToolCall};
use crate::state::ThreadState;

/// The batches of `calls`, in the order they run: indices into `calls`.
pub(crate) fn batches(
    calls: &[ToolCall],
    read_only: impl Fn(&ToolCall) -> bool,
) -> Vec<Vec<usize>> {
    let (searches, others): (Vec<usize>, Vec<usize>) =
        (0..calls.len()).partition(|&i| calls[i].name == TOOL_SEARCH);
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut joins_last = false;
    for i in others.into_iter().chain(searches) {
        let shared = read_only(&calls[i]);
        match out.last_mut() {
            Some(last) if shared && joins_last => last.push(i),
            _ => out.push(vec![i]),
        }
        joins_last = shared;
    }
    out
}

/// Where a finished call of a turn sends the run next.
#[derive(Debug, PartialEq)]
pub(super) enum AfterCall {
    /// Other calls of its batch are still running (they decide).
    Nothing,
    /// It ended its batch; these calls run next.
    Next(Vec<ToolCall>),
    /// It ended the turn's last batch (or is not a call of the turn's AI message): the model
    /// runs next.
    Model,
}

/// What follows the call `id` of the last AI message in `state` that made it, planned from
/// the state alone (O(calls)).
#[cfg(test)]
pub(super) fn after_call(
    state: &ThreadState,
    id: &str,
    read_only: impl Fn(&ToolCall) -> bool,
) -> AfterCall {
    TurnPlan::of(state, id, read_only).map_or(AfterCall::Model, |plan| plan.after(id))
}

/// One turn's batches, planned once from its AI message: for each call id, its batch and
/// whether it ends it (an O(1) lookup), and the calls of each batch.
struct TurnPlan {
    /// The thread's messages when planned. A clone shares their storage, so it keeps the AI
    /// message where it was: a state whose message at `at` is at the same address holds that
    /// very message.
    messages: List<Message>,
    /// The AI message's position in `messages`.
    at: usize,
    /// Call id → (its batch, whether it is the batch's last call); for an id the message
    /// repeats, its first call.
    by_id: HashMap<String, (usize, bool)>,
    /// The calls of each batch, in the order they run.
    batches: Vec<Vec<ToolCall>>,
}

impl TurnPlan {
    /// The plan of the last AI message in `state` with a call `id` (`None` if none has one).
    fn of(state: &ThreadState, id: &str, read_only: impl Fn(&ToolCall) -> bool) -> Option<Self> {
        let messages = &state.messages;
        let (at, ai) = (0..messages.len())
            .rev()
            .find_map(|i| match messages.get(i) {
                Some(Message::Ai(ai)) if ai.tool_calls.iter().any(|c| c.id == id) => Some((i, ai)),
                _ => None,
            })?;
        let calls = &ai.tool_calls;
        let order = batches(calls, read_only);
        let mut place = vec![(0, false); calls.len()];
        for (b, batch) in order.iter().enumerate() {
            for (k, &i) in batch.iter().enumerate() {
                place[i] = (b, k + 1 == batch.len());
            }
        }
        let mut by_id = HashMap::with_capacity(calls.len());
        for (call, p) in calls.iter().zip(place) {
            by_id.entry(call.id.clone()).or_insert(p);
        }
        Some(TurnPlan {
            messages: messages.clone(),
            at,
            by_id,
            batches: order
                .into_iter()
                .map(|b| b.into_iter().map(|i| calls[i].clone()).collect())
                .collect(),
        })
    }

    /// Whether this is the plan of call `id` in `state`: the call is planned here and the
    /// state holds the very AI message planned (not a copy, nor another at that position).
    fn covers(&self, state: &ThreadState, id: &str) -> bool {
        self.by_id.contains_key(id)
            && matches!(
                (state.messages.get(self.at), self.messages.get(self.at)),
                (Some(a), Some(b)) if std::ptr::eq(a, b)
            )
    }

    /// What follows call `id` (O(1), plus the next batch's calls).
    fn after(&self, id: &str) -> AfterCall {
        match self.by_id.get(id) {
            None => AfterCall::Model,
            Some((_, false)) => AfterCall::Nothing,
            Some((b, true)) => match self.batches.get(b + 1) {
                Some(next) => AfterCall::Next(next.clone()),
                None => AfterCall::Model,
            },
        }
    }
}

/// The plan of the turn in progress, kept between its tool calls: each call of a turn looks
/// up what follows it in O(1) instead of planning the turn again, so a turn of n calls costs
/// O(n). The plan is made by the first call that finds none for its state — after a resume
/// from a checkpoint, too, when nothing was kept — from the state alone.
#[derive(Default)]
pub(super) struct TurnPlans {
    current: Mutex<Option<Arc<TurnPlan>>>,
}

impl TurnPlans {
    /// What follows the call `id` of the last AI message in `state` that made it.
    pub(super) fn after_call(
        &self,
        state: &ThreadState,
        id: &str,
        read_only: impl Fn(&ToolCall) -> bool,
    ) -> AfterCall {
        let kept = self.current.lock().unpoisoned().clone();
        if let Some(plan) = kept.filter(|p| p.covers(state, id)) {
            return plan.after(id);
        }
        let Some(plan) = TurnPlan::of(state, id, read_only) else {
            return AfterCall::Model;
        };
        let after = plan.after(id);
        *self.current.lock().unpoisoned() = Some(Arc::new(plan));
        after
    }

    /// Drop the kept plan (and the messages it holds).
    pub(super) fn clear(&self) {
        *self.current.lock().unpoisoned() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::AiMessage;

    fn calls(names: &[&str]) -> Vec<ToolCall> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| ToolCall::new(format!("c{i}"), *n, serde_json::json!({})))
            .collect()
    }

    fn reads(c: &ToolCall) -> bool {
        c.name.starts_with("read") || c.name == TOOL_SEARCH
    }

    #[test]
    fn consecutive_reads_share_a_batch_and_every_write_runs_alone_in_order() {
        let c = calls(&[
            "read", "read", "write", "read", "write", "write", "read", "read",
        ]);
        let expected: Vec<Vec<usize>> =
            vec![vec![0, 1], vec![2], vec![3], vec![4], vec![5], vec![6, 7]];
        assert_eq!(batches(&c, reads), expected);
        assert_eq!(batches(&calls(&["write"]), reads), vec![vec![0]]);
        assert!(batches(&[], reads).is_empty());
    }

    #[test]
    fn tool_search_runs_after_every_other_call_of_its_turn() {
        let c = calls(&[TOOL_SEARCH, "write", "read"]);
        assert_eq!(batches(&c, reads), vec![vec![1], vec![2, 0]]);
        let c = calls(&[TOOL_SEARCH, "write"]);
        assert_eq!(batches(&c, reads), vec![vec![1], vec![0]]);
    }

    #[test]
    fn the_last_call_of_a_batch_starts_the_next_and_the_last_batch_returns_to_the_model() {
        let c = calls(&["read", "read", "write"]);
        let state = ThreadState {
            messages: vec![Message::Ai(AiMessage::calls(c.clone()))].into(),
            ..ThreadState::default()
        };
        assert_eq!(after_call(&state, "c0", reads), AfterCall::Nothing);
        assert_eq!(
            after_call(&state, "c1", reads),
            AfterCall::Next(vec![c[2].clone()])
        );
        assert_eq!(after_call(&state, "c2", reads), AfterCall::Model);
        assert_eq!(after_call(&state, "elsewhere", reads), AfterCall::Model);
    }

    /// A state whose last message is an AI message making `c`.
    fn turn(c: &[ToolCall]) -> ThreadState {
        ThreadState {
            messages: vec![
                Message::human("go"),
                Message::Ai(AiMessage::calls(c.to_vec())),
            ]
            .into(),
            ..ThreadState::default()
        }
    }

    #[test]
    fn every_call_of_a_turn_reuses_its_plan_so_a_turn_of_n_calls_asks_o_n_questions() {
        let n = 200;
        let c = calls(&vec!["read"; n]);
        let state = turn(&c);
        let asked = std::cell::Cell::new(0usize);
        let counting = |call: &ToolCall| {
            asked.set(asked.get() + 1);
            reads(call)
        };
        let plans = TurnPlans::default();
        for call in &c[..n - 1] {
            assert_eq!(
                plans.after_call(&state, &call.id, counting),
                AfterCall::Nothing
            );
        }
        assert_eq!(
            plans.after_call(&state, &c[n - 1].id, counting),
            AfterCall::Model
        );
        // Planned once: one question per call, not one per call per call.
        assert_eq!(asked.get(), n);
    }

    #[test]
    fn a_kept_plan_is_not_used_for_another_state_and_a_resumed_state_is_planned_again() {
        let plans = TurnPlans::default();
        let first = calls(&["read", "write"]);
        let state = turn(&first);
        assert_eq!(
            plans.after_call(&state, "c0", reads),
            AfterCall::Next(vec![first[1].clone()])
        );
        // Another branch: an AI message at the same position, with calls of the same ids.
        let other = calls(&["write", "write"]);
        assert_eq!(
            plans.after_call(&turn(&other), "c0", reads),
            AfterCall::Next(vec![other[1].clone()])
        );
        // The same turn decoded from a checkpoint (a copy, nothing of it kept): the same
        // answers, planned from the state.
        let resumed: ThreadState =
            serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
        assert_eq!(
            plans.after_call(&resumed, "c0", reads),
            AfterCall::Next(vec![first[1].clone()])
        );
        assert_eq!(plans.after_call(&resumed, "c1", reads), AfterCall::Model);
        // A later state of the same thread still holds the planned message: the plan serves.
        let mut later = resumed.clone();
        later.messages.push(Message::human("more"));
        assert_eq!(plans.after_call(&later, "c1", reads), AfterCall::Model);
    }
}
