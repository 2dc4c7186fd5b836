//! Running one task: its context, its attempts (retry, timeout, a panic turned into a
//! failure), its error handler, and the result the step sees.

use std::sync::{Arc, Mutex};

use super::answers::{self, TaskAnswers};
use super::execute::TaskResult;
use super::handler;
use super::plan::PlannedTask;
use super::superstep::RunLoop;
use crate::graph::{NodeRun, TaskOutput};
use crate::node::{CheckpointScope, NodeContext, NodeResult, ResumeCursor, TaskInfo};
use crate::timeout::{Fired, NodeTimeout};
use crate::{BoxError, Interrupt, NodeError, RunError, State, TimeoutPolicy};
use stategraph_checkpoints::sync::Unpoisoned;

impl<S: State> RunLoop<S> {
    /// What task `t` sees of its run.
    fn task_ctx(
        &self,
        t: &PlannedTask,
        resume: Vec<serde_json::Value>,
        resumed: bool,
        idle_limit: bool,
    ) -> NodeContext {
        NodeContext {
            inner: Arc::new(TaskInfo {
                node: self.node_name(t),
                task: t.id,
                step: self.step,
                stop: self.stop,
                ns: self.level.ns.clone(),
                thread: self.shared.thread.clone(),
                arg: t.arg.clone(),
                sink: self.shared.sink.clone(),
                cursor: Mutex::new(ResumeCursor { resume, calls: 0 }),
                message_ids: Default::default(),
                resumed,
                resume: self.shared.resume.clone(),
                cancel: self.shared.cancel.clone(),
                run: self.shared.clone(),
                scope: CheckpointScope {
                    ns: self.level.ns.clone(),
                    saver: self.level.saver.clone(),
                    ephemeral: self.level.ephemeral,
                    store: self.level.store.clone(),
                },
                heartbeat: idle_limit.then(|| Box::new(crate::timeout::Heartbeat::new())),
                subtasks: self.subtask_link(t.id, t.node).map(Box::new),
            }),
        }
    }

    /// The future of task `t`: its attempts (retried as its policy says) until one
    /// succeeds, pauses, or fails for good.
    pub(super) fn task_future(
        &self,
        t: &PlannedTask,
        resume: Vec<serde_json::Value>,
        resumed: bool,
    ) -> impl std::future::Future<Output = TaskResult<S>> + Send + 'static {
        let node_ix = t.node.unwrap_or(0);
        let idle_limit = self.g.nodes[node_ix]
            .options
            .timeout
            .is_some_and(|p| p.idle_timeout.is_some());
        // The future holds the graph, not copies of the node's run, options and name.
        let task = Attempts {
            g: self.g.clone(),
            node_ix,
            state: self.state.clone(),
            ctx: self.task_ctx(t, resume, resumed, idle_limit),
            shared: self.shared.clone(),
        };
        async move {
            // The first attempt inline; a failure's retries and handler are boxed, so that
            // the rare path keeps no room in every task's future.
            let rest = match task.attempt().await {
                Ok(out) => return task.done(out),
                Err(end) => Box::pin(task.after_failure(end)),
            };
            rest.await
        }
    }
}

/// One task's attempts: the graph (for its node, options and name), the state it reads and
/// its context.
struct Attempts<S: State> {
    g: Arc<crate::graph::GraphInner<S>>,
    node_ix: usize,
    state: Arc<S>,
    ctx: NodeContext,
    shared: Arc<crate::run::RunShared>,
}

impl<S: State> Attempts<S> {
    /// The task's node.
    fn node(&self) -> &crate::graph::CompiledNode<S> {
        &self.g.nodes[self.node_ix]
    }

    /// One attempt, from a fresh count of the task's interrupt and subtask calls.
    async fn attempt(&self) -> Result<TaskOutput<S>, AttemptFailure> {
        self.ctx.inner.cursor.lock().unpoisoned().calls = 0;
        if let Some(link) = &self.ctx.inner.subtasks {
            link.calls.store(0, std::sync::atomic::Ordering::SeqCst);
        }
        let node = self.node();
        run_attempt(
            &node.run,
            &self.state,
            &self.ctx,
            node.options.timeout.as_ref(),
        )
        .await
    }

    /// A task that succeeded: the resume values it consumed are noted for its step's
    /// checkpoint.
    fn done(&self, out: TaskOutput<S>) -> TaskResult<S> {
        let resumes = self.consumed();
        if !resumes.is_empty() {
            let entry = TaskAnswers {
                node: self.node().name.to_string(),
                interrupt: self.ctx.interrupt_id(),
                values: resumes,
            };
            answers::note(&mut self.shared.answers.lock().unpoisoned(), entry);
        }
        TaskResult::Done(out)
    }

    /// The resume values the task consumed.
    fn consumed(&self) -> Vec<serde_json::Value> {
        self.ctx.inner.cursor.lock().unpoisoned().resume.clone()
    }

