//! [`MemorySaver`]: checkpoints kept in process memory, for tests and short-lived programs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::{self, BoxFuture};

use crate::checkpoint::whole_first;
use crate::run_book::RunBook;
use crate::sync::Unpoisoned;
use crate::{
    validate_filter_key, Checkpoint, CheckpointError, CheckpointId, DeliveryReceipt, FieldPart,
    FieldWrite, ListOptions, LoadedCheckpoint, Namespace, NamespaceInfo, PendingWrite,
    PutCheckpoint, Retention, RunId, RunRecord, Saver, Source, StepChanges, ThreadId, ThreadInfo,
    ThreadStatus, WriteKind,
};

type Parts = Vec<Arc<FieldPart>>;

#[derive(Debug)]
struct Entry {
    checkpoint: Checkpoint,
    fields: BTreeMap<String, Arc<Parts>>,
    /// What the checkpoint's own `put` wrote, relative to its parent (for `changes`).
    wrote: Vec<(String, Arc<FieldPart>)>,
    pending: Vec<PendingWrite>,
}

type Chain = BTreeMap<CheckpointId, Entry>;

impl Entry {
    /// The same checkpoint for another thread (parts shared, not copied).
    fn copy(&self) -> Entry {
        Entry {
            checkpoint: self.checkpoint.clone(),
            fields: self.fields.clone(),
            wrote: self.wrote.clone(),
            pending: self.pending.clone(),
        }
    }
}

/// [`CheckpointError::StaleParent`] when `to` has checkpoints already.
fn refuse_existing(
    map: &HashMap<(ThreadId, Namespace), Chain>,
    to: &ThreadId,
) -> Result<(), CheckpointError> {
    match map.iter().find(|((t, _), c)| t == to && !c.is_empty()) {
        Some(((_, ns), chain)) => Err(CheckpointError::StaleParent {
            thread: to.clone(),
            ns: ns.clone(),
            expected: None,
            found: chain.keys().next_back().copied(),
        }),
        None => Ok(()),
    }
}

/// A [`Saver`] that keeps everything in memory. Cloning shares the store.
///
/// Field parts are shared between checkpoints (an unchanged field costs a pointer), and an
/// appended list stores only its tail, merged with earlier tails like a binary counter (a
/// list of n appends is O(log n) parts).
///
/// ```
/// use stategraph_checkpoints::{MemorySaver, Namespace, Saver, ThreadId};
/// # futures::executor::block_on(async {
/// let saver = MemorySaver::new();
/// let thread = ThreadId::new("t1")?;
/// assert!(saver.get(&thread, &Namespace::root(), None).await?.is_none());
/// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemorySaver {
    inner: Arc<Mutex<HashMap<(ThreadId, Namespace), Chain>>>,
    runs: Arc<Mutex<RunBook>>,
}

impl MemorySaver {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(ThreadId, Namespace), Chain>> {
        // A poisoned lock only means another thread panicked mid-call; the map itself is
        // always left consistent (every mutation is a single insert), so keep serving.
        self.inner.lock().unpoisoned()
    }

