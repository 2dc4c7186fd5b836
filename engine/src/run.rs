//! The superstep runner: plan, execute, apply, checkpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, Control, FieldPart, FieldWrite, LoadedCheckpoint,
    Namespace, PendingSend, PendingWrite, PutCheckpoint, Saver, Source, TaskId, ThreadId,
    WriteKind,
};
use stategraph_reducers::{Change, ReduceCtx, Stored, StoredRef};

use crate::command::{Goto, ParentCommand, Resume, START};
use crate::event::{Event, EventKind, EventSink, Shared, TaskStatus};
use crate::graph::{Channel, CompiledGraph, GraphInner, TaskOutput};
use crate::node::{CancelToken, NodeContext, NodeResult, ResumeInput, Scratch, TaskCtx};
use crate::state::Field;
use crate::{BoxError, Command, Interrupt, RunError, State};

/// Default recursion limit (supersteps per invocation), as in LangGraph.
pub const DEFAULT_RECURSION_LIMIT: usize = 10_007;

/// Most checkpoint writes in flight under durability `async` (buffered or handed to the
/// saver): a crash loses at most these.
pub const MAX_INFLIGHT: usize = 64;

/// Under durability `async`, checkpoints go to a saver that does not order batches (see
/// [`Saver::orders_batches`]) in batches of this many.
const ASYNC_BATCH: usize = 16;

/// A checkpoint write handed to the saver: how many checkpoints, and its outcome. (The
/// future sits in a mutex only to keep the run loop `Sync`; it is reached through `&mut`.)
struct Inflight {
    puts: usize,
    done: std::sync::Mutex<BoxFuture<'static, Result<(), RunError>>>,
}

/// When a step's checkpoint must be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Each step's checkpoint is stored before the next step starts.
    Sync,
    /// A step's checkpoint is stored while the next step runs: up to
    /// [`MAX_INFLIGHT`] checkpoints may be in flight, and a saver that groups writes commits
    /// them together. A storage error surfaces at the next step boundary. A crash loses at most
    /// the steps not yet committed, never part of one; they run again, with the same task ids.
    #[default]
    Async,
    /// Only the final checkpoint of an invocation (at its end, error or interrupt) is stored.
    Exit,
}

/// How a run is configured: thread, time travel, limits, durability, metadata, cancellation.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub(crate) thread: Option<String>,
    pub(crate) checkpoint: Option<CheckpointId>,
    pub(crate) recursion_limit: usize,
    pub(crate) durability: Durability,
    pub(crate) metadata: BTreeMap<String, serde_json::Value>,
    pub(crate) cancel: CancelToken,
    pub(crate) interrupt_before: Vec<String>,
    pub(crate) interrupt_after: Vec<String>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            thread: None,
            checkpoint: None,
            recursion_limit: DEFAULT_RECURSION_LIMIT,
            durability: Durability::default(),
            metadata: BTreeMap::new(),
            cancel: CancelToken::new(),
            interrupt_before: Vec::new(),
            interrupt_after: Vec::new(),
        }
    }
}

impl RunConfig {
    /// A config without a thread (enough for a graph without checkpointer).
    pub fn new() -> Self {
        Self::default()
    }

    /// Run on this thread (validated when the run starts).
    pub fn thread(mut self, id: impl Into<String>) -> Self {
        self.thread = Some(id.into());
        self
    }

    /// Start from this checkpoint instead of the thread's newest: a fork.
    pub fn checkpoint(mut self, id: CheckpointId) -> Self {
        self.checkpoint = Some(id);
        self
    }

    /// At most this many supersteps.
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// When checkpoints are stored.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// A metadata entry stored on every checkpoint of the run.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// For this run only, pause before any step that would run one of these nodes of the root
    /// graph (`"*"`: every node), in addition to the graph's own static interrupts.
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// For this run only, pause after any step that ran one of these nodes of the root graph
    /// (`"*"`: every node).
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Cancel the run through this token.
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = token;
        self
    }

    fn thread_id(&self) -> Result<Option<ThreadId>, RunError> {
        self.thread
            .clone()
            .map(ThreadId::new)
            .transpose()
            .map_err(RunError::from)
    }
}

/// What a run starts from.
pub enum Input<S: State> {
    /// New input: applied by the `__start__` step, then the entry edges run.
    Update(S::Update),
    /// A command: resume interrupts, update the state and/or route, then continue.
    Command(Command<S>),
    /// Continue where the thread stopped (after a failure or a static interrupt).
    Continue,
}

impl<S: State> From<Command<S>> for Input<S> {
    fn from(value: Command<S>) -> Self {
        Input::Command(value)
    }
}

/// How a run ended (an interrupt is an outcome, not an error).
#[derive(Debug, Clone)]
pub struct RunOutcome<S> {
    /// The state at the end.
    pub state: Arc<S>,
    /// Pending interrupts, if the run paused.
    pub interrupts: Vec<Interrupt>,
    /// The last checkpoint written, if the graph has a checkpointer.
    pub checkpoint: Option<CheckpointId>,
    /// Supersteps run by this invocation.
    pub steps: usize,
}

impl<S> RunOutcome<S> {
    /// Whether the run paused on an interrupt.
    pub fn is_interrupted(&self) -> bool {
        !self.interrupts.is_empty()
    }
}

/// A thread's state at one checkpoint, as `get_state` shows it.
#[derive(Debug, Clone)]
pub struct StateSnapshot<S> {
    /// The state values.
    pub values: Arc<S>,
    /// Nodes the next step would run.
    pub next: Vec<String>,
    /// The checkpoint's header.
    pub checkpoint: Checkpoint,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// Errors of tasks that failed in the step after this checkpoint: (node, message).
    pub errors: Vec<(String, String)>,
}

/// Run-wide context shared by every task and subgraph level.
pub(crate) struct RunShared {
    pub(crate) resume: Arc<Mutex<ResumeInput>>,
    pub(crate) cancel: CancelToken,
    pub(crate) sink: Option<EventSink>,
    pub(crate) thread: Option<ThreadId>,
    pub(crate) durability: Durability,
    pub(crate) recursion_limit: usize,
    pub(crate) metadata: BTreeMap<String, serde_json::Value>,
    pub(crate) interrupt_before: Vec<String>,
    pub(crate) interrupt_after: Vec<String>,
}

/// Where one level of a run checkpoints.
pub(crate) struct Level {
    pub(crate) ns: Namespace,
    pub(crate) saver: Option<Arc<dyn Saver>>,
    /// Checkpointing disabled for this subgraph (interrupts are an error).
    pub(crate) ephemeral: bool,
    pub(crate) is_root: bool,
}

/// How a level's run ended.
pub(crate) enum LevelEnd<S: State> {
    Done(RunOutcome<S>),
    Parent(Vec<ParentCommand>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Start,
    Pull,
    Push(usize),
}

struct Planned {
    id: TaskId,
    node: Option<usize>,
    kind: Kind,
    arg: Option<Arc<serde_json::Value>>,
}

enum TaskResult<S: State> {
    Done(TaskOutput<S>),
    Failed(RunError, Vec<serde_json::Value>),
    Interrupted(Vec<Interrupt>, Vec<serde_json::Value>),
}

/// Typed control state (the fast in-memory form of [`Control`]).
#[derive(Clone)]
struct Ctl<S: State> {
    field_versions: Vec<u64>,
    branch_versions: Vec<u64>,
    join_versions: Vec<u64>,
    seen_branch: Vec<u64>,
    seen_join: Vec<u64>,
    branches: Vec<bool>,
    barriers: Vec<Vec<bool>>,
    sends: Vec<(usize, Arc<serde_json::Value>)>,
    start: Option<S::Update>,
    max_version: u64,
    interrupt_seen: u64,
    /// The checkpoint that started this stretch of the branch (see [`Control::anchor`]).
    anchor: Option<CheckpointId>,
}

impl<S: State> Ctl<S> {
    fn new(g: &GraphInner<S>) -> Self {
        Ctl {
            field_versions: vec![0; S::Field::ALL.len()],
            branch_versions: vec![0; g.nodes.len()],
            join_versions: vec![0; g.joins.len()],
            seen_branch: vec![0; g.nodes.len()],
            seen_join: vec![0; g.joins.len()],
            branches: vec![false; g.nodes.len()],
            barriers: g
                .joins
                .iter()
                .map(|j| vec![false; j.sources.len()])
                .collect(),
            sends: Vec::new(),
            start: None,
            max_version: 0,
            interrupt_seen: 0,
            anchor: None,
        }
    }

