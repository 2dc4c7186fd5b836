//! Driving a replay along a recorded branch: the scratch thread, re-applying what came from
//! outside, answering interrupts as recorded, running the steps and comparing each.

use std::collections::{BTreeMap, VecDeque};

use futures::StreamExt;
use stategraph_checkpoints::fork::ForkPlan;
use stategraph_checkpoints::tree::BranchTree;
use stategraph_checkpoints::{
    Checkpoint, CheckpointId, FieldPart, ListOptions, Namespace, PendingWrite, PutCheckpoint,
    Source, StepChanges, ThreadId, WriteKind,
};

use super::compare::{first_odd_node, DivergenceKind, WriteOrder};
use super::{not_found, Divergence, ReplayReport, SaverRef, RESUMED_KEY, RUN_INTERRUPTS_KEY};
use crate::diff::{diff_states, StateDiff};
use crate::run::{input_task, is_static_interrupt, INPUT_NODE};
use crate::state::Field;
use crate::{
    Command, CompiledGraph, Durability, EventKind, Input, Interrupt, Resume, RunConfig, RunError,
    State, StreamMode,
};

/// The checkpoints of the branch of `thread` that ends at `to`, after `from`, oldest
/// first (headers only).
pub(super) async fn branch_path(
    saver: SaverRef<'_>,
    thread: &ThreadId,
    from: CheckpointId,
    to: CheckpointId,
) -> Result<Vec<Checkpoint>, RunError> {
    let headers = saver
        .list(thread, &Namespace::root(), ListOptions::default())
        .await?;
    let tree = BranchTree::new(headers);
    let path = tree.path(to).ok_or_else(|| not_found(thread, to))?;
    let at = path
        .iter()
        .position(|id| *id == from)
        .ok_or_else(|| not_found(thread, from))?;
    Ok(path[at + 1..]
        .iter()
        .filter_map(|id| tree.checkpoint(*id).cloned())
        .collect())
}

/// The thread a replay of `thread` from `from` to `to` runs on: named after all three, so
/// a replay left behind by a crash is found and deleted by the next one.
pub(super) fn scratch_thread(
    thread: &str,
    from: CheckpointId,
    to: CheckpointId,
) -> Result<ThreadId, RunError> {
    Ok(ThreadId::new(format!(
        "replay-{}",
        blake3::hash(format!("{thread}\u{0}{from}\u{0}{to}").as_bytes()).to_hex()
    ))?)
}

/// How a replayed run that did not finish failed, when its failure is a divergence.
struct Failure {
    node: Option<String>,
    step: Option<i64>,
    error: String,
}

/// A run error that the replayed code caused (a divergence), or `None` for one of the
/// replay's own (storage, decoding, cancellation), which the replay returns.
fn failure_of(e: &RunError) -> Option<Failure> {
    let (node, step) = match e {
        RunError::Node { node, step, .. } | RunError::Timeout { node, step, .. } => {
            (Some(node.clone()), Some(*step))
        }
        RunError::Reduce { writers, step, .. } => (writers.first().cloned(), Some(*step)),
        RunError::UnknownNode { from, step, .. } => (Some(from.clone()), Some(*step)),
        RunError::UnknownRouteTarget { router, .. } => (Some(router.clone()), None),
        RunError::Checkpoint(_)
        | RunError::Fork(_)
        | RunError::Cancelled { .. }
        | RunError::Decode { .. }
        | RunError::Encode { .. }
        | RunError::MissingThread => return None,
        _ => (None, None),
    };
    Some(Failure {
        node,
        step,
        error: e.to_string(),
    })
}

/// One replay: the graph, the thread replayed and its scratch copy, and what the replayed
/// steps wrote.
pub(super) struct Replay<'a, S: State> {
    graph: &'a CompiledGraph<S>,
    saver: SaverRef<'a>,
    thread: ThreadId,
    scratch: ThreadId,
    written: WriteOrder,
    /// The last pair of checkpoints (recorded, replayed) found equal: their states, pending
    /// interrupts and next nodes agree.
    equal_at: Option<(CheckpointId, CheckpointId)>,
    /// The runtime context the replayed runs are given (none is stored to replay).
    pub(super) context: Option<crate::ContextValue>,
}

impl<'a, S: State> Replay<'a, S> {
    pub(super) fn new(
        graph: &'a CompiledGraph<S>,
        saver: SaverRef<'a>,
        thread: ThreadId,
        scratch: ThreadId,
    ) -> Self {
        Replay {
            graph,
            saver,
            thread,
            scratch,
            written: WriteOrder::default(),
            equal_at: None,
            context: None,
        }
    }

