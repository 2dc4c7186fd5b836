//! The checkpoint data model: what one step of a thread leaves behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{CheckpointId, Namespace, TaskId, ThreadId};

/// Why a checkpoint was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// New input was accepted (before the `__start__` step applies it).
    Input,
    /// A superstep finished.
    Loop,
    /// The state was updated from outside, as if a node had written it.
    Update,
    /// A new branch was started from an older checkpoint.
    Fork,
}

impl Source {
    /// The lowercase name used in metadata and on disk.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Input => "input",
            Source::Loop => "loop",
            Source::Update => "update",
            Source::Fork => "fork",
        }
    }
}

/// A `Send` waiting to run as a task of the next step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingSend {
    /// The target node.
    pub node: String,
    /// The task's input, as JSON.
    pub arg: serde_json::Value,
}

/// The engine's control state at a checkpoint: what decides the next step's tasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Control {
    /// Version of every channel that has one: state fields by name, trigger channels as
    /// `branch:to:<node>` and `join:<a>+<b>:<node>`.
    ///
    /// Keys are shared strings: an engine hands every checkpoint the same channel names, so
    /// building, cloning and diffing a control record allocates no key text.
    pub versions: BTreeMap<Arc<str>, u64>,
    /// For each node, the versions of its trigger channels when it last ran.
    pub versions_seen: BTreeMap<Arc<str>, BTreeMap<Arc<str>, u64>>,
    /// Trigger channels that are available now (`branch:to:<node>`), in node order.
    pub branches: Vec<String>,
    /// Fan-in barriers partly or wholly reached: channel → sources seen so far.
    pub barriers: BTreeMap<String, Vec<String>>,
    /// `Send` tasks for the next step, in order.
    pub sends: Vec<PendingSend>,
    /// Channel versions already acknowledged by static interrupts.
    pub interrupt_seen: BTreeMap<String, u64>,
    /// The checkpoint that started this stretch of the branch (new input, a fork or an
    /// update): task ids derive from it and the step, so a step computed again after a crash
    /// gets the same ids.
    #[serde(default)]
    pub anchor: Option<CheckpointId>,
}

/// One checkpoint's header: identity, lineage and control state, without field values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The checkpoint's id (time-ordered).
    pub id: CheckpointId,
    /// The checkpoint this one follows, if any.
    pub parent: Option<CheckpointId>,
    /// The superstep (−1 for the first input checkpoint of a thread).
    pub step: i64,
    /// Why it was written.
    pub source: Source,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Control state for planning the next step.
    pub control: Control,
    /// User and engine metadata (`run_id`, `writes` per node, …).
    pub metadata: BTreeMap<String, serde_json::Value>,
}

impl Checkpoint {
    /// Nodes with a trigger available at this checkpoint, followed by the targets of pending
    /// `Send`s (what the next step would run, before trigger/version filtering).
    pub fn next_nodes(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .control
            .branches
            .iter()
            .filter_map(|b| b.strip_prefix("branch:to:").map(str::to_owned))
            .collect();
        out.extend(self.control.sends.iter().map(|s| s.node.clone()));
        out
    }
}

/// The stored form of one field's value, as a reducer produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldPart {
    /// The whole value (JSON).
    Whole(Vec<u8>),
    /// Items appended after the earlier parts (a JSON array).
    Tail(Vec<u8>),
}

/// What a step changed in one field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldWrite {
    /// The field's name.
    pub field: String,
    /// Its stored change.
    pub part: FieldPart,
}

/// What a finished task left behind in a step that did not complete (or the resume values an
/// interrupted task consumed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WriteKind {
    /// The task succeeded; its output (update, goto, sends) as JSON.
    Output(serde_json::Value),
    /// The task failed with this message.
    Error(String),
    /// The task paused on an interrupt.
    Interrupt {
        /// The interrupt's id.
        id: String,
        /// The value shown to the caller.
        value: serde_json::Value,
    },
    /// Resume values the task received so far, by position.
    Resume(Vec<serde_json::Value>),
}

