//! What a node returns: [`Command`], [`Goto`], [`SendTo`], and [`Resume`] for interrupts.

use std::any::Any;
use std::fmt;

use serde::Serialize;

use crate::State;

/// The name of the virtual end node: routing to it schedules nothing.
pub const END: &str = "__end__";
/// The name of the virtual start node: the source of the entry edges.
pub const START: &str = "__start__";

/// A task for the next step: run `node` with its own input `arg` (map-reduce fan-out).
///
/// The target node reads the argument with [`NodeContext::arg`](crate::NodeContext::arg).
///
/// ```
/// use stategraph::SendTo;
/// let s = SendTo::new("worker", 7_u32);
/// assert_eq!(s.node(), "worker");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SendTo {
    pub(crate) node: String,
    pub(crate) arg: Result<serde_json::Value, String>,
}

impl SendTo {
    /// A `SendTo` of `arg` to `node`. The argument is kept as JSON so that it can be
    /// checkpointed; a value that cannot be serialized fails the step with
    /// [`RunError::SendArg`](crate::RunError::SendArg).
    pub fn new(node: impl Into<String>, arg: impl Serialize) -> Self {
        SendTo {
            node: node.into(),
            arg: serde_json::to_value(arg).map_err(|e| e.to_string()),
        }
    }

    /// The target node.
    pub fn node(&self) -> &str {
        &self.node
    }
}

/// Where a command routes: a node by name (or [`END`]) or a [`SendTo`].
#[derive(Debug, Clone, PartialEq)]
pub enum Goto {
    /// Trigger a node in the next step.
    Node(String),
    /// Run a node with its own input in the next step.
    Send(SendTo),
}

impl From<&str> for Goto {
    fn from(value: &str) -> Self {
        Goto::Node(value.to_owned())
    }
}

impl From<String> for Goto {
    fn from(value: String) -> Self {
        Goto::Node(value)
    }
}

impl From<SendTo> for Goto {
    fn from(value: SendTo) -> Self {
        Goto::Send(value)
    }
}

/// A list of [`Goto`]s: what a router returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Route(pub Vec<Goto>);

impl<T: Into<Goto>> From<T> for Route {
    fn from(value: T) -> Self {
        Route(vec![value.into()])
    }
}

impl<T: Into<Goto>> From<Vec<T>> for Route {
    fn from(value: Vec<T>) -> Self {
        Route(value.into_iter().map(Into::into).collect())
    }
}

pub use stategraph_checkpoints::Resume;

/// An update sent to the enclosing graph (see [`Command::to_parent`]).
pub struct ParentCommand {
    pub(crate) command: Box<dyn Any + Send + Sync>,
    pub(crate) type_name: &'static str,
}

impl fmt::Debug for ParentCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ParentCommand<{}>", self.type_name)
    }
}

/// What a node or a tool returns: a state update plus routing.
///
/// - `update`: a partial write of the state, merged through the reducers;
/// - `goto`: nodes (or [`SendTo`]s) to run next step, in addition to the node's edges;
/// - `to_parent`: instead of this graph, apply a command in the enclosing graph, as if the
///   subgraph's node there had returned it;
/// - `resume`: as run input, the answer to pending interrupts.
///
/// A state's generated update type converts into a `Command`, so a node can return either.
///
/// ```
/// use stategraph::{Command, SendTo, State};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Job { #[reduce(append)] results: Vec<u32>, total: u32 }
///
/// let cmd: Command<Job> = Command::new()
///     .update(Job::update().total(0))
///     .goto("reduce")
///     .goto(SendTo::new("worker", 3));
/// assert_eq!(cmd.gotos().len(), 2);
/// ```
pub struct Command<S: State> {
    pub(crate) update: Option<S::Update>,
    pub(crate) goto: Vec<Goto>,
    pub(crate) parent: Option<ParentCommand>,
    pub(crate) resume: Option<Resume>,
}