    fn to_control(&self, g: &GraphInner<S>) -> Result<Control, RunError> {
        let version = |c: Channel| match c {
            Channel::Field(f) => self.field_versions[f],
            Channel::Branch(n) => self.branch_versions[n],
            Channel::Join(j) => self.join_versions[j],
        };
        let seen = |c: Channel| match c {
            Channel::Field(_) => 0,
            Channel::Branch(n) => self.seen_branch[n],
            Channel::Join(j) => self.seen_join[j],
        };
        // Built from entries already in key order: collecting sorted entries bulk-builds the
        // map instead of inserting them one by one.
        let order = &g.control_order;
        let versions: BTreeMap<Arc<str>, u64> = order
            .channels
            .iter()
            .filter_map(|(name, c)| Some((Arc::clone(name), version(*c))).filter(|e| e.1 > 0))
            .collect();
        let versions_seen: BTreeMap<Arc<str>, BTreeMap<Arc<str>, u64>> = order
            .seen
            .iter()
            .filter_map(|(node, chans)| {
                let m: BTreeMap<Arc<str>, u64> = chans
                    .iter()
                    .filter_map(|(name, c)| Some((Arc::clone(name), seen(*c))).filter(|e| e.1 > 0))
                    .collect();
                (!m.is_empty()).then(|| (Arc::clone(&g.nodes[*node].name), m))
            })
            .collect();
        let mut barriers = BTreeMap::new();
        for (j, join) in g.joins.iter().enumerate() {
            let seen: Vec<String> = join
                .sources
                .iter()
                .zip(&self.barriers[j])
                .filter(|(_, s)| **s)
                .map(|(&src, _)| g.nodes[src].name.to_string())
                .collect();
            if !seen.is_empty() {
                barriers.insert(join.channel.to_string(), seen);
            }
        }
        let mut sends: Vec<PendingSend> = Vec::new();
        if let Some(start) = &self.start {
            let arg = serde_json::to_value(start).map_err(|source| RunError::Encode {
                field: START,
                source,
            })?;
            sends.push(PendingSend {
                node: START.to_string(),
                arg,
            });
        }
        sends.extend(self.sends.iter().map(|(n, arg)| PendingSend {
            node: g.nodes[*n].name.to_string(),
            arg: arg.as_ref().clone(),
        }));
        let mut interrupt_seen = BTreeMap::new();
        if self.interrupt_seen > 0 {
            interrupt_seen.insert("*".to_string(), self.interrupt_seen);
        }
        Ok(Control {
            versions,
            versions_seen,
            branches: g
                .nodes
                .iter()
                .zip(&self.branches)
                .filter(|(_, b)| **b)
                .map(|(n, _)| n.branch_channel.to_string())
                .collect(),
            barriers,
            sends,
            interrupt_seen,
            anchor: self.anchor,
        })
    }

    fn from_control(
        g: &GraphInner<S>,
        c: &Control,
        thread: &Option<ThreadId>,
    ) -> Result<Self, RunError> {
        let mut ctl = Ctl::new(g);
        let unknown = |what: &str, name: &str| RunError::Decode {
            field: what.to_string(),
            thread: thread.clone(),
            detail: format!("checkpoint names {name:?}, which this graph does not have"),
        };
        for (name, &v) in &c.versions {
            ctl.max_version = ctl.max_version.max(v);
            if let Some(f) = S::Field::from_name(name.as_ref()) {
                ctl.field_versions[f.index()] = v;
            } else if let Some(node) = name.strip_prefix("branch:to:") {
                let i = *g.index.get(node).ok_or_else(|| unknown("control", name))?;
                ctl.branch_versions[i] = v;
            } else if let Some(j) = g.joins.iter().position(|j| j.channel == *name) {
                ctl.join_versions[j] = v;
            } else {
                return Err(unknown("control", name));
            }
        }
        for (node, chans) in &c.versions_seen {
            let i = *g
                .index
                .get(node.as_ref())
                .ok_or_else(|| unknown("versions_seen", node))?;
            for (chan, &v) in chans {
                if *chan == g.nodes[i].branch_channel {
                    ctl.seen_branch[i] = v;
                } else if let Some(j) = g.joins.iter().position(|j| j.channel == *chan) {
                    ctl.seen_join[j] = v;
                }
            }
        }
        for b in &c.branches {
            let node = b.strip_prefix("branch:to:").unwrap_or(b);
            let i = *g.index.get(node).ok_or_else(|| unknown("branches", b))?;
            ctl.branches[i] = true;
        }
        for (chan, seen) in &c.barriers {
            let j = g
                .joins
                .iter()
                .position(|j| *j.channel == **chan)
                .ok_or_else(|| unknown("barriers", chan))?;
            for s in seen {
                let i = *g.index.get(s).ok_or_else(|| unknown("barriers", s))?;
                if let Some(pos) = g.joins[j].sources.iter().position(|&x| x == i) {
                    ctl.barriers[j][pos] = true;
                }
            }
        }
        for s in &c.sends {
            if s.node == START {
                let u = serde_json::from_value(s.arg.clone()).map_err(|e| RunError::Decode {
                    field: START.to_string(),
                    thread: thread.clone(),
                    detail: e.to_string(),
                })?;
                ctl.start = Some(u);
            } else {
                let i = *g
                    .index
                    .get(&s.node)
                    .ok_or_else(|| unknown("sends", &s.node))?;
                ctl.sends.push((i, Arc::new(s.arg.clone())));
            }
        }
        ctl.interrupt_seen = c.interrupt_seen.values().copied().max().unwrap_or(0);
        ctl.anchor = c.anchor;
        Ok(ctl)
    }

