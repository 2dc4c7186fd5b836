//! Opening a level's run: loading its thread (or the state cached from the last run),
//! forking from an older checkpoint, and applying the input (new input, a command, or
//! continuing where the thread stopped).

use std::collections::BTreeMap;
use std::sync::Arc;

use stategraph_checkpoints::{
    Checkpoint, CheckpointId, Head, Namespace, PendingWrite, Source, TaskId, ThreadId, WriteKind,
};
use stategraph_reducers::ReduceCtx;

use super::apply::NextSchedule;
use super::control::ControlState;
use super::decode::decode_state;
use super::pending::{input_task, output_from_json, output_to_json, INPUT_NODE};
use super::persist::CheckpointPipeline;
use super::superstep::{is_static_interrupt, RunLoop};
use super::{GraphLevel, Input, RunShared};
use crate::command::Resume;
use crate::graph::{CompiledGraph, GraphInner, TaskOutput};
use crate::state::Field;
use crate::{Command, RunError, State};
use stategraph_checkpoints::sync::Unpoisoned;

/// What starting from a named checkpoint older than the thread's newest does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum OlderStart {
    /// A run: the new branch starts with a fork checkpoint.
    Fork,
    /// A state update: its own checkpoint starts the new branch.
    Branch,
}

/// A checkpoint a run starts from: its header, its pending writes and its state.
struct LoadedHead<S> {
    checkpoint: Checkpoint,
    pending: Vec<PendingWrite>,
    state: Arc<S>,
}

impl<S: State> RunLoop<S> {
    /// Load the level's thread (if any) and apply the input.
    pub(crate) async fn start(
        graph: &CompiledGraph<S>,
        shared: Arc<RunShared>,
        level: GraphLevel,
        input: Input<S>,
        from: Option<CheckpointId>,
    ) -> Result<Self, RunError> {
        Self::start_at(graph, shared, level, input, from, OlderStart::Fork).await
    }

    /// [`RunLoop::start`], choosing what a named older checkpoint starts.
    pub(super) async fn start_at(
        graph: &CompiledGraph<S>,
        shared: Arc<RunShared>,
        level: GraphLevel,
        input: Input<S>,
        from: Option<CheckpointId>,
        older: OlderStart,
    ) -> Result<Self, RunError> {
        let mut lp = RunLoop::new(graph.inner.clone(), shared, level);
        let loaded = lp.load_head(from).await?;
        let had_checkpoint = loaded.is_some();
        // A resumed run streams the head it resumes from first (checkpoints mode).
        let resumed_head = match (&loaded, &input) {
            (Some(l), Input::Command(_) | Input::Continue) if lp.wants(|m| m.checkpoints) => {
                Some(l.checkpoint.clone())
            }
            _ => None,
        };
        if let Some(loaded) = loaded {
            lp.resume_from(loaded, from, older).await?;
        }
        if !matches!(input, Input::Update(_)) {
            lp.reapply_recorded_input()?;
        }
        match input {
            Input::Update(update) => lp.open_with_input(update, had_checkpoint).await?,
            Input::Command(cmd) => lp.open_with_command(cmd).await?,
            Input::Continue => {
                lp.control.interrupt_seen = lp.control.max_version;
                lp.step = lp.persist.head_step().saturating_add(1);
                lp.stop = lp.step.saturating_add(lp.step_limit()).saturating_add(1);
            }
        }
        // Unless the run wrote a checkpoint of its own on opening (a fork, a command's update).
        if let Some(head) = resumed_head.filter(|h| lp.persist.head() == Some(h.id)) {
            lp.stream_resumed_head(&head).await?;
        }
        Ok(lp)
    }

    /// A level that has not run.
    fn new(g: Arc<GraphInner<S>>, shared: Arc<RunShared>, level: GraphLevel) -> Self {
        RunLoop {
            control: ControlState::new(&g),
            persist: CheckpointPipeline::new(
                level.saver.clone(),
                shared.durability,
                S::Field::ALL.len(),
            ),
            g,
            shared,
            level,
            state: Arc::new(S::default()),
            step: -1,
            stop: 0,
            pending: Vec::new(),
            input_writes: Vec::new(),
            poisoned: false,
            steps_run: 0,
            handled: Vec::new(),
            cache_hits: Vec::new(),
            subtask_tx: None,
            spare_branches: Vec::new(),
        }
    }

    /// Supersteps one invocation may run.
    fn step_limit(&self) -> i64 {
        i64::try_from(self.shared.recursion_limit)
            .unwrap_or(i64::MAX)
            .min(i64::MAX / 4)
    }

