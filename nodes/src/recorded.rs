//! [`RecordedReplies`]: a chat model that answers from a thread's recorded conversation, so
//! a replay of the thread calls no model, costs no tokens and is deterministic.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use stategraph::checkpoints::CheckpointId;
use stategraph::{CompiledGraph, RunError};

use crate::message::{AiMessage, Message};
use crate::model::{ChatModel, ModelError, ModelRequest, ModelResponse};
use crate::ThreadState;
use stategraph::checkpoints::sync::Unpoisoned;

/// One recorded model call: how much of the conversation the model had been shown and
/// what it replied.
#[derive(Debug, Clone)]
struct RecordedCall {
    /// How many messages of the recorded conversation (without system messages) came
    /// before the reply.
    shown: usize,
    reply: AiMessage,
}

/// A [`ChatModel`] that gives the k-th call the k-th reply the model gave in a recording,
/// after checking that the call shows the model the same conversation the recorded call
/// did. Give it to the agent (or model node) that a
/// [`CompiledGraph::replay`](stategraph::CompiledGraph::replay) runs: the replay then makes
/// no model call, and a request that differs from the recorded one fails the call with
/// [`ModelError::NotRecorded`], which the replay reports as the step's divergence.
///
/// The conversation is compared without system messages (a changed prompt is the agent's
/// configuration, not the thread's history).
///
/// ```
/// use stategraph_nodes::prelude::*;
/// use stategraph_nodes::{ModelRequest, RecordedReplies};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let before = vec![Message::human("hi")];
/// let after = vec![Message::human("hi"), Message::Ai(AiMessage::text("hello"))];
/// let model = RecordedReplies::from_messages("replay", &before, &after);
/// let reply = model.invoke(ModelRequest::new(before.clone())).await?;
/// assert_eq!(reply.message.content, "hello");
/// assert_eq!(model.answered(), 1);
/// // A second call has no recorded reply.
/// assert!(model.invoke(ModelRequest::new(after)).await.is_err());
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct RecordedReplies {
    name: Arc<str>,
    /// The recorded conversation at the branch's end, without system messages: each call's
    /// request is compared with a prefix of it.
    history: Arc<[Message]>,
    calls: Arc<[RecordedCall]>,
    next: Arc<Mutex<usize>>,
}

impl RecordedReplies {
    /// The replies of the model turns in `after` that come after `before` (the conversation
    /// at the replay's start and at the recorded branch's end).
    pub fn from_messages(name: &str, before: &[Message], after: &[Message]) -> Self {
        let start = before.len().min(after.len());
        let mut history = Vec::with_capacity(after.len());
        let mut calls = Vec::new();
        for (i, m) in after.iter().enumerate() {
            if let (true, Message::Ai(reply)) = (i >= start, m) {
                calls.push(RecordedCall {
                    shown: history.len(),
                    reply: reply.clone(),
                });
            }
            if !is_system(m) {
                history.push(m.clone());
            }
        }
        RecordedReplies {
            name: name.into(),
            history: history.into(),
            calls: calls.into(),
            next: Arc::default(),
        }
    }

    /// The replies recorded on `thread` between checkpoint `from` and `to` (the thread's
    /// newest checkpoint by default), read with `graph`.
    ///
    /// # Errors
    /// [`RunError::Checkpoint`] with `NotFound` for a checkpoint the thread does not have;
    /// storage and decode errors.
    pub async fn from_thread(
        graph: &CompiledGraph<ThreadState>,
        thread: &str,
        from: CheckpointId,
        to: Option<CheckpointId>,
    ) -> Result<Self, RunError> {
        let start = graph
            .get_state(thread, Some(from))
            .await?
            .ok_or_else(|| not_found(thread, from))?;
        let end = graph.get_state(thread, to).await?;
        let end = end.ok_or_else(|| not_found(thread, to.unwrap_or(from)))?;
        let before: Vec<Message> = start.values.messages.iter().cloned().collect();
        let after: Vec<Message> = end.values.messages.iter().cloned().collect();
        Ok(Self::from_messages("recorded", &before, &after))
    }

    /// How many calls were answered so far.
    pub fn answered(&self) -> usize {
        *self.next.lock().unpoisoned()
    }

    /// How many replies the recording holds.
    pub fn recorded(&self) -> usize {
        self.calls.len()
    }
}