    fn join_ready(&self, j: usize) -> bool {
        self.barriers[j].iter().all(|s| *s)
    }
}

/// Move a state to a child checkpoint by applying what the child's step changed.
pub(crate) fn apply_changes<S: State>(
    state: &mut S,
    fields: &[(String, Vec<FieldPart>)],
) -> Result<(), String> {
    for (name, parts) in fields {
        let field = S::Field::from_name(name).ok_or_else(|| format!("unknown field {name:?}"))?;
        let refs: Vec<StoredRef<'_>> = parts
            .iter()
            .map(|p| match p {
                FieldPart::Whole(b) => StoredRef::Whole(b),
                FieldPart::Tail(b) => StoredRef::Tail(b),
            })
            .collect();
        let result = match refs.first() {
            Some(StoredRef::Whole(_)) => state.decode_field(field, &refs),
            _ => state.extend_field(field, &refs),
        };
        result.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Decode a state from a loaded checkpoint.
pub(crate) fn decode_state<S: State>(
    loaded: &LoadedCheckpoint,
    thread: &Option<ThreadId>,
) -> Result<S, RunError> {
    let mut state = S::default();
    for (name, parts) in &loaded.fields {
        let field = S::Field::from_name(name).ok_or_else(|| RunError::Decode {
            field: name.clone(),
            thread: thread.clone(),
            detail: "the checkpoint has a field the state type does not declare".to_string(),
        })?;
        let refs: Vec<StoredRef<'_>> = parts
            .iter()
            .map(|p| match p {
                FieldPart::Whole(b) => StoredRef::Whole(b),
                FieldPart::Tail(b) => StoredRef::Tail(b),
            })
            .collect();
        state
            .decode_field(field, &refs)
            .map_err(|e| RunError::Decode {
                field: name.clone(),
                thread: thread.clone(),
                detail: e.to_string(),
            })?;
    }
    Ok(state)
}

/// The stored form of a task's output: its updates and routing (a `Send` whose argument
/// could not be serialized keeps its error, so a reuse fails the same way).
fn output_to_json<S: State>(out: &TaskOutput<S>) -> serde_json::Value {
    let goto: Vec<serde_json::Value> = out
        .goto
        .iter()
        .map(|g| match g {
            Goto::Node(n) => serde_json::json!({ "node": n }),
            Goto::Send(s) => match &s.arg {
                Ok(arg) => serde_json::json!({ "send": s.node, "arg": arg }),
                Err(e) => serde_json::json!({ "send": s.node, "arg_error": e }),
            },
        })
        .collect();
    serde_json::json!({ "updates": out.updates, "goto": goto })
}

fn output_from_json<S: State>(v: &serde_json::Value) -> Result<TaskOutput<S>, String> {
    let updates: Vec<S::Update> =
        serde_json::from_value(v.get("updates").cloned().unwrap_or_default())
            .map_err(|e| e.to_string())?;
    let mut goto = Vec::new();
    if let Some(items) = v.get("goto").and_then(|g| g.as_array()) {
        for item in items {
            if let Some(n) = item.get("node").and_then(|n| n.as_str()) {
                goto.push(Goto::Node(n.to_string()));
            } else if let Some(n) = item.get("send").and_then(|n| n.as_str()) {
                let arg = match item.get("arg_error").and_then(|e| e.as_str()) {
                    Some(e) => Err(e.to_string()),
                    None => Ok(item.get("arg").cloned().unwrap_or_default()),
                };
                goto.push(Goto::Send(crate::Send {
                    node: n.to_string(),
                    arg,
                }));
            } else {
                return Err(format!("unreadable goto record {item}"));
            }
        }
    }
    Ok(TaskOutput {
        updates,
        goto,
        parents: Vec::new(),
    })
}

/// One level's superstep loop.
pub(crate) struct Loop<S: State> {
    g: Arc<GraphInner<S>>,
    shared: Arc<RunShared>,
    level: Level,
    state: Arc<S>,
    ctl: Ctl<S>,
    /// The checkpoint the current step starts from (also its id when not yet stored).
    head: Option<CheckpointId>,
    /// The newest checkpoint actually stored (differs from `head` under durability exit).
    stored_head: Option<CheckpointId>,
    step: i64,
    /// The step of `head`.
    head_step: i64,
    stop: i64,
    pending: Vec<PendingWrite>,
    /// Changes not yet stored (durability exit), per field.
    unsaved: Vec<Change>,
    /// Checkpoint writes handed to the saver and not yet confirmed (durability async), oldest
    /// first.
    inflight: std::collections::VecDeque<Inflight>,
    /// Checkpoints in `inflight`.
    inflight_puts: usize,
    /// Checkpoints not yet handed to the saver (durability async).
    buffer: Vec<PutCheckpoint>,
    /// Pending writes held back until the final checkpoint (durability exit).
    deferred_pending: Vec<PendingWrite>,
    /// A resuming command's update and routing, kept as pending writes of the input until
    /// the resumed step commits.
    input_writes: Vec<PendingWrite>,
    /// A step failed while being applied: the in-memory state is partly updated and must not
    /// be stored.
    poisoned: bool,
    /// Where the head checkpoint came from (for the final checkpoint under durability exit).
    head_source: Source,
    steps_run: usize,
}

impl<S: State> Loop<S> {
    /// Load the level's thread (if any) and apply the input.
    pub(crate) async fn start(
        graph: &CompiledGraph<S>,
        shared: Arc<RunShared>,
        level: Level,
        input: Input<S>,
        from: Option<CheckpointId>,
    ) -> Result<Self, RunError> {
        Self::start_at(graph, shared, level, input, from, true).await
    }

    /// [`Loop::start`], choosing whether a named older checkpoint starts a fork.
    pub(crate) async fn start_at(
        graph: &CompiledGraph<S>,
        shared: Arc<RunShared>,
        level: Level,
        input: Input<S>,
        from: Option<CheckpointId>,
        fork: bool,
    ) -> Result<Self, RunError> {
        let g = graph.inner.clone();
        let thread = shared.thread.clone();
        let loaded: Option<(Checkpoint, Vec<PendingWrite>, Arc<S>)> = match (&level.saver, &thread)
        {
            (Some(saver), Some(t)) => {
                // The state this graph left at the thread's head in an earlier run is reused
                // when the head has not moved since: no decoding of a long state.
                let cached = if from.is_none() {
                    g.take_cached(t, &level.ns)
                } else {
                    None
                };
                let mut hit = None;
                if let Some((id, state)) = cached {
                    if let Some((cp, pending)) = saver.head(t, &level.ns).await? {
                        if cp.id == id {
                            hit = Some((cp, pending, state));
                        }
                    }
                }
                match hit {
                    Some(h) => Some(h),
                    None => match saver.get(t, &level.ns, from).await? {
                        Some(l) => {
                            let state = Arc::new(decode_state(&l, &thread)?);
                            Some((l.checkpoint, l.pending, state))
                        }
                        None => None,
                    },
                }
            }
            (Some(_), None) => return Err(RunError::MissingThread),
            _ => None,
        };
        let mut lp = Loop {
            ctl: Ctl::new(&g),
            g,
            shared,
            level,
            state: Arc::new(S::default()),
            head: None,
            stored_head: None,
            step: -1,
            head_step: -1,
            stop: 0,
            pending: Vec::new(),
            unsaved: vec![Change::Unchanged; S::Field::ALL.len()],
            inflight: std::collections::VecDeque::new(),
            inflight_puts: 0,
            buffer: Vec::new(),
            deferred_pending: Vec::new(),
            input_writes: Vec::new(),
            poisoned: false,
            head_source: Source::Loop,
            steps_run: 0,
        };
        let limit = i64::try_from(lp.shared.recursion_limit)
            .unwrap_or(i64::MAX)
            .min(i64::MAX / 4);
        if let Some((checkpoint, pending, state)) = &loaded {
            lp.state = state.clone();
            lp.ctl = Ctl::from_control(&lp.g, &checkpoint.control, &thread)?;
            lp.head = Some(checkpoint.id);
            lp.stored_head = lp.head;
            lp.head_source = checkpoint.source;
            lp.step = checkpoint.step;
            lp.head_step = lp.step;
            lp.pending = pending.clone();
            if let (Some(from), Some(saver), Some(t), true) = (from, &lp.level.saver, &thread, fork)
            {
                let newest = saver.head(t, &lp.level.ns).await?.map(|(cp, _)| cp.id);
                if newest != Some(from) {
                    // Time travel: a new branch starts with a fork checkpoint; the recorded
                    // pending writes of the old branch are not reused.
                    lp.pending.clear();
                    lp.put(Source::Fork, lp.step, Vec::new()).await?;
                }
            }
        }
        let had_checkpoint = loaded.is_some();
        drop(loaded);
        let resuming = !matches!(input, Input::Update(_));
        // A resuming command's update recorded with an interrupted or failed step applies
        // again until that step commits.
        if resuming {
            let recorded: Vec<PendingWrite> = lp
                .pending
                .iter()
                .filter(|w| w.task_id == input_task())
                .cloned()
                .collect();
            for w in recorded {
                if let WriteKind::Output(v) = &w.kind {
                    let out = output_from_json::<S>(v).map_err(|detail| RunError::Decode {
                        field: "pending input command".to_string(),
                        thread: thread.clone(),
                        detail,
                    })?;
                    lp.step = lp.head_step.saturating_add(1);
                    lp.apply_input_command(out)?;
                }
                lp.input_writes.push(w);
            }
        }
        match input {
            Input::Update(update) => {
                // New input discards tasks the thread had left to run, ready joins included.
                lp.ctl.branches.iter_mut().for_each(|b| *b = false);
                lp.ctl
                    .barriers
                    .iter_mut()
                    .for_each(|b| b.iter_mut().for_each(|s| *s = false));
                lp.ctl.sends.clear();
                lp.pending.clear();
                // Task ids of a stored run derive from the input (a run without a saver has
                // nothing to resume, so it skips serializing the input).
                lp.ctl.anchor = match lp.level.saver {
                    Some(_) => Some(input_anchor(&lp.level.ns, lp.head, &update, &thread)),
                    None => None,
                };
                lp.ctl.start = Some(update);
                let input_step = if had_checkpoint {
                    lp.step.saturating_add(1)
                } else {
                    -1
                };
                lp.put(Source::Input, input_step, Vec::new()).await?;
                lp.step = input_step.saturating_add(1);
                lp.stop = input_step.saturating_add(limit).saturating_add(1);
            }
            Input::Command(cmd) => {
                lp.step = lp.head_step.saturating_add(1);
                let resumes = cmd.resume.is_some();
                if let Some(resume) = cmd.resume {
                    if lp.level.is_root {
                        lp.validate_resume(&resume)?;
                    }
                    let mut r = lp.shared.resume.lock().unwrap_or_else(|p| p.into_inner());
                    match resume {
                        Resume::Value(v) => r.value = Some(v),
                        Resume::Map(m) => r.map.extend(m),
                    }
                }
                if cmd.update.is_some() || !cmd.goto.is_empty() {
                    // The command's update and routing apply at once. Without a resume they
                    // are checkpointed before any task runs, so they are kept even if nothing
                    // runs after. With a resume the interrupted step's tasks (and their
                    // recorded writes) must keep their ids: the update is stored with that
                    // step's checkpoint, and kept as a pending write of the input until then.
                    let out = TaskOutput {
                        updates: cmd.update.into_iter().collect(),
                        goto: cmd.goto,
                        parents: Vec::new(),
                    };
                    let stored = output_to_json(&out);
                    lp.apply_input_command(out)?;
                    if resumes {
                        lp.input_writes.retain(|w| w.task_id != input_task());
                        lp.input_writes.push(PendingWrite {
                            task_id: input_task(),
                            node: INPUT_NODE.to_string(),
                            kind: WriteKind::Output(stored),
                        });
                    } else {
                        let writes = lp.encode_changes()?;
                        lp.put(Source::Input, lp.step, writes).await?;
                        lp.step = lp.step.saturating_add(1);
                    }
                }
                // A command resumes: static interrupts do not refire on what it acknowledged.
                lp.ctl.interrupt_seen = lp.ctl.max_version;
                lp.stop = lp.step.saturating_add(limit).saturating_add(1);
            }
            Input::Continue => {
                lp.ctl.interrupt_seen = lp.ctl.max_version;
                lp.step = lp.head_step.saturating_add(1);
                lp.stop = lp.step.saturating_add(limit).saturating_add(1);
            }
        }
        Ok(lp)
    }

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

    fn validate_resume(&self, resume: &Resume) -> Result<(), RunError> {
        let pending = self.pending_interrupt_ids();
        if pending.is_empty() {
            return Err(RunError::NoPendingInterrupt {
                thread: self.shared.thread.clone(),
            });
        }
        match resume {
            Resume::Value(_) if pending.len() > 1 => Err(RunError::AmbiguousResume { pending }),
            Resume::Value(_) => Ok(()),
            Resume::Map(m) if m.is_empty() => Err(RunError::EmptyResume),
            Resume::Map(m) => match m.keys().find(|k| !pending.contains(k)) {
                Some(id) => Err(RunError::UnknownInterruptId {
                    id: id.clone(),
                    pending,
                }),
                None => Ok(()),
            },
        }
    }

    /// A command given as input: its update and routing apply at once, as writes of no task.
    fn apply_input_command(&mut self, out: TaskOutput<S>) -> Result<(), RunError> {
        let version = self.ctl.max_version + 1;
        let mut next_branches = vec![false; self.g.nodes.len()];
        let mut next_sends = Vec::new();
        self.route(out.goto, "input", None, &mut next_branches, &mut next_sends)?;
        let changes = Arc::make_mut(&mut self.state)
            .apply(out.updates, &mut ReduceCtx::for_input(self.step))
            .map_err(|(field, source)| RunError::Reduce {
                field: field.name(),
                writers: vec!["input".to_string()],
                step: self.step,
                source,
            })?;
        for (f, c) in changes {
            self.ctl.field_versions[f.index()] = version;
            self.unsaved[f.index()] = self.unsaved[f.index()].then(c);
        }
        for (i, b) in next_branches.into_iter().enumerate() {
            if b {
                self.ctl.branches[i] = true;
                self.ctl.branch_versions[i] = version;
            }
        }
        self.ctl.sends.extend(next_sends);
        self.ctl.max_version = version;
        Ok(())
    }

    fn plan(&self) -> Vec<Planned> {
        let mut tasks = Vec::new();
        // Task ids derive from the checkpoint that started this stretch of the branch and the
        // step: the same step computed again (after a crash lost its checkpoint, or on resume)
        // gets the same ids; a fork or new input gets new ones.
        let base = self
            .ctl
            .anchor
            .or(self.head)
            .map(|h| h.as_u128().to_be_bytes())
            .unwrap_or([0; 16]);
        let ns = self.level.ns.as_str().as_bytes();
        let step = self.step.to_le_bytes();
        let id = |kind: &[u8], node: &str, idx: usize| {
            TaskId::derive(&[&base, ns, &step, kind, node.as_bytes(), &idx.to_le_bytes()])
        };
        if self.ctl.start.is_some() {
            tasks.push(Planned {
                id: id(b"start", START, 0),
                node: None,
                kind: Kind::Start,
                arg: None,
            });
            return tasks;
        }
        let triggered = |i: usize| {
            self.ctl.branches[i]
                || self
                    .g
                    .joins
                    .iter()
                    .enumerate()
                    .any(|(j, join)| join.target == i && self.ctl.join_ready(j))
        };
        for (i, n) in self.g.nodes.iter().enumerate() {
            if !n.options.defer && triggered(i) {
                tasks.push(Planned {
                    id: id(b"pull", &n.name, 0),
                    node: Some(i),
                    kind: Kind::Pull,
                    arg: None,
                });
            }
        }
        for (k, (i, arg)) in self.ctl.sends.iter().enumerate() {
            tasks.push(Planned {
                id: id(b"push", &self.g.nodes[*i].name, k),
                node: Some(*i),
                kind: Kind::Push(k),
                arg: Some(Arc::clone(arg)),
            });
        }
        if tasks.is_empty() {
            for (i, n) in self.g.nodes.iter().enumerate() {
                if n.options.defer && triggered(i) {
                    tasks.push(Planned {
                        id: id(b"pull", &n.name, 0),
                        node: Some(i),
                        kind: Kind::Pull,
                        arg: None,
                    });
                }
            }
        }
        tasks
    }

    fn node_name(&self, t: &Planned) -> Arc<str> {
        match t.node {
            Some(i) => self.g.nodes[i].name.clone(),
            None => Arc::from(START),
        }
    }

    async fn emit(&self, kind: EventKind) {
        if let Some(sink) = &self.shared.sink {
            if self.level.ns.is_root() || sink.mode.subgraphs {
                sink.send(Event {
                    ns: self.level.ns.clone(),
                    step: self.step,
                    kind,
                })
                .await;
            }
        }
    }

    fn wants(&self, pick: impl Fn(&crate::StreamMode) -> bool) -> bool {
        self.shared
            .sink
            .as_ref()
            .is_some_and(|s| pick(&s.mode) && (self.level.ns.is_root() || s.mode.subgraphs))
    }

    /// Run the loop to its end.
    pub(crate) async fn run(mut self) -> Result<LevelEnd<S>, RunError> {
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
            self.head,
            self.poisoned,
            self.level.saver.is_none(),
        ) {
            if self.stored_head == Some(head) {
                self.g
                    .remember(thread, &self.level.ns, head, self.state.clone());
            }
        }
    }

    async fn run_steps(&mut self) -> Result<LevelEnd<S>, RunError> {
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
            let tasks = self.plan();
            if tasks.is_empty() {
                return Ok(LevelEnd::Done(self.outcome(Vec::new())));
            }
            // Static interrupt before: only for versions not yet acknowledged by a resume.
            if self.ctl.max_version > self.ctl.interrupt_seen {
                let hits: Vec<Interrupt> = tasks
                    .iter()
                    .filter_map(|t| t.node)
                    .filter(|&i| {
                        self.g.interrupt_before[i]
                            || self.run_interrupt(&self.shared.interrupt_before, i)
                    })
                    .map(|i| static_interrupt("before", &self.g.nodes[i].name))
                    .collect();
                if !hits.is_empty() {
                    self.require_checkpointer(&hits[0].node)?;
                    self.emit(EventKind::Interrupt(hits.clone())).await;
                    return Ok(LevelEnd::Done(self.outcome(hits)));
                }
            }
            let executed = self.execute(&tasks).await;
            if self.level.is_root {
                // Resume values answer the step they resumed, never a later interrupt.
                let mut r = self.shared.resume.lock().unwrap_or_else(|p| p.into_inner());
                r.value = None;
                r.map.clear();
            }
            match executed? {
                Executed::Applied => {}
                Executed::Interrupted(interrupts) => {
                    return Ok(LevelEnd::Done(self.outcome(interrupts)))
                }
                Executed::Parent(cmds) => return Ok(LevelEnd::Parent(cmds)),
            }
            self.steps_run += 1;
            // Static interrupt after.
            let hits: Vec<Interrupt> = tasks
                .iter()
                .filter_map(|t| t.node)
                .filter(|&i| {
                    self.g.interrupt_after[i] || self.run_interrupt(&self.shared.interrupt_after, i)
                })
                .map(|i| static_interrupt("after", &self.g.nodes[i].name))
                .collect();
            self.step += 1;
            if !hits.is_empty() {
                self.require_checkpointer(&hits[0].node)?;
                self.ctl.interrupt_seen = self.ctl.max_version;
                self.emit(EventKind::Interrupt(hits.clone())).await;
                return Ok(LevelEnd::Done(self.outcome(hits)));
            }
        }
    }

    /// Whether a per-run static interrupt list names node `i` (root graph only).
    fn run_interrupt(&self, names: &[String], i: usize) -> bool {
        self.level.is_root
            && names
                .iter()
                .any(|n| n == "*" || **n == *self.g.nodes[i].name)
    }

    fn require_checkpointer(&self, node: &str) -> Result<(), RunError> {
        if self.level.ephemeral {
            Err(RunError::InterruptInEphemeralSubgraph {
                subgraph: self.level.ns.clone(),
            })
        } else if self.level.saver.is_none() {
            Err(RunError::InterruptWithoutCheckpointer {
                node: node.to_string(),
            })
        } else {
            Ok(())
        }
    }

    fn outcome(&self, interrupts: Vec<Interrupt>) -> RunOutcome<S> {
        RunOutcome {
            state: self.state.clone(),
            interrupts,
            checkpoint: self.head,
            steps: self.steps_run,
        }
    }

    fn task_ctx(&self, t: &Planned, resume: Vec<serde_json::Value>, resumed: bool) -> NodeContext {
        NodeContext {
            inner: Arc::new(TaskCtx {
                node: self.node_name(t),
                task: t.id,
                step: self.step,
                ns: self.level.ns.clone(),
                thread: self.shared.thread.clone(),
                arg: t.arg.clone(),
                sink: self.shared.sink.clone(),
                scratch: Mutex::new(Scratch { resume, calls: 0 }),
                resumed,
                resume: self.shared.resume.clone(),
                cancel: self.shared.cancel.clone(),
                run: self.shared.clone(),
                level: crate::node::LevelInfo {
                    ns: self.level.ns.clone(),
                    saver: self.level.saver.clone(),
                    ephemeral: self.level.ephemeral,
                },
            }),
        }
    }

    async fn execute(&mut self, tasks: &[Planned]) -> Result<Executed, RunError> {
        // Writes recorded by an earlier attempt of this step.
        let mut reused: BTreeMap<usize, TaskOutput<S>> = BTreeMap::new();
        let mut resumes: BTreeMap<usize, Vec<serde_json::Value>> = BTreeMap::new();
        // Tasks that paused or failed before: a subgraph they run continues where it stopped.
        let mut resumed: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
        if !self.pending.is_empty() {
            // Determinism guard: every task an earlier attempt of this step recorded must be
            // one this code plans again; otherwise the code changed under the thread, and its
            // recorded writes must not be applied to other tasks or dropped unseen.
            let planned: std::collections::BTreeSet<TaskId> = tasks.iter().map(|t| t.id).collect();
            let apply_error = apply_error_task(self.step);
            let unknown: Vec<String> = self
                .pending
                .iter()
                .filter(|w| {
                    w.task_id != input_task()
                        && w.task_id != apply_error
                        && !planned.contains(&w.task_id)
                })
                .map(|w| w.node.clone())
                .collect();
            if !unknown.is_empty() {
                let mut recorded: Vec<String> = self
                    .pending
                    .iter()
                    .filter(|w| w.task_id != input_task())
                    .map(|w| w.node.clone())
                    .collect();
                recorded.dedup();
                let mut computed: Vec<String> = tasks
                    .iter()
                    .map(|t| self.node_name(t).to_string())
                    .collect();
                computed.dedup();
                return Err(RunError::DeterminismMismatch {
                    step: self.step,
                    recorded,
                    computed,
                });
            }
            for (ti, t) in tasks.iter().enumerate() {
                for w in self.pending.iter().filter(|w| w.task_id == t.id) {
                    match &w.kind {
                        WriteKind::Output(v) => {
                            let out =
                                output_from_json::<S>(v).map_err(|detail| RunError::Decode {
                                    field: format!("pending write of task {}", t.id),
                                    thread: self.shared.thread.clone(),
                                    detail,
                                })?;
                            reused.insert(ti, out);
                        }
                        WriteKind::Resume(values) => {
                            resumes.insert(ti, values.clone());
                            resumed.insert(ti);
                        }
                        WriteKind::Error(_) | WriteKind::Interrupt { .. } => {
                            resumed.insert(ti);
                        }
                    }
                }
            }
        }

        let mut results: Vec<Option<TaskResult<S>>> = (0..tasks.len()).map(|_| None).collect();
        let mut to_run = Vec::new();
        for (ti, t) in tasks.iter().enumerate() {
            if let Some(out) = reused.remove(&ti) {
                if self.wants(|m| m.tasks) {
                    self.emit(EventKind::TaskEnd {
                        node: self.node_name(t),
                        task: t.id,
                        status: TaskStatus::Reused,
                    })
                    .await;
                }
                results[ti] = Some(TaskResult::Done(out));
            } else if t.kind == Kind::Start {
                let update = self.ctl.start.take().unwrap_or_default();
                results[ti] = Some(TaskResult::Done(TaskOutput {
                    updates: vec![update],
                    goto: Vec::new(),
                    parents: Vec::new(),
                }));
            } else {
                to_run.push(ti);
            }
        }

        if !to_run.is_empty() {
            if self.wants(|m| m.tasks) {
                for &ti in &to_run {
                    self.emit(EventKind::TaskStart {
                        node: self.node_name(&tasks[ti]),
                        task: tasks[ti].id,
                    })
                    .await;
                }
            }
            let cancel = self.shared.cancel.clone();
            if to_run.len() == 1 {
                let ti = to_run[0];
                let fut = self.task_future(
                    &tasks[ti],
                    resumes.remove(&ti).unwrap_or_default(),
                    resumed.contains(&ti),
                );
                let r = tokio::select! {
                    r = fut => r,
                    _ = cancel.cancelled() => return Err(RunError::Cancelled { step: self.step }),
                };
                results[ti] = Some(r);
            } else {
                // Tasks run concurrently on this task; a node marked `spawn` runs on its
                // own tokio task (in parallel with the others). Leaving the loop early
                // (failure, cancellation) drops the inline futures and aborts the spawned
                // ones, through `aborts`.
                let mut aborts = AbortOnDrop(Vec::new());
                let mut running: FuturesUnordered<BoxFuture<'static, (usize, TaskJoin<S>)>> =
                    FuturesUnordered::new();
                for &ti in &to_run {
                    let fut = self.task_future(
                        &tasks[ti],
                        resumes.remove(&ti).unwrap_or_default(),
                        resumed.contains(&ti),
                    );
                    let spawn = tasks[ti]
                        .node
                        .is_some_and(|i| self.g.nodes[i].options.spawn);
                    if spawn {
                        let handle = tokio::spawn(fut);
                        aborts.0.push(handle.abort_handle());
                        running.push(Box::pin(async move {
                            (ti, handle.await.map_err(|e| e.to_string()))
                        }));
                    } else {
                        running.push(Box::pin(async move { (ti, Ok(fut.await)) }));
                    }
                }
                loop {
                    let next = tokio::select! {
                        n = running.next() => n,
                        _ = cancel.cancelled() => return Err(RunError::Cancelled { step: self.step }),
                    };
                    let Some((ti, joined)) = next else { break };
                    let r = match joined {
                        Ok(r) => r,
                        Err(e) => TaskResult::Failed(
                            RunError::Node {
                                node: self.node_name(&tasks[ti]).to_string(),
                                step: self.step,
                                task: tasks[ti].id,
                                source: format!("task panicked or was aborted: {e}").into(),
                            },
                            Vec::new(),
                        ),
                    };
                    let failed = matches!(r, TaskResult::Failed(..));
                    results[ti] = Some(r);
                    if failed {
                        break;
                    }
                }
                drop(running);
                drop(aborts);
            }
        }

        let node_of = |ti: usize| self.node_name(&tasks[ti]);
        if self.wants(|m| m.tasks) {
            for &ti in &to_run {
                let status = match &results[ti] {
                    Some(TaskResult::Done(_)) => TaskStatus::Succeeded,
                    Some(TaskResult::Failed(e, _)) => TaskStatus::Failed(e.to_string()),
                    Some(TaskResult::Interrupted(..)) => TaskStatus::Interrupted,
                    None => continue,
                };
                self.emit(EventKind::TaskEnd {
                    node: node_of(ti),
                    task: tasks[ti].id,
                    status,
                })
                .await;
            }
        }

        let failed = results
            .iter()
            .position(|r| matches!(r, Some(TaskResult::Failed(..))));
        let interrupted = results
            .iter()
            .any(|r| matches!(r, Some(TaskResult::Interrupted(..))));

        // Commands for the enclosing graph end this level's run; they win over interrupts of
        // siblings (whose tasks run again when the parent resumes), not over failures.
        let has_parent = results
            .iter()
            .any(|r| matches!(r, Some(TaskResult::Done(o)) if !o.parents.is_empty()));
        if failed.is_none() && has_parent {
            if self.level.is_root {
                let ti = results
                    .iter()
                    .position(|r| matches!(r, Some(TaskResult::Done(o)) if !o.parents.is_empty()))
                    .unwrap_or(0);
                return Err(RunError::ParentCommand {
                    node: node_of(ti).to_string(),
                    reason: "there is no parent graph".to_string(),
                });
            }
            let cmds = results
                .into_iter()
                .flat_map(|r| match r {
                    Some(TaskResult::Done(o)) => o.parents,
                    _ => Vec::new(),
                })
                .collect();
            return Ok(Executed::Parent(cmds));
        }

        // A failure or an interrupt: record what finished (and what was asked and answered),
        // then report the first failure in task order, or pause.
        if failed.is_some() || interrupted {
            let (writes, interrupts) = self.pending_writes_of(tasks, &results);
            if let Some(fi) = failed {
                self.record_pending(writes).await?;
                let Some(Some(TaskResult::Failed(e, _))) = results.into_iter().nth(fi) else {
                    return Err(RunError::Cancelled { step: self.step });
                };
                return Err(e);
            }
            if let Some(first) = interrupts.first() {
                self.require_checkpointer(&first.node)?;
            }
            self.record_pending(writes).await?;
            self.emit(EventKind::Interrupt(interrupts.clone())).await;
            return Ok(Executed::Interrupted(interrupts));
        }

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
        let saved: Option<Vec<PendingWrite>> = self.keeps_pending().then(|| {
            let mut writes: Vec<PendingWrite> = outputs
                .iter()
                .filter(|(ti, _)| tasks[*ti].kind != Kind::Start)
                .map(|(ti, out)| PendingWrite {
                    task_id: tasks[*ti].id,
                    node: node_of(*ti).to_string(),
                    kind: WriteKind::Output(output_to_json(out)),
                })
                .collect();
            writes.extend(self.input_writes.iter().cloned());
            writes
        });
        if let Err(e) = self.apply(tasks, outputs).await {
            // The in-memory state is partly updated: nothing of it may be stored.
            self.poisoned = true;
            if let Some(mut writes) = saved {
                writes.push(PendingWrite {
                    task_id: apply_error_task(self.step),
                    node: "__apply__".to_string(),
                    kind: WriteKind::Error(e.to_string()),
                });
                self.record_pending(writes).await?;
            }
            return Err(e);
        }
        self.commit_step().await?;
        Ok(Executed::Applied)
    }

    /// Whether failed or interrupted steps keep pending writes (a stored thread, and a
    /// durability that stores before the end of the run).
    fn keeps_pending(&self) -> bool {
        self.level.saver.is_some()
            && self.shared.thread.is_some()
            && self.shared.durability != Durability::Exit
    }

    /// The pending writes a failed or interrupted step leaves, and its interrupts.
    fn pending_writes_of(
        &self,
        tasks: &[Planned],
        results: &[Option<TaskResult<S>>],
    ) -> (Vec<PendingWrite>, Vec<Interrupt>) {
        let mut writes = Vec::new();
        let mut interrupts = Vec::new();
        let resume_write = |writes: &mut Vec<PendingWrite>,
                            task_id: TaskId,
                            node: &str,
                            resume: &[serde_json::Value]| {
            if !resume.is_empty() {
                writes.push(PendingWrite {
                    task_id,
                    node: node.to_string(),
                    kind: WriteKind::Resume(resume.to_vec()),
                });
            }
        };
        for (ti, r) in results.iter().enumerate() {
            let node = self.node_name(&tasks[ti]).to_string();
            let task_id = tasks[ti].id;
            match r {
                Some(TaskResult::Done(out)) if tasks[ti].kind != Kind::Start => {
                    writes.push(PendingWrite {
                        task_id,
                        node,
                        kind: WriteKind::Output(output_to_json(out)),
                    })
                }
                Some(TaskResult::Failed(e, resume)) => {
                    writes.push(PendingWrite {
                        task_id,
                        node: node.clone(),
                        kind: WriteKind::Error(e.to_string()),
                    });
                    resume_write(&mut writes, task_id, &node, resume);
                }
                Some(TaskResult::Interrupted(list, resume)) => {
                    for i in list {
                        writes.push(PendingWrite {
                            task_id,
                            node: i.node.clone(),
                            kind: WriteKind::Interrupt {
                                id: i.id.clone(),
                                value: i.value.clone(),
                            },
                        });
                    }
                    resume_write(&mut writes, task_id, &node, resume);
                    interrupts.extend(list.iter().cloned());
                }
                _ => {}
            }
        }
        // A resuming command's update and routing stay pending until the step commits.
        writes.extend(self.input_writes.iter().cloned());
        (writes, interrupts)
    }

    fn task_future(
        &self,
        t: &Planned,
        resume: Vec<serde_json::Value>,
        resumed: bool,
    ) -> impl std::future::Future<Output = TaskResult<S>> + std::marker::Send + 'static {
        let node_ix = t.node.unwrap_or(0);
        let node = self.g.nodes[node_ix].run.clone();
        let options = self.g.nodes[node_ix].options.clone();
        let name = self.g.nodes[node_ix].name.clone();
        let state = self.state.clone();
        let ctx = self.task_ctx(t, resume, resumed);
        let step = self.step;
        let task = t.id;
        async move {
            let mut attempt = 1u32;
            loop {
                ctx.inner
                    .scratch
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .calls = 0;
                let result = run_attempt(&node, &state, &ctx, options.timeout).await;
                let consumed = || {
                    ctx.inner
                        .scratch
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .resume
                        .clone()
                };
                let failure = match result {
                    Ok(out) => return TaskResult::Done(out),
                    Err(Attempt::Interrupted(list)) => {
                        return TaskResult::Interrupted(list, consumed())
                    }
                    Err(Attempt::Child(e)) => e,
                    Err(Attempt::Failed(source)) => RunError::Node {
                        node: name.to_string(),
                        step,
                        task,
                        source,
                    },
                    Err(Attempt::TimedOut(after)) => RunError::Timeout {
                        node: name.to_string(),
                        step,
                        after,
                    },
                };
                // A child's interrupt-related errors are final; anything else may be retried.
                let retryable = !matches!(
                    failure,
                    RunError::InterruptInEphemeralSubgraph { .. }
                        | RunError::InterruptWithoutCheckpointer { .. }
                        | RunError::Cancelled { .. }
                );
                match &options.retry {
                    Some(p) if retryable && p.should_retry(attempt, &failure_box(&failure)) => {
                        tokio::time::sleep(p.wait(attempt)).await;
                        attempt += 1;
                    }
                    _ => return TaskResult::Failed(failure, consumed()),
                }
            }
        }
    }

