//! [`CapabilityTrace`]: every tool of a run through the six capability states, with who removed
//! or denied it and why.

use std::fmt;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use stategraph::checkpoints::sync::Unpoisoned;

/// The six states a capability (a tool) passes on its way to a delivered result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// In the candidate catalog.
    Available,
    /// Kept by authorization for this principal.
    Authorized,
    /// Its schema was shown to the model on a call.
    Visible,
    /// A call passed the call-time checks and its handler ran.
    Executed,
    /// Its result was handed to the graph to merge into the state.
    Returned,
    /// A file it produced was declared and verified (filled by run settlement).
    Delivered,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Available => "available",
            Stage::Authorized => "authorized",
            Stage::Visible => "visible",
            Stage::Executed => "executed",
            Stage::Returned => "returned",
            Stage::Delivered => "delivered",
        })
    }
}

/// What happened to a tool at a stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// It reached the stage.
    Passed,
    /// It was taken out before the stage (dropped from the catalog, hidden from the model).
    Removed {
        /// Which component removed it.
        by: String,
        /// Why.
        reason: String,
    },
    /// A call was refused at the stage (its handler never ran).
    Denied {
        /// Which component refused it.
        by: String,
        /// Why.
        reason: String,
    },
    /// The handler ran but reported an error.
    Failed {
        /// The error text.
        reason: String,
    },
    /// The stage could not be confirmed: a presented path that the run's settlement did not
    /// match to a file the run produced (or a run that ended before settlement verified it).
    Unverified {
        /// Why.
        reason: String,
    },
}

/// One record of the trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEntry {
    /// The tool.
    pub tool: String,
    /// The stage.
    pub stage: Stage,
    /// What happened.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The model call (1-based, in this run) for `Visible` entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_call: Option<u32>,
    /// The tool call id for `Executed`, `Returned` and `Delivered` entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The presented virtual path for `Delivered` entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// For an entry of a delegated child: the lead's `task` call it ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call: Option<String>,
    /// The run it was recorded in (`None`: at assembly, before any run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Arc<str>>,
    /// The thread of that run (`None`: at assembly, or a run without a thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Arc<str>>,
}

impl Verdict {
    /// Taken out by `by` before the stage.
    pub fn removed(by: &str, reason: impl Into<String>) -> Self {
        Verdict::Removed {
            by: by.to_owned(),
            reason: reason.into(),
        }
    }

    /// A call refused by `by` at the stage.
    pub fn denied(by: &str, reason: impl Into<String>) -> Self {
        Verdict::Denied {
            by: by.to_owned(),
            reason: reason.into(),
        }
    }
}

impl TraceEntry {
    /// What happened to `tool` at `stage`, outside any model call or tool call.
    pub fn new(tool: impl Into<String>, stage: Stage, verdict: Verdict) -> Self {
        TraceEntry {
            tool: tool.into(),
            stage,
            verdict,
            model_call: None,
            call_id: None,
            path: None,
            parent_call: None,
            run_id: None,
            thread_id: None,
        }
    }

    /// On model call `n`.
    pub fn on_model_call(mut self, n: u32) -> Self {
        self.model_call = Some(n);
        self
    }

    /// For the tool call with this id.
    pub fn for_call(mut self, id: impl Into<String>) -> Self {
        self.call_id = Some(id.into());
        self
    }

    /// About the presented virtual path `path`.
    pub fn for_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// An entry of a child delegated by the lead's call `id`.
    pub fn under_call(mut self, id: impl Into<String>) -> Self {
        self.parent_call = Some(id.into());
        self
    }

    /// Whether the entry is the agent's own (not a delegated child's).
    pub fn is_own(&self) -> bool {
        self.parent_call.is_none()
    }

    /// Whether the tool passed.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Passed
    }
}

impl fmt::Display for TraceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parent) = &self.parent_call {
            write!(f, "  [{parent}] ")?;
        }
        write!(f, "{:<10} {:<22}", self.stage.to_string(), self.tool)?;
        match &self.verdict {
            Verdict::Passed => write!(f, " passed")?,
            Verdict::Removed { by, reason } => write!(f, " removed by {by}: {reason}")?,
            Verdict::Denied { by, reason } => write!(f, " denied by {by}: {reason}")?,
            Verdict::Failed { reason } => write!(f, " failed: {reason}")?,
            Verdict::Unverified { reason } => write!(f, " unverified: {reason}")?,
        }
        if let Some(path) = &self.path {
            write!(f, " {path}")?;
        }
        if let Some(n) = self.model_call {
            write!(f, " (model call {n})")?;
        }
        if let Some(id) = &self.call_id {
            write!(f, " (call {id})")?;
        }
        Ok(())
    }
}

