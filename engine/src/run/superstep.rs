//! The superstep loop of one graph level: plan, check static interrupts, execute, apply,
//! checkpoint, until nothing is left to run.

use std::sync::Arc;

use stategraph_checkpoints::PendingWrite;

use super::control::ControlState;
use super::execute::StepEnd;
use super::persist::CheckpointPipeline;
use super::plan::PlannedTask;
use super::{GraphLevel, GraphLevelEnd, RunOutcome, RunShared};
use crate::event::{Event, EventKind};
use crate::graph::GraphInner;
use crate::{Interrupt, RunError, State, StreamMode};
use stategraph_checkpoints::sync::Unpoisoned;

/// One graph level's run: its state, control state and checkpoint pipeline, stepped until
/// it ends.
pub(crate) struct RunLoop<S: State> {
    pub(super) g: Arc<GraphInner<S>>,
    pub(super) shared: Arc<RunShared>,
    pub(super) level: GraphLevel,
    pub(super) state: Arc<S>,
    pub(super) control: ControlState<S>,
    /// The head checkpoint and the writes on their way to the saver.
    pub(super) persist: CheckpointPipeline,
    /// The current step.
    pub(super) step: i64,
    /// The last step the recursion limit allows.
    pub(super) stop: i64,
    /// Pending writes recorded on the head checkpoint by an earlier attempt of its step.
    pub(super) pending: Vec<PendingWrite>,
    /// A resuming command's update and routing, kept as pending writes of the input until
    /// the resumed step commits.
    pub(super) input_writes: Vec<PendingWrite>,
    /// A step failed while being applied: the in-memory state is partly updated and must not
    /// be stored.
    pub(super) poisoned: bool,
    pub(super) steps_run: usize,
    /// The failures error handlers took over in the step being applied, for its checkpoint.
    pub(super) handled: Vec<crate::HandledFailure>,
    /// The tasks of the current step taken from the node cache, for its checkpoint's metadata.
    pub(super) cache_hits: Vec<serde_json::Value>,
    /// Where the current step's subtasks send their writes (a workflow's step only).
    pub(super) subtask_tx:
        Option<tokio::sync::mpsc::UnboundedSender<super::subtask::SubtaskRecord>>,
    /// The room of the last step's scheduled branches, reused by the next step.
    pub(super) spare_branches: Vec<bool>,
}

/// Which static interrupt a node can have.
#[derive(Clone, Copy)]
enum StaticInterrupt {
    Before,
    After,
}

impl StaticInterrupt {
    fn name(self) -> &'static str {
        match self {
            StaticInterrupt::Before => "before",
            StaticInterrupt::After => "after",
        }
    }
}

/// Whether an interrupt id is a static pause's (`before:` / `after:` a node), not a task's
/// `interrupt` call.
pub fn is_static_interrupt(id: &str) -> bool {
    id.starts_with("before:") || id.starts_with("after:")
}

impl<S: State> RunLoop<S> {
    /// Run the loop to its end.
    pub(crate) async fn run(mut self) -> Result<GraphLevelEnd<S>, RunError> {
        let result = self.run_steps().await;
        // Whatever happened, a checkpoint handed to the background writer must land (or its
        // error surface) before the run reports.
        let result = match result {
            Ok(end) => self.flush().await.map(|()| end),
            Err(e) => {
                let _ = self.flush().await;
                Err(e)
            }
        };
        if result.is_ok() {
            self.remember_state();
        }
        result
    }

    /// Leave the state at the stored head for the next run on this thread.
    fn remember_state(&self) {
        if let (Some(thread), Some(head), false, false) = (
            &self.shared.thread,
            self.persist.head(),
            self.poisoned,
            self.level.saver.is_none(),
        ) {
            if self.persist.stored_head() == Some(head) {
                self.g
                    .remember(thread, &self.level.ns, head, self.state.clone());
            }
        }
    }