    /// Replay `recorded` (the branch after `from`, up to `to`) on the scratch thread.
    pub(super) async fn run(
        mut self,
        from: CheckpointId,
        to: CheckpointId,
        recorded: &[Checkpoint],
    ) -> Result<ReplayReport, RunError> {
        let mut report = ReplayReport {
            to,
            steps_compared: 0,
            inputs_applied: 0,
            answers_given: 0,
            divergence: None,
        };
        let head = self.start_branch(from).await?;
        // The replay starts from a plain fork of `from`: the same state, nothing pending.
        self.equal_at = Some((from, head));
        report.divergence = self.walk(head, recorded, &mut report).await?;
        Ok(report)
    }

    /// Make each recorded checkpoint again on from `head` and compare it with its twin; the
    /// first divergence. The last checkpoint a run made is compared once what follows it
    /// has run: a step that paused shows its final questions only after the recorded
    /// answers were given, as in the recording.
    async fn walk(
        &mut self,
        mut head: CheckpointId,
        recorded: &[Checkpoint],
        report: &mut ReplayReport,
    ) -> Result<Option<Divergence>, RunError> {
        let mut held: Option<(&Checkpoint, Checkpoint)> = None;
        let mut i = 0;
        while let Some(r) = recorded.get(i) {
            let (produced, failure) = if r.source == Source::Loop {
                self.run_stretch(head, &recorded[i..], report).await?
            } else {
                report.inputs_applied += 1;
                (vec![self.copy_input(r, head).await?], None)
            };
            if let Some((r, p)) = held.take() {
                report.steps_compared += 1;
                if let Some(d) = self.compare(r, &p).await? {
                    return Ok(Some(d));
                }
            }
            let pairs: Vec<(&Checkpoint, Checkpoint)> =
                recorded[i..].iter().zip(produced).collect();
            let n = pairs.len();
            for (k, (r, p)) in pairs.into_iter().enumerate() {
                if k + 1 == n && failure.is_none() {
                    head = p.id;
                    held = Some((r, p));
                    break;
                }
                report.steps_compared += 1;
                if let Some(d) = self.compare(r, &p).await? {
                    return Ok(Some(d));
                }
            }
            if let Some(failure) = failure {
                return Ok(Some(failed(recorded.get(i + n), failure)));
            }
            if n == 0 {
                return Ok(Some(ended(r)));
            }
            i += n;
        }
        if let Some((r, p)) = held {
            report.steps_compared += 1;
            return self.compare(r, &p).await;
        }
        Ok(None)
    }

    /// The replay's first checkpoint: a plain fork of `from` on the scratch thread, so what
    /// an earlier attempt recorded at `from` is not reused and every step runs the code. It
    /// keeps the anchor the recorded steps derived their task ids from, so the replayed tasks
    /// — and their interrupts — have the recorded ids, which the recorded answers name.
    async fn start_branch(&self, from: CheckpointId) -> Result<CheckpointId, RunError> {
        let root = Namespace::root();
        let loaded = self
            .saver
            .get(&self.scratch, &root, Some(from))
            .await?
            .ok_or_else(|| not_found(&self.thread, from))?;
        // Without an anchor, the step after `from` derived its ids from `from` itself.
        let anchor = loaded.checkpoint.control.anchor.unwrap_or(from);
        let mut put = ForkPlan::new(&self.scratch, loaded, &self.scratch)?.to_put()?;
        put.checkpoint.control.anchor = Some(anchor);
        let id = put.checkpoint.id;
        self.saver.put(put).await?;
        Ok(id)
    }

    /// Re-apply a recorded checkpoint made from outside (an update, a fork, new input) on
    /// top of `head`: its recorded changes and control state (its anchor included, so the
    /// steps after it get the recorded task ids), under a new id.
    async fn copy_input(&self, r: &Checkpoint, head: CheckpointId) -> Result<Checkpoint, RunError> {
        let root = Namespace::root();
        let changes = self.saver.changes(&self.thread, &root, r.id).await?;
        let id = CheckpointId::generate();
        let control = r.control.clone();
        let mut metadata = r.metadata.clone();
        metadata.insert("replay_of".to_owned(), r.id.to_string().into());
        let writes = changes.into_writes();
        let checkpoint = Checkpoint {
            id,
            parent: Some(head),
            step: r.step,
            source: r.source,
            created_at_ms: id.created_at_ms(),
            control,
            metadata,
        };
        self.saver
            .put(PutCheckpoint {
                thread: self.scratch.clone(),
                ns: root,
                checkpoint: checkpoint.clone(),
                writes,
            })
            .await?;
        Ok(checkpoint)
    }