impl<S: State> fmt::Debug for Command<S>
where
    S::Update: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("update", &self.update)
            .field("goto", &self.goto)
            .field("parent", &self.parent)
            .field("resume", &self.resume)
            .finish()
    }
}

impl<S: State> Default for Command<S> {
    fn default() -> Self {
        Command {
            update: None,
            goto: Vec::new(),
            parent: None,
            resume: None,
        }
    }
}

impl<S: State> Command<S> {
    /// An empty command: no update, no routing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A command that resumes pending interrupts (as run input).
    pub fn resume(resume: Resume) -> Self {
        Command {
            resume: Some(resume),
            ..Self::default()
        }
    }

    /// Set the state update.
    pub fn update(mut self, update: S::Update) -> Self {
        self.update = Some(update);
        self
    }

    /// Add a routing target.
    pub fn goto(mut self, goto: impl Into<Goto>) -> Self {
        self.goto.push(goto.into());
        self
    }

    /// Add several routing targets.
    pub fn goto_all<G: Into<Goto>>(mut self, gotos: impl IntoIterator<Item = G>) -> Self {
        self.goto.extend(gotos.into_iter().map(Into::into));
        self
    }

    /// A command applied in the enclosing graph (whose state type is `P`) as if the subgraph's
    /// node there had returned `command`. At the root it fails with
    /// [`RunError::ParentCommand`](crate::RunError::ParentCommand).
    pub fn to_parent<P: State>(command: Command<P>) -> Self {
        Command {
            parent: Some(ParentCommand {
                command: Box::new(command),
                type_name: std::any::type_name::<P>(),
            }),
            ..Self::default()
        }
    }

    /// The update, if any.
    pub fn update_ref(&self) -> Option<&S::Update> {
        self.update.as_ref()
    }

    /// The command this one carries for the enclosing graph ([`Command::to_parent`]), if that
    /// graph's state is `P`.
    ///
    /// ```
    /// use stategraph::{Command, State};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Outer { n: i64 }
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Inner { m: i64 }
    ///
    /// let cmd = Command::<Inner>::to_parent(Command::<Outer>::new().update(Outer::update().n(1)));
    /// assert_eq!(cmd.parent_ref::<Outer>().and_then(|c| c.update_ref()).and_then(|u| u.n), Some(1));
    /// assert!(cmd.parent_ref::<Inner>().is_none());
    /// ```
    pub fn parent_ref<P: State>(&self) -> Option<&Command<P>> {
        self.parent
            .as_ref()
            .and_then(|p| p.command.downcast_ref::<Command<P>>())
    }

    /// The routing targets.
    pub fn gotos(&self) -> &[Goto] {
        &self.goto
    }

    /// Whether the command carries a command for the parent graph
    /// ([`Command::to_parent`]).
    ///
    /// ```
    /// use stategraph::{Command, State};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { n: i64 }
    ///
    /// assert!(Command::<S>::to_parent(Command::<S>::new().goto("x")).has_parent());
    /// assert!(!Command::<S>::new().goto("x").has_parent());
    /// ```
    pub fn has_parent(&self) -> bool {
        self.parent.is_some()
    }
}

/// A pending interrupt: the value a node paused with, and the id to resume it by.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Interrupt {
    /// The interrupt's id (stable across re-executions of the task).
    pub id: String,
    /// The value the node passed to `interrupt`.
    pub value: serde_json::Value,
    /// The node that paused.
    pub node: String,
}

/// The signal a node's `interrupt` call returns while no answer exists yet.
///
/// Propagate it with `?`; the engine recognises it and pauses the run instead of failing it.
/// Error-handling code must not swallow it.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupted {
    /// The interrupts raised (several when a subgraph's parallel tasks paused).
    pub interrupts: Vec<Interrupt>,
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interrupted ({} pending)", self.interrupts.len())
    }
}

impl std::error::Error for Interrupted {}
