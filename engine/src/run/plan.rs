//! Planning a superstep: which tasks run, and the task ids they get.

use std::sync::Arc;

use stategraph_checkpoints::TaskId;

use super::superstep::RunLoop;
use crate::command::START;
use crate::State;

pub(super) use crate::event::TaskTrigger;

/// A task the step runs.
pub(super) struct PlannedTask {
    pub(super) id: TaskId,
    /// The node it runs (`None`: the `__start__` task).
    pub(super) node: Option<usize>,
    pub(super) trigger: TaskTrigger,
    /// Its `Send` argument.
    pub(super) arg: Option<Arc<serde_json::Value>>,
}

impl<S: State> RunLoop<S> {
    /// The tasks of the current step: the start task for new input; otherwise the
    /// triggered nodes and the sends, and deferred nodes only when nothing else runs.
    pub(super) fn plan(&self) -> Vec<PlannedTask> {
        self.plan_at(self.step)
    }

    /// The tasks step `step` would run from the current state and control.
    pub(super) fn plan_at(&self, step: i64) -> Vec<PlannedTask> {
        let mut tasks = Vec::new();
        // Task ids derive from the checkpoint that started this stretch of the branch and the
        // step: the same step computed again (after a crash lost its checkpoint, or on resume)
        // gets the same ids; a fork or new input gets new ones.
        let base = self
            .control
            .anchor
            .or(self.persist.head())
            .map(|h| h.as_u128().to_be_bytes())
            .unwrap_or([0; 16]);
        let ns = self.level.ns.as_str().as_bytes();
        let step = step.to_le_bytes();
        let id = |kind: &[u8], node: &str, idx: usize| {
            TaskId::derive(&[&base, ns, &step, kind, node.as_bytes(), &idx.to_le_bytes()])
        };
        if self.control.start.is_some() {
            tasks.push(PlannedTask {
                id: id(b"start", START, 0),
                node: None,
                trigger: TaskTrigger::Start,
                arg: None,
            });
            return tasks;
        }
        let edge_task = |i: usize, name: &str| PlannedTask {
            id: id(b"pull", name, 0),
            node: Some(i),
            trigger: TaskTrigger::Edge,
            arg: None,
        };
        for (i, n) in self.g.nodes.iter().enumerate() {
            if !n.options.defer && self.control.is_triggered(&self.g, i) {
                tasks.push(edge_task(i, &n.name));
            }
        }
        for (k, send) in self.control.sends.iter().enumerate() {
            tasks.push(PlannedTask {
                id: id(b"push", &self.g.nodes[send.node].name, k),
                node: Some(send.node),
                trigger: TaskTrigger::Sent(k),
                arg: Some(Arc::clone(&send.arg)),
            });
        }
        if tasks.is_empty() {
            for (i, n) in self.g.nodes.iter().enumerate() {
                if n.options.defer && self.control.is_triggered(&self.g, i) {
                    tasks.push(edge_task(i, &n.name));
                }
            }
        }
        tasks
    }

    /// The name of the node task `t` runs.
    pub(super) fn node_name(&self, t: &PlannedTask) -> Arc<str> {
        match t.node {
            Some(i) => self.g.nodes[i].name.clone(),
            None => Arc::from(START),
        }
    }
}