    /// Store the recorded resuming command's update and routing, if any, as the pending
    /// write of the input at `head`, which the next run applies with the resumed step.
    async fn give_command(
        &self,
        head: CheckpointId,
        resumed: &serde_json::Value,
    ) -> Result<(), RunError> {
        let Some(command) = resumed.get("command") else {
            return Ok(());
        };
        let write = PendingWrite {
            task_id: input_task(),
            node: INPUT_NODE.to_owned(),
            kind: WriteKind::Output(command.clone()),
        };
        self.saver
            .put_writes(&self.scratch, &Namespace::root(), head, vec![write])
            .await?;
        Ok(())
    }

    /// The next run's input: a resume with the next recorded answer for each interrupt
    /// pending at the scratch thread's head (matched by interrupt id, see [`Answers`]), or
    /// `Continue` when none matches.
    async fn next_input(&self, answers: &mut Answers) -> Result<Input<S>, RunError> {
        let Some(head) = self.saver.head(&self.scratch, &Namespace::root()).await? else {
            return Ok(Input::Continue);
        };
        let pending: Vec<(&str, &str)> = head
            .pending
            .iter()
            .filter_map(|w| match &w.kind {
                WriteKind::Interrupt { id, .. } if !is_static_interrupt(id) => {
                    Some((id.as_str(), w.node.as_str()))
                }
                _ => None,
            })
            .collect();
        let mut map = BTreeMap::new();
        for &(id, node) in &pending {
            if map.contains_key(id) {
                continue;
            }
            if let Some(value) = answers.next(id, node, &pending) {
                map.insert(id.to_owned(), value);
            }
        }
        Ok(if map.is_empty() {
            Input::Continue
        } else {
            Input::Command(Command::resume(Resume::Map(map)))
        })
    }

    /// Run the graph on from `head` through the recorded stretch of steps that starts
    /// `rest`, giving the recorded answers of its first step (resuming again while a task
    /// asks once more before that step commits): the checkpoints it made, oldest first, and
    /// the failure the replayed code caused, if it failed.
    async fn run_stretch(
        &mut self,
        head: CheckpointId,
        rest: &[Checkpoint],
        report: &mut ReplayReport,
    ) -> Result<(Vec<Checkpoint>, Option<Failure>), RunError> {
        let until = rest
            .iter()
            .take_while(|c| c.source == Source::Loop)
            .last()
            .map_or(i64::MAX, |c| c.step);
        let resumed = rest.first().and_then(|r| r.metadata.get(RESUMED_KEY));
        let pauses = RunPauses::of(rest.first());
        let mut answers = Answers::of(resumed);
        if let Some(resumed) = resumed {
            self.give_command(head, resumed).await?;
        }
        let mut input = self.next_input(&mut answers).await?;
        loop {
            if matches!(input, Input::Command(_)) {
                report.answers_given += 1;
            }
            let failed = self.run_once(input, until, &pauses).await?;
            let produced = self.produced_after(head).await?;
            if failed.is_none() && produced.is_empty() && !answers.is_empty() {
                input = self.next_input(&mut answers).await?;
                if matches!(input, Input::Command(_)) {
                    continue;
                }
            }
            return Ok((produced, failed));
        }
    }

    /// One run on the scratch thread, bounded to step `until`, pausing as the recorded run
    /// did, noting what each step wrote; the failure the replayed code caused, if it failed.
    async fn run_once(
        &mut self,
        input: Input<S>,
        until: i64,
        pauses: &RunPauses,
    ) -> Result<Option<Failure>, RunError> {
        let mut config = RunConfig::new()
            .thread(self.scratch.as_str())
            .durability(Durability::Sync)
            .interrupt_before(pauses.before.iter().cloned())
            .interrupt_after(pauses.after.iter().cloned());
        config.until_step = Some(until);
        config.context = self.context.clone();
        // A replay re-runs the code: it never reads (or fills) the node cache.
        let graph = self.graph.without_cache();
        let mut stream = graph.stream(input, &config, StreamMode::updates());
        while let Some(event) = stream.next().await {
            if let (true, EventKind::Updates { node, update, .. }) =
                (event.ns.is_root(), &event.kind)
            {
                if let Some(u) = update.get::<S::Update>() {
                    let written = &mut self.written;
                    S::written(u, &mut |f| written.note(event.step, node, f.name()));
                }
            }
        }
        match stream.outcome().await {
            Ok(_) => Ok(None),
            Err(e) => Ok(Some(failure_of(&e).ok_or(e)?)),
        }
    }

