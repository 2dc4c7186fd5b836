//! How one model turn's tool calls run: each maximal run of consecutive read-only calls
//! together (one step, concurrently), every other call alone, in the model's order — except
//! `tool_search`, which runs after every other call of its turn: a promotion takes effect from
//! the next model call, so a deferred tool called in the same message as its promotion is
//! still refused. A call that changes something therefore never overlaps another call of its
//! turn, and sees the effects of every call the model listed before it.

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

/// What follows the call `id` of the last AI message in `state` that made it.
pub(super) fn after_call(
    state: &ThreadState,
    id: &str,
    read_only: impl Fn(&ToolCall) -> bool,
) -> AfterCall {
    let turn = state.messages.iter().rev().find_map(|m| match m {
        Message::Ai(ai) => ai
            .tool_calls
            .iter()
            .position(|c| c.id == id)
            .map(|i| (&ai.tool_calls, i)),
        _ => None,
    });
    let Some((calls, index)) = turn else {
        return AfterCall::Model;
    };
    let batches = batches(calls, read_only);
    let Some(at) = batches.iter().position(|b| b.contains(&index)) else {
        return AfterCall::Model;
    };
    if batches[at].last() != Some(&index) {
        return AfterCall::Nothing;
    }
    match batches.get(at + 1) {
        Some(next) => AfterCall::Next(next.iter().map(|&i| calls[i].clone()).collect()),
        None => AfterCall::Model,
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
}
