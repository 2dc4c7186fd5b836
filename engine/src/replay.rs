//! Replay: run a thread again from one of its checkpoints with the current node code, and
//! report the first step where the new run's state differs from the recorded one.

use std::collections::BTreeMap;

use futures::StreamExt;
use stategraph_checkpoints::{CheckpointError, CheckpointId, Namespace, Saver, Source, ThreadId};

use crate::diff::{diff_states, StateDiff};
use crate::state::Field;
use crate::{CompiledGraph, Durability, EventKind, Input, RunConfig, RunError, State, StreamMode};

/// Where a replay first differed from the recorded history.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The superstep.
    pub step: i64,
    /// The recorded checkpoint of that step (`None` if the recording ended earlier).
    pub recorded: Option<CheckpointId>,
    /// The replayed checkpoint of that step (`None` if the replay ended earlier).
    pub replayed: Option<CheckpointId>,
    /// How the replayed state differs from the recorded one (empty if one side ended), its
    /// fields in the order the step changed them: first those the replayed step wrote, in
    /// the order the engine applied its tasks' writes (task order, then the fields of each
    /// update in declaration order), then the others in declaration order.
    pub diff: StateDiff,
}

impl Divergence {
    /// The field that changed first in the diverging step (see [`Divergence::diff`] for the
    /// order), if the states differ.
    pub fn field(&self) -> Option<&str> {
        self.diff.fields.first().map(|f| f.field.as_str())
    }
}

/// The result of [`CompiledGraph::replay`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// Steps compared, recorded against replayed.
    pub steps_compared: usize,
    /// The first difference, if any.
    pub divergence: Option<Divergence>,
}

/// One checkpoint on a thread's path, as the comparison needs it.
#[derive(Debug, Clone, Copy)]
struct PathStep {
    id: CheckpointId,
    step: i64,
    source: Source,
}

/// The checkpoints from `head` back to (not including) `from`, oldest first; `None` if `from`
/// is not on that path.
async fn chain_after(
    saver: &dyn Saver,
    thread: &ThreadId,
    from: CheckpointId,
    head: CheckpointId,
) -> Result<Option<Vec<PathStep>>, RunError> {
    let root = Namespace::root();
    let mut out = Vec::new();
    let mut cur = Some(head);
    while let Some(id) = cur {
        if id == from {
            out.reverse();
            return Ok(Some(out));
        }
        let Some(cp) = saver.get(thread, &root, Some(id)).await? else {
            return Ok(None);
        };
        out.push(PathStep {
            id,
            step: cp.checkpoint.step,
            source: cp.checkpoint.source,
        });
        cur = cp.checkpoint.parent;
    }
    Ok(None)
}

/// The thread a replay of `thread` from `from` runs on: named after both, so a replay left
/// behind by a crash is found and deleted by the next one.
fn scratch_thread(thread: &str, from: CheckpointId) -> Result<ThreadId, RunError> {
    Ok(ThreadId::new(format!(
        "replay-{}",
        blake3::hash(format!("{thread}\u{0}{from}").as_bytes()).to_hex()
    ))?)
}

/// The fields each replayed step wrote, by step, in the order the engine applied them.
#[derive(Debug, Default)]
struct WriteOrder(BTreeMap<i64, Vec<&'static str>>);

impl WriteOrder {
    /// Put `diff`'s fields in the order step `step` changed them: those it wrote first, in
    /// write order, then the rest in the state's declaration order.
    fn sort<S: State>(&self, step: i64, diff: &mut StateDiff) {
        let order = self.0.get(&step).map_or(&[][..], Vec::as_slice);
        diff.fields.sort_by_key(|f| {
            let declared = S::Field::from_name(&f.field).map_or(usize::MAX, Field::index);
            let at = order
                .iter()
                .position(|w| *w == f.field)
                .unwrap_or(usize::MAX);
            (at, declared)
        });
    }
}

/// One replay of a thread from a checkpoint, on a scratch copy of the thread.
struct Replay<'a, S: State> {
    graph: &'a CompiledGraph<S>,
    saver: &'a dyn Saver,
    /// The thread replayed, as the caller named it.
    thread: &'a str,
    thread_id: ThreadId,
    /// The copy the replay runs on.
    scratch: ThreadId,
    from: CheckpointId,
}