    /// Route `gotos` issued by `from` (a node name or "input").
    fn route(
        &self,
        gotos: Vec<Goto>,
        from: &str,
        allowed: Option<&std::collections::BTreeSet<String>>,
        next_branches: &mut [bool],
        next_sends: &mut Vec<(usize, Arc<serde_json::Value>)>,
    ) -> Result<(), RunError> {
        for g in gotos {
            let name = match &g {
                Goto::Node(n) => n.as_str(),
                Goto::Send(s) => s.node.as_str(),
            };
            if let Some(allowed) = allowed {
                if !allowed.contains(name) {
                    return Err(RunError::UnknownRouteTarget {
                        router: from.to_string(),
                        value: name.to_string(),
                    });
                }
            }
            if name == crate::END {
                continue;
            }
            let Some(&i) = self.g.index.get(name) else {
                return Err(RunError::UnknownNode {
                    name: name.to_string(),
                    from: from.to_string(),
                    step: self.step,
                });
            };
            match g {
                Goto::Node(_) => next_branches[i] = true,
                Goto::Send(s) => match s.arg {
                    Ok(v) => next_sends.push((i, Arc::new(v))),
                    Err(detail) => {
                        return Err(RunError::SendArg {
                            node: s.node,
                            detail,
                        })
                    }
                },
            }
        }
        Ok(())
    }