    /// The scratch thread's checkpoints after `head`, oldest first.
    async fn produced_after(&self, head: CheckpointId) -> Result<Vec<Checkpoint>, RunError> {
        let Some(newest) = self.saver.head(&self.scratch, &Namespace::root()).await? else {
            return Ok(Vec::new());
        };
        if newest.checkpoint.id == head {
            return Ok(Vec::new());
        }
        branch_path(self.saver, &self.scratch, head, newest.checkpoint.id).await
    }

    /// How replayed checkpoint `p` differs from recorded checkpoint `r`, if it does: the
    /// state first, then the interrupts pending there, then what runs next.
    ///
    /// When the pair before was found equal and both checkpoints follow it, only what the two
    /// steps changed is read and compared (O(changed), not O(state)): the same stored changes
    /// applied to equal states give equal states. Otherwise — or when the changes differ,
    /// which may still give equal values — both states are loaded and compared whole.
    async fn compare(
        &mut self,
        r: &Checkpoint,
        p: &Checkpoint,
    ) -> Result<Option<Divergence>, RunError> {
        let follows = self
            .equal_at
            .is_some_and(|(a, b)| r.parent == Some(a) && p.parent == Some(b));
        let found = match follows {
            true => self.compare_changes(r, p).await?,
            false => None,
        };
        let found = match found {
            Some(found) => found,
            None => self.compare_whole(r, p).await?,
        };
        self.equal_at = match found {
            None => Some((r.id, p.id)),
            Some(_) => None,
        };
        Ok(found)
    }

    /// [`Replay::compare`] from what the two steps changed: `None` if their changes differ
    /// (the states must be compared whole), else the divergence in what is pending or runs
    /// next, if any.
    async fn compare_changes(
        &self,
        r: &Checkpoint,
        p: &Checkpoint,
    ) -> Result<Option<Option<Divergence>>, RunError> {
        let root = Namespace::root();
        let rc = self.saver.changes(&self.thread, &root, r.id).await?;
        let pc = self.saver.changes(&self.scratch, &root, p.id).await?;
        let fields = |c: &StepChanges| -> BTreeMap<String, Vec<FieldPart>> {
            c.fields.iter().cloned().collect()
        };
        if fields(&rc) != fields(&pc) {
            return Ok(None);
        }
        let graph = self.graph;
        let (rn, ri) = graph.next_and_interrupts(r, &rc.pending, &Some(self.thread.clone()))?;
        let (pn, pi) = graph.next_and_interrupts(p, &pc.pending, &Some(self.scratch.clone()))?;
        Ok(Some(control_divergence(r, p, (&ri, rn), (&pi, pn))))
    }

    /// [`Replay::compare`] on the two states loaded whole.
    async fn compare_whole(
        &self,
        r: &Checkpoint,
        p: &Checkpoint,
    ) -> Result<Option<Divergence>, RunError> {
        let thread = self.thread.as_str();
        let a = self
            .graph
            .get_state(thread, Some(r.id))
            .await?
            .ok_or_else(|| not_found(&self.thread, r.id))?;
        let b = self
            .graph
            .get_state(self.scratch.as_str(), Some(p.id))
            .await?
            .ok_or_else(|| not_found(&self.scratch, p.id))?;
        let mut diff = diff_states(&*a.values, &*b.values)?;
        if !diff.is_empty() {
            let index = &self.graph.inner.index;
            let rank = |node: &str| index.get(node).copied().unwrap_or(usize::MAX);
            let node = self.written.sort::<S>(p.step, &mut diff, rank);
            return Ok(Some(Divergence {
                step: r.step,
                node,
                recorded: Some(r.id),
                replayed: Some(p.id),
                kind: DivergenceKind::State,
                diff,
            }));
        }
        Ok(control_divergence(
            r,
            p,
            (&a.interrupts, a.next),
            (&b.interrupts, b.next),
        ))
    }
}

/// How two checkpoints whose states agree differ in the interrupts pending there, then in
/// what runs next, if they do: `(interrupts, next)` of the recorded `r`, then of the replayed
/// `p`.
fn control_divergence(
    r: &Checkpoint,
    p: &Checkpoint,
    recorded: (&[Interrupt], Vec<String>),
    replayed: (&[Interrupt], Vec<String>),
) -> Option<Divergence> {
    let divergence = |kind, node| Divergence {
        step: r.step,
        node,
        recorded: Some(r.id),
        replayed: Some(p.id),
        kind,
        diff: StateDiff::default(),
    };
    let (ra, pa) = (pairs(recorded.0), pairs(replayed.0));
    if ra != pa {
        let node = first_odd_node(&ra, &pa);
        let kind = DivergenceKind::Interrupts {
            recorded: ra,
            replayed: pa,
        };
        return Some(divergence(kind, node));
    }
    let (mut rn, mut pn) = (recorded.1, replayed.1);
    rn.sort();
    pn.sort();
    if rn != pn {
        let kind = DivergenceKind::Next {
            recorded: rn,
            replayed: pn,
        };
        return Some(divergence(kind, None));
    }
    None
}

