//! Executing a superstep's tasks: the determinism guard, reuse of writes an earlier attempt
//! recorded, running the rest (inline, concurrently, or spawned) and streaming each one's
//! update as it finishes, and settling the step: commands for the parent graph, a failure,
//! an interrupt, or the step applied.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::{Either, FutureExt};
use futures::stream::{FuturesUnordered, StreamExt};
use stategraph_checkpoints::{PendingWrite, TaskId, WriteKind};

use super::answers::answers_task;
use super::pending::{apply_error_task, input_task, output_from_json, APPLY_NODE};
use super::plan::{PlannedTask, TaskTrigger};
use super::subtask::{self, next_record};
use super::superstep::RunLoop;
use crate::command::ParentCommand;
use crate::event::{EventKind, Shared, TaskStatus};
use crate::graph::TaskOutput;
use crate::{Interrupt, RunError, State};

/// How a task ended.
pub(super) enum TaskResult<S: State> {
    Done(TaskOutput<S>),
    /// It failed; `resumes`: the resume values it had consumed.
    Failed {
        error: RunError,
        resumes: Vec<serde_json::Value>,
    },
    /// It paused; `resumes`: the resume values it had consumed.
    Interrupted {
        interrupts: Vec<Interrupt>,
        resumes: Vec<serde_json::Value>,
    },
}

/// How a step ended.
pub(super) enum StepEnd {
    /// Its writes were applied and its checkpoint made.
    Applied,
    /// It paused on these interrupts.
    Interrupted(Vec<Interrupt>),
    /// Its tasks sent commands to the parent graph, which end this level's run.
    ToParent(Vec<ParentCommand>),
}

/// Where a finished task's output came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The task ran.
    Ran,
    /// An earlier attempt of the step recorded it.
    Reused,
    /// The node cache held it.
    Cached,
}

/// Which per-task events the step streams (asked once per step).
#[derive(Clone, Copy)]
struct StepStream {
    updates: bool,
    tasks: bool,
}

/// A task's result, or why its spawned tokio task did not return one.
type TaskJoin<S> = Result<TaskResult<S>, String>;

/// Aborts spawned tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// What an earlier attempt of this step recorded, by task position.
struct RecordedWrites<S: State> {
    /// Outputs of tasks that finished: reused, not run again.
    reused: BTreeMap<usize, TaskOutput<S>>,
    /// Resume values tasks had consumed.
    resumes: BTreeMap<usize, Vec<serde_json::Value>>,
    /// Tasks that paused or failed before: a subgraph they run continues where it stopped.
    resumed: BTreeSet<usize>,
}

impl<S: State> RunLoop<S> {
    /// Run a step's tasks and settle the step.
    pub(super) async fn execute(&mut self, tasks: &[PlannedTask]) -> Result<StepEnd, RunError> {
        let mut recorded = self.recorded_writes(tasks)?;
        let stream = StepStream {
            updates: self.wants(|m| m.updates),
            tasks: self.wants(|m| m.tasks),
        };
        let mut results: Vec<Option<TaskResult<S>>> = (0..tasks.len()).map(|_| None).collect();
        let mut to_run = Vec::new();
        for (ti, t) in tasks.iter().enumerate() {
            if let Some(out) = recorded.reused.remove(&ti) {
                // Finished in an earlier attempt: streamed now, as it is not run again.
                if stream.tasks {
                    self.stream_start(t).await;
                }
                let r = TaskResult::Done(out);
                self.stream_finished(t, &r, Origin::Reused, stream).await;
                results[ti] = Some(r);
            } else if t.trigger == TaskTrigger::Start {
                let update = self.control.start.take().unwrap_or_default();
                results[ti] = Some(TaskResult::Done(TaskOutput {
                    updates: vec![update],
                    goto: Vec::new(),
                    parents: Vec::new(),
                    handled: None,
                }));
            } else {
                to_run.push(ti);
            }
        }
        // The node cache costs nothing to a graph without one.
        let cache = self.level.cache.clone();
        let mut misses = Vec::new();
        if let Some(cache) = &cache {
            self.cache_hits.clear();
            // Boxed, as the store below: a graph without a cache keeps no room for them in
            // every step's future (which is moved as each step starts).
            let (hits, missed) =
                Box::pin(self.cache_lookup(cache, tasks, &mut to_run, &recorded.resumed)).await?;
            misses = missed;
            for (ti, out) in hits {
                let r = TaskResult::Done(out);
                self.stream_hit_start(&tasks[ti]).await;
                self.stream_finished(&tasks[ti], &r, Origin::Cached, stream)
                    .await;
                results[ti] = Some(r);
            }
        }
        if !to_run.is_empty() {
            self.run_tasks(tasks, &to_run, &mut recorded, &mut results, stream)
                .await?;
        }
        if let (Some(cache), false) = (&cache, misses.is_empty()) {
            Box::pin(self.cache_store(cache, tasks, misses, &results)).await?;
        }
        self.settle(tasks, results).await
    }