    async fn apply(
        &mut self,
        tasks: &[Planned],
        outputs: Vec<(usize, TaskOutput<S>)>,
    ) -> Result<(), RunError> {
        let g = self.g.clone();
        let version = self.ctl.max_version + 1;
        let mut next_branches = vec![false; g.nodes.len()];
        let mut next_sends: Vec<(usize, Arc<serde_json::Value>)> = Vec::new();
        let mut joins_touched = false;

        // Triggers consumed by the tasks that ran.
        for t in tasks {
            if let (Some(i), Kind::Pull) = (t.node, t.kind) {
                self.ctl.seen_branch[i] = self.ctl.branch_versions[i];
                self.ctl.branches[i] = false;
                for (j, join) in g.joins.iter().enumerate() {
                    if join.target == i && self.ctl.join_ready(j) {
                        self.ctl.seen_join[j] = self.ctl.join_versions[j];
                        self.ctl.barriers[j].iter_mut().for_each(|s| *s = false);
                    }
                }
            }
        }

        let want_updates = self.wants(|m| m.updates);
        let mut writers: Vec<(S::Field, usize)> = Vec::new();
        let mut updates: Vec<S::Update> = Vec::new();
        let mut routed: Vec<usize> = Vec::with_capacity(outputs.len());
        for (ti, out) in outputs {
            let t = &tasks[ti];
            let name = self.node_name(t);
            for u in &out.updates {
                S::written(u, &mut |f| writers.push((f, ti)));
                if want_updates {
                    self.emit(EventKind::Updates {
                        node: name.clone(),
                        update: Shared(Arc::new(u.clone())),
                    })
                    .await;
                }
            }
            let (out_edges, allowed) = match t.node {
                Some(i) => (&g.nodes[i].out, g.nodes[i].destinations.as_ref()),
                None => (&g.entry, None),
            };
            for &to in out_edges {
                next_branches[to] = true;
            }
            if let Some(i) = t.node {
                for &j in &g.nodes[i].joins {
                    if let Some(pos) = g.joins[j].sources.iter().position(|&s| s == i) {
                        self.ctl.barriers[j][pos] = true;
                        self.ctl.join_versions[j] = version;
                        joins_touched = true;
                    }
                }
            }
            self.route(
                out.goto,
                &name,
                allowed,
                &mut next_branches,
                &mut next_sends,
            )?;
            if updates.is_empty() {
                // Most steps have one writer: take its updates as they are (no copy).
                updates = out.updates;
            } else {
                updates.extend(out.updates);
            }
            routed.push(ti);
        }

        let mut rctx = ReduceCtx::new(self.step);
        let changes = Arc::make_mut(&mut self.state)
            .apply(updates, &mut rctx)
            .map_err(|(field, source)| {
                let mut names: Vec<String> = writers
                    .iter()
                    .filter(|(f, _)| *f == field)
                    .map(|(_, ti)| self.node_name(&tasks[*ti]).to_string())
                    .collect();
                names.dedup();
                RunError::Reduce {
                    field: field.name(),
                    writers: names,
                    step: self.step,
                    source,
                }
            })?;

        // Conditional edges read the state after the step's writes.
        for ti in routed {
            let t = &tasks[ti];
            let branch_ids = match t.node {
                Some(i) => &g.nodes[i].branches,
                None => &g.entry_branches,
            };
            for &b in branch_ids {
                let branch = &g.branches[b];
                let route = (branch.router)(&self.state);
                self.route(
                    route.0,
                    &branch.from,
                    Some(&branch.targets),
                    &mut next_branches,
                    &mut next_sends,
                )?;
            }
        }

        let mut changed = joins_touched;
        for &(f, c) in &changes {
            self.ctl.field_versions[f.index()] = version;
            self.unsaved[f.index()] = self.unsaved[f.index()].then(c);
            changed = true;
        }
        for (i, b) in next_branches.into_iter().enumerate() {
            if b {
                self.ctl.branches[i] = true;
                self.ctl.branch_versions[i] = version;
                changed = true;
            } else if !g.nodes[i].options.defer {
                self.ctl.branches[i] = false;
            }
        }
        changed |= !next_sends.is_empty();
        self.ctl.sends = next_sends;
        if changed {
            self.ctl.max_version = version;
        }

        Ok(())
    }

