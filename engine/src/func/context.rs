//! What a workflow's function sees: its tasks, recorded as they finish, and interrupts.

use std::future::Future;

use serde::{de::DeserializeOwned, Serialize};
use stategraph_checkpoints::{PendingWrite, WriteKind};
use tokio::sync::oneshot;

use crate::run::subtask::{writer_name, SubtaskRecord};
use crate::{BoxError, NodeContext};

/// The context of a running workflow ([`entrypoint`](super::entrypoint)): run tasks whose
/// results are recorded, pause on interrupts, and reach the node's context.
#[derive(Clone, Debug)]
pub struct WorkflowContext {
    cx: NodeContext,
}

impl WorkflowContext {
    pub(super) fn new(cx: NodeContext) -> Self {
        WorkflowContext { cx }
    }

    /// Run `body` as the workflow's task `name`, or, when this workflow ran it before on
    /// this thread and step (a run that crashed, paused or failed), return its recorded
    /// result without running it.
    ///
    /// A task is known by its name and its position among the tasks the function starts
    /// (counted when `task` is called, not when the future is polled), so a function that
    /// starts the same tasks in the same order finds them again: start tasks to run in
    /// parallel before awaiting them (e.g. with `futures::future::try_join_all`). Under
    /// durability `sync` a result is stored before `task` returns it; under `async` it is
    /// handed to the writer. The result must serialize (it is stored as JSON).
    ///
    /// # Errors
    /// `body`'s error; a recorded result that no longer decodes as `T`; a failure to store
    /// the result.
    pub fn task<T, Fut>(
        &self,
        name: &str,
        body: Fut,
    ) -> impl Future<Output = Result<T, BoxError>> + Send + 'static
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        Fut: Future<Output = Result<T, BoxError>> + Send + 'static,
    {
        let parent = self.cx.task_id();
        let link = self.cx.inner.subtasks.as_ref();
        let id = link.map(|l| l.next_id(parent, name));
        let recorded = match (link, id) {
            (Some(l), Some(id)) => l.recorded.get(&id).cloned(),
            _ => None,
        };
        let tx = link.and_then(|l| l.tx.clone());
        let writer = writer_name(parent, name);
        let label = name.to_owned();
        async move {
            if let Some(value) = recorded {
                return T::deserialize(&value).map_err(|e| {
                    format!("task {label}'s recorded result does not decode: {e}").into()
                });
            }
            let value = body.await?;
            if let (Some(tx), Some(id)) = (tx, id) {
                let write = PendingWrite {
                    task_id: id,
                    node: writer,
                    kind: WriteKind::Output(serde_json::to_value(&value)?),
                };
                let (done, stored) = oneshot::channel();
                if tx.send(SubtaskRecord { write, done }).is_ok() {
                    if let Ok(result) = stored.await {
                        result?;
                    }
                }
            }
            Ok(value)
        }
    }

    /// Pause the workflow with `value` shown to the caller, or, when it is resumed, return
    /// the resume value (see [`NodeContext::interrupt`]).
    ///
    /// # Errors
    /// The pause itself (propagate it with `?`), or a resume value that is not a `T`.
    pub fn interrupt<T: DeserializeOwned>(&self, value: impl Serialize) -> Result<T, BoxError> {
        self.cx.interrupt(value)
    }

    /// The context of the node running the workflow: its task id, thread, store, events.
    pub fn node(&self) -> &NodeContext {
        &self.cx
    }
}
