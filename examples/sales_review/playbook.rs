//! [`Playbook`]: the offline model. Like a scripted model it answers from a list of turns, but
//! each turn is a function of the request, so a turn can read what the tools returned (the
//! report is written from the PDF's text, the search results and the subagent's findings).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use stategraph_nodes::prelude::*;
use stategraph_nodes::{ModelError, ModelRequest, ModelResponse};

/// One turn: the model's answer to the request it is given.
pub(crate) type Turn = Box<dyn Fn(&ModelRequest) -> AiMessage + Send + Sync>;

#[derive(Default)]
struct Turns {
    left: VecDeque<Turn>,
    scripted: usize,
    calls: usize,
}

/// A chat model answering with one [`Turn`] per call, in order; a call after the last turn is
/// a [`ModelError::ScriptExhausted`], and [`Playbook::verify`] fails while turns are left.
/// Clones share the turns.
#[derive(Clone)]
pub(crate) struct Playbook {
    name: Arc<str>,
    turns: Arc<Mutex<Turns>>,
}

impl std::fmt::Debug for Playbook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Playbook")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Turns the run never asked for.
#[derive(Debug, thiserror::Error)]
#[error("playbook {model:?}: {unused} of {scripted} turns were never used")]
pub(crate) struct UnusedTurns {
    model: String,
    unused: usize,
    scripted: usize,
}

impl Playbook {
    /// A model named `name` playing `turns` in order.
    pub(crate) fn new(name: &str, turns: Vec<Turn>) -> Self {
        Playbook {
            name: Arc::from(name),
            turns: Arc::new(Mutex::new(Turns {
                scripted: turns.len(),
                left: turns.into(),
                calls: 0,
            })),
        }
    }

    /// Check that every turn was played.
    ///
    /// # Errors
    /// [`UnusedTurns`] when some were not.
    pub(crate) fn verify(&self) -> Result<(), UnusedTurns> {
        let t = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        match t.left.len() {
            0 => Ok(()),
            unused => Err(UnusedTurns {
                model: self.name.to_string(),
                unused,
                scripted: t.scripted,
            }),
        }
    }
}

impl ChatModel for Playbook {
    fn name(&self) -> &str {
        &self.name
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let turn = {
            let mut t = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            t.calls += 1;
            let (call, scripted) = (t.calls, t.scripted);
            t.left.pop_front().ok_or(ModelError::ScriptExhausted {
                model: self.name.to_string(),
                call,
                scripted,
            })
        };
        let result = turn.map(|turn| turn(&request).into());
        Box::pin(async move { result })
    }
}

/// A turn that always answers `message` (it reads nothing).
pub(crate) fn fixed(message: AiMessage) -> Turn {
    Box::new(move |_| message.clone())
}

/// The content of the newest result of tool `name` in `request` (empty when there is none).
pub(crate) fn last_result<'r>(request: &'r ModelRequest, name: &str) -> &'r str {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Tool(t) if t.name == name => Some(t.content.as_str()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The text of the newest human message in `request`.
pub(crate) fn last_human(request: &ModelRequest) -> &str {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Human { .. } => Some(m.text()),
            _ => None,
        })
        .unwrap_or_default()
}
