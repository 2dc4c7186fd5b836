//! The engine's internal node interface: what a task produced, and the adapter that runs a
//! user's [`Node`] behind it.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::command::{Goto, ParentCommand};
use crate::node::{Node, NodeContext, NodeResult};
use crate::State;

/// What a task produced, before it is applied.
pub(crate) struct TaskOutput<S: State> {
    pub(crate) updates: Vec<S::Update>,
    pub(crate) goto: Vec<Goto>,
    pub(crate) parents: Vec<ParentCommand>,
    /// The failure an error handler took over, when this is the handler's output: the
    /// node's own edges do not fire, and the step's checkpoint records it.
    pub(crate) handled: Option<Box<crate::HandledFailure>>,
}

impl<S: State> Default for TaskOutput<S> {
    fn default() -> Self {
        TaskOutput {
            updates: Vec::new(),
            goto: Vec::new(),
            parents: Vec::new(),
            handled: None,
        }
    }
}

/// The engine's internal node interface.
pub(crate) trait NodeRun<S: State>: Send + Sync + 'static {
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> BoxFuture<'static, NodeResult<S>>;
}

/// A user's [`Node`], run as a [`NodeRun`]: its command split into the task's output.
pub(super) struct UserNode<N>(pub(super) N);

impl<S: State, N: Node<S>> NodeRun<S> for UserNode<N> {
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> BoxFuture<'static, NodeResult<S>> {
        let fut = self.0.run(state, ctx);
        Box::pin(async move { NodeResult::from_user(fut.await) })
    }
}