    /// Store the applied step's checkpoint and show its values.
    async fn commit_step(&mut self) -> Result<(), RunError> {
        let field_writes = self.encode_changes()?;
        self.put(Source::Loop, self.step, field_writes).await?;
        if self.wants(|m| m.values) {
            self.emit(EventKind::Values(Shared(self.state.clone())))
                .await;
        }
        Ok(())
    }

    /// Encode the fields changed since the last stored checkpoint (nothing without a saver).
    fn encode_changes(&mut self) -> Result<Vec<FieldWrite>, RunError> {
        if self.level.saver.is_none() || self.shared.durability == Durability::Exit {
            return Ok(Vec::new());
        }
        self.take_unsaved()
    }

    fn take_unsaved(&mut self) -> Result<Vec<FieldWrite>, RunError> {
        let mut writes = Vec::new();
        for f in S::Field::ALL {
            let change = std::mem::replace(&mut self.unsaved[f.index()], Change::Unchanged);
            if change.is_changed() {
                let stored =
                    self.state
                        .encode_field(*f, change)
                        .map_err(|source| RunError::Encode {
                            field: f.name(),
                            source,
                        })?;
                let part = match stored {
                    Stored::Whole(b) => FieldPart::Whole(b),
                    Stored::Tail(b) => FieldPart::Tail(b),
                };
                writes.push(FieldWrite {
                    field: f.name().to_string(),
                    part,
                });
            }
        }
        Ok(writes)
    }

    /// Write a checkpoint at `step` (or, under durability exit, only advance the head).
    async fn put(
        &mut self,
        source: Source,
        step: i64,
        writes: Vec<FieldWrite>,
    ) -> Result<(), RunError> {
        let id = CheckpointId::generate();
        let parent = self.head;
        if matches!(source, Source::Fork | Source::Update) {
            self.ctl.anchor = Some(id);
        }
        self.head = Some(id);
        self.head_source = source;
        self.step = step;
        self.head_step = step;
        self.pending.clear();
        if source == Source::Loop {
            // The resuming command's update is now part of the committed state.
            self.input_writes.clear();
        }
        let Some(saver) = self.level.saver.clone() else {
            return Ok(());
        };
        let Some(thread) = self.shared.thread.clone() else {
            return Ok(());
        };
        if self.shared.durability == Durability::Exit && source != Source::Fork {
            return Ok(());
        }
        let put = PutCheckpoint {
            thread,
            ns: self.level.ns.clone(),
            checkpoint: Checkpoint {
                id,
                parent: if self.shared.durability == Durability::Exit {
                    self.stored_head
                } else {
                    parent
                },
                step,
                source,
                created_at_ms: id.created_at_ms(),
                control: self.ctl.to_control(&self.g)?,
                metadata: self.shared.metadata.clone(),
            },
            writes,
        };
        self.stored_head = Some(id);
        // A fork or an update is stored before anything runs on it. New input is not waited
        // for under `async`: its anchor is derived from the input itself (see
        // `input_anchor`), so if it is lost in a crash and given again, the steps computed
        // again keep their task ids.
        let wait = matches!(source, Source::Fork | Source::Update);
        self.submit(saver, put, wait).await?;
        if self.wants(|m| m.checkpoints) {
            self.emit(EventKind::Checkpoint { id, source }).await;
        }
        Ok(())
    }