    fn runs(&self) -> MutexGuard<'_, RunBook> {
        // As `lock`: every mutation of the book leaves it consistent.
        self.runs.lock().unpoisoned()
    }

    /// How many checkpoints the store holds in all threads and namespaces.
    pub fn checkpoint_count(&self) -> usize {
        self.lock().values().map(BTreeMap::len).sum()
    }

    /// How many checkpoints a thread holds, in every namespace.
    pub fn thread_checkpoint_count(&self, thread: &ThreadId) -> usize {
        self.lock()
            .iter()
            .filter(|((t, _), _)| t == thread)
            .map(|(_, c)| c.len())
            .sum()
    }

    /// The namespaces that hold checkpoints of a thread.
    pub fn namespaces(&self, thread: &ThreadId) -> Vec<Namespace> {
        let mut out: Vec<Namespace> = self
            .lock()
            .keys()
            .filter(|(t, _)| t == thread)
            .map(|(_, ns)| ns.clone())
            .collect();
        out.sort();
        out
    }

    fn put_sync(&self, put: PutCheckpoint) -> Result<(), CheckpointError> {
        let mut map = self.lock();
        let key = (put.thread.clone(), put.ns.clone());
        let chain = map.entry(key).or_default();
        let head = chain.keys().next_back().copied();
        let cp = &put.checkpoint;
        let must_extend_head = matches!(cp.source, Source::Loop | Source::Input);
        if must_extend_head && cp.parent != head {
            return Err(CheckpointError::StaleParent {
                thread: put.thread,
                ns: put.ns,
                expected: cp.parent,
                found: head,
            });
        }
        let mut fields = match cp.parent {
            Some(parent) => match chain.get_mut(&parent) {
                Some(entry) => {
                    if cp.source == Source::Loop {
                        // The step's checkpoint holds what its tasks recorded as they finished.
                        entry
                            .pending
                            .retain(|w| !matches!(w.kind, WriteKind::Output(_)));
                    }
                    entry.fields.clone()
                }
                None => {
                    return Err(CheckpointError::NotFound {
                        thread: put.thread,
                        ns: put.ns,
                        id: parent,
                    })
                }
            },
            None => BTreeMap::new(),
        };
        let mut wrote = Vec::with_capacity(put.writes.len());
        for FieldWrite { field, part } in put.writes {
            let part = Arc::new(part);
            let parts = match part.as_ref() {
                FieldPart::Whole(_) => vec![part.clone()],
                FieldPart::Tail(_) => {
                    let mut parts: Parts = fields
                        .get(&field)
                        .map(|p| p.as_ref().clone())
                        .unwrap_or_default();
                    push_part(&mut parts, part.clone());
                    parts
                }
            };
            fields.insert(field.clone(), Arc::new(parts));
            wrote.push((field, part));
        }
        chain.insert(
            cp.id,
            Entry {
                checkpoint: put.checkpoint,
                fields,
                wrote,
                pending: Vec::new(),
            },
        );
        Ok(())
    }

    fn put_writes_sync(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError> {
        let mut map = self.lock();
        let entry = map
            .get_mut(&(thread.clone(), ns.clone()))
            .and_then(|c| c.get_mut(&id))
            .ok_or_else(|| CheckpointError::NotFound {
                thread: thread.clone(),
                ns: ns.clone(),
                id,
            })?;
        // The writes of a task replace everything recorded for it before (a resumed
        // task records its outcome afresh).
        let tasks: std::collections::BTreeSet<_> = writes.iter().map(|w| w.task_id).collect();
        entry.pending.retain(|p| !tasks.contains(&p.task_id));
        entry.pending.extend(writes);
        Ok(())
    }

    fn changes_sync(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
        id: CheckpointId,
    ) -> Result<StepChanges, CheckpointError> {
        let map = self.lock();
        let chain = map.get(&(thread.clone(), ns.clone()));
        let Some(entry) = chain.and_then(|c| c.get(&id)) else {
            return Err(CheckpointError::NotFound {
                thread: thread.clone(),
                ns: ns.clone(),
                id,
            });
        };
        let parent_kept = entry
            .checkpoint
            .parent
            .is_some_and(|p| chain.is_some_and(|c| c.contains_key(&p)));
        let fields = if parent_kept {
            entry
                .wrote
                .iter()
                .map(|(name, part)| {
                    let parts = vec![(**part).clone()];
                    match part.as_ref() {
                        FieldPart::Tail(_) => (name.clone(), parts),
                        FieldPart::Whole(_) => (name.clone(), whole_first(parts)),
                    }
                })
                .collect()
        } else {
            entry
                .fields
                .iter()
                .map(|(name, parts)| {
                    (
                        name.clone(),
                        whole_first(parts.iter().map(|p| (**p).clone()).collect()),
                    )
                })
                .collect()
        };
        Ok(StepChanges {
            parent: entry.checkpoint.parent,
            fields,
            pending: entry.pending.clone(),
        })
    }

    fn get_sync(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
        id: Option<CheckpointId>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
        let map = self.lock();
        let chain = map.get(&(thread.clone(), ns.clone()));
        let entry = match (chain, id) {
            (Some(chain), None) => chain.values().next_back(),
            (Some(chain), Some(id)) => chain.get(&id),
            (None, _) => None,
        };
        match (entry, id) {
            (Some(e), _) => Ok(Some(LoadedCheckpoint {
                checkpoint: e.checkpoint.clone(),
                fields: e
                    .fields
                    .iter()
                    .map(|(k, parts)| (k.clone(), parts.iter().map(|p| (**p).clone()).collect()))
                    .collect(),
                pending: e.pending.clone(),
            })),
            (None, Some(id)) => Err(CheckpointError::NotFound {
                thread: thread.clone(),
                ns: ns.clone(),
                id,
            }),
            (None, None) => Ok(None),
        }
    }

    fn list_sync(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
        options: ListOptions,
    ) -> Result<Vec<Checkpoint>, CheckpointError> {
        for key in options.filter.keys() {
            validate_filter_key(key)?;
        }
        let map = self.lock();
        let Some(chain) = map.get(&(thread.clone(), ns.clone())) else {
            return Ok(Vec::new());
        };
        let upper = options
            .before
            .map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        Ok(chain
            .range((std::ops::Bound::Unbounded, upper))
            .rev()
            .map(|(_, e)| &e.checkpoint)
            .filter(|cp| matches_filter(cp, &options.filter))
            .take(options.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }
}

/// Append a list part, merging it with the parts before it like a binary counter: while the
/// part before the last is no bigger than the last, the two become one. A list then has
/// O(log n) parts and each stored byte is copied O(log n) times in all, instead of a
/// periodic re-encoding of the whole list.
fn push_part(parts: &mut Parts, part: Arc<FieldPart>) {
    parts.push(part);
    while parts.len() >= 2 {
        let last = parts.len() - 1;
        let (prev, tail) = (&parts[last - 1], &parts[last]);
        if part_bytes(prev).len() > part_bytes(tail).len() {
            break;
        }
        let Some(merged) = concat_arrays(prev, tail) else {
            break;
        };
        parts.truncate(last - 1);
        parts.push(Arc::new(merged));
    }
}

fn part_bytes(part: &FieldPart) -> &[u8] {
    match part {
        FieldPart::Whole(b) | FieldPart::Tail(b) => b,
    }
}

/// Two adjacent JSON-array parts as one (of the first one's kind), by joining their texts;
/// `None` if either is not an array (a decoder will report it).
fn concat_arrays(first: &FieldPart, second: &FieldPart) -> Option<FieldPart> {
    fn inner(bytes: &[u8]) -> Option<&[u8]> {
        let text = bytes.trim_ascii();
        let body = text.strip_prefix(b"[")?.strip_suffix(b"]")?;
        Some(body.trim_ascii())
    }
    let (a, b) = (inner(part_bytes(first))?, inner(part_bytes(second))?);
    let mut out = Vec::with_capacity(a.len() + b.len() + 3);
    out.push(b'[');
    out.extend_from_slice(a);
    if !a.is_empty() && !b.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(b);
    out.push(b']');
    Some(match first {
        FieldPart::Whole(_) => FieldPart::Whole(out),
        FieldPart::Tail(_) => FieldPart::Tail(out),
    })
}

fn matches_filter(cp: &Checkpoint, filter: &BTreeMap<String, serde_json::Value>) -> bool {
    filter.iter().all(|(k, v)| match k.as_str() {
        "source" => v.as_str() == Some(cp.source.as_str()),
        "step" => v.as_i64() == Some(cp.step),
        _ => cp.metadata.get(k) == Some(v),
    })
}

impl Saver for MemorySaver {
    fn put(&self, put: PutCheckpoint) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(future::ready(self.put_sync(put)))
    }

    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let result = self.put_writes_sync(thread, ns, id, writes);
        Box::pin(future::ready(result))
    }

    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<LoadedCheckpoint>, CheckpointError>> {
        let result = self.get_sync(thread, ns, id);
        Box::pin(future::ready(result))
    }

    /// From what the checkpoint's `put` wrote; a checkpoint whose parent is gone (pruned)
    /// reports every field, as a root does.
    fn changes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
    ) -> BoxFuture<'a, Result<StepChanges, CheckpointError>> {
        Box::pin(future::ready(self.changes_sync(thread, ns, id)))
    }

    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>> {
        let result = self.list_sync(thread, ns, options);
        Box::pin(future::ready(result))
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let mut map = self.lock();
        map.retain(|(t, _), _| t != thread);
        self.runs().delete_thread(thread);
        Box::pin(future::ready(Ok(())))
    }

    fn list_namespaces<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<NamespaceInfo>, CheckpointError>> {
        let mut out: Vec<NamespaceInfo> = self
            .lock()
            .iter()
            .filter(|((t, _), _)| t == thread)
            .filter_map(|((_, ns), chain)| {
                let first = *chain.keys().next()?;
                let last = *chain.keys().next_back()?;
                Some(NamespaceInfo::new(ns.clone(), chain.len(), first, last))
            })
            .collect();
        out.sort_by(|a, b| a.ns.as_str().cmp(b.ns.as_str()));
        Box::pin(future::ready(Ok(out)))
    }

    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>> {
        let mut threads: Vec<ThreadId> = self
            .lock()
            .keys()
            .filter(|(_, ns)| ns.is_root())
            .map(|(t, _)| t.clone())
            .collect();
        threads.sort();
        let mut out = Vec::new();
        for thread in threads {
            let count = self
                .lock()
                .get(&(thread.clone(), Namespace::root()))
                .map_or(0, BTreeMap::len);
            match self.get_sync(&thread, &Namespace::root(), None) {
                Ok(Some(head)) => out.push(ThreadInfo {
                    thread,
                    checkpoints: count,
                    last_step: head.checkpoint.step,
                    status: ThreadStatus::of(&head),
                    updated_at_ms: head.checkpoint.created_at_ms,
                }),
                Ok(None) => {}
                Err(e) => return Box::pin(future::ready(Err(e))),
            }
        }
        Box::pin(future::ready(Ok(out)))
    }

    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let mut map = self.lock();
        if let Err(e) = refuse_existing(&map, to) {
            return Box::pin(future::ready(Err(e)));
        }
        let copies: Vec<((ThreadId, Namespace), Chain)> = map
            .iter()
            .filter(|((t, _), _)| t == from)
            .map(|((_, ns), chain)| {
                let chain = chain.iter().map(|(id, e)| (*id, e.copy())).collect();
                ((to.clone(), ns.clone()), chain)
            })
            .collect();
        map.extend(copies);
        Box::pin(future::ready(Ok(())))
    }

    fn copy_branch<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
        head: CheckpointId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let mut map = self.lock();
        if let Err(e) = refuse_existing(&map, to) {
            return Box::pin(future::ready(Err(e)));
        }
        let root = Namespace::root();
        let not_found = || CheckpointError::NotFound {
            thread: from.clone(),
            ns: Namespace::root(),
            id: head,
        };
        let Some(chain) = map.get(&(from.clone(), root.clone())) else {
            return Box::pin(future::ready(Err(not_found())));
        };
        let mut copy = Chain::new();
        let mut cur = Some(head);
        while let Some(id) = cur {
            let Some(entry) = chain.get(&id) else {
                return Box::pin(future::ready(Err(not_found())));
            };
            copy.insert(id, entry.copy());
            cur = entry.checkpoint.parent.filter(|p| chain.contains_key(p));
        }
        map.insert((to.clone(), root), copy);
        Box::pin(future::ready(Ok(())))
    }

    fn prune<'a>(
        &'a self,
        thread: &'a ThreadId,
        retention: Retention,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        let mut map = self.lock();
        let mut deleted = 0;
        for ((t, _), chain) in map.iter_mut() {
            if t != thread {
                continue;
            }
            let keep: std::collections::BTreeSet<CheckpointId> = chain
                .iter()
                .rev()
                .enumerate()
                .filter(|(i, (_, e))| match retention {
                    Retention::KeepLast(n) => *i < n.max(1),
                    Retention::NewerThan(ms) => *i == 0 || e.checkpoint.created_at_ms >= ms,
                })
                .map(|(_, (id, _))| *id)
                .collect();
            let before = chain.len();
            chain.retain(|id, _| keep.contains(id));
            deleted += before - chain.len();
            for e in chain.values_mut() {
                if e.checkpoint.parent.is_some_and(|p| !keep.contains(&p)) {
                    e.checkpoint.parent = None;
                }
            }
        }
        Box::pin(future::ready(Ok(deleted)))
    }

    fn put_run(&self, run: RunRecord) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(future::ready(self.runs().put(run)))
    }

    fn get_run<'a>(
        &'a self,
        thread: Option<&'a ThreadId>,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, CheckpointError>> {
        Box::pin(future::ready(Ok(self.runs().get(thread, run))))
    }

    fn list_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        Box::pin(future::ready(Ok(self.runs().list(thread))))
    }

    fn put_receipt_if_absent<'a>(
        &'a self,
        run: &'a RunId,
        receipt: DeliveryReceipt,
    ) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        Box::pin(future::ready(self.runs().put_receipt(run, receipt)))
    }

    fn get_receipt<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<DeliveryReceipt>, CheckpointError>> {
        Box::pin(future::ready(Ok(self.runs().receipt(run))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(parts: &Parts) -> Result<Vec<u32>, serde_json::Error> {
        let mut out = Vec::new();
        for part in parts {
            out.extend(serde_json::from_slice::<Vec<u32>>(part_bytes(part))?);
        }
        Ok(out)
    }

    #[test]
    fn appended_tails_merge_into_logarithmically_many_parts() -> Result<(), serde_json::Error> {
        let mut parts: Parts = vec![Arc::new(FieldPart::Whole(b"[]".to_vec()))];
        for i in 0..1000u32 {
            push_part(
                &mut parts,
                Arc::new(FieldPart::Tail(serde_json::to_vec(&[i])?)),
            );
            assert!(
                parts.len() <= 12,
                "{} parts after {} appends",
                parts.len(),
                i + 1
            );
        }
        assert!(matches!(parts[0].as_ref(), FieldPart::Whole(_)));
        assert_eq!(items(&parts)?, (0..1000).collect::<Vec<_>>());
        Ok(())
    }

    #[test]
    fn empty_and_spaced_arrays_merge_into_valid_json() -> Result<(), serde_json::Error> {
        let mut parts: Parts = vec![Arc::new(FieldPart::Whole(b" [ ] ".to_vec()))];
        push_part(&mut parts, Arc::new(FieldPart::Tail(b"[ 1 , 2 ]".to_vec())));
        push_part(&mut parts, Arc::new(FieldPart::Tail(b"[]".to_vec())));
        push_part(&mut parts, Arc::new(FieldPart::Tail(b"[3]".to_vec())));
        assert_eq!(items(&parts)?, [1, 2, 3]);
        Ok(())
    }

    #[test]
    fn a_part_that_is_not_an_array_is_never_merged() {
        let mut parts: Parts = vec![Arc::new(FieldPart::Whole(b"{}".to_vec()))];
        push_part(&mut parts, Arc::new(FieldPart::Tail(b"[1,2,3]".to_vec())));
        assert_eq!(parts.len(), 2);
        assert_eq!(part_bytes(&parts[0]), b"{}");
    }
}
