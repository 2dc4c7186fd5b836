//! Replay: run a thread again from one of its checkpoints with the current node code, and
//! report the first step where the new run's state differs from the recorded one.

use stategraph_checkpoints::{CheckpointError, CheckpointId, Namespace, Saver, Source, ThreadId};

use crate::diff::{diff_states, StateDiff};
use crate::{CompiledGraph, Durability, Input, RunConfig, RunError, State};

/// Where a replay first differed from the recorded history.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The superstep.
    pub step: i64,
    /// The recorded checkpoint of that step (`None` if the recording ended earlier).
    pub recorded: Option<CheckpointId>,
    /// The replayed checkpoint of that step (`None` if the replay ended earlier).
    pub replayed: Option<CheckpointId>,
    /// How the replayed state differs from the recorded one (empty if one side ended).
    pub diff: StateDiff,
}

impl Divergence {
    /// The first field that differs, if the states differ.
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

/// The checkpoints from `head` back to (not including) `from`, oldest first.
async fn chain_after(
    saver: &dyn Saver,
    thread: &ThreadId,
    from: CheckpointId,
    head: CheckpointId,
) -> Result<Option<Vec<(CheckpointId, i64, Source)>>, RunError> {
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
        out.push((id, cp.checkpoint.step, cp.checkpoint.source));
        cur = cp.checkpoint.parent;
    }
    Ok(None)
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
        let thread_id = ThreadId::new(thread)?;
        let root = Namespace::root();
        let not_found = || {
            RunError::Checkpoint(CheckpointError::NotFound {
                thread: thread_id.clone(),
                ns: root.clone(),
                id: from,
            })
        };
        let head = saver
            .get(&thread_id, &root, None)
            .await?
            .ok_or_else(not_found)?
            .checkpoint
            .id;
        let recorded = chain_after(saver.as_ref(), &thread_id, from, head)
            .await?
            .ok_or_else(not_found)?;

        let scratch = ThreadId::new(format!(
            "replay-{}",
            blake3::hash(format!("{thread}\u{0}{from}").as_bytes()).to_hex()
        ))?;
        saver.delete_thread(&scratch).await?;
        saver.copy_thread(&thread_id, &scratch).await?;
        let config = RunConfig::new()
            .thread(scratch.as_str())
            .checkpoint(from)
            .durability(Durability::Sync);
        let run = self.invoke(Input::Continue, &config).await;
        let result = async {
            let paused = run?.is_interrupted();
            let replay_head = saver
                .get(&scratch, &root, None)
                .await?
                .ok_or_else(not_found)?
                .checkpoint
                .id;
            // The replay starts with a fork checkpoint on top of `from`; compare what follows.
            let replayed = chain_after(saver.as_ref(), &scratch, from, replay_head)
                .await?
                .ok_or_else(not_found)?;
            let replayed: Vec<(CheckpointId, i64, Source)> = replayed
                .into_iter()
                .filter(|c| c.2 != Source::Fork)
                .collect();
            let mut compared = 0;
            // A replay that paused on an interrupt is compared as far as it got.
            let span = if paused {
                replayed.len().min(recorded.len())
            } else {
                recorded.len().max(replayed.len())
            };
            for i in 0..span {
                let (r, p) = (recorded.get(i), replayed.get(i));
                let (Some(&(rid, rstep, _)), Some(&(pid, _, _))) = (r, p) else {
                    let step = r.or(p).map_or(-1, |x| x.1);
                    return Ok(ReplayReport {
                        steps_compared: compared,
                        divergence: Some(Divergence {
                            step,
                            recorded: r.map(|x| x.0),
                            replayed: p.map(|x| x.0),
                            diff: StateDiff::default(),
                        }),
                    });
                };
                let a = self
                    .get_state(thread, Some(rid))
                    .await?
                    .ok_or_else(not_found)?;
                let b = self
                    .get_state(scratch.as_str(), Some(pid))
                    .await?
                    .ok_or_else(not_found)?;
                compared += 1;
                let diff = diff_states(&*a.values, &*b.values)?;
                if !diff.is_empty() {
                    return Ok(ReplayReport {
                        steps_compared: compared,
                        divergence: Some(Divergence {
                            step: rstep,
                            recorded: Some(rid),
                            replayed: Some(pid),
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
        .await;
        saver.delete_thread(&scratch).await?;
        result
    }
}