    async fn submit(
        &mut self,
        saver: Arc<dyn Saver>,
        put: PutCheckpoint,
        wait: bool,
    ) -> Result<(), RunError> {
        if self.shared.durability != Durability::Async || wait {
            self.drain_inflight().await?;
            return saver.put(put).await.map_err(RunError::from);
        }
        // Under `async`, checkpoints are handed to the saver while the steps go on: to a saver
        // that queues batches in call order each one as it is made (saying more follow, so a
        // grouping saver stores them while the run goes on and commits them together), to
        // any other in batches.
        if saver.orders_batches() {
            self.hand_over(
                1,
                Box::pin(
                    async move { saver.put_many_more(vec![put]).await.map_err(RunError::from) },
                ),
                false,
            )?;
        } else {
            self.buffer.push(put);
            if self.buffer.len() >= ASYNC_BATCH {
                self.send_buffer(saver).await?;
            }
        }
        // Surface finished writes (and their errors) early; bound what is in flight.
        while let Some(front) = self.inflight.front_mut() {
            let done = front.done.get_mut().unwrap_or_else(|p| p.into_inner());
            match futures::FutureExt::now_or_never(done) {
                Some(done) => {
                    self.pop_inflight();
                    done?;
                }
                None => break,
            }
        }
        while self.inflight_puts + self.buffer.len() > MAX_INFLIGHT {
            match self.pop_inflight() {
                Some(front) => front.await?,
                None => break,
            }
        }
        Ok(())
    }

    fn push_inflight(&mut self, puts: usize, done: BoxFuture<'static, Result<(), RunError>>) {
        self.inflight_puts += puts;
        self.inflight.push_back(Inflight {
            puts,
            done: std::sync::Mutex::new(done),
        });
    }

    /// The oldest write in flight, taken off the queue.
    fn pop_inflight(&mut self) -> Option<BoxFuture<'static, Result<(), RunError>>> {
        let front = self.inflight.pop_front()?;
        self.inflight_puts -= front.puts;
        Some(front.done.into_inner().unwrap_or_else(|p| p.into_inner()))
    }

    /// Hand the buffered checkpoints (only a saver that does not order batches has any) to
    /// the saver as one batch, once the last batch is stored: such a saver may store
    /// concurrent batches out of order.
    async fn send_buffer(&mut self, saver: Arc<dyn Saver>) -> Result<(), RunError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        while let Some(front) = self.pop_inflight() {
            front.await?;
        }
        let puts = std::mem::take(&mut self.buffer);
        let n = puts.len();
        self.hand_over(
            n,
            Box::pin(async move { saver.put_many(puts).await.map_err(RunError::from) }),
            true,
        )
    }

    /// Poll a write of `n` checkpoints once (which hands it to the saver) and keep it in
    /// flight unless it is done; `spawn`: as a task of its own, for a saver whose future must
    /// be polled to make progress. A saver that completes at once (in memory) needs no task.
    /// An error that arrives at once still waits its turn behind the writes sent before it:
    /// the run reports the first failure in checkpoint order, not whichever finished first.
    fn hand_over(
        &mut self,
        n: usize,
        mut write: BoxFuture<'static, Result<(), RunError>>,
        spawn: bool,
    ) -> Result<(), RunError> {
        match futures::FutureExt::now_or_never(&mut write) {
            Some(Ok(())) => {}
            Some(Err(e)) if self.inflight.is_empty() => return Err(e),
            Some(Err(e)) => self.push_inflight(n, Box::pin(futures::future::ready(Err(e)))),
            None if spawn => {
                let task = tokio::spawn(write);
                self.push_inflight(n, Box::pin(async move { joined(task.await) }));
            }
            None => self.push_inflight(n, write),
        }
        Ok(())
    }

    /// Send what is buffered and wait for every checkpoint write in flight, asking the saver
    /// to commit at once what is still in flight (what it was told more would follow).
    async fn drain_inflight(&mut self) -> Result<(), RunError> {
        if let Some(saver) = self.level.saver.clone() {
            self.send_buffer(saver.clone()).await?;
            if !self.inflight.is_empty() {
                self.hand_over(
                    0,
                    Box::pin(async move { saver.flush().await.map_err(RunError::from) }),
                    false,
                )?;
            }
        }
        while let Some(front) = self.pop_inflight() {
            front.await?;
        }
        Ok(())
    }

    /// Store what must be stored before the run reports: the in-flight checkpoint, and under
    /// durability exit the final one.
    async fn flush(&mut self) -> Result<(), RunError> {
        self.drain_inflight().await?;
        if self.shared.durability != Durability::Exit || self.poisoned {
            // A step that failed while being applied left the state partly updated: under
            // durability exit the thread stays at its checkpoint from before the run.
            return Ok(());
        }
        let (Some(saver), Some(thread), Some(id)) = (
            self.level.saver.clone(),
            self.shared.thread.clone(),
            self.head,
        ) else {
            return Ok(());
        };
        if self.head != self.stored_head {
            let writes = self.take_unsaved()?;
            let put = PutCheckpoint {
                thread: thread.clone(),
                ns: self.level.ns.clone(),
                checkpoint: Checkpoint {
                    id,
                    parent: self.stored_head,
                    step: self.head_step,
                    source: self.head_source,
                    created_at_ms: id.created_at_ms(),
                    control: self.ctl.to_control(&self.g)?,
                    metadata: self.shared.metadata.clone(),
                },
                writes,
            };
            saver.put(put).await?;
            self.stored_head = Some(id);
        }
        if !self.deferred_pending.is_empty() {
            let writes = std::mem::take(&mut self.deferred_pending);
            saver
                .put_writes(&thread, &self.level.ns, id, writes)
                .await?;
        }
        Ok(())
    }

    async fn record_pending(&mut self, writes: Vec<PendingWrite>) -> Result<(), RunError> {
        self.pending = writes.clone();
        if self.shared.durability == Durability::Exit {
            self.deferred_pending = writes;
            return Ok(());
        }
        self.drain_inflight().await?;
        if let (Some(saver), Some(thread), Some(head)) =
            (&self.level.saver, &self.shared.thread, self.head)
        {
            saver
                .put_writes(thread, &self.level.ns, head, writes)
                .await?;
        }
        Ok(())
    }
}

/// How one attempt of a task ended, when it did not succeed.
enum Attempt {
    Interrupted(Vec<Interrupt>),
    /// A subgraph's run error, passed through unchanged.
    Child(RunError),
    Failed(BoxError),
    TimedOut(std::time::Duration),
}

/// Run one attempt of a node, turning a panic into a failure of the task.
async fn run_attempt<S: State>(
    node: &Arc<dyn crate::graph::NodeRun<S>>,
    state: &Arc<S>,
    ctx: &NodeContext,
    timeout: Option<std::time::Duration>,
) -> Result<TaskOutput<S>, Attempt> {
    use futures::FutureExt;
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        node.run(state.clone(), ctx.clone())
    }));
    let fut = match started {
        Ok(fut) => fut,
        Err(panic) => return Err(Attempt::Failed(panic_message(panic).into())),
    };
    let guarded = std::panic::AssertUnwindSafe(fut).catch_unwind();
    let result = match timeout {
        Some(d) => match tokio::time::timeout(d, guarded).await {
            Ok(r) => r,
            Err(_) => return Err(Attempt::TimedOut(d)),
        },
        None => guarded.await,
    };
    match result {
        Ok(NodeResult::Output(out)) => Ok(out),
        Ok(NodeResult::Interrupted(list)) => Err(Attempt::Interrupted(list)),
        Ok(NodeResult::Child(e)) => Err(Attempt::Child(e)),
        Ok(NodeResult::Failed(e)) => Err(Attempt::Failed(e)),
        Err(panic) => Err(Attempt::Failed(panic_message(panic).into())),
    }
}

fn panic_message(panic: Box<dyn std::any::Any + std::marker::Send>) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string payload".to_string());
    format!("node panicked: {text}")
}