    /// The checkpoint the run starts from: `from`, or the thread's newest. The state this
    /// graph left at the thread's head in an earlier run is reused when the head has not
    /// moved since: no decoding of a long state.
    async fn load_head(
        &self,
        from: Option<CheckpointId>,
    ) -> Result<Option<LoadedHead<S>>, RunError> {
        let thread = &self.shared.thread;
        let (saver, t) = match (&self.level.saver, thread) {
            (Some(saver), Some(t)) => (saver, t),
            (Some(_), None) => return Err(RunError::MissingThread),
            _ => return Ok(None),
        };
        let ns = &self.level.ns;
        let cached = match from {
            None => self.g.take_cached(t, ns),
            Some(_) => None,
        };
        if let Some((id, state)) = cached {
            if let Some(Head {
                checkpoint,
                pending,
            }) = saver.head(t, ns).await?
            {
                if checkpoint.id == id {
                    return Ok(Some(LoadedHead {
                        checkpoint,
                        pending,
                        state,
                    }));
                }
            }
        }
        match saver.get(t, ns, from).await? {
            Some(l) => Ok(Some(LoadedHead {
                state: Arc::new(decode_state(&l, thread)?),
                checkpoint: l.checkpoint,
                pending: l.pending,
            })),
            None => Ok(None),
        }
    }

    /// Continue from a loaded checkpoint; time travel (`from` older than the newest) under
    /// [`OlderStart::Fork`] starts a new branch with a fork checkpoint, and the recorded
    /// pending writes of the old branch are not reused.
    async fn resume_from(
        &mut self,
        loaded: LoadedHead<S>,
        from: Option<CheckpointId>,
        older: OlderStart,
    ) -> Result<(), RunError> {
        self.state = loaded.state;
        self.control =
            ControlState::from_control(&self.g, &loaded.checkpoint.control, &self.shared.thread)?;
        self.persist.load_head(&loaded.checkpoint);
        self.step = loaded.checkpoint.step;
        self.pending = loaded.pending;
        if let (Some(from), Some(saver), Some(t), OlderStart::Fork) =
            (from, &self.level.saver, &self.shared.thread, older)
        {
            let newest = saver
                .head(t, &self.level.ns)
                .await?
                .map(|h| h.checkpoint.id);
            if newest != Some(from) {
                self.pending.clear();
                self.put(Source::Fork, self.step, Vec::new()).await?;
            }
        }
        Ok(())
    }

    /// A resuming command's update recorded with an interrupted or failed step applies
    /// again until that step commits.
    fn reapply_recorded_input(&mut self) -> Result<(), RunError> {
        let recorded: Vec<PendingWrite> = self
            .pending
            .iter()
            .filter(|w| w.task_id == input_task())
            .cloned()
            .collect();
        for w in recorded {
            if let WriteKind::Output(v) = &w.kind {
                let out = output_from_json::<S>(v).map_err(|e| RunError::Decode {
                    field: "pending input command".to_owned(),
                    thread: self.shared.thread.clone(),
                    detail: e.to_string(),
                })?;
                self.step = self.persist.head_step().saturating_add(1);
                self.apply_input_command(out)?;
            }
            self.input_writes.push(w);
        }
        Ok(())
    }

    /// New input: it discards tasks the thread had left to run (ready joins included) and
    /// is applied by the `__start__` step.
    async fn open_with_input(
        &mut self,
        update: S::Update,
        had_checkpoint: bool,
    ) -> Result<(), RunError> {
        self.control.branches.iter_mut().for_each(|b| *b = false);
        self.control
            .barriers
            .iter_mut()
            .for_each(|b| b.iter_mut().for_each(|s| *s = false));
        self.control.sends.clear();
        self.pending.clear();
        // Task ids of a stored run derive from the input (a run without a saver has
        // nothing to resume, so it skips serializing the input).
        self.control.anchor = match self.level.saver {
            Some(_) => Some(input_anchor(
                &self.level.ns,
                self.persist.head(),
                &update,
                &self.shared.thread,
            )),
            None => None,
        };
        self.control.start = Some(update);
        let input_step = if had_checkpoint {
            self.step.saturating_add(1)
        } else {
            -1
        };
        self.put(Source::Input, input_step, Vec::new()).await?;
        self.step = input_step.saturating_add(1);
        self.stop = input_step
            .saturating_add(self.step_limit())
            .saturating_add(1);
        Ok(())
    }

