//! [`ScriptedModel`]: a chat model that answers from a script, for tests and examples.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::model::{ChatModel, ModelError, ModelRequest, ModelResponse};
use stategraph::checkpoints::sync::Unpoisoned;

#[derive(Default)]
struct Script {
    replies: VecDeque<ModelResponse>,
    scripted: usize,
    requests: Vec<ModelRequest>,
    verified: bool,
}

/// A chat model that answers from a queue of replies and records every request.
///
/// It fails loudly both ways when asked: a call after the last reply is a
/// [`ModelError::ScriptExhausted`], and [`ScriptedModel::verify`] fails while replies are left
/// (a test calls it to prove its script was used). Dropping the model with replies left is not
/// an error — a program whose run never reaches the model (resuming, continuing a fork,
/// replaying) is fine — it only logs a warning when `verify` was never called. Clones share
/// one script.
///
/// ```
/// use stategraph_nodes::{AiMessage, ScriptedModel};
///
/// let model = ScriptedModel::new("m", [AiMessage::text("one")]);
/// assert_eq!(model.remaining(), 1);
/// assert!(model.verify().is_err());
/// # model.clear();
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    name: Arc<str>,
    script: Arc<Mutex<Script>>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The error [`ScriptedModel::verify`] returns: replies the run never asked for.
#[derive(Debug, thiserror::Error)]
#[error("scripted model {model:?}: {unused} of {scripted} scripted replies were never used")]
pub struct UnusedScript {
    /// The model's name.
    pub model: String,
    /// Replies left.
    pub unused: usize,
    /// Replies scripted in all.
    pub scripted: usize,
}

impl ScriptedModel {
    /// A model named `name` answering with `replies`, in order.
    pub fn new<R: Into<ModelResponse>>(
        name: impl Into<String>,
        replies: impl IntoIterator<Item = R>,
    ) -> Self {
        let replies: VecDeque<ModelResponse> = replies.into_iter().map(Into::into).collect();
        let scripted = replies.len();
        ScriptedModel {
            name: Arc::from(name.into()),
            script: Arc::new(Mutex::new(Script {
                replies,
                scripted,
                ..Script::default()
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unpoisoned()
    }

    /// Append a reply to the script.
    pub fn push(&self, reply: impl Into<ModelResponse>) {
        let mut s = self.lock();
        s.replies.push_back(reply.into());
        s.scripted += 1;
        s.verified = false;
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// Replies not used yet.
    pub fn remaining(&self) -> usize {
        self.lock().replies.len()
    }

    /// Drop the replies left (the model will not complain about them).
    pub fn clear(&self) {
        let mut s = self.lock();
        s.replies.clear();
        s.verified = true;
    }

    /// Check that every scripted reply was used.
    ///
    /// # Errors
    /// [`UnusedScript`] naming how many replies were left.
    pub fn verify(&self) -> Result<(), UnusedScript> {
        let mut s = self.lock();
        s.verified = true;
        if s.replies.is_empty() {
            Ok(())
        } else {
            Err(UnusedScript {
                model: self.name.to_string(),
                unused: s.replies.len(),
                scripted: s.scripted,
            })
        }
    }
}

impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let result = {
            let mut s = self.lock();
            s.requests.push(request);
            let call = s.requests.len();
            let scripted = s.scripted;
            s.replies
                .pop_front()
                .ok_or_else(|| ModelError::ScriptExhausted {
                    model: self.name.to_string(),
                    call,
                    scripted,
                })
        };
        Box::pin(async move { result })
    }

    /// The scripted reply, word by word ([`word_chunks`](crate::tokens::word_chunks)).
    fn stream(
        &self,
        request: ModelRequest,
    ) -> futures::stream::BoxStream<'_, Result<crate::ModelChunk, ModelError>> {
        crate::tokens::stream_words(self.invoke(request))
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        // Only the last clone checks.
        if Arc::strong_count(&self.script) != 1 || std::thread::panicking() {
            return;
        }
        let s = self.lock();
        if !s.verified && !s.replies.is_empty() {
            tracing::warn!(
                model = %self.name,
                unused = s.replies.len(),
                scripted = s.scripted,
                "scripted model dropped with replies unused (verify() would have failed)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AiMessage;

    #[test]
    fn dropping_a_model_with_replies_left_does_not_panic() {
        let model = ScriptedModel::new("m", [AiMessage::text("one"), AiMessage::text("two")]);
        let outcome = std::panic::catch_unwind(move || drop(model));
        assert!(outcome.is_ok(), "the drop panicked");
    }

    #[tokio::test]
    async fn scripted_model_answers_in_order_and_records_requests(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let m = ScriptedModel::new("m", [AiMessage::text("a"), AiMessage::text("b")]);
        let a = m.invoke(ModelRequest::default()).await?;
        let b = m.invoke(ModelRequest::default()).await?;
        assert_eq!(
            (a.message.content.as_str(), b.message.content.as_str()),
            ("a", "b")
        );
        assert_eq!(m.requests().len(), 2);
        m.verify()?;
        Ok(())
    }

    #[tokio::test]
    async fn scripted_model_fails_when_its_script_runs_out() {
        let m = ScriptedModel::new("m", Vec::<AiMessage>::new());
        let err = m.invoke(ModelRequest::default()).await.err();
        assert!(
            matches!(
                err,
                Some(ModelError::ScriptExhausted {
                    call: 1,
                    scripted: 0,
                    ..
                })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn scripted_model_with_unused_replies_fails_verify() {
        let m = ScriptedModel::new("m", [AiMessage::text("a")]);
        let err = m.verify().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("scripted model \"m\": 1 of 1 scripted replies were never used")
        );
    }
}
