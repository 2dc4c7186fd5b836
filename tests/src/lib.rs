//! Shared helpers for the behaviour tests: a saver that records what it is asked to store,
//! and LangGraph's recorded behaviour ([`langgraph`]).

pub mod child_store;
pub mod kill;
pub mod langgraph;
pub mod steps;
pub mod writes;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use stategraph_checkpoints::sync::Unpoisoned;
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, DeliveryReceipt, Head, ListOptions,
    LoadedCheckpoint, MemorySaver, Namespace, PendingWrite, PutCheckpoint, Retention, RunId,
    RunRecord, Saver, StepChanges, ThreadId, ThreadInfo,
};

/// One recorded `put_writes` call: namespace, checkpoint, writes.
pub type PendingCall = (Namespace, CheckpointId, Vec<PendingWrite>);

/// A saver that records every `put` and `put_writes` call and can inject faults, in front of
/// a [`MemorySaver`] (or, built with [`RecordingSaver::over`], any saver).
#[derive(Clone)]
pub struct RecordingSaver {
    /// The in-memory store behind it (unused when built with [`RecordingSaver::over`]).
    pub inner: MemorySaver,
    /// Where calls go.
    target: Arc<dyn Saver>,
    /// `put` attempts so far (failed ones included).
    attempts: Arc<AtomicUsize>,
    /// Only the n-th `put` attempt fails (a fault that then clears).
    pub fail_put_once_at: Option<usize>,
    /// Every checkpoint put, in order.
    pub puts: Arc<Mutex<Vec<PutCheckpoint>>>,
    /// Every pending-writes call: (namespace, checkpoint, writes).
    pub writes: Arc<Mutex<Vec<PendingCall>>>,
    /// Each `put` completes only after this delay, like a real disk.
    pub put_delay: Option<std::time::Duration>,
    /// The n-th `put` and every later one fail with a storage error (nothing stored).
    pub fail_puts_from: Option<usize>,
    /// This many of the next receipt writes fail with a storage error (nothing stored).
    pub fail_receipts: Arc<AtomicUsize>,
    /// Every run and receipt write that reached the target, in order.
    pub run_log: Arc<Mutex<Vec<RunCall>>>,
    /// `get` calls so far: each loads a whole checkpoint.
    pub gets: Arc<AtomicUsize>,
}

/// A run or receipt write a [`RecordingSaver`] passed on.
#[derive(Debug, Clone, PartialEq)]
pub enum RunCall {
    /// `put_run` with this record.
    Run(RunRecord),
    /// `put_receipt_if_absent` for this run.
    Receipt(RunId),
}

impl std::fmt::Debug for RecordingSaver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingSaver")
            .field("puts", &self.puts().len())
            .field("fail_puts_from", &self.fail_puts_from)
            .field("fail_put_once_at", &self.fail_put_once_at)
            .finish_non_exhaustive()
    }
}

impl Default for RecordingSaver {
    fn default() -> Self {
        let inner = MemorySaver::new();
        RecordingSaver {
            target: Arc::new(inner.clone()),
            inner,
            attempts: Arc::default(),
            fail_put_once_at: None,
            puts: Arc::default(),
            writes: Arc::default(),
            put_delay: None,
            fail_puts_from: None,
            fail_receipts: Arc::default(),
            run_log: Arc::default(),
            gets: Arc::default(),
        }
    }
}

impl RecordingSaver {
    /// An empty recording saver.
    pub fn new() -> Self {
        Self::default()
    }

    /// A recording saver in front of `saver`.
    pub fn over(saver: Arc<dyn Saver>) -> Self {
        RecordingSaver {
            target: saver,
            ..Self::default()
        }
    }

    /// A recording saver in front of `saver` whose `n`-th `put` attempt fails once.
    pub fn failing_once_at(saver: Arc<dyn Saver>, n: usize) -> Self {
        RecordingSaver {
            fail_put_once_at: Some(n),
            ..Self::over(saver)
        }
    }

    /// A recording saver whose `put`s complete after `delay`.
    pub fn slow(delay: std::time::Duration) -> Self {
        RecordingSaver {
            put_delay: Some(delay),
            ..Self::default()
        }
    }