    /// What an earlier attempt of this step recorded for `tasks`, after the determinism
    /// guard.
    fn recorded_writes(&self, tasks: &[PlannedTask]) -> Result<RecordedWrites<S>, RunError> {
        let mut recorded = RecordedWrites {
            reused: BTreeMap::new(),
            resumes: BTreeMap::new(),
            resumed: BTreeSet::new(),
        };
        if self.pending.is_empty() {
            return Ok(recorded);
        }
        self.check_determinism(tasks)?;
        self.restore_answers();
        for (ti, t) in tasks.iter().enumerate() {
            for w in self.pending.iter().filter(|w| w.task_id == t.id) {
                match &w.kind {
                    WriteKind::Output(v) => {
                        let out = output_from_json::<S>(v).map_err(|e| RunError::Decode {
                            field: format!("pending write of task {}", t.id),
                            thread: self.shared.thread.clone(),
                            detail: e.to_string(),
                        })?;
                        recorded.reused.insert(ti, out);
                    }
                    WriteKind::Resume(values) => {
                        recorded.resumes.insert(ti, values.clone());
                        recorded.resumed.insert(ti);
                    }
                    WriteKind::Error(_) | WriteKind::Interrupt { .. } => {
                        recorded.resumed.insert(ti);
                    }
                }
            }
        }
        Ok(recorded)
    }

    /// Determinism guard: every task an earlier attempt of this step recorded must be one
    /// this code plans again; otherwise the code changed under the thread, and its recorded
    /// writes must not be applied to other tasks or dropped unseen.
    fn check_determinism(&self, tasks: &[PlannedTask]) -> Result<(), RunError> {
        let planned: BTreeSet<TaskId> = tasks.iter().map(|t| t.id).collect();
        let apply_error = apply_error_task(self.step);
        let of_no_task = |id: &TaskId| *id == input_task() || *id == answers_task();
        let known = |id: &TaskId| of_no_task(id) || *id == apply_error || planned.contains(id);
        let of_subtask =
            |w: &PendingWrite| subtask::parent_of(&w.node).is_some_and(|p| planned.contains(&p));
        if self
            .pending
            .iter()
            .all(|w| known(&w.task_id) || of_subtask(w))
        {
            return Ok(());
        }
        let mut recorded: Vec<String> = self
            .pending
            .iter()
            .filter(|w| !of_no_task(&w.task_id))
            .map(|w| w.node.clone())
            .collect();
        recorded.dedup();
        let mut computed: Vec<String> = tasks
            .iter()
            .map(|t| self.node_name(t).to_string())
            .collect();
        computed.dedup();
        Err(RunError::DeterminismMismatch {
            step: self.step,
            recorded,
            computed,
        })
    }

    /// Run the tasks at positions `to_run`, with task events around them; cancellation ends
    /// the step at once.
    async fn run_tasks(
        &mut self,
        tasks: &[PlannedTask],
        to_run: &[usize],
        recorded: &mut RecordedWrites<S>,
        results: &mut [Option<TaskResult<S>>],
        stream: StepStream,
    ) -> Result<(), RunError> {
        if stream.tasks {
            for &ti in to_run {
                self.stream_start(&tasks[ti]).await;
            }
        }
        let mut subtasks = self.open_subtasks(to_run.iter().map(|&ti| tasks[ti].node));
        let ran = if let [ti] = *to_run {
            let fut = self.task_future(
                &tasks[ti],
                recorded.resumes.remove(&ti).unwrap_or_default(),
                recorded.resumed.contains(&ti),
            );
            let r = match subtasks.as_mut() {
                None => tokio::select! {
                    r = fut => r,
                    _ = self.shared.cancel.cancelled() => return Err(RunError::Cancelled { step: self.step }),
                },
                // A workflow's task: its subtasks' writes are recorded while it runs.
                Some(_) => Box::pin(self.run_recording(fut, &mut subtasks)).await?,
            };
            self.stream_finished(&tasks[ti], &r, Origin::Ran, stream)
                .await;
            results[ti] = Some(r);
            Ok(())
        } else {
            self.run_concurrently(tasks, to_run, recorded, results, stream, &mut subtasks)
                .await
        };
        self.subtask_tx = None;
        ran
    }