/// The answer to pending interrupts: run input (`Command::resume` in the engine) or a queued
/// run's (`RunQueue::submit_resume`). Stored as JSON `{"value": v}` or `{"map": {id: v}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resume {
    /// One value, for the single pending interrupt.
    Value(serde_json::Value),
    /// Values by interrupt id, when several are pending.
    Map(std::collections::BTreeMap<String, serde_json::Value>),
}

impl Resume {
    /// A single resume value.
    ///
    /// # Panics
    /// Never; a value that cannot be serialized becomes JSON `null`.
    pub fn value(v: impl Serialize) -> Self {
        Resume::Value(serde_json::to_value(v).unwrap_or(serde_json::Value::Null))
    }
}

/// A pending write of one task against the checkpoint its step started from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The task that wrote it.
    pub task_id: TaskId,
    /// The task's node.
    pub node: String,
    /// What it wrote.
    pub kind: WriteKind,
}

/// A checkpoint to store: header plus the fields its step changed.
#[derive(Debug, Clone, PartialEq)]
pub struct PutCheckpoint {
    /// Thread.
    pub thread: ThreadId,
    /// Namespace.
    pub ns: Namespace,
    /// Header and control state.
    pub checkpoint: Checkpoint,
    /// Fields changed since the parent checkpoint (all fields for a checkpoint without parent
    /// or one that starts a new chain of stored parts).
    pub writes: Vec<FieldWrite>,
}

/// A checkpoint as loaded: header, every field's stored parts, pending writes.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedCheckpoint {
    /// Header and control state.
    pub checkpoint: Checkpoint,
    /// For each field with a value: its parts, oldest first (a `Whole` then `Tail`s).
    pub fields: BTreeMap<String, Vec<FieldPart>>,
    /// Pending writes recorded against this checkpoint.
    pub pending: Vec<PendingWrite>,
}

/// Options for listing a thread's history.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// At most this many checkpoints.
    pub limit: Option<usize>,
    /// Only checkpoints older than this one.
    pub before: Option<CheckpointId>,
    /// Only checkpoints whose metadata has these key/value pairs: the key present, with a JSON
    /// value equal to the given one (a missing key never matches, not even `null`; `1` is not
    /// `1.0`, `true` is not `1`). The keys `source` and `step` match the checkpoint's own
    /// fields. A key must match `[A-Za-z_][A-Za-z0-9_.-]{0,63}`, else
    /// [`CheckpointError::InvalidFilterKey`](crate::CheckpointError::InvalidFilterKey).
    pub filter: BTreeMap<String, serde_json::Value>,
}

/// How a thread stands at its newest checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadStatus {
    /// Nothing left to run.
    Done,
    /// Paused on a question: an interrupt is pending at the newest checkpoint, waiting for a
    /// resume.
    Interrupted,
    /// Tasks are planned but not run, and no interrupt is pending: a fork or a state edit not
    /// yet continued, a static interrupt, or a run that stopped mid-way. Invoking the thread
    /// with no input continues it.
    Ready,
    /// The last step failed; its error is recorded.
    Error,
}

impl ThreadStatus {
    /// The status of a thread whose newest checkpoint is `head`.
    pub fn of(head: &LoadedCheckpoint) -> Self {
        if head
            .pending
            .iter()
            .any(|w| matches!(w.kind, WriteKind::Error(_)))
        {
            ThreadStatus::Error
        } else if head
            .pending
            .iter()
            .any(|w| matches!(w.kind, WriteKind::Interrupt { .. }))
        {
            ThreadStatus::Interrupted
        } else if !head.checkpoint.control.branches.is_empty()
            || !head.checkpoint.control.sends.is_empty()
        {
            ThreadStatus::Ready
        } else {
            ThreadStatus::Done
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Done => "done",
            ThreadStatus::Interrupted => "interrupted",
            ThreadStatus::Ready => "ready",
            ThreadStatus::Error => "error",
        }
    }
}

/// One thread, as listed by [`Saver::list_threads`](crate::Saver::list_threads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The thread.
    pub thread: ThreadId,
    /// Checkpoints in its root namespace.
    pub checkpoints: usize,
    /// Step of its newest checkpoint.
    pub last_step: i64,
    /// How it stands.
    pub status: ThreadStatus,
    /// Creation time of its newest checkpoint, milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
}