    async fn run_steps(&mut self) -> Result<GraphLevelEnd<S>, RunError> {
        loop {
            if self.shared.cancel.is_cancelled() {
                return Err(RunError::Cancelled { step: self.step });
            }
            if self.step > self.stop {
                return Err(RunError::RecursionLimit {
                    limit: self.shared.recursion_limit,
                    thread: self.shared.thread.clone(),
                });
            }
            if self.level.is_root && self.shared.until_step.is_some_and(|s| self.step > s) {
                return Ok(GraphLevelEnd::Done(self.outcome(Vec::new())));
            }
            let tasks = self.plan();
            if tasks.is_empty() {
                return Ok(GraphLevelEnd::Done(self.outcome(Vec::new())));
            }
            // Static interrupt before: only for versions not yet acknowledged by a resume.
            if self.control.max_version > self.control.interrupt_seen {
                let hits = self.static_interrupts(&tasks, StaticInterrupt::Before);
                if !hits.is_empty() {
                    return self.pause_on(hits).await;
                }
            }
            let executed = self.execute(&tasks).await;
            if self.level.is_root {
                // Resume values answer the step they resumed, never a later interrupt.
                let mut r = self.shared.resume.lock().unpoisoned();
                r.map.clear();
            }
            match executed? {
                StepEnd::Applied => {}
                StepEnd::Interrupted(interrupts) => {
                    return Ok(GraphLevelEnd::Done(self.outcome(interrupts)))
                }
                StepEnd::ToParent(cmds) => return Ok(GraphLevelEnd::ToParent(cmds)),
            }
            self.steps_run += 1;
            let hits = self.static_interrupts(&tasks, StaticInterrupt::After);
            self.step += 1;
            if !hits.is_empty() {
                self.require_checkpointer(&hits[0].node)?;
                self.control.interrupt_seen = self.control.max_version;
                return self.pause_on(hits).await;
            }
        }
    }

    /// End the level's run on static interrupts.
    async fn pause_on(&mut self, hits: Vec<Interrupt>) -> Result<GraphLevelEnd<S>, RunError> {
        self.require_checkpointer(&hits[0].node)?;
        self.emit(EventKind::Interrupt(hits.clone())).await;
        Ok(GraphLevelEnd::Done(self.outcome(hits)))
    }

    /// The static interrupts `when` the nodes of `tasks` (the graph's, and the run's for the
    /// root graph).
    fn static_interrupts(&self, tasks: &[PlannedTask], when: StaticInterrupt) -> Vec<Interrupt> {
        let (graph_list, run_list) = match when {
            StaticInterrupt::Before => (&self.g.interrupt_before, &self.shared.interrupt_before),
            StaticInterrupt::After => (&self.g.interrupt_after, &self.shared.interrupt_after),
        };
        tasks
            .iter()
            .filter_map(|t| t.node)
            .filter(|&i| graph_list[i] || self.run_interrupt(run_list, i))
            .map(|i| {
                let node = &self.g.nodes[i].name;
                Interrupt {
                    id: format!("{}:{node}", when.name()),
                    value: serde_json::Value::Null,
                    node: node.to_string(),
                }
            })
            .collect()
    }

    /// Whether a per-run static interrupt list names node `i` (root graph only).
    fn run_interrupt(&self, names: &[String], i: usize) -> bool {
        self.level.is_root
            && names
                .iter()
                .any(|n| n == "*" || **n == *self.g.nodes[i].name)
    }

    /// An interrupt needs a checkpointer (and a subgraph that checkpoints).
    pub(super) fn require_checkpointer(&self, node: &str) -> Result<(), RunError> {
        if self.level.ephemeral {
            Err(RunError::InterruptInEphemeralSubgraph {
                subgraph: self.level.ns.clone(),
            })
        } else if self.level.saver.is_none() {
            Err(RunError::InterruptWithoutCheckpointer {
                node: node.to_owned(),
            })
        } else {
            Ok(())
        }
    }

    fn outcome(&self, interrupts: Vec<Interrupt>) -> RunOutcome<S> {
        RunOutcome {
            state: self.state.clone(),
            interrupts,
            checkpoint: self.persist.head(),
            steps: self.steps_run,
            usage: self.shared.usage.total(),
        }
    }

    /// Send an event of this level (subgraph events only when the stream asks for them).
    pub(super) async fn emit(&self, kind: EventKind) {
        self.emit_at(self.step, kind).await;
    }

    /// Send an event of this level that belongs to `step`.
    pub(super) async fn emit_at(&self, step: i64, kind: EventKind) {
        if let Some(sink) = &self.shared.sink {
            if self.level.ns.is_root() || sink.mode.subgraphs {
                sink.send(Event {
                    ns: self.level.ns.clone(),
                    step,
                    kind,
                })
                .await;
            }
        }
    }

    /// Whether the stream wants events `pick` selects from this level.
    pub(super) fn wants(&self, pick: impl Fn(&StreamMode) -> bool) -> bool {
        self.shared
            .sink
            .as_ref()
            .is_some_and(|s| pick(&s.mode) && (self.level.ns.is_root() || s.mode.subgraphs))
    }
}