    /// Run one task's future to its end, recording the writes its subtasks send meanwhile.
    async fn run_recording(
        &mut self,
        fut: impl std::future::Future<Output = TaskResult<S>>,
        subtasks: &mut Option<tokio::sync::mpsc::UnboundedReceiver<subtask::SubtaskRecord>>,
    ) -> Result<TaskResult<S>, RunError> {
        let mut fut = std::pin::pin!(fut);
        loop {
            tokio::select! {
                r = &mut fut => return Ok(r),
                record = next_record(subtasks) => self.record_subtask(record).await,
                _ = self.shared.cancel.cancelled() => return Err(RunError::Cancelled { step: self.step }),
            }
        }
    }

    /// Stream that task `t` starts, with its input: the state snapshot it reads, or its
    /// `Send` argument.
    pub(super) async fn stream_start(&self, t: &PlannedTask) {
        let input = match &t.arg {
            Some(arg) => Shared::new(serde_json::Value::clone(arg)),
            None => Shared::state(self.state.clone()),
        };
        self.emit(EventKind::TaskStart {
            node: self.node_name(t),
            task: t.id,
            trigger: t.trigger,
            input,
        })
        .await;
    }

    /// Stream what task `t` produced, the moment it finished (LangGraph's order: a slow task
    /// holds back no sibling's progress; the merge still follows task order): its updates,
    /// unless they end this level's run as a command for the parent graph, then its end.
    async fn stream_finished(
        &self,
        t: &PlannedTask,
        r: &TaskResult<S>,
        origin: Origin,
        stream: StepStream,
    ) {
        if let (true, TaskResult::Done(out)) = (stream.updates, r) {
            if out.parents.is_empty() {
                let node = self.node_name(t);
                for u in &out.updates {
                    self.emit(EventKind::Updates {
                        node: node.clone(),
                        update: Shared::update::<S>(u.clone()),
                        cached: origin == Origin::Cached,
                    })
                    .await;
                }
            }
        }
        if stream.tasks {
            let (status, updates, interrupts) = match r {
                TaskResult::Done(out) => {
                    let updates = out.updates.iter().cloned().map(Shared::update::<S>);
                    let status = match origin {
                        Origin::Ran => TaskStatus::Succeeded,
                        Origin::Reused => TaskStatus::Reused,
                        Origin::Cached => TaskStatus::Cached,
                    };
                    (status, updates.collect(), Vec::new())
                }
                TaskResult::Failed { error, .. } => {
                    // The event names the node and task: a node's own error says the rest.
                    let message = match error {
                        RunError::Node { source, .. } => source.to_string(),
                        other => other.to_string(),
                    };
                    (TaskStatus::Failed(message), Vec::new(), Vec::new())
                }
                TaskResult::Interrupted { interrupts, .. } => {
                    (TaskStatus::Interrupted, Vec::new(), interrupts.clone())
                }
            };
            self.emit(EventKind::TaskEnd {
                node: self.node_name(t),
                task: t.id,
                status,
                updates,
                interrupts,
            })
            .await;
        }
    }