/// The capability trace of one agent run: shared by the run's nodes and layers, queryable
/// afterwards. Clones share one record.
///
/// ```
/// use stategraph_nodes::{CapabilityTrace, Stage};
///
/// let trace = CapabilityTrace::new();
/// trace.pass("search", Stage::Available);
/// trace.remove("search", Stage::Authorized, "authorization", "role guest may not use it");
/// assert!(!trace.reached("search", Stage::Authorized));
/// assert_eq!(trace.why_not("search", Stage::Visible).map(|e| e.stage), Some(Stage::Authorized));
/// ```
#[derive(Clone, Default)]
pub struct CapabilityTrace {
    log: Arc<Mutex<TraceLog>>,
}

/// The entries, and the run and thread that entries recorded now belong to (one lock for
/// all).
#[derive(Default)]
struct TraceLog {
    entries: Vec<TraceEntry>,
    run: Option<Arc<str>>,
    thread: Option<Arc<str>>,
}

impl fmt::Debug for CapabilityTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries()).finish()
    }
}

impl CapabilityTrace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// A trace whose entries are recorded in `run` on `thread` (unless an entry names its
    /// own): what a node records into while it runs for one thread, before its entries join
    /// a shared trace with [`CapabilityTrace::extend`].
    ///
    /// ```
    /// use stategraph_nodes::{CapabilityTrace, Stage};
    ///
    /// let shared = CapabilityTrace::new();
    /// let task = CapabilityTrace::scoped(Some("run-1"), Some("t1"));
    /// task.pass("search", Stage::Executed);
    /// shared.extend(task.entries());
    /// assert_eq!(shared.for_thread("t1").len(), 1);
    /// assert!(shared.for_thread("t2").is_empty());
    /// ```
    pub fn scoped(run: Option<&str>, thread: Option<&str>) -> Self {
        let trace = CapabilityTrace::new();
        trace.enter_run(run, thread);
        trace
    }

    /// Record an entry (in the current run and thread, unless it names its own).
    pub fn record(&self, mut entry: TraceEntry) {
        tracing::debug!(tool = %entry.tool, stage = %entry.stage, verdict = ?entry.verdict, "capability");
        let mut log = self.log.lock().unpoisoned();
        if entry.run_id.is_none() {
            entry.run_id.clone_from(&log.run);
            if entry.thread_id.is_none() {
                entry.thread_id.clone_from(&log.thread);
            }
        }
        log.entries.push(entry);
    }

    /// Append `entries` as they are (their run and thread kept), in order.
    ///
    /// ```
    /// use stategraph_nodes::{CapabilityTrace, Stage, TraceEntry, Verdict};
    ///
    /// let trace = CapabilityTrace::new();
    /// trace.extend([TraceEntry::new("search", Stage::Available, Verdict::Passed)]);
    /// assert_eq!(trace.len(), 1);
    /// ```
    pub fn extend(&self, entries: impl IntoIterator<Item = TraceEntry>) {
        self.log.lock().unpoisoned().entries.extend(entries);
    }

    /// Entries recorded from now on belong to `run` on `thread` (`None`: to no run, no
    /// thread).
    pub(crate) fn enter_run(&self, run: Option<&str>, thread: Option<&str>) {
        let mut log = self.log.lock().unpoisoned();
        log.run = run.map(Arc::from);
        log.thread = thread.map(Arc::from);
    }

    /// The entries recorded on thread `thread`, with the assembly's (recorded before any
    /// run), in order: what one thread's runs did, whatever other threads ran the same agent.
    ///
    /// ```
    /// use stategraph_nodes::{CapabilityTrace, Stage};
    ///
    /// let trace = CapabilityTrace::new();
    /// trace.pass("search", Stage::Available); // the assembly's: in every thread's trace
    /// let t1 = CapabilityTrace::scoped(Some("r1"), Some("t1"));
    /// t1.pass("search", Stage::Executed);
    /// trace.extend(t1.entries());
    /// assert_eq!(trace.for_thread("t1").len(), 2);
    /// assert_eq!(trace.for_thread("t2").len(), 1);
    /// ```
    pub fn for_thread(&self, thread: &str) -> Vec<TraceEntry> {
        self.log
            .lock()
            .unpoisoned()
            .entries
            .iter()
            .filter(|e| match e.thread_id.as_deref() {
                Some(t) => t == thread,
                None => e.run_id.is_none(),
            })
            .cloned()
            .collect()
    }

    /// A separate trace holding `entries` (to query a run's or a thread's entries with
    /// [`CapabilityTrace::reached`], [`CapabilityTrace::visible_on`], ...).
    ///
    /// ```
    /// use stategraph_nodes::{CapabilityTrace, Stage};
    ///
    /// let all = CapabilityTrace::scoped(Some("run-1"), Some("t1"));
    /// all.pass("search", Stage::Returned);
    /// assert!(CapabilityTrace::of(all.for_thread("t1")).reached("search", Stage::Returned));
    /// assert!(!CapabilityTrace::of(all.for_thread("t2")).reached("search", Stage::Returned));
    /// ```
    pub fn of(entries: impl IntoIterator<Item = TraceEntry>) -> Self {
        let trace = CapabilityTrace::new();
        trace.extend(entries);
        trace
    }

    /// The entries of run `run_id`, with the assembly's (recorded before any run), in order.
    pub fn for_run(&self, run_id: &str) -> Vec<TraceEntry> {
        self.log
            .lock()
            .unpoisoned()
            .entries
            .iter()
            .filter(|e| e.run_id.as_deref().is_none_or(|r| r == run_id))
            .cloned()
            .collect()
    }

    /// Record that `tool` reached `stage`.
    pub fn pass(&self, tool: &str, stage: Stage) {
        self.record(TraceEntry::new(tool, stage, Verdict::Passed));
    }

    /// Record that `by` removed `tool` before `stage`.
    pub fn remove(&self, tool: &str, stage: Stage, by: &str, reason: impl Into<String>) {
        self.record(TraceEntry::new(tool, stage, Verdict::removed(by, reason)));
    }

    /// Every entry, in the order recorded.
    pub fn entries(&self) -> Vec<TraceEntry> {
        self.log.lock().unpoisoned().entries.clone()
    }

    /// How many entries were recorded.
    pub fn len(&self) -> usize {
        self.log.lock().unpoisoned().entries.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries recorded at index `from` or later that `keep` selects.
    pub fn entries_since(
        &self,
        from: usize,
        keep: impl Fn(&TraceEntry) -> bool,
    ) -> Vec<TraceEntry> {
        self.log
            .lock()
            .unpoisoned()
            .entries
            .iter()
            .skip(from)
            .filter(|e| keep(e))
            .cloned()
            .collect()
    }

    /// The entries of one tool.
    pub fn for_tool(&self, tool: &str) -> Vec<TraceEntry> {
        self.entries()
            .into_iter()
            .filter(|e| e.tool == tool)
            .collect()
    }

    /// Whether `tool` passed `stage` at least once in this agent (a delegated child's entries,
    /// recorded under a call, are not this agent's).
    pub fn reached(&self, tool: &str, stage: Stage) -> bool {
        self.log
            .lock()
            .unpoisoned()
            .entries
            .iter()
            .any(|e| e.is_own() && e.tool == tool && e.stage == stage && e.passed())
    }

    /// The entries of the child delegated by this agent's call `call_id`, in order.
    pub fn under(&self, call_id: &str) -> Vec<TraceEntry> {
        self.log
            .lock()
            .unpoisoned()
            .entries
            .iter()
            .filter(|e| e.parent_call.as_deref() == Some(call_id))
            .cloned()
            .collect()
    }

    /// Why `tool` did not reach `stage`: `None` if it did (at least once); otherwise the entry
    /// that stopped it furthest along — the removal, denial or failure with the highest stage
    /// not past `stage` (the latest of those), or `None` if nothing was recorded.
    pub fn why_not(&self, tool: &str, stage: Stage) -> Option<TraceEntry> {
        if self.reached(tool, stage) {
            return None;
        }
        let log = self.log.lock().unpoisoned();
        let entries = &log.entries;
        let mut best: Option<&TraceEntry> = None;
        for e in entries.iter() {
            if e.is_own()
                && e.tool == tool
                && e.stage <= stage
                && !e.passed()
                && best.is_none_or(|b| e.stage >= b.stage)
            {
                best = Some(e);
            }
        }
        best.cloned()
    }

    /// The tools shown to the model on model call `n` (1-based; calls are numbered per run,
    /// so for an agent that ran more than once, ask a run's or a thread's trace:
    /// `CapabilityTrace::of(agent.run_trace(&run_id))`), in order.
    pub fn visible_on(&self, n: u32) -> Vec<String> {
        self.log
            .lock()
            .unpoisoned()
            .entries
            .iter()
            .filter(|e| {
                e.is_own() && e.stage == Stage::Visible && e.model_call == Some(n) && e.passed()
            })
            .map(|e| e.tool.clone())
            .collect()
    }

    /// The trace as text, one entry per line.
    pub fn render(&self) -> String {
        self.entries().iter().map(|e| format!("{e}\n")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_not_names_the_furthest_stop_and_nothing_once_the_stage_was_reached() {
        let t = CapabilityTrace::new();
        t.remove("x", Stage::Visible, "deferred_tool_filter", "not promoted");
        t.pass("x", Stage::Visible);
        t.record(
            TraceEntry::new(
                "x",
                Stage::Executed,
                Verdict::denied("guardrail", "denylist"),
            )
            .for_call("c1"),
        );
        let why = t.why_not("x", Stage::Returned);
        assert!(
            matches!(why.map(|e| e.verdict), Some(Verdict::Denied { by, .. }) if by == "guardrail")
        );
        assert_eq!(t.why_not("x", Stage::Visible), None);
        assert_eq!(t.why_not("never-seen", Stage::Visible), None);
    }
}
