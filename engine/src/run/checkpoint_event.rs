//! The `checkpoints` stream mode's event: a checkpoint just written, with the state it holds
//! and the tasks the next step runs from it; and, when a run resumes, the head it resumes
//! from, with what its tasks recorded before the pause.

use stategraph_checkpoints::{Checkpoint, WriteKind};

use super::pending::output_from_json;
use super::superstep::RunLoop;
use crate::event::{CheckpointEvent, EventKind, NextTask, Shared};
use crate::{Interrupt, RunError, State};

impl<S: State> RunLoop<S> {
    /// The event of `header`, written for the current state and control (asked only when
    /// the stream wants checkpoints: planning the next step and sharing the state cost
    /// nothing otherwise).
    pub(super) fn checkpoint_event(&self, header: &Checkpoint) -> CheckpointEvent {
        let next = self
            .plan_at(header.step.saturating_add(1))
            .into_iter()
            .map(|t| NextTask {
                id: t.id,
                node: self.node_name(&t),
                subgraph: t.node.is_some_and(|i| self.g.nodes[i].subgraph.is_some()),
                updates: Vec::new(),
                interrupts: Vec::new(),
                error: None,
            })
            .collect();
        CheckpointEvent {
            id: header.id,
            parent: header.parent,
            source: header.source,
            values: Shared::state(self.state.clone()),
            metadata: header.metadata.clone(),
            next,
        }
    }

    /// Stream the head a run resumes from (`header`), its tasks carrying the updates,
    /// interrupts and errors they recorded, as LangGraph does before a resumed run's steps.
    pub(super) async fn stream_resumed_head(&self, header: &Checkpoint) -> Result<(), RunError> {
        let mut event = self.checkpoint_event(header);
        for task in &mut event.next {
            for w in self.pending.iter().filter(|w| w.task_id == task.id) {
                match &w.kind {
                    WriteKind::Output(v) => {
                        let out = output_from_json::<S>(v).map_err(|e| RunError::Decode {
                            field: format!("pending writes of task {}", task.id),
                            thread: self.shared.thread.clone(),
                            detail: e.to_string(),
                        })?;
                        task.updates = out.updates.into_iter().map(Shared::update::<S>).collect();
                    }
                    WriteKind::Interrupt { id, value } => task.interrupts.push(Interrupt {
                        id: id.clone(),
                        value: value.clone(),
                        node: w.node.clone(),
                    }),
                    WriteKind::Error(message) => task.error = Some(message.clone()),
                    _ => {}
                }
            }
        }
        self.emit_at(header.step, EventKind::Checkpoint(Box::new(event)))
            .await;
        Ok(())
    }
}