/// `id` is not a checkpoint of `thread`.
fn not_found(thread: &str, id: CheckpointId) -> RunError {
    match stategraph::checkpoints::ThreadId::new(thread) {
        Ok(thread) => RunError::Checkpoint(stategraph::checkpoints::CheckpointError::NotFound {
            thread,
            ns: stategraph::checkpoints::Namespace::root(),
            id,
        }),
        Err(e) => RunError::Checkpoint(e),
    }
}

/// Whether `m` is a system message (left out of the comparison).
fn is_system(m: &Message) -> bool {
    matches!(m, Message::System { .. })
}

/// Who speaks in `m`.
fn role(m: &Message) -> &'static str {
    match m {
        Message::System { .. } => "system",
        Message::Human { .. } => "human",
        Message::Ai(_) => "ai",
        Message::Tool(_) => "tool",
    }
}

/// Where two conversations first differ, in words.
fn first_difference(recorded: &[Message], shown: &[&Message]) -> String {
    let at = recorded
        .iter()
        .zip(shown)
        .position(|(a, b)| a != *b)
        .unwrap_or_else(|| recorded.len().min(shown.len()));
    let describe = |m: Option<&Message>| match m {
        None => "nothing".to_owned(),
        Some(m) => {
            let text: String = m.text().chars().take(60).collect();
            format!("{} message {text:?}", role(m))
        }
    };
    format!(
        "message {at} of the conversation differs: recorded {}, now {}",
        describe(recorded.get(at)),
        describe(shown.get(at).copied())
    )
}

impl ChatModel for RecordedReplies {
    fn name(&self) -> &str {
        &self.name
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let result = {
            let mut next = self.next.lock().unpoisoned();
            let call = *next + 1;
            let shown: Vec<&Message> = request.messages.iter().filter(|m| !is_system(m)).collect();
            let recorded = |r: &RecordedCall| &self.history[..r.shown];
            match self.calls.get(*next) {
                None => Err(ModelError::NotRecorded {
                    model: self.name.to_string(),
                    call,
                    detail: format!("the recording has {} model calls", self.calls.len()),
                }),
                Some(r) if !recorded(r).iter().eq(shown.iter().copied()) => {
                    Err(ModelError::NotRecorded {
                        model: self.name.to_string(),
                        call,
                        detail: first_difference(recorded(r), &shown),
                    })
                }
                Some(r) => {
                    *next += 1;
                    Ok(ModelResponse::from(r.reply.clone()))
                }
            }
        };
        Box::pin(async move { result })
    }

    /// The recorded reply, word by word, as a scripted model streams.
    fn stream(
        &self,
        request: ModelRequest,
    ) -> futures::stream::BoxStream<'_, Result<crate::ModelChunk, ModelError>> {
        crate::tokens::stream_words(self.invoke(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convo() -> (Vec<Message>, Vec<Message>) {
        let before = vec![Message::system("be brief"), Message::human("a")];
        let mut after = before.clone();
        after.push(Message::Ai(AiMessage::text("one")));
        after.push(Message::human("b"));
        after.push(Message::Ai(AiMessage::text("two")));
        (before, after)
    }

    #[tokio::test]
    async fn each_call_gets_its_recorded_reply_when_it_shows_the_recorded_conversation(
    ) -> Result<(), ModelError> {
        let (before, after) = convo();
        let model = RecordedReplies::from_messages("r", &before, &after);
        assert_eq!(model.recorded(), 2);
        // A system prompt is not part of the comparison.
        let first = ModelRequest::new(vec![Message::human("a")]).with_system("other");
        assert_eq!(model.invoke(first).await?.message.content, "one");
        let second = ModelRequest::new(after[..4].to_vec());
        assert_eq!(model.invoke(second).await?.message.content, "two");
        assert_eq!(model.answered(), 2);
        Ok(())
    }

    #[tokio::test]
    async fn a_different_conversation_or_an_extra_call_is_not_recorded() {
        let (before, after) = convo();
        let model = RecordedReplies::from_messages("r", &before, &after);
        let changed = ModelRequest::new(vec![Message::human("A")]);
        let err = model.invoke(changed).await.err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "model \"r\": call 1 does not match the recording: message 0 of the \
                 conversation differs: recorded human message \"a\", now human message \"A\""
            )
        );
        assert_eq!(model.answered(), 0, "a refused call answers nothing");
        let _ = model.invoke(ModelRequest::new(after[..2].to_vec())).await;
        let _ = model.invoke(ModelRequest::new(after[..4].to_vec())).await;
        let extra = model.invoke(ModelRequest::new(after.clone())).await;
        assert!(
            matches!(extra, Err(ModelError::NotRecorded { call: 3, .. })),
            "{extra:?}"
        );
    }
}