/// A recorded run's own static interrupts (see [`RUN_INTERRUPTS_KEY`]).
#[derive(Debug, Default)]
struct RunPauses {
    before: Vec<String>,
    after: Vec<String>,
}

impl RunPauses {
    /// The interrupts the run that made `first` was given; none if it records none (a
    /// checkpoint stored before they were recorded, or an entry not of that form).
    fn of(first: Option<&Checkpoint>) -> Self {
        let entry = first.and_then(|c| c.metadata.get(RUN_INTERRUPTS_KEY));
        let names = |side: &str| -> Vec<String> {
            entry
                .and_then(|e| e.get(side))
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        };
        RunPauses {
            before: names("before"),
            after: names("after"),
        }
    }
}

/// The recorded answers of a resumed step, per task, in the order they were given. A task
/// is known by the id of its interrupts, which the replay reproduces (see
/// [`Replay::start_branch`]); an entry without an id (recorded before ids were), or whose id
/// the replay does not reproduce (a stretch stored without an anchor), answers the next
/// pending interrupt of its node, in order.
#[derive(Debug, Default)]
struct Answers(Vec<TaskAnswers>);

/// One task's recorded answers.
#[derive(Debug)]
struct TaskAnswers {
    node: String,
    id: Option<String>,
    values: VecDeque<serde_json::Value>,
}

impl Answers {
    /// The answers in a step's `resumed` metadata (none without it).
    fn of(resumed: Option<&serde_json::Value>) -> Self {
        let mut out = Answers::default();
        let tasks = resumed
            .and_then(|r| r.get("tasks"))
            .and_then(|t| t.as_array());
        for t in tasks.into_iter().flatten() {
            let (Some(node), Some(values)) = (
                t.get("node").and_then(|n| n.as_str()),
                t.get("values").and_then(|v| v.as_array()),
            ) else {
                continue;
            };
            out.0.push(TaskAnswers {
                node: node.to_owned(),
                id: t.get("id").and_then(|i| i.as_str()).map(str::to_owned),
                values: values.iter().cloned().collect(),
            });
        }
        out
    }

    /// The next answer for the interrupt `id` of `node`, among the interrupts `pending`
    /// (id, node).
    fn next(
        &mut self,
        id: &str,
        node: &str,
        pending: &[(&str, &str)],
    ) -> Option<serde_json::Value> {
        let by_id = self.0.iter().position(|t| t.id.as_deref() == Some(id));
        let by_node = || {
            self.0.iter().position(|t| {
                t.node == node
                    && !t.values.is_empty()
                    && t.id
                        .as_deref()
                        .is_none_or(|tid| !pending.iter().any(|&(p, _)| p == tid))
            })
        };
        let at = by_id.or_else(by_node)?;
        self.0[at].values.pop_front()
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(|t| t.values.is_empty())
    }
}

/// A replayed step failed where the recording made `r`.
fn failed(r: Option<&Checkpoint>, failure: Failure) -> Divergence {
    Divergence {
        step: failure.step.or(r.map(|r| r.step)).unwrap_or(-1),
        node: failure.node,
        recorded: r.map(|r| r.id),
        replayed: None,
        kind: DivergenceKind::Failed {
            error: failure.error,
        },
        diff: StateDiff::default(),
    }
}

/// The recording goes on at `r` where the replay made nothing.
fn ended(r: &Checkpoint) -> Divergence {
    Divergence {
        step: r.step,
        node: None,
        recorded: Some(r.id),
        replayed: None,
        kind: DivergenceKind::ReplayEnded,
        diff: StateDiff::default(),
    }
}

/// Interrupts as sorted `(node, value)` pairs (ids differ between a recording and its
/// replay: they derive from the branch's task ids).
fn pairs(interrupts: &[Interrupt]) -> Vec<(String, serde_json::Value)> {
    let mut out: Vec<(String, serde_json::Value)> = interrupts
        .iter()
        .map(|i| (i.node.clone(), i.value.clone()))
        .collect();
    out.sort_by(|a, b| (&a.0, a.1.to_string()).cmp(&(&b.0, b.1.to_string())));
    out
}
