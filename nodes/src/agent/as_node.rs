//! An assembled agent as a node of any graph: [`Agent::as_node`].

use std::sync::Arc;

use futures::future::BoxFuture;
use stategraph::checkpoints::RunId;
use stategraph::{
    BoxError, Checkpointing, ChildEnd, Command, CompiledGraph, Interrupted, Node, NodeContext,
    RunConfig, RunError, State,
};

use super::node::AgentCore;
use super::run::RunScope;
use super::{Agent, AgentRunError};
use crate::state::{ThreadState, ThreadStateUpdate};

type InputFn<P> = dyn Fn(&P) -> ThreadStateUpdate + Send + Sync;
type OutputFn<P> = dyn Fn(&ThreadState) -> <P as State>::Update + Send + Sync;

/// An [`Agent`] as a node of a graph over `P` (build it with [`Agent::as_node`]).
///
/// ```
/// use stategraph::{StateGraph, END, START};
/// use stategraph_nodes::prelude::*;
/// use stategraph_nodes::AgentNode;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let agent = AgentBuilder::new(ScriptedModel::new("m", Vec::<AiMessage>::new()))
///     .assemble(RunContext::default()).await?;
/// // Over the agent's own state type, the mappings can be the identity.
/// let node: AgentNode<ThreadState> = agent.as_node(
///     |s: &ThreadState| ThreadState::update().messages(s.messages.to_vec().into()),
///     |s: &ThreadState| ThreadState::update().title(s.title.clone()),
/// );
/// let graph = StateGraph::new().add_node("agent", node).add_edge(START, "agent").add_edge("agent", END);
/// assert!(graph.compile().is_ok());
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub struct AgentNode<P: State> {
    graph: CompiledGraph<ThreadState>,
    core: Arc<AgentCore>,
    input: Arc<InputFn<P>>,
    output: Arc<OutputFn<P>>,
}

impl<P: State> std::fmt::Debug for AgentNode<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentNode")
            .field("tools", &self.core.schemas.len())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// This agent as a node of a graph over `P`: `input` maps the parent's state to the
    /// agent's input (usually the conversation to start from), `output` maps the agent's final
    /// state to the parent's update.
    ///
    /// Each task of the node is one invocation of the agent, with everything
    /// [`Agent::invoke`] gives an invocation except the run record and receipt:
    ///
    /// - **Identity**: it runs on the parent run's thread (tools, layers, policies and the
    ///   sandbox see that thread, whatever thread the agent was assembled for), as the run
    ///   `run-<task id>` — the parent task's id, so a task resumed after an interrupt continues
    ///   the same run. The capability trace records each entry under that run and thread
    ///   ([`Agent::run_trace`], [`Agent::thread_trace`]); model calls are numbered per run.
    /// - **Checkpoints**: the agent's steps are checkpointed by the parent's checkpointer in a
    ///   namespace under the task (as [`Checkpointing::Inherit`]); an interrupt inside the
    ///   agent (a tool asking a human) pauses the parent, and resuming the parent resumes the
    ///   agent where it stopped. The agent's own checkpointer is not used.
    /// - **One at a time**, sandbox release and the delivery check as for `invoke`; a delivery
    ///   failure fails the node with the [`AgentRunError`]. Cancelling the parent cancels the
    ///   agent.
    /// - **Hand-off**: a tool returning [`Command::to_parent`] (a command over `P`) ends the
    ///   agent's run there, settled as a success whose delivery counts the artifacts that
    ///   command carries; the node returns it, so the parent applies it. Two such calls in one
    ///   step fail the node ([`RunError::ParentCommand`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::{List, State, StateGraph, END, START};
    /// use stategraph_nodes::prelude::*;
    /// use stategraph_nodes::impl_messages_state;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Report {
    ///     question: String,
    ///     answer: String,
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let model = ScriptedModel::new("m", [AiMessage::text("42")]);
    /// let agent = AgentBuilder::new(model.clone()).assemble(RunContext::default()).await?;
    /// let graph = StateGraph::<Report>::new()
    ///     .add_node("agent", agent.as_node(
    ///         |r: &Report| ThreadState::human_input(r.question.clone()),
    ///         |s: &ThreadState| Report::update().answer(s.last_ai().map(|m| m.content.clone()).unwrap_or_default()),
    ///     ))
    ///     .add_edge(START, "agent")
    ///     .add_edge("agent", END)
    ///     .compile()?;
    /// let out = graph.invoke(Report::update().question("why?".into()), &Default::default()).await?;
    /// assert_eq!(out.state.answer, "42");
    /// model.verify()?;
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    pub fn as_node<P: State>(
        &self,
        input: impl Fn(&P) -> ThreadStateUpdate + Send + Sync + 'static,
        output: impl Fn(&ThreadState) -> P::Update + Send + Sync + 'static,
    ) -> AgentNode<P> {
        AgentNode {
            graph: self.graph.clone(),
            core: Arc::clone(&self.core),
            input: Arc::new(input),
            output: Arc::new(output),
        }
    }
}

impl<P: State> Node<P> for AgentNode<P> {
    fn run(
        &self,
        state: Arc<P>,
        ctx: NodeContext,
    ) -> BoxFuture<'static, Result<Command<P>, BoxError>> {
        let graph = self.graph.clone();
        let core = Arc::clone(&self.core);
        let input = Arc::clone(&self.input);
        let output = Arc::clone(&self.output);
        Box::pin(async move {
            let mut config = RunConfig::new();
            if let Some(thread) = ctx.thread() {
                config = config.thread(thread.as_str());
            }
            let run = RunId::new(format!("run-{}", ctx.task_id()))?;
            let scope = RunScope::begin_as(&core, None, &config, Some(run)).await?;
            let result = match graph
                .run_in_task_or_parent::<P>(&ctx, Checkpointing::Inherit, || input(&state))
                .await
            {
                Ok(ChildEnd::ToParent(commands)) => {
                    scope.finish_handed().await?;
                    return one_command(commands, ctx.node());
                }
                Ok(ChildEnd::Done(outcome)) => Ok(outcome),
                Err(e) => Err(e),
            };
            match scope.finish(result).await {
                Ok(outcome) if !outcome.interrupts.is_empty() => Err(Box::new(Interrupted {
                    interrupts: outcome.interrupts,
                })
                    as BoxError),
                Ok(outcome) => Ok(Command::new().update(output(&outcome.state))),
                Err(AgentRunError::Run {
                    error: RunError::Cancelled { .. },
                    ..
                }) => {
                    // The parent's run was cancelled: end it as cancelled, not as a failed node.
                    ctx.cancel_run();
                    std::future::pending().await
                }
                Err(e) => Err(Box::new(e) as BoxError),
            }
        })
    }
}

/// The one command a tool of the agent handed to the enclosing graph, as the node's own.
fn one_command<P: State>(
    mut commands: Vec<Command<P>>,
    node: &str,
) -> Result<Command<P>, BoxError> {
    match commands.len() {
        1 => commands.pop().ok_or_else(|| "no command".into()),
        n => Err(Box::new(RunError::ParentCommand {
            node: node.to_owned(),
            reason: format!(
                "{n} tool calls of the agent sent commands to the parent graph in one step; \
                 an agent node returns one"
            ),
        })),
    }
}