    /// Tasks run concurrently on this task; a node marked `spawn` runs on its own tokio task
    /// (in parallel with the others). The first failure stops the step: leaving early
    /// (failure, cancellation) drops the inline futures and aborts the spawned ones.
    async fn run_concurrently(
        &mut self,
        tasks: &[PlannedTask],
        to_run: &[usize],
        recorded: &mut RecordedWrites<S>,
        results: &mut [Option<TaskResult<S>>],
        stream: StepStream,
        subtasks: &mut Option<tokio::sync::mpsc::UnboundedReceiver<subtask::SubtaskRecord>>,
    ) -> Result<(), RunError> {
        let mut aborts = AbortOnDrop(Vec::new());
        // An inline task's future lives in the set's own node rather than in a box of its
        // own: one allocation a task instead of two.
        let mut running = FuturesUnordered::new();
        for &ti in to_run {
            let fut = self.task_future(
                &tasks[ti],
                recorded.resumes.remove(&ti).unwrap_or_default(),
                recorded.resumed.contains(&ti),
            );
            let spawn = tasks[ti]
                .node
                .is_some_and(|i| self.g.nodes[i].options.spawn);
            if spawn {
                let handle = tokio::spawn(fut);
                aborts.0.push(handle.abort_handle());
                running.push(Either::Right(Box::pin(async move {
                    (ti, handle.await.map_err(|e| e.to_string()))
                })));
            } else {
                running.push(Either::Left(fut.map(move |r| (ti, Ok(r)))));
            }
        }
        // Finished tasks whose writes are not yet recorded (see `record_finished`).
        let mut unrecorded = Vec::new();
        loop {
            let next = tokio::select! {
                n = running.next() => n,
                record = next_record(subtasks) => {
                    Box::pin(self.record_subtask(record)).await;
                    continue;
                }
                _ = self.shared.cancel.cancelled() => return Err(RunError::Cancelled { step: self.step }),
            };
            let Some(mut done) = next else { break };
            // Take every task that has finished by now before recording any writes, so that
            // tasks finishing together cost one record.
            loop {
                let (ti, joined) = done;
                let r = self.joined_result(&tasks[ti], joined);
                let failed = matches!(r, TaskResult::Failed { .. });
                self.stream_finished(&tasks[ti], &r, Origin::Ran, stream)
                    .await;
                results[ti] = Some(r);
                if failed {
                    return Ok(());
                }
                unrecorded.push(ti);
                match running.next().now_or_never() {
                    Some(Some(more)) => done = more,
                    _ => break,
                }
            }
            if !running.is_empty() {
                self.record_finished(tasks, results, &mut unrecorded)
                    .await?;
            }
        }
        drop(running);
        drop(aborts);
        Ok(())
    }

    /// A finished task's result, or the failure of a spawned task that panicked or was
    /// aborted.
    fn joined_result(&self, t: &PlannedTask, joined: TaskJoin<S>) -> TaskResult<S> {
        joined.unwrap_or_else(|e| TaskResult::Failed {
            error: RunError::Node {
                node: self.node_name(t).to_string(),
                step: self.step,
                task: t.id,
                source: format!("task panicked or was aborted: {e}").into(),
            },
            resumes: Vec::new(),
        })
    }

    /// Record the writes of the tasks in `unrecorded` (finished, while others of the step
    /// still run) against the head checkpoint, so that a crash before the step commits runs
    /// only the tasks that had not finished (what a failed or interrupted step keeps anyway).
    /// Without a stored thread, or under durability exit, nothing is recorded.
    async fn record_finished(
        &mut self,
        tasks: &[PlannedTask],
        results: &[Option<TaskResult<S>>],
        unrecorded: &mut Vec<usize>,
    ) -> Result<(), RunError> {
        let thread = match &self.shared.thread {
            Some(thread) if self.keeps_pending() => thread.clone(),
            _ => {
                unrecorded.clear();
                return Ok(());
            }
        };
        let mut writes = Vec::with_capacity(unrecorded.len());
        for ti in unrecorded.drain(..) {
            if let Some(TaskResult::Done(out)) = &results[ti] {
                writes.push(self.output_write(&tasks[ti], out)?);
            }
        }
        if writes.is_empty() {
            return Ok(());
        }
        let ns = self.level.ns.clone();
        self.persist.record_task_writes(&thread, &ns, writes).await
    }