    /// A command as input: it resumes interrupts, updates the state and/or routes.
    async fn open_with_command(&mut self, cmd: Command<S>) -> Result<(), RunError> {
        self.step = self.persist.head_step().saturating_add(1);
        let resumes = cmd.resume.is_some();
        if let Some(resume) = cmd.resume {
            let answers = self.answers_by_interrupt(resume)?;
            self.shared.resume.lock().unpoisoned().map.extend(answers);
        }
        if cmd.update.is_some() || !cmd.goto.is_empty() {
            // The command's update and routing apply at once. Without a resume they are
            // checkpointed before any task runs, so they are kept even if nothing runs after.
            // With a resume the interrupted step's tasks (and their recorded writes) must keep
            // their ids: the update is stored with that step's checkpoint, and kept as a
            // pending write of the input until then.
            let out = TaskOutput {
                updates: cmd.update.into_iter().collect(),
                goto: cmd.goto,
                parents: Vec::new(),
                handled: None,
            };
            let stored = output_to_json(&out)?;
            self.apply_input_command(out)?;
            if resumes {
                self.input_writes.retain(|w| w.task_id != input_task());
                self.input_writes.push(PendingWrite {
                    task_id: input_task(),
                    node: INPUT_NODE.to_owned(),
                    kind: WriteKind::Output(stored),
                });
            } else {
                let writes = self.encode_changes()?;
                self.put(Source::Input, self.step, writes).await?;
                self.step = self.step.saturating_add(1);
            }
        }
        // A command resumes: static interrupts do not refire on what it acknowledged.
        self.control.interrupt_seen = self.control.max_version;
        self.stop = self
            .step
            .saturating_add(self.step_limit())
            .saturating_add(1);
        Ok(())
    }

    /// The ids of the pending interrupts a resume value can answer.
    fn pending_interrupt_ids(&self) -> Vec<String> {
        self.pending
            .iter()
            .filter_map(|w| match &w.kind {
                // Static interrupts take no value: they are resumed with `Input::Continue`.
                WriteKind::Interrupt { id, .. } if !is_static_interrupt(id) => Some(id.clone()),
                _ => None,
            })
            .collect()
    }

    /// The answers of `resume` by the id of the interrupt each one answers, checked against
    /// the interrupts pending: a bare value answers the one pending interrupt, so it reaches
    /// the task that asked, whichever task asks first when the step runs again.
    fn answers_by_interrupt(
        &self,
        resume: Resume,
    ) -> Result<BTreeMap<String, serde_json::Value>, RunError> {
        let mut pending = self.pending_interrupt_ids();
        if pending.is_empty() {
            return Err(RunError::NoPendingInterrupt {
                thread: self.shared.thread.clone(),
            });
        }
        match resume {
            Resume::Value(_) if pending.len() > 1 => Err(RunError::AmbiguousResume { pending }),
            Resume::Value(v) => Ok(BTreeMap::from([(pending.remove(0), v)])),
            Resume::Map(m) if m.is_empty() => Err(RunError::EmptyResume),
            Resume::Map(m) => match m.keys().find(|k| !pending.contains(k)) {
                Some(id) => Err(RunError::UnknownInterruptId {
                    id: id.clone(),
                    pending,
                }),
                None => Ok(m),
            },
        }
    }

    /// A command given as input: its update and routing apply at once, as writes of no task.
    pub(super) fn apply_input_command(&mut self, out: TaskOutput<S>) -> Result<(), RunError> {
        let version = self.control.max_version + 1;
        let mut next = NextSchedule::new(self.g.nodes.len());
        self.route(out.goto, "input", None, &mut next)?;
        let changes = Arc::make_mut(&mut self.state)
            .apply(out.updates, &mut ReduceCtx::for_input(self.step))
            .map_err(|(field, source)| RunError::Reduce {
                field: field.name(),
                writers: vec!["input".to_owned()],
                step: self.step,
                source,
            })?;
        for (f, c) in changes {
            self.control.field_versions[f.index()] = version;
            self.persist.note_change(f.index(), c);
        }
        for (i, b) in next.branches.into_iter().enumerate() {
            if b {
                self.control.branches[i] = true;
                self.control.branch_versions[i] = version;
            }
        }
        self.control.sends.extend(next.sends);
        self.control.max_version = version;
        Ok(())
    }
}

/// The anchor of new input: a hash of the thread, the namespace, the checkpoint it extends
/// and the input itself. The same input given again on the same checkpoint (because the
/// first attempt was lost in a crash before it was stored) gets the same task ids; input
/// given after a stored run extends another checkpoint and gets new ones.
fn input_anchor<U: serde::Serialize>(
    ns: &Namespace,
    head: Option<CheckpointId>,
    input: &U,
    thread: &Option<ThreadId>,
) -> CheckpointId {
    let head = head.map_or([0u8; 16], |h| h.as_u128().to_be_bytes());
    let thread = thread.as_ref().map_or("", ThreadId::as_str);
    let input = serde_json::to_vec(input).unwrap_or_default();
    let id = TaskId::derive(&[
        b"input",
        thread.as_bytes(),
        ns.as_str().as_bytes(),
        &head,
        &input,
    ]);
    CheckpointId::from_u128(id.as_u128())
}