    /// A recording saver whose `n`-th and later `put`s fail.
    pub fn failing_from(n: usize) -> Self {
        RecordingSaver {
            fail_puts_from: Some(n),
            ..Self::default()
        }
    }

    /// Count a put attempt: the injected fault, if this is its turn, else record the put.
    fn admit(&self, put: &PutCheckpoint) -> Result<(), CheckpointError> {
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        if self
            .fail_puts_from
            .is_some_and(|n| self.puts.lock().unpoisoned().len() + 1 >= n)
            || self.fail_put_once_at == Some(attempt)
        {
            return Err(CheckpointError::Storage(
                format!("disk full (put {attempt})").into(),
            ));
        }
        self.puts.lock().unpoisoned().push(put.clone());
        Ok(())
    }

    /// The recorded puts.
    pub fn puts(&self) -> Vec<PutCheckpoint> {
        self.puts.lock().unpoisoned().clone()
    }

    /// The recorded pending writes.
    pub fn pending_calls(&self) -> Vec<PendingCall> {
        self.writes.lock().unpoisoned().clone()
    }

    /// As a shared saver.
    pub fn shared(&self) -> Arc<dyn Saver> {
        Arc::new(self.clone())
    }
}

impl RecordingSaver {
    /// `put_many` or (`more_follow`) `put_streamed` of the target, with the injected faults.
    fn put_batch(
        &self,
        puts: Vec<PutCheckpoint>,
        more_follow: bool,
    ) -> BoxFuture<'_, Result<(), CheckpointError>> {
        // The puts before an injected fault reach the target as one batch (so a batching
        // saver's grouping is exercised); the fault is the batch's error.
        let mut admitted = Vec::with_capacity(puts.len());
        let mut fault = None;
        for put in puts {
            match self.admit(&put) {
                Ok(()) => admitted.push(put),
                Err(e) => {
                    fault = Some(e);
                    break;
                }
            }
        }
        let stored = if admitted.is_empty() {
            None
        } else {
            Some(if more_follow {
                self.target.put_streamed(admitted)
            } else {
                self.target.put_many(admitted)
            })
        };
        let delay = self.put_delay;
        Box::pin(async move {
            if let Some(stored) = stored {
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                }
                stored.await?;
            }
            fault.map_or(Ok(()), Err)
        })
    }
}

impl Saver for RecordingSaver {
    fn put(&self, put: PutCheckpoint) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            if let Some(delay) = self.put_delay {
                tokio::time::sleep(delay).await;
            }
            self.admit(&put)?;
            self.target.put(put).await
        })
    }

    fn queues_in_call_order(&self) -> bool {
        self.target.queues_in_call_order()
    }

    fn put_many(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_batch(puts, false)
    }

    fn put_streamed(&self, puts: Vec<PutCheckpoint>) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.put_batch(puts, true)
    }

    fn flush(&self) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.target.flush()
    }

    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.writes
            .lock()
            .unpoisoned()
            .push((ns.clone(), id, writes.clone()));
        self.target.put_writes(thread, ns, id, writes)
    }

    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<LoadedCheckpoint>, CheckpointError>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.target.get(thread, ns, id)
    }

    fn changes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
    ) -> BoxFuture<'a, Result<StepChanges, CheckpointError>> {
        self.target.changes(thread, ns, id)
    }

    fn changes_many<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        ids: Vec<CheckpointId>,
    ) -> BoxFuture<'a, Result<Vec<StepChanges>, CheckpointError>> {
        self.target.changes_many(thread, ns, ids)
    }

    fn head<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
    ) -> BoxFuture<'a, Result<Option<Head>, CheckpointError>> {
        self.target.head(thread, ns)
    }

    fn copy_branch<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
        head: CheckpointId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.target.copy_branch(from, to, head)
    }

    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>> {
        self.target.list(thread, ns, options)
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.target.delete_thread(thread)
    }

    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>> {
        self.target.list_threads()
    }

    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.target.copy_thread(from, to)
    }

    fn prune<'a>(
        &'a self,
        thread: &'a ThreadId,
        retention: Retention,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        self.target.prune(thread, retention)
    }

    fn put_run(&self, run: RunRecord) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.run_log
            .lock()
            .unpoisoned()
            .push(RunCall::Run(run.clone()));
        self.target.put_run(run)
    }

    fn get_run<'a>(
        &'a self,
        thread: Option<&'a ThreadId>,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, CheckpointError>> {
        self.target.get_run(thread, run)
    }

    fn list_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        self.target.list_runs(thread)
    }

    fn list_running_runs<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>, CheckpointError>> {
        self.target.list_running_runs(thread)
    }

    fn put_receipt_if_absent<'a>(
        &'a self,
        run: &'a RunId,
        receipt: DeliveryReceipt,
    ) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        let failing = self
            .fail_receipts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Box::pin(async { Err(CheckpointError::Storage("receipt store down".into())) });
        }
        self.run_log
            .lock()
            .unpoisoned()
            .push(RunCall::Receipt(run.clone()));
        self.target.put_receipt_if_absent(run, receipt)
    }

    fn get_receipt<'a>(
        &'a self,
        run: &'a RunId,
    ) -> BoxFuture<'a, Result<Option<DeliveryReceipt>, CheckpointError>> {
        self.target.get_receipt(run)
    }
}