    /// After the first attempt ended in `end`: retried as the node's policy says until an
    /// attempt succeeds, pauses, or fails for good, and then handled if the node has a
    /// handler.
    async fn after_failure(&self, mut end: AttemptFailure) -> TaskResult<S> {
        let mut attempt = 1u32;
        loop {
            let failure =
                match end.error_or_pause(&self.node().name, self.ctx.step(), self.ctx.task_id()) {
                    Ok(error) => error,
                    Err(interrupts) => {
                        return TaskResult::Interrupted {
                            interrupts,
                            resumes: self.consumed(),
                        }
                    }
                };
            // Control flow (a child's interrupt errors, a cancellation) is final and never
            // handled; anything else may be retried, then handled.
            let failure_only = !handler::is_control_flow(&failure);
            match &self.node().options.retry {
                Some(p) if failure_only && p.should_retry(attempt, &failure_box(&failure)) => {
                    drop(failure);
                    tokio::time::sleep(p.wait(attempt)).await;
                    attempt += 1;
                }
                _ => return self.fail(failure, failure_only, attempt).await,
            }
            match self.attempt().await {
                Ok(out) => return self.done(out),
                Err(next) => end = next,
            }
        }
    }

    /// The task failed for good after `attempts` attempts: handled if the node has a handler
    /// and `failure` is no control flow.
    async fn fail(&self, failure: RunError, failure_only: bool, attempts: u32) -> TaskResult<S> {
        match &self.node().options.error_handler {
            Some(h) if failure_only && !self.ctx.is_cancelled() => {
                let error = NodeError {
                    node: self.node().name.to_string(),
                    step: self.ctx.step(),
                    task: self.ctx.task_id(),
                    attempts,
                    source: Arc::new(failure),
                };
                handler::handle(h, self.state.clone(), &self.ctx, error).await
            }
            _ => TaskResult::Failed {
                error: failure,
                resumes: self.consumed(),
            },
        }
    }
}

/// How one attempt of a task ended, when it did not succeed.
enum AttemptFailure {
    Interrupted(Vec<Interrupt>),
    /// A subgraph's run error, passed through unchanged.
    Child(RunError),
    Failed(BoxError),
    TimedOut(Fired),
}

impl AttemptFailure {
    /// The run error of a failed attempt of task `task` of node `node` at `step`, or the
    /// interrupts of a paused one.
    fn error_or_pause(
        self,
        node: &str,
        step: i64,
        task: stategraph_checkpoints::TaskId,
    ) -> Result<RunError, Vec<Interrupt>> {
        Ok(match self {
            AttemptFailure::Interrupted(list) => return Err(list),
            AttemptFailure::Child(e) => e,
            AttemptFailure::Failed(source) => RunError::Node {
                node: node.to_owned(),
                step,
                task,
                source,
            },
            AttemptFailure::TimedOut(fired) => RunError::Timeout {
                node: node.to_owned(),
                step,
                limit: fired.limit,
                after: fired.after,
                elapsed: fired.elapsed,
            },
        })
    }
}

/// Run one attempt of a node, turning a panic into a failure of the task.
async fn run_attempt<S: State>(
    node: &Arc<dyn NodeRun<S>>,
    state: &Arc<S>,
    ctx: &NodeContext,
    timeout: Option<&TimeoutPolicy>,
) -> Result<TaskOutput<S>, AttemptFailure> {
    use futures::FutureExt;
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        node.run(state.clone(), ctx.clone())
    }));
    let fut = match started {
        Ok(fut) => fut,
        Err(panic) => return Err(AttemptFailure::Failed(panic_message(panic).into())),
    };
    let guarded = std::panic::AssertUnwindSafe(fut).catch_unwind();
    let result = match timeout {
        Some(policy) => {
            let clock = ctx.inner.heartbeat.as_deref();
            // Boxed: an untimed task's future keeps no room for the watchdog.
            match Box::pin(crate::timeout::run_timed(guarded, policy, clock)).await {
                Ok(r) => r,
                Err(fired) => return Err(AttemptFailure::TimedOut(fired)),
            }
        }
        None => guarded.await,
    };
    match result {
        Ok(NodeResult::Output(out)) => Ok(out),
        Ok(NodeResult::Interrupted(list)) => Err(AttemptFailure::Interrupted(list)),
        Ok(NodeResult::Child(e)) => Err(AttemptFailure::Child(e)),
        Ok(NodeResult::Failed(e)) => Err(AttemptFailure::Failed(e)),
        Err(panic) => Err(AttemptFailure::Failed(panic_message(panic).into())),
    }
}

pub(super) fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string payload".to_owned());
    format!("node panicked: {text}")
}

/// A run error as the boxed error a retry predicate sees (a timeout as a [`NodeTimeout`], so
/// that a predicate can tell it by downcasting).
fn failure_box(e: &RunError) -> BoxError {
    match e {
        RunError::Node { source, .. } => source.to_string().into(),
        RunError::Timeout {
            node,
            limit,
            after,
            elapsed,
            ..
        } => Box::new(NodeTimeout {
            node: node.clone(),
            limit: *limit,
            after: *after,
            elapsed: *elapsed,
        }),
        other => other.to_string().into(),
    }
}
