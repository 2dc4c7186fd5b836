//! The runtime context: a typed value given to one run ([`RunConfig::context`](crate::RunConfig::context)), read by its
//! nodes, routers, tools and subgraphs, and never checkpointed (LangGraph's `context=` and
//! `Runtime.context`).
//!
//! The state is what a run computes and stores; the context is what it is given and does not
//! keep: the user it runs for, a database handle, a feature flag. Every graph level of the run
//! sees the same value (a subgraph inherits its parent's); a run resumed later sees the
//! context its own config gives, or none.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph::prelude::*;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct S { greeting: String }
//!
//! struct User { name: String }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let graph = StateGraph::<S>::new()
//!     .add_node("greet", |_s: Arc<S>, cx: NodeContext| async move {
//!         let user = cx.context::<User>()?;
//!         Ok::<_, BoxError>(S::update().greeting(format!("Hello {}", user.name)))
//!     })
//!     .add_edge(START, "greet")
//!     .add_edge("greet", END)
//!     .compile()?;
//! let config = RunConfig::new().context(User { name: "Ada".into() });
//! let out = graph.invoke(S::update(), &config).await?;
//! assert_eq!(out.state.greeting, "Hello Ada");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::NodeContext;

/// A run's context value with its type erased: what [`RunConfig::context_value`] takes and
/// [`ContextSchema::decode`] makes. Cheap to clone (one shared pointer).
///
/// [`RunConfig::context_value`]: crate::RunConfig::context_value
#[derive(Clone)]
pub struct ContextValue {
    value: Arc<dyn Any + Send + Sync>,
    type_name: &'static str,
}

impl ContextValue {
    /// Wrap `value`.
    ///
    /// ```
    /// let v = stategraph::ContextValue::new(42u32);
    /// assert_eq!(v.get::<u32>().ok(), Some(&42));
    /// ```
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        ContextValue {
            value: Arc::new(value),
            type_name: std::any::type_name::<T>(),
        }
    }

    /// The Rust type of the value, as [`std::any::type_name`] spells it.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The value as a `T`.
    ///
    /// # Errors
    /// [`ContextError::WrongType`] when it is not a `T`.
    pub fn get<T: Any>(&self) -> Result<&T, ContextError> {
        self.value
            .downcast_ref::<T>()
            .ok_or_else(|| ContextError::WrongType {
                expected: std::any::type_name::<T>(),
                found: self.type_name,
            })
    }
}

impl fmt::Debug for ContextValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextValue")
            .field("type", &self.type_name)
            .finish_non_exhaustive()
    }
}

/// Why a run's context could not be read or made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// The run was given no context.
    #[error("the run has no context (expected a {expected}; give one with RunConfig::context)")]
    Missing {
        /// The type the reader asked for.
        expected: &'static str,
    },
    /// The run's context is of another type.
    #[error("the run's context is a {found}, not a {expected}")]
    WrongType {
        /// The type the reader asked for.
        expected: &'static str,
        /// The type the run was given.
        found: &'static str,
    },
    /// A JSON context does not decode as the graph's context type.
    #[error("context does not fit {expected}: {reason}")]
    Invalid {
        /// The graph's context type.
        expected: &'static str,
        /// What serde said was wrong.
        reason: String,
    },
}

/// Read `T` out of a run's context slot.
pub(crate) fn read<T: Any>(slot: Option<&ContextValue>) -> Result<&T, ContextError> {
    match slot {
        Some(v) => v.get::<T>(),
        None => Err(ContextError::Missing {
            expected: std::any::type_name::<T>(),
        }),
    }
}

type Decoder = fn(&serde_json::Value) -> Result<ContextValue, ContextError>;

/// The context type a graph declares ([`StateGraph::context_schema`]), so that a
/// front end that gets a run's context as JSON (the server's `context` field) can decode it.
/// A graph that declares none is given the JSON value itself, as a [`serde_json::Value`].
///
/// [`StateGraph::context_schema`]: crate::StateGraph::context_schema
#[derive(Clone, Copy)]
pub struct ContextSchema {
    type_name: &'static str,
    decode: Decoder,
}

impl fmt::Debug for ContextSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextSchema")
            .field("type", &self.type_name)
            .finish()
    }
}

impl ContextSchema {
    /// The schema of context type `C`, decoded from JSON by serde.
    pub fn of<C: DeserializeOwned + Send + Sync + 'static>() -> Self {
        ContextSchema {
            type_name: std::any::type_name::<C>(),
            decode: |json| {
                C::deserialize(json)
                    .map(ContextValue::new)
                    .map_err(|e| ContextError::Invalid {
                        expected: std::any::type_name::<C>(),
                        reason: e.to_string(),
                    })
            },
        }
    }

    /// The declared type's name.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Decode `json` as the declared type.
    ///
    /// ```
    /// use stategraph::{ContextError, ContextSchema};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Ctx { user: String }
    ///
    /// let schema = ContextSchema::of::<Ctx>();
    /// let v = schema.decode(&serde_json::json!({"user": "ada"}))?;
    /// assert_eq!(v.get::<Ctx>()?.user, "ada");
    /// let bad = schema.decode(&serde_json::json!({"user": 7})).unwrap_err();
    /// assert!(matches!(bad, ContextError::Invalid { .. }));
    /// # Ok::<(), ContextError>(())
    /// ```
    ///
    /// # Errors
    /// [`ContextError::Invalid`] with serde's reason.
    pub fn decode(&self, json: &serde_json::Value) -> Result<ContextValue, ContextError> {
        (self.decode)(json)
    }
}