/// One namespace of a thread (its root graph or a subgraph's), as listed by
/// [`Saver::list_namespaces`](crate::Saver::list_namespaces).
///
/// Checkpoint ids are time-ordered, so `first` and `last` also tell when the namespace's
/// history began and when it was last written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NamespaceInfo {
    /// The namespace (the root one is empty).
    pub ns: Namespace,
    /// How many checkpoints it holds.
    pub checkpoints: usize,
    /// Its oldest checkpoint.
    pub first: CheckpointId,
    /// Its newest checkpoint.
    pub last: CheckpointId,
}

impl NamespaceInfo {
    /// A namespace's entry.
    pub fn new(ns: Namespace, checkpoints: usize, first: CheckpointId, last: CheckpointId) -> Self {
        NamespaceInfo {
            ns,
            checkpoints,
            first,
            last,
        }
    }
}

/// Which checkpoints of a thread [`Saver::prune`](crate::Saver::prune) keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// The newest `n` checkpoints of each namespace.
    KeepLast(usize),
    /// Checkpoints created at or after this time (ms since the epoch); the newest one of each
    /// namespace is always kept.
    NewerThan(u64),
}

/// What one checkpoint changed since its parent, as a saver stored it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepChanges {
    /// The checkpoint's parent, if it has one.
    pub parent: Option<CheckpointId>,
    /// Changed fields with their parts, oldest first: a field whose first part is
    /// [`FieldPart::Whole`] was replaced; one whose parts are all [`FieldPart::Tail`] had
    /// those items appended.
    pub fields: Vec<(String, Vec<FieldPart>)>,
    /// Pending writes recorded against the checkpoint.
    pub pending: Vec<PendingWrite>,
}

impl StepChanges {
    /// The changed fields as the writes that store them again (each part, in order).
    ///
    /// ```
    /// use stategraph_checkpoints::{FieldPart, StepChanges};
    ///
    /// let changes = StepChanges {
    ///     parent: None,
    ///     fields: vec![("log".to_owned(), vec![FieldPart::Whole(vec![1]), FieldPart::Tail(vec![2])])],
    ///     pending: Vec::new(),
    /// };
    /// let writes = changes.into_writes();
    /// assert_eq!(writes.len(), 2);
    /// assert!(writes.iter().all(|w| w.field == "log"));
    /// ```
    pub fn into_writes(self) -> Vec<FieldWrite> {
        self.fields
            .into_iter()
            .flat_map(|(field, parts)| {
                parts.into_iter().map(move |part| FieldWrite {
                    field: field.clone(),
                    part,
                })
            })
            .collect()
    }

    /// The changes from `parent` to `child`, by comparing their stored parts (a saver that
    /// knows its deltas answers without loading both).
    pub fn between(parent: Option<&LoadedCheckpoint>, child: &LoadedCheckpoint) -> Self {
        let mut fields = Vec::new();
        for (name, parts) in &child.fields {
            let before = parent.and_then(|p| p.fields.get(name));
            match before {
                Some(b) if b == parts => {}
                Some(b)
                    if parts.len() > b.len()
                        && parts[..b.len()] == b[..]
                        && parts[b.len()..]
                            .iter()
                            .all(|p| matches!(p, FieldPart::Tail(_))) =>
                {
                    fields.push((name.clone(), parts[b.len()..].to_vec()));
                }
                _ => fields.push((name.clone(), whole_first(parts.clone()))),
            }
        }
        StepChanges {
            parent: child.checkpoint.parent,
            fields,
            pending: child.pending.clone(),
        }
    }
}

/// Parts that replace a value: start with a whole part (an empty list before tails).
pub(crate) fn whole_first(mut parts: Vec<FieldPart>) -> Vec<FieldPart> {
    if !matches!(parts.first(), Some(FieldPart::Whole(_))) {
        parts.insert(0, FieldPart::Whole(b"[]".to_vec()));
    }
    parts
}
