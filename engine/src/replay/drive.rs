//! Driving a replay along a recorded branch: the scratch thread, re-applying what came from
//! outside, answering interrupts as recorded, running the steps and comparing each.

use std::collections::HashSet;

use futures::StreamExt;
use stategraph_checkpoints::fork::ForkPlan;
use stategraph_checkpoints::tree::BranchTree;
use stategraph_checkpoints::{
    Checkpoint, CheckpointId, FieldWrite, ListOptions, Namespace, PendingWrite, PutCheckpoint,
    Source, ThreadId, WriteKind,
};

use super::compare::{first_odd_node, DivergenceKind, WriteOrder};
use super::{not_found, Divergence, ReplayReport, SaverRef, RESUMED_KEY};
use crate::diff::{diff_states, StateDiff};
use crate::run::{input_task, is_static_interrupt, INPUT_NODE};
use crate::state::Field;
use crate::{
    CompiledGraph, Durability, EventKind, Input, Interrupt, RunConfig, RunError, State, StreamMode,
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
        let mut head = self.start_branch(from).await?;
        let mut i = 0;
        while i < recorded.len() {
            let r = &recorded[i];
            let produced = if r.source == Source::Loop {
                if let Some(resumed) = r.metadata.get(RESUMED_KEY) {
                    self.answer(head, resumed).await?;
                    report.answers_given += 1;
                }
                match self.run_stretch(head, &recorded[i..], &mut report).await? {
                    Stretch::Ran(produced) => produced,
                    Stretch::Diverged(d) => {
                        report.divergence = Some(d);
                        return Ok(report);
                    }
                }
            } else {
                report.inputs_applied += 1;
                vec![self.copy_input(r, head).await?]
            };
            if produced.is_empty() {
                report.divergence = Some(ended(r));
                return Ok(report);
            }
            for (r, p) in recorded[i..].iter().zip(&produced) {
                report.steps_compared += 1;
                if let Some(d) = self.compare(r, p).await? {
                    report.divergence = Some(d);
                    return Ok(report);
                }
            }
            i += produced.len();
            head = produced.last().map_or(head, |p| p.id);
        }
        Ok(report)
    }

    /// The replay's first checkpoint: a plain fork of `from` on the scratch thread, so what
    /// an earlier attempt recorded at `from` is not reused and every step runs the code.
    async fn start_branch(&self, from: CheckpointId) -> Result<CheckpointId, RunError> {
        let root = Namespace::root();
        let loaded = self
            .saver
            .get(&self.scratch, &root, Some(from))
            .await?
            .ok_or_else(|| not_found(&self.thread, from))?;
        let plan = ForkPlan::new(&self.scratch, loaded, &self.scratch)?;
        Ok(plan.write(self.saver).await?)
    }

    /// Re-apply a recorded checkpoint made from outside (an update, a fork, new input) on
    /// top of `head`: its recorded changes and control state, under a new id.
    async fn copy_input(&self, r: &Checkpoint, head: CheckpointId) -> Result<Checkpoint, RunError> {
        let root = Namespace::root();
        let changes = self.saver.changes(&self.thread, &root, r.id).await?;
        let id = CheckpointId::generate();
        let mut control = r.control.clone();
        if control.anchor == Some(r.id) {
            control.anchor = Some(id);
        }
        let mut metadata = r.metadata.clone();
        metadata.insert("replay_of".to_owned(), r.id.to_string().into());
        let writes = changes
            .fields
            .into_iter()
            .flat_map(|(field, parts)| {
                parts.into_iter().map(move |part| FieldWrite {
                    field: field.clone(),
                    part,
                })
            })
            .collect();
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

    /// Give the tasks paused at `head` the recorded answers of the step that resumed them
    /// (matched by node, in order), and the resuming command's update, as pending writes
    /// the next run picks up. A recorded answer with no paused task to take it is dropped:
    /// the comparison of the step then shows the difference.
    async fn answer(
        &self,
        head: CheckpointId,
        resumed: &serde_json::Value,
    ) -> Result<(), RunError> {
        let root = Namespace::root();
        let Some(loaded) = self.saver.head(&self.scratch, &root).await? else {
            return Ok(());
        };
        let mut writes: Vec<PendingWrite> = Vec::new();
        let mut used = HashSet::new();
        let tasks = resumed.get("tasks").and_then(|t| t.as_array());
        for t in tasks.into_iter().flatten() {
            let (Some(node), Some(values)) = (
                t.get("node").and_then(|n| n.as_str()),
                t.get("values").and_then(|v| v.as_array()),
            ) else {
                continue;
            };
            let paused = loaded.pending.iter().find(|w| {
                w.node == node
                    && !used.contains(&w.task_id)
                    && matches!(&w.kind, WriteKind::Interrupt { id, .. } if !is_static_interrupt(id))
            });
            if let Some(w) = paused {
                used.insert(w.task_id);
                writes.push(PendingWrite {
                    task_id: w.task_id,
                    node: node.to_owned(),
                    kind: WriteKind::Resume(values.clone()),
                });
            }
        }
        if let Some(command) = resumed.get("command") {
            writes.push(PendingWrite {
                task_id: input_task(),
                node: INPUT_NODE.to_owned(),
                kind: WriteKind::Output(command.clone()),
            });
        }
        if writes.is_empty() || loaded.checkpoint.id != head {
            return Ok(());
        }
        self.saver
            .put_writes(&self.scratch, &root, head, writes)
            .await?;
        Ok(())
    }

    /// Run the graph on from `head` through the recorded stretch of steps that starts
    /// `rest`, noting what each step wrote; the checkpoints it made, oldest first.
    async fn run_stretch(
        &mut self,
        head: CheckpointId,
        rest: &[Checkpoint],
        report: &mut ReplayReport,
    ) -> Result<Stretch, RunError> {
        let until = rest
            .iter()
            .take_while(|c| c.source == Source::Loop)
            .last()
            .map_or(i64::MAX, |c| c.step);
        let mut config = RunConfig::new()
            .thread(self.scratch.as_str())
            .durability(Durability::Sync);
        config.until_step = Some(until);
        let mut stream = self
            .graph
            .stream(Input::Continue, &config, StreamMode::updates());
        while let Some(event) = stream.next().await {
            if let (true, EventKind::Updates { node, update }) = (event.ns.is_root(), &event.kind) {
                if let Some(u) = update.get::<S::Update>() {
                    let written = &mut self.written;
                    S::written(u, &mut |f| written.note(event.step, node, f.name()));
                }
            }
        }
        let failed = match stream.outcome().await {
            Ok(_) => None,
            Err(e) => Some(failure_of(&e).ok_or(e)?),
        };
        let produced = self.produced_after(head).await?;
        let Some(failure) = failed else {
            return Ok(Stretch::Ran(produced));
        };
        // What ran before the failure is compared first: a difference there came earlier.
        for (r, p) in rest.iter().zip(&produced) {
            report.steps_compared += 1;
            if let Some(d) = self.compare(r, p).await? {
                return Ok(Stretch::Diverged(d));
            }
        }
        let r = rest.get(produced.len());
        Ok(Stretch::Diverged(Divergence {
            step: failure.step.or(r.map(|r| r.step)).unwrap_or(-1),
            node: failure.node,
            recorded: r.map(|r| r.id),
            replayed: None,
            kind: DivergenceKind::Failed {
                error: failure.error,
            },
            diff: StateDiff::default(),
        }))
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
    async fn compare(
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
        let divergence = |kind, node, diff| Divergence {
            step: r.step,
            node,
            recorded: Some(r.id),
            replayed: Some(p.id),
            kind,
            diff,
        };
        if !diff.is_empty() {
            let node = self.written.sort::<S>(p.step, &mut diff);
            return Ok(Some(divergence(DivergenceKind::State, node, diff)));
        }
        let (ra, pa) = (pairs(&a.interrupts), pairs(&b.interrupts));
        if ra != pa {
            let node = first_odd_node(&ra, &pa);
            let kind = DivergenceKind::Interrupts {
                recorded: ra,
                replayed: pa,
            };
            return Ok(Some(divergence(kind, node, StateDiff::default())));
        }
        let (mut rn, mut pn) = (a.next, b.next);
        rn.sort();
        pn.sort();
        if rn != pn {
            let kind = DivergenceKind::Next {
                recorded: rn,
                replayed: pn,
            };
            return Ok(Some(divergence(kind, None, StateDiff::default())));
        }
        Ok(None)
    }
}

/// What running a stretch of recorded steps gave.
enum Stretch {
    /// The checkpoints it made, oldest first.
    Ran(Vec<Checkpoint>),
    /// It failed, or a step before the failure differed.
    Diverged(Divergence),
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