/// Build one target of the workspace with cargo (in the profile the tests run in) and return
/// the path of its executable. `kind` is `"--bin"` or `"--example"`.
///
/// # Errors
/// A description of why cargo could not build it or did not report its executable.
pub fn build_target(package: &str, kind: &str, name: &str) -> Result<std::path::PathBuf, String> {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace root")?
        .to_path_buf();
    let mut cmd = std::process::Command::new(env!("CARGO"));
    cmd.current_dir(&workspace)
        .args(["build", "-p", package, kind, name, "--message-format=json"]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build {kind} {name} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(std::path::PathBuf::from))
        .ok_or_else(|| format!("cargo did not report the {name} executable"))
}

/// The counting thread several reliability tests share (the `crash_resume` example's shape):
/// each step appends its index to `items` and folds it into `checksum`, until `steps` items.
pub mod tally {
    use std::sync::Arc;

    use stategraph::{BoxError, CompileError, CompiledGraph, List, NodeContext, State, StateGraph};
    use stategraph::{END, START};

    /// The state: the items so far and a running checksum over them.
    #[derive(State, Clone, Default, Debug)]
    pub struct Tally {
        /// One item per step: the step index.
        #[reduce(append)]
        pub items: List<u64>,
        /// [`next_checksum`] folded over the items.
        pub checksum: u64,
    }

    /// The checksum after item `i`, given the one before it.
    pub fn next_checksum(prev: u64, i: u64) -> u64 {
        prev.wrapping_mul(1_000_003).wrapping_add(i + 1)
    }

    /// The checksum after `k` steps of an uninterrupted run.
    pub fn reference_checksum(k: u64) -> u64 {
        (0..k).fold(0, next_checksum)
    }

    /// The graph: `step` loops on itself until the state holds `steps` items.
    ///
    /// # Errors
    /// Never in practice (the graph is valid); compile errors are passed on.
    pub fn graph(steps: u64) -> Result<CompiledGraph<Tally>, CompileError> {
        let route = move |s: &Tally| {
            if (s.items.len() as u64) < steps {
                "step"
            } else {
                END
            }
        };
        StateGraph::<Tally>::new()
            .add_node("step", |s: Arc<Tally>, _c: NodeContext| async move {
                let i = s.items.len() as u64;
                Ok::<_, BoxError>(
                    Tally::update()
                        .items(vec![i])
                        .checksum(next_checksum(s.checksum, i)),
                )
            })
            .add_conditional_edges(START, route, ["step", END])
            .add_conditional_edges("step", route, ["step", END])
            .compile()
    }

    /// The number of items if `t` is a prefix of the uninterrupted run (items `0..k` with the
    /// checksum after `k`), else what is wrong, prefixed with `what`.
    ///
    /// # Errors
    /// A description of the torn or wrong state.
    pub fn check(t: &Tally, what: &str) -> Result<u64, String> {
        let k = t.items.len() as u64;
        if !t.items.iter().copied().eq(0..k) {
            return Err(format!("{what}: items are not 0..{k}"));
        }
        if t.checksum != reference_checksum(k) {
            return Err(format!("{what}: checksum does not match {k} items"));
        }
        Ok(k)
    }
}