    /// Settle a step whose tasks have run: commands for the enclosing graph end this level's
    /// run (they win over interrupts of siblings, whose tasks run again when the parent
    /// resumes, not over failures); then a failure or an interrupt; else the step applies.
    async fn settle(
        &mut self,
        tasks: &[PlannedTask],
        results: Vec<Option<TaskResult<S>>>,
    ) -> Result<StepEnd, RunError> {
        let failed = results
            .iter()
            .any(|r| matches!(r, Some(TaskResult::Failed { .. })));
        let interrupted = results
            .iter()
            .any(|r| matches!(r, Some(TaskResult::Interrupted { .. })));
        let to_parent = results
            .iter()
            .position(|r| matches!(r, Some(TaskResult::Done(o)) if !o.parents.is_empty()));
        match to_parent {
            Some(ti) if !failed => self.to_parent(tasks, ti, results),
            _ if failed || interrupted => self.stop_step(tasks, results).await,
            _ => self.apply_step(tasks, results).await,
        }
    }

    /// The commands the step's tasks sent to the parent graph (the first from task `first`).
    fn to_parent(
        &self,
        tasks: &[PlannedTask],
        first: usize,
        results: Vec<Option<TaskResult<S>>>,
    ) -> Result<StepEnd, RunError> {
        if self.level.is_root {
            return Err(RunError::ParentCommand {
                node: self.node_name(&tasks[first]).to_string(),
                reason: "there is no parent graph".to_owned(),
            });
        }
        let cmds = results
            .into_iter()
            .flat_map(|r| match r {
                Some(TaskResult::Done(o)) => o.parents,
                _ => Vec::new(),
            })
            .collect();
        Ok(StepEnd::ToParent(cmds))
    }

    /// A failure or an interrupt: record what finished (and what was asked and answered),
    /// then report the first failure in task order, or pause.
    async fn stop_step(
        &mut self,
        tasks: &[PlannedTask],
        results: Vec<Option<TaskResult<S>>>,
    ) -> Result<StepEnd, RunError> {
        let (writes, interrupts) = self.pending_writes_of(tasks, &results)?;
        let failure = results.into_iter().find_map(|r| match r {
            Some(TaskResult::Failed { error, .. }) => Some(error),
            _ => None,
        });
        if let Some(e) = failure {
            self.record_pending(writes).await?;
            return Err(e);
        }
        if let Some(first) = interrupts.first() {
            self.require_checkpointer(&first.node)?;
        }
        self.record_pending(writes).await?;
        self.emit(EventKind::Interrupt(interrupts.clone())).await;
        Ok(StepEnd::Interrupted(interrupts))
    }

    /// Apply the outputs of a step whose tasks all finished, and make its checkpoint.
    async fn apply_step(
        &mut self,
        tasks: &[PlannedTask],
        results: Vec<Option<TaskResult<S>>>,
    ) -> Result<StepEnd, RunError> {
        let outputs: Vec<(usize, TaskOutput<S>)> = results
            .into_iter()
            .enumerate()
            .filter_map(|(ti, r)| match r {
                Some(TaskResult::Done(out)) => Some((ti, out)),
                _ => None,
            })
            .collect();
        // With a checkpointer, keep the outputs' stored form until the step is applied: if a
        // reducer or a route rejects the step, they become its pending writes, so the tasks
        // do not run again.
        let saved = match self.keeps_pending() {
            true => Some(self.output_writes(tasks, &outputs)?),
            false => None,
        };
        if let Err(e) = self.apply(tasks, outputs) {
            // The in-memory state is partly updated: nothing of it may be stored.
            self.poisoned = true;
            if let Some(mut writes) = saved {
                writes.push(PendingWrite {
                    task_id: apply_error_task(self.step),
                    node: APPLY_NODE.to_owned(),
                    kind: WriteKind::Error(e.to_string()),
                });
                self.record_pending(writes).await?;
            }
            return Err(e);
        }
        self.commit_step().await?;
        Ok(StepEnd::Applied)
    }

    /// The pending writes the outputs of a step become if applying it fails.
    fn output_writes(
        &self,
        tasks: &[PlannedTask],
        outputs: &[(usize, TaskOutput<S>)],
    ) -> Result<Vec<PendingWrite>, RunError> {
        let mut writes = Vec::with_capacity(outputs.len() + self.input_writes.len());
        for (ti, out) in outputs {
            if tasks[*ti].trigger != TaskTrigger::Start {
                writes.push(self.output_write(&tasks[*ti], out)?);
            }
        }
        writes.extend(self.input_writes.iter().cloned());
        Ok(writes)
    }
}
