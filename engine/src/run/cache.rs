//! The node cache in a step: the keys of the step's cached tasks, the hits that replace
//! running them, and the writes of those that ran, stored for the next task with their key
//! (see [`crate::cache`]).

use std::time::Duration;

use stategraph_checkpoints::node_cache::{CacheEntry, CacheKey};
use stategraph_reducers::{Change, Stored};

use super::pending::{output_from_json, output_to_json};
use super::plan::{PlannedTask, TaskTrigger};
use super::superstep::RunLoop;
use crate::cache::{namespace, CachePolicy, GraphCache};
use crate::graph::TaskOutput;
use crate::state::Field;
use crate::{RunError, State};

/// A cached task of the step that found no entry: where its writes go if it finishes.
pub(super) struct CacheMiss {
    /// The task's position in the step.
    pub(super) ti: usize,
    key: CacheKey,
    ttl: Option<Duration>,
}

/// Version of the default key's layout: a change to it must not read older entries.
const KEY_LAYOUT: &[u8] = b"stategraph node cache key v1";

impl<S: State> RunLoop<S> {
    /// Look up the tasks at positions `to_run` whose node has a cache policy (but tasks that
    /// paused or failed in an earlier attempt of the step: they run to take their answers).
    /// Hits leave `to_run` with their outputs; the misses are returned, to store their
    /// writes once they ran.
    pub(super) async fn cache_lookup(
        &mut self,
        cache: &GraphCache,
        tasks: &[PlannedTask],
        to_run: &mut Vec<usize>,
        resumed: &std::collections::BTreeSet<usize>,
    ) -> Result<(Vec<(usize, TaskOutput<S>)>, Vec<CacheMiss>), RunError> {
        let mut digest: Option<blake3::Hasher> = None;
        let mut asked = Vec::new();
        for &ti in to_run.iter() {
            let t = &tasks[ti];
            let Some(policy) = self.policy_of(t) else {
                continue;
            };
            if resumed.contains(&ti) || t.trigger == TaskTrigger::Start {
                continue;
            }
            let key = self.cache_key(t, policy, &mut digest)?;
            asked.push(CacheMiss {
                ti,
                key,
                ttl: policy.ttl,
            });
        }
        if asked.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let keys: Vec<CacheKey> = asked.iter().map(|m| m.key.clone()).collect();
        let now = cache.clock.now().0;
        let found = cache.backend.get_cached(&keys, now).await?;
        let mut hits = Vec::new();
        let mut misses = Vec::new();
        for (miss, value) in asked.into_iter().zip(found) {
            // An entry this build cannot read (the update type changed) is a miss: the node
            // runs and its writes replace the entry.
            match value.map(|v| output_from_json::<S>(&v)) {
                Some(Ok(out)) => hits.push((miss.ti, out)),
                Some(Err(e)) => {
                    tracing::debug!(node = %self.node_name(&tasks[miss.ti]), error = %e, "unreadable node cache entry");
                    misses.push(miss);
                }
                None => misses.push(miss),
            }
        }
        to_run.retain(|ti| !hits.iter().any(|(hit, _)| hit == ti));
        for (ti, _) in &hits {
            let t = &tasks[*ti];
            self.cache_hits.push(serde_json::json!({
                "node": &*self.node_name(t),
                "task": t.id.to_string(),
            }));
        }
        Ok((hits, misses))
    }

    /// Store the writes of the tasks in `misses` that ran and finished: not those that
    /// consumed an answer to an interrupt (input the key does not see), nor those whose
    /// output goes to a parent graph.
    pub(super) async fn cache_store(
        &self,
        cache: &GraphCache,
        tasks: &[PlannedTask],
        misses: Vec<CacheMiss>,
        results: &[Option<super::execute::TaskResult<S>>],
    ) -> Result<(), RunError> {
        let now = cache.clock.now().0;
        let mut entries = Vec::new();
        for miss in misses {
            let Some(super::execute::TaskResult::Done(out)) = &results[miss.ti] else {
                continue;
            };
            if !out.parents.is_empty() || self.took_answers(&tasks[miss.ti]) {
                continue;
            }
            let expires_at_ms = miss.ttl.map(|d| {
                let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                now.saturating_add(ms)
            });
            entries.push(CacheEntry {
                key: miss.key,
                value: output_to_json(out)?,
                expires_at_ms,
            });
        }
        if entries.is_empty() {
            return Ok(());
        }
        cache.backend.put_cached(entries).await?;
        Ok(())
    }

    /// Stream a hit's task start (its update and end follow as a finished task's).
    pub(super) async fn stream_hit_start(&self, t: &PlannedTask) {
        if self.wants(|m| m.tasks) {
            self.stream_start(t).await;
        }
    }

    /// The cache policy of task `t`'s node.
    fn policy_of(&self, t: &PlannedTask) -> Option<&CachePolicy> {
        self.g.nodes[t.node?].options.cache.as_ref()
    }

    /// Whether task `t` consumed answers to its interrupts in this run.
    fn took_answers(&self, t: &PlannedTask) -> bool {
        let id = crate::node::interrupt_id(t.id);
        use stategraph_checkpoints::sync::Unpoisoned;
        let answers = self.shared.answers.lock().unpoisoned();
        answers.iter().any(|a| a.interrupt == id)
    }

    /// Task `t`'s key: the user's string, or the digest of the state and its argument.
    fn cache_key(
        &self,
        t: &PlannedTask,
        policy: &CachePolicy,
        digest: &mut Option<blake3::Hasher>,
    ) -> Result<CacheKey, RunError> {
        let node = self.node_name(t);
        let ns = namespace(&self.g.name, &node);
        let arg = t.arg.as_deref();
        let mut h = match &policy.key {
            Some(user) => {
                let text = (user.f)(self.state.as_ref(), arg).unwrap_or_default();
                let mut h = blake3::Hasher::new();
                h.update(b"user:");
                h.update(text.as_bytes());
                h
            }
            None => {
                let mut h = match digest {
                    Some(h) => h.clone(),
                    None => digest.insert(self.state_digest()?).clone(),
                };
                match arg {
                    Some(v) => {
                        let bytes = serde_json::to_vec(v).map_err(|source| RunError::Encode {
                            field: "Send argument",
                            source,
                        })?;
                        framed(&mut h, b"arg", &bytes);
                    }
                    None => {
                        h.update(b"no arg");
                    }
                }
                h
            }
        };
        framed(&mut h, b"node", ns.as_bytes());
        Ok(CacheKey {
            ns,
            key: h.finalize().to_hex().to_string(),
        })
    }

    /// The digest of every field of the step's state, in its stored encoding.
    fn state_digest(&self) -> Result<blake3::Hasher, RunError> {
        let mut h = blake3::Hasher::new();
        h.update(KEY_LAYOUT);
        for &f in S::Field::ALL {
            let stored = self
                .state
                .encode_field(f, Change::Replaced)
                .map_err(|source| RunError::Encode {
                    field: f.name(),
                    source,
                })?;
            let bytes = match &stored {
                Stored::Whole(b) | Stored::Tail(b) => b,
            };
            framed(&mut h, f.name().as_bytes(), bytes);
        }
        Ok(h)
    }
}

/// Feed `label` and `bytes` to `h`, each behind its length, so no two inputs run together.
fn framed(h: &mut blake3::Hasher, label: &[u8], bytes: &[u8]) {
    h.update(&(label.len() as u64).to_le_bytes());
    h.update(label);
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}
