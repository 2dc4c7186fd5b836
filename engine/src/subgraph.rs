//! Subgraphs: a compiled graph running as a node of another graph.

use std::fmt;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use stategraph_checkpoints::WriteKind;

use crate::graph::{CompiledGraph, NodeRun, TaskOutput};
use crate::run::{Input, Level, LevelEnd, Loop};
use crate::{BoxError, Command, Interrupted, NodeContext, RunError, State};

/// How a subgraph's steps are checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checkpointing {
    /// Use the parent's checkpointer, in a namespace scoped to the parent task
    /// (`node:task_id`): each parent task starts a fresh child history, and an interrupt
    /// inside the child resumes where it stopped.
    #[default]
    Inherit,
    /// Use the parent's checkpointer in a namespace without task id (`node`): the child's
    /// state carries over from one parent invocation to the next on the same thread.
    Own,
    /// No checkpoints at all (ephemeral, as for subagents): nothing is written to any saver,
    /// and an interrupt inside it is an error.
    Disabled,
}

type MapFn<A, B> = Arc<dyn Fn(&A) -> B + Send + Sync>;

pub(crate) struct SubgraphNode<S: State, C: State> {
    graph: CompiledGraph<C>,
    mode: Checkpointing,
    input: MapFn<S, C::Update>,
    output: MapFn<C, S::Update>,
}

impl<S: State, C: State> SubgraphNode<S, C> {
    pub(crate) fn new(
        graph: CompiledGraph<C>,
        mode: Checkpointing,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        SubgraphNode {
            graph,
            mode,
            input: Arc::new(input),
            output: Arc::new(output),
        }
    }
}

/// A child run's error, carried through the parent task unchanged.
#[derive(Debug)]
pub(crate) struct ChildError(Mutex<Option<RunError>>);

impl ChildError {
    pub(crate) fn boxed(e: RunError) -> BoxError {
        Box::new(ChildError(Mutex::new(Some(e))))
    }

    pub(crate) fn take(&self) -> RunError {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or(RunError::Cancelled { step: -1 })
    }
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(e) => write!(f, "{e}"),
            None => f.write_str("subgraph error (already reported)"),
        }
    }
}

impl std::error::Error for ChildError {}

impl<S: State, C: State> NodeRun<S> for SubgraphNode<S, C> {
    fn run(
        &self,
        state: Arc<S>,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<TaskOutput<S>, BoxError>> {
        let graph = self.graph.clone();
        let mode = self.mode;
        let input = self.input.clone();
        let output = self.output.clone();
        Box::pin(async move {
            let info = &ctx.inner.level;
            let node = ctx.node().to_string();
            let (ns, saver, ephemeral) = match mode {
                Checkpointing::Inherit => (
                    info.ns.child(&format!("{node}:{}", ctx.task_id())),
                    info.saver.clone(),
                    info.ephemeral,
                ),
                Checkpointing::Own => (info.ns.child(&node), info.saver.clone(), info.ephemeral),
                Checkpointing::Disabled => (
                    info.ns.child(&format!("{node}:{}", ctx.task_id())),
                    None,
                    true,
                ),
            };
            let shared = ctx.inner.run.clone();
            // Re-enter a child that stopped inside (interrupt, failure, crash) instead of
            // starting it over. Under `Inherit` the namespace belongs to this very task, so an
            // unfinished child can only be an earlier attempt of it; under `Own` the history
            // is shared across invocations, so only a task that paused or failed before
            // re-enters.
            let may_resume = match mode {
                Checkpointing::Inherit => true,
                Checkpointing::Own => ctx.inner.resumed,
                Checkpointing::Disabled => false,
            };
            let mut resume_child = false;
            if let (Some(saver), Some(thread), true) = (&saver, &shared.thread, may_resume) {
                if let Some(head) = saver
                    .get(thread, &ns, None)
                    .await
                    .map_err(|e| ChildError::boxed(e.into()))?
                {
                    let unfinished = !head.checkpoint.control.branches.is_empty()
                        || !head.checkpoint.control.sends.is_empty();
                    let paused = head.pending.iter().any(|w| {
                        matches!(w.kind, WriteKind::Interrupt { .. } | WriteKind::Error(_))
                    });
                    resume_child = unfinished || paused;
                }
            }
            let child_input = if resume_child {
                Input::Continue
            } else {
                Input::Update(input(&state))
            };
            let level = Level {
                ns,
                saver,
                ephemeral,
                is_root: false,
            };
            let lp = Loop::start(&graph, shared, level, child_input, None)
                .await
                .map_err(ChildError::boxed)?;
            match lp.run().await.map_err(ChildError::boxed)? {
                LevelEnd::Done(outcome) if outcome.is_interrupted() => Err(Box::new(Interrupted {
                    interrupts: outcome.interrupts,
                })
                    as BoxError),
                LevelEnd::Done(outcome) => Ok(TaskOutput {
                    updates: vec![output(&outcome.state)],
                    goto: Vec::new(),
                    parents: Vec::new(),
                }),
                LevelEnd::Parent(cmds) => {
                    let mut out = TaskOutput::default();
                    for pc in cmds {
                        let type_name = pc.type_name;
                        let cmd = pc.command.downcast::<Command<S>>().map_err(|_| {
                            ChildError::boxed(RunError::ParentCommand {
                                node: node.clone(),
                                reason: format!(
                                    "its command is for state {type_name}, and the parent's state is {}",
                                    std::any::type_name::<S>()
                                ),
                            })
                        })?;
                        let Command {
                            update,
                            goto,
                            parent,
                            ..
                        } = *cmd;
                        out.updates.extend(update);
                        out.goto.extend(goto);
                        out.parents.extend(parent);
                    }
                    Ok(out)
                }
            }
        })
    }
}