impl<S: State> Replay<'_, S> {
    /// `from` is not on the path to the newest checkpoint of a thread compared.
    fn not_found(&self) -> RunError {
        RunError::Checkpoint(CheckpointError::NotFound {
            thread: self.thread_id.clone(),
            ns: Namespace::root(),
            id: self.from,
        })
    }

    /// The steps of `thread` after `from`, up to its newest checkpoint.
    async fn path_after_from(&self, thread: &ThreadId) -> Result<Vec<PathStep>, RunError> {
        let head = self
            .saver
            .get(thread, &Namespace::root(), None)
            .await?
            .ok_or_else(|| self.not_found())?
            .checkpoint
            .id;
        chain_after(self.saver, thread, self.from, head)
            .await?
            .ok_or_else(|| self.not_found())
    }

    /// Run the scratch copy on from `from`, then compare its steps with `recorded`.
    async fn run_and_compare(&self, recorded: &[PathStep]) -> Result<ReplayReport, RunError> {
        let config = RunConfig::new()
            .thread(self.scratch.as_str())
            .checkpoint(self.from)
            .durability(Durability::Sync);
        let mut stream = self
            .graph
            .stream(Input::Continue, &config, StreamMode::updates());
        let mut written = WriteOrder::default();
        while let Some(event) = stream.next().await {
            if let (true, EventKind::Updates { update, .. }) = (event.ns.is_root(), &event.kind) {
                if let Some(u) = update.get::<S::Update>() {
                    let fields = written.0.entry(event.step).or_default();
                    S::written(u, &mut |f| {
                        if !fields.contains(&f.name()) {
                            fields.push(f.name());
                        }
                    });
                }
            }
        }
        let paused = stream.outcome().await?.is_interrupted();
        // The replay starts with a fork checkpoint on top of `from`; compare what follows.
        let replayed: Vec<PathStep> = self
            .path_after_from(&self.scratch)
            .await?
            .into_iter()
            .filter(|c| c.source != Source::Fork)
            .collect();
        // A replay that paused on an interrupt is compared as far as it got.
        let span = if paused {
            replayed.len().min(recorded.len())
        } else {
            recorded.len().max(replayed.len())
        };
        self.compare(recorded, &replayed, span, &written).await
    }

    /// Compare the first `span` steps of both paths; the first step where one path has ended
    /// or the states differ is the divergence.
    async fn compare(
        &self,
        recorded: &[PathStep],
        replayed: &[PathStep],
        span: usize,
        written: &WriteOrder,
    ) -> Result<ReplayReport, RunError> {
        let mut compared = 0;
        for i in 0..span {
            let (r, p) = (recorded.get(i), replayed.get(i));
            let (Some(r), Some(p)) = (r, p) else {
                let step = r.or(p).map_or(-1, |x| x.step);
                return Ok(ReplayReport {
                    steps_compared: compared,
                    divergence: Some(Divergence {
                        step,
                        recorded: r.map(|x| x.id),
                        replayed: p.map(|x| x.id),
                        diff: StateDiff::default(),
                    }),
                });
            };
            let mut diff = self.diff_states_at(r.id, p.id).await?;
            written.sort::<S>(p.step, &mut diff);
            compared += 1;
            if !diff.is_empty() {
                return Ok(ReplayReport {
                    steps_compared: compared,
                    divergence: Some(Divergence {
                        step: r.step,
                        recorded: Some(r.id),
                        replayed: Some(p.id),
                        diff,
                    }),
                });
            }
        }
        Ok(ReplayReport {
            steps_compared: compared,
            divergence: None,
        })
    }

    /// How the replayed state at `replayed` differs from the recorded one at `recorded`.
    async fn diff_states_at(
        &self,
        recorded: CheckpointId,
        replayed: CheckpointId,
    ) -> Result<StateDiff, RunError> {
        let a = self
            .graph
            .get_state(self.thread, Some(recorded))
            .await?
            .ok_or_else(|| self.not_found())?;
        let b = self
            .graph
            .get_state(self.scratch.as_str(), Some(replayed))
            .await?
            .ok_or_else(|| self.not_found())?;
        diff_states(&*a.values, &*b.values)
    }
}

