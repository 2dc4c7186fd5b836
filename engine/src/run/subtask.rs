//! Subtasks: the results a workflow's tasks ([`crate::func`]) record while their node runs.
//!
//! A subtask's result is a pending write of the step its node runs in, under a task id derived
//! from the node's task, the subtask's name and its call position, and a node name that names
//! its parent task (see [`writer_name`]). A finished subtask hands its write to the run loop,
//! which records it against the head checkpoint as it records a finished task's writes; when
//! the node runs again (after a crash, an interrupt or a retry), each subtask whose write was
//! recorded returns it without running. The step's commit drops them with the rest of its
//! pending writes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use stategraph_checkpoints::{PendingWrite, TaskId, WriteKind};
use tokio::sync::{mpsc, oneshot};

use super::superstep::RunLoop;
use crate::{Durability, RunError, State};

/// The prefix of a subtask write's node name.
const PREFIX: &str = "task:";

/// The node name a subtask's write is recorded under: its parent task and its name.
pub(crate) fn writer_name(parent: TaskId, name: &str) -> String {
    format!("{PREFIX}{parent}:{name}")
}

/// The parent task of a subtask write's node name (`None` for any other write).
pub(crate) fn parent_of(node: &str) -> Option<TaskId> {
    let rest = node.strip_prefix(PREFIX)?;
    let (parent, _) = rest.split_once(':')?;
    if parent.len() != 32 {
        return None;
    }
    TaskId::try_from(parent.to_owned()).ok()
}

/// A finished subtask's write, and where to say it was recorded.
pub(crate) struct SubtaskRecord {
    pub(crate) write: PendingWrite,
    pub(crate) done: oneshot::Sender<Result<(), RunError>>,
}

/// What a task that runs subtasks knows of them.
pub(crate) struct SubtaskLink {
    /// The results its subtasks recorded in earlier attempts, by subtask id.
    pub(crate) recorded: BTreeMap<TaskId, serde_json::Value>,
    /// Where finished subtasks' writes go; `None` when nothing is kept (no saver or thread,
    /// or durability exit).
    pub(crate) tx: Option<mpsc::UnboundedSender<SubtaskRecord>>,
    /// How many subtasks the current attempt has started (their positions).
    pub(crate) calls: AtomicUsize,
}

impl SubtaskLink {
    /// The id of the next subtask named `name` that task `parent` starts.
    pub(crate) fn next_id(&self, parent: TaskId, name: &str) -> TaskId {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) as u64;
        TaskId::derive(&[
            &parent.as_u128().to_be_bytes(),
            b"subtask",
            name.as_bytes(),
            &n.to_le_bytes(),
        ])
    }
}

/// The receiving end of a step's subtask writes: pends forever when the step has none.
pub(super) async fn next_record(
    rx: &mut Option<mpsc::UnboundedReceiver<SubtaskRecord>>,
) -> SubtaskRecord {
    match rx {
        Some(rx) => match rx.recv().await {
            Some(r) => r,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

impl<S: State> RunLoop<S> {
    /// The subtask link of a task `parent` of node `node_ix`: `None` unless the node runs
    /// subtasks (a workflow's node).
    pub(super) fn subtask_link(
        &self,
        parent: TaskId,
        node_ix: Option<usize>,
    ) -> Option<SubtaskLink> {
        let runs_subtasks =
            self.g.runs_subtasks && node_ix.is_some_and(|i| self.g.nodes[i].options.subtasks);
        if !runs_subtasks {
            return None;
        }
        let recorded = self
            .pending
            .iter()
            .filter(|w| parent_of(&w.node) == Some(parent))
            .filter_map(|w| match &w.kind {
                WriteKind::Output(v) => Some((w.task_id, v.clone())),
                _ => None,
            })
            .collect();
        Some(SubtaskLink {
            recorded,
            tx: self.subtask_tx.clone(),
            calls: AtomicUsize::new(0),
        })
    }

    /// Whether a step of `tasks` (by node index) has a task that runs subtasks whose writes
    /// are kept: nothing to look at in a graph without a workflow node.
    #[inline]
    pub(super) fn open_subtasks(
        &mut self,
        nodes: impl Iterator<Item = Option<usize>>,
    ) -> Option<mpsc::UnboundedReceiver<SubtaskRecord>> {
        if !self.g.runs_subtasks {
            return None;
        }
        let any = nodes
            .into_iter()
            .any(|i| i.is_some_and(|i| self.g.nodes[i].options.subtasks));
        if !any || !self.keeps_pending() {
            self.subtask_tx = None;
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.subtask_tx = Some(tx);
        Some(rx)
    }

    /// Record a finished subtask's write against the head checkpoint; under durability
    /// `sync`, stored before the subtask returns.
    pub(super) async fn record_subtask(&mut self, record: SubtaskRecord) {
        let result = self.store_subtask(record.write).await;
        let _ = record.done.send(result);
    }

    async fn store_subtask(&mut self, write: PendingWrite) -> Result<(), RunError> {
        let Some(thread) = self.shared.thread.clone() else {
            return Ok(());
        };
        let ns = self.level.ns.clone();
        self.persist
            .record_task_writes(&thread, &ns, vec![write])
            .await?;
        if self.shared.durability == Durability::Sync {
            self.persist.drain().await?;
        }
        Ok(())
    }
}