/// A run error as the boxed error a retry predicate sees.
fn failure_box(e: &RunError) -> BoxError {
    match e {
        RunError::Node { source, .. } => source.to_string().into(),
        other => other.to_string().into(),
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

/// The task id under which an error applying step `step` is recorded.
fn apply_error_task(step: i64) -> TaskId {
    TaskId::derive(&[b"apply", &step.to_le_bytes()])
}

/// The node name recorded for a resuming command's update.
const INPUT_NODE: &str = "__input__";

/// The task id under which a resuming command's update is recorded.
fn input_task() -> TaskId {
    TaskId::derive(&[b"input"])
}

/// Aborts spawned tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// A task's result, or why its spawned tokio task did not return one.
type TaskJoin<S> = Result<TaskResult<S>, String>;

enum Executed {
    Applied,
    Interrupted(Vec<Interrupt>),
    Parent(Vec<ParentCommand>),
}

fn joined(r: Result<Result<(), RunError>, tokio::task::JoinError>) -> Result<(), RunError> {
    match r {
        Ok(r) => r,
        Err(e) => Err(RunError::Checkpoint(CheckpointError::Storage(
            format!("checkpoint writer failed: {e}").into(),
        ))),
    }
}

fn is_static_interrupt(id: &str) -> bool {
    id.starts_with("before:") || id.starts_with("after:")
}

fn static_interrupt(when: &str, node: &str) -> Interrupt {
    Interrupt {
        id: format!("{when}:{node}"),
        value: serde_json::Value::Null,
        node: node.to_string(),
    }
}

impl<S: State> CompiledGraph<S> {
    fn shared(
        &self,
        config: &RunConfig,
        cancel: CancelToken,
        sink: Option<EventSink>,
    ) -> Result<Arc<RunShared>, RunError> {
        Ok(Arc::new(RunShared {
            resume: Arc::new(Mutex::new(ResumeInput::default())),
            cancel,
            sink,
            thread: config.thread_id()?,
            durability: config.durability,
            recursion_limit: config.recursion_limit,
            metadata: config.metadata.clone(),
            interrupt_before: config.interrupt_before.clone(),
            interrupt_after: config.interrupt_after.clone(),
        }))
    }

    pub(crate) async fn run_root(
        &self,
        input: Input<S>,
        config: &RunConfig,
        sink: Option<EventSink>,
        cancel: CancelToken,
    ) -> Result<RunOutcome<S>, RunError> {
        let shared = self.shared(config, cancel, sink)?;
        let level = Level {
            ns: Namespace::root(),
            saver: self.saver.clone(),
            ephemeral: false,
            is_root: true,
        };
        let lp = Loop::start(self, shared, level, input, config.checkpoint).await?;
        match lp.run().await? {
            LevelEnd::Done(outcome) => Ok(outcome),
            LevelEnd::Parent(_) => Err(RunError::ParentCommand {
                node: "?".to_string(),
                reason: "there is no parent graph".to_string(),
            }),
        }
    }

    /// Run the graph to its end (or an interrupt).
    ///
    /// # Errors
    /// A [`RunError`]: a node failure, a reducer conflict, the recursion limit, a bad resume,
    /// a storage error. Tasks that finished in a failed step keep their writes (with a
    /// checkpointer), so a later [`Input::Continue`] does not run them again.
    pub async fn invoke(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
    ) -> Result<RunOutcome<S>, RunError> {
        self.run_root(input.into(), config, None, config.cancel.clone())
            .await
    }

    /// Run the graph, streaming its events (see [`crate::RunStream`]).
    pub fn stream(
        &self,
        input: impl Into<Input<S>>,
        config: &RunConfig,
        mode: crate::StreamMode,
    ) -> crate::RunStream<S> {
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        let graph = self.clone();
        let config = config.clone();
        let input = input.into();
        // Dropping the stream cancels the run (at its next step boundary, so it stops cleanly).
        let cancel = config.cancel.child();
        let run_cancel = cancel.clone();
        let handle = tokio::spawn(async move {
            graph
                .run_root(input, &config, Some(EventSink { tx, mode }), run_cancel)
                .await
        });
        crate::RunStream::new(rx, handle, cancel)
    }

    /// Write `update` into the thread as if node `as_node` had returned it, on top of its
    /// newest checkpoint (or of `checkpoint`, starting a new branch from there). The update
    /// goes through the reducers; the next step runs what `as_node`'s edges lead to. Returns
    /// the new checkpoint (source `update`).
    ///
    /// # Errors
    /// [`RunError::UnknownNode`] for a node the graph does not have; reducer, routing and
    /// storage errors; [`RunError::MissingThread`] without a checkpointer.
    pub async fn update_state(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
        update: S::Update,
        as_node: &str,
    ) -> Result<CheckpointId, RunError> {
        if self.saver.is_none() {
            return Err(RunError::MissingThread);
        }
        let node = *self
            .inner
            .index
            .get(as_node)
            .ok_or_else(|| RunError::UnknownNode {
                name: as_node.to_string(),
                from: "update_state".to_string(),
                step: -1,
            })?;
        let config = RunConfig::new().thread(thread).durability(Durability::Sync);
        let shared = self.shared(&config, config.cancel.clone(), None)?;
        let level = Level {
            ns: Namespace::root(),
            saver: self.saver.clone(),
            ephemeral: false,
            is_root: true,
        };
        let mut lp =
            Loop::start_at(self, shared, level, Input::Continue, checkpoint, false).await?;
        // What was left to run is replaced by what `as_node`'s edges lead to.
        lp.ctl.branches.iter_mut().for_each(|b| *b = false);
        lp.ctl.sends.clear();
        lp.pending.clear();
        let task = Planned {
            id: TaskId::derive(&[b"update", as_node.as_bytes()]),
            node: Some(node),
            kind: Kind::Pull,
            arg: None,
        };
        let out = TaskOutput {
            updates: vec![update],
            goto: Vec::new(),
            parents: Vec::new(),
        };
        lp.apply(std::slice::from_ref(&task), vec![(0, out)])
            .await?;
        let writes = lp.take_unsaved()?;
        lp.put(Source::Update, lp.step, writes).await?;
        lp.flush().await?;
        lp.head.ok_or(RunError::MissingThread)
    }

    /// The thread's state at its newest checkpoint (or at `checkpoint`).
    ///
    /// # Errors
    /// [`RunError::MissingThread`] without a checkpointer's thread; storage and decode errors.
    pub async fn get_state(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<Option<StateSnapshot<S>>, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let Some(loaded) = saver
            .get(&thread_id, &Namespace::root(), checkpoint)
            .await?
        else {
            return Ok(None);
        };
        self.snapshot(loaded, &Some(thread_id)).map(Some)
    }

    /// The thread's checkpoints, newest first, as snapshots.
    ///
    /// # Errors
    /// Storage and decode errors; [`CheckpointError::InvalidFilterKey`] for a bad filter key.
    pub async fn get_state_history(
        &self,
        thread: &str,
        options: stategraph_checkpoints::ListOptions,
    ) -> Result<Vec<StateSnapshot<S>>, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let root = Namespace::root();
        let headers = saver.list(&thread_id, &root, options).await?;
        let t = Some(thread_id.clone());
        // Oldest first: a checkpoint whose parent was just rebuilt is that state plus what its
        // step changed (cloned and extended, not decoded whole).
        let mut out: Vec<StateSnapshot<S>> = Vec::with_capacity(headers.len());
        let oldest_first: Vec<Checkpoint> = headers.into_iter().rev().collect();
        // What each checkpoint's step changed, for those whose parent is the one before it
        // in the list: fetched in one round trip.
        let chained: Vec<CheckpointId> = oldest_first
            .windows(2)
            .filter(|w| w[1].parent == Some(w[0].id))
            .map(|w| w[1].id)
            .collect();
        let mut changes: std::collections::HashMap<
            CheckpointId,
            stategraph_checkpoints::StepChanges,
        > = chained
            .iter()
            .copied()
            .zip(
                saver
                    .changes_many(&thread_id, &root, chained.clone())
                    .await?,
            )
            .collect();
        let mut prev: Option<(CheckpointId, Arc<S>)> = None;
        for h in oldest_first {
            let mut rebuilt = None;
            if let (Some((pid, ps)), Some(parent)) = (&prev, h.parent) {
                if *pid == parent {
                    if let Some(step) = changes.remove(&h.id) {
                        let mut state = (**ps).clone();
                        if apply_changes(&mut state, &step.fields).is_ok() {
                            rebuilt = Some((Arc::new(state), step.pending));
                        }
                    }
                }
            }
            let (values, pending) = match rebuilt {
                Some(r) => r,
                None => {
                    let loaded =
                        saver
                            .get(&thread_id, &root, Some(h.id))
                            .await?
                            .ok_or_else(|| CheckpointError::NotFound {
                                thread: thread_id.clone(),
                                ns: root.clone(),
                                id: h.id,
                            })?;
                    (Arc::new(decode_state::<S>(&loaded, &t)?), loaded.pending)
                }
            };
            prev = Some((h.id, values.clone()));
            out.push(self.snapshot_of(h, values, &pending, &t)?);
        }
        out.reverse();
        Ok(out)
    }

    fn snapshot(
        &self,
        loaded: LoadedCheckpoint,
        thread: &Option<ThreadId>,
    ) -> Result<StateSnapshot<S>, RunError> {
        let values = Arc::new(decode_state::<S>(&loaded, thread)?);
        self.snapshot_of(loaded.checkpoint, values, &loaded.pending, thread)
    }

    fn snapshot_of(
        &self,
        checkpoint: Checkpoint,
        values: Arc<S>,
        pending: &[PendingWrite],
        thread: &Option<ThreadId>,
    ) -> Result<StateSnapshot<S>, RunError> {
        let ctl = Ctl::<S>::from_control(&self.inner, &checkpoint.control, thread)?;
        let mut next: Vec<String> = Vec::new();
        if ctl.start.is_some() {
            next.push(START.to_string());
        }
        for (i, n) in self.inner.nodes.iter().enumerate() {
            let joined = self
                .inner
                .joins
                .iter()
                .enumerate()
                .any(|(j, join)| join.target == i && ctl.join_ready(j));
            if ctl.branches[i] || joined {
                next.push(n.name.to_string());
            }
        }
        next.extend(
            ctl.sends
                .iter()
                .map(|(i, _)| self.inner.nodes[*i].name.to_string()),
        );
        let mut interrupts = Vec::new();
        let mut errors = Vec::new();
        for w in pending {
            match &w.kind {
                WriteKind::Interrupt { id, value } => interrupts.push(Interrupt {
                    id: id.clone(),
                    value: value.clone(),
                    node: w.node.clone(),
                }),
                WriteKind::Error(e) => errors.push((w.node.clone(), e.clone())),
                _ => {}
            }
        }
        Ok(StateSnapshot {
            values,
            next,
            checkpoint,
            interrupts,
            errors,
        })
    }
}