impl<S: State> CompiledGraph<S> {
    /// Run `thread` again from checkpoint `from` with this graph's node code, on a scratch
    /// copy of the thread (deleted afterwards; the thread itself is not touched), and compare
    /// each replayed step's state with the recorded one on the path from `from` to the
    /// thread's newest checkpoint. Reports the first step and field that diverged.
    ///
    /// The replay stops where the recording would need an answer to an interrupt (a step
    /// that paused); steps up to there are compared.
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] if `from` is not on the path to the thread's newest
    /// checkpoint; run, storage and decode errors of the replay.
    pub async fn replay(&self, thread: &str, from: CheckpointId) -> Result<ReplayReport, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let replay = Replay {
            graph: self,
            saver: saver.as_ref(),
            thread,
            thread_id: ThreadId::new(thread)?,
            scratch: scratch_thread(thread, from)?,
            from,
        };
        let recorded = replay.path_after_from(&replay.thread_id).await?;
        saver.delete_thread(&replay.scratch).await?;
        saver
            .copy_thread(&replay.thread_id, &replay.scratch)
            .await?;
        let result = replay.run_and_compare(&recorded).await;
        saver.delete_thread(&replay.scratch).await?;
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use stategraph_checkpoints::{ListOptions, MemorySaver};

    use super::*;
    use crate::{BoxError, NodeContext, StateGraph, END, START};

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[derive(crate::State, Clone, Default, Debug)]
    struct Count {
        n: u32,
    }

    /// Counts to 3, one step at a time.
    fn counter(saver: Arc<MemorySaver>) -> Result<CompiledGraph<Count>, crate::CompileError> {
        let graph = StateGraph::<Count>::new()
            .add_node("inc", |s: Arc<Count>, _ctx: NodeContext| async move {
                Ok::<_, BoxError>(Count::update().n(s.n + 1))
            })
            .add_edge(START, "inc")
            .add_conditional_edges(
                "inc",
                |s: &Count| if s.n < 3 { "inc" } else { END },
                ["inc", END],
            )
            .compile()?;
        Ok(graph.with_checkpointer(saver))
    }

    async fn thread_names(saver: &MemorySaver) -> Result<Vec<String>, CheckpointError> {
        let threads = saver.list_threads().await?;
        Ok(threads.into_iter().map(|t| t.thread.to_string()).collect())
    }

    #[tokio::test]
    async fn a_replay_leaves_no_scratch_thread_behind() -> TestResult {
        let saver = Arc::new(MemorySaver::new());
        let g = counter(saver.clone())?;
        g.invoke(Count::update(), &RunConfig::new().thread("t"))
            .await?;
        let history = g.get_state_history("t", ListOptions::default()).await?;
        let oldest = history.last().ok_or("no history")?;
        let report = g.replay("t", oldest.checkpoint.id).await?;
        assert_eq!(report.divergence, None);
        assert_eq!(report.steps_compared, history.len() - 1);
        assert_eq!(thread_names(&saver).await?, ["t"]);
        Ok(())
    }

    #[tokio::test]
    async fn a_checkpoint_of_another_thread_is_not_found() -> TestResult {
        let saver = Arc::new(MemorySaver::new());
        let g = counter(saver.clone())?;
        for thread in ["t", "u"] {
            g.invoke(Count::update(), &RunConfig::new().thread(thread))
                .await?;
        }
        let other = g.get_state("u", None).await?.ok_or("no state")?;
        match g.replay("t", other.checkpoint.id).await {
            Err(RunError::Checkpoint(CheckpointError::NotFound { thread, id, .. })) => {
                assert_eq!((thread.as_str(), id), ("t", other.checkpoint.id));
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
        assert_eq!(thread_names(&saver).await?, ["t", "u"]);
        Ok(())
    }

    #[tokio::test]
    async fn a_graph_without_a_checkpointer_cannot_replay() -> TestResult {
        let saver = Arc::new(MemorySaver::new());
        let g = counter(saver.clone())?;
        g.invoke(Count::update(), &RunConfig::new().thread("t"))
            .await?;
        let head = g.get_state("t", None).await?.ok_or("no state")?;
        let result = g
            .without_checkpointer()
            .replay("t", head.checkpoint.id)
            .await;
        assert!(matches!(result, Err(RunError::MissingThread)), "{result:?}");
        Ok(())
    }

    #[test]
    fn the_scratch_thread_is_named_after_thread_and_checkpoint() -> TestResult {
        let (a, b) = (CheckpointId::from_u128(1), CheckpointId::from_u128(2));
        let scratch = scratch_thread("t", a)?;
        assert!(scratch.as_str().starts_with("replay-"), "{scratch}");
        assert_eq!(scratch, scratch_thread("t", a)?);
        assert_ne!(scratch, scratch_thread("t", b)?);
        assert_ne!(scratch, scratch_thread("u", a)?);
        Ok(())
    }
}