impl NodeContext {
    /// The run's context ([`RunConfig::context`](crate::RunConfig::context)) as a `T`: the
    /// same value for every task of the run, at every subgraph level.
    ///
    /// # Errors
    /// [`ContextError::Missing`] when the run was given none; [`ContextError::WrongType`]
    /// when it is not a `T` (both name `T`).
    pub fn context<T: Any>(&self) -> Result<&T, ContextError> {
        read(self.inner.run.context.as_ref())
    }

    /// The run's context as given, type-erased: for a run this task starts itself that
    /// should see it too ([`RunConfig::inherit_context`](crate::RunConfig::inherit_context)).
    pub fn context_value(&self) -> Option<&ContextValue> {
        self.inner.run.context.as_ref()
    }
}

impl crate::RunConfig {
    /// Give the run this context: its nodes read it with [`NodeContext::context`], its
    /// routers with [`RouteContext::context`], its subgraphs inherit it. It is not stored in
    /// any checkpoint: a later run on the thread sees only its own config's context.
    pub fn context<T: Any + Send + Sync>(self, value: T) -> Self {
        self.context_value(ContextValue::new(value))
    }

    /// [`RunConfig::context`](crate::RunConfig::context) with a value already type-erased
    /// (as [`ContextSchema::decode`] makes it).
    pub fn context_value(mut self, value: ContextValue) -> Self {
        self.context = Some(value);
        self
    }

    /// Give the run the context of the run `cx`'s task belongs to, unless this config already
    /// has one: how a run a node starts itself (a subagent's) sees its parent's context, as a
    /// graph invoked inside a LangGraph node does.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use stategraph::prelude::*;
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct S { user: String }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let inner = StateGraph::<S>::new()
    ///     .add_node("who", |_s: Arc<S>, cx: NodeContext| async move {
    ///         Ok::<_, BoxError>(S::update().user(cx.context::<String>()?.clone()))
    ///     })
    ///     .add_edge(START, "who")
    ///     .add_edge("who", END)
    ///     .compile()?;
    /// let outer = StateGraph::<S>::new()
    ///     .add_node("run_inner", move |_s: Arc<S>, cx: NodeContext| {
    ///         let inner = inner.clone();
    ///         async move {
    ///             let config = RunConfig::new().inherit_context(&cx);
    ///             let out = inner.invoke(S::update(), &config).await?;
    ///             Ok::<_, BoxError>(S::update().user(out.state.user.clone()))
    ///         }
    ///     })
    ///     .add_edge(START, "run_inner")
    ///     .add_edge("run_inner", END)
    ///     .compile()?;
    /// let config = RunConfig::new().context("ada".to_owned());
    /// assert_eq!(outer.invoke(S::update(), &config).await?.state.user, "ada");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn inherit_context(mut self, cx: &NodeContext) -> Self {
        if self.context.is_none() {
            self.context = cx.context_value().cloned();
        }
        self
    }

    /// The context this config gives its runs, if any.
    pub fn given_context(&self) -> Option<&ContextValue> {
        self.context.as_ref()
    }
}

/// What a conditional edge's router sees besides the state
/// ([`StateGraph::add_conditional_edges_with_context`]): the run's context and the step
/// counters of the step its node ran in.
///
/// [`StateGraph::add_conditional_edges_with_context`]: crate::StateGraph::add_conditional_edges_with_context
#[derive(Clone, Copy)]
pub struct RouteContext<'a> {
    pub(crate) context: Option<&'a ContextValue>,
    pub(crate) steps: crate::managed::Steps,
}

impl fmt::Debug for RouteContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteContext")
            .field("context", &self.context)
            .field("steps", &self.steps)
            .finish()
    }
}

impl<'a> RouteContext<'a> {
    /// The run's context as a `T`, as [`NodeContext::context`] reads it.
    ///
    /// # Errors
    /// [`ContextError::Missing`] or [`ContextError::WrongType`], naming `T`.
    pub fn context<T: Any>(&self) -> Result<&'a T, ContextError> {
        read(self.context)
    }
}

impl<S: crate::State> crate::CompiledGraph<S> {
    /// [`CompiledGraph::replay`](crate::CompiledGraph::replay) with the replayed runs given
    /// `context`: no checkpoint holds the recorded runs' context, so a graph whose nodes read
    /// one is replayed with the context the caller gives (the recorded runs' own, to replay
    /// them faithfully).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::prelude::*;
    /// use stategraph::ContextValue;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { user: String }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("who", |_s: Arc<S>, cx: NodeContext| async move {
    ///         Ok::<_, BoxError>(S::update().user(cx.context::<String>()?.clone()))
    ///     })
    ///     .add_edge(START, "who")
    ///     .add_edge("who", END)
    ///     .compile()?
    ///     .with_checkpointer(Arc::new(MemorySaver::new()));
    /// let config = RunConfig::new().thread("t").context("ada".to_owned());
    /// graph.invoke(S::update(), &config).await?;
    /// let first = graph.get_state_history("t", Default::default()).await?.last().unwrap().checkpoint.id;
    /// let same = ContextValue::new("ada".to_owned());
    /// let report = graph.replay_with_context("t", first, None, same).await?;
    /// assert!(report.divergence.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`CompiledGraph::replay`](crate::CompiledGraph::replay).
    pub async fn replay_with_context(
        &self,
        thread: &str,
        from: stategraph_checkpoints::CheckpointId,
        to: Option<stategraph_checkpoints::CheckpointId>,
        context: ContextValue,
    ) -> Result<crate::replay::ReplayReport, crate::RunError> {
        self.replay_in(thread, from, to, Some(context)).await
    }
}
