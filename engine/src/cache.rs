//! The node cache: a node given a [`CachePolicy`] returns the writes it stored for the same
//! input instead of running again.
//!
//! A policy goes on a node through [`NodeOptions::cache`](crate::NodeOptions::cache); the
//! storage goes on the compiled graph through [`CompiledGraph::with_cache`]: a
//! [`MemoryCache`], or a saver that keeps a cache table ([`SqliteSaver`] in its file,
//! `PostgresSaver` in its schema). A node with a policy in a graph without a cache simply
//! runs.
//!
//! - **The key** of a task is, by default, a digest of its input: every field of the state
//!   snapshot the step's tasks share, in its stored encoding, and the task's `Send`
//!   argument. [`CachePolicy::key`] replaces it with the digest of a string the user makes
//!   from the state and the argument. Entries live in one namespace per node, named after
//!   the graph and the node (`"<graph name>/<node>"`), so two graphs sharing one cache must
//!   have different names unless their equally named nodes are the same code.
//! - **A hit** gives the task the writes the entry holds (its updates and routing, stored in
//!   the form pending writes use) without running the node: its update is streamed with
//!   [`EventKind::Updates`]'s `cached` set, its task ends with [`TaskStatus::Cached`], and
//!   the step's checkpoint lists it in its metadata under [`CACHED_KEY`].
//! - **Stored** are the writes of a task that ran and finished: not a failure, not an
//!   interrupt, not a task that consumed an answer to an interrupt (the answer is input the
//!   key does not see), not a command for a parent graph.
//! - **Expiry**: [`CachePolicy::ttl`]; the time comes from the graph's clock
//!   ([`CompiledGraph::with_cache_clock`]), so tests move it by hand.
//! - **Replay** ([`crate::replay`]) never reads or writes the cache: it re-runs the code.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use stategraph::cache::{CachePolicy, MemoryCache};
//! use stategraph::prelude::*;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct S { x: i64, doubled: i64 }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let runs = Arc::new(AtomicUsize::new(0));
//! let counter = runs.clone();
//! let graph = StateGraph::<S>::new()
//!     .add_node_with(
//!         "double",
//!         move |s: Arc<S>, _cx: NodeContext| {
//!             counter.fetch_add(1, Ordering::SeqCst);
//!             async move { Ok::<_, BoxError>(S::update().doubled(s.x * 2)) }
//!         },
//!         NodeOptions::new().cache(CachePolicy::new()),
//!     )
//!     .add_edge(START, "double")
//!     .compile()?
//!     .with_cache(Arc::new(MemoryCache::new()));
//! for _ in 0..2 {
//!     let out = graph.invoke(S::update().x(21), &RunConfig::new()).await?;
//!     assert_eq!(out.state.doubled, 42);
//! }
//! assert_eq!(runs.load(Ordering::SeqCst), 1); // the second run was a hit
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! [`SqliteSaver`]: crate::checkpoints::SqliteSaver
//! [`EventKind::Updates`]: crate::EventKind::Updates
//! [`TaskStatus::Cached`]: crate::TaskStatus::Cached

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use stategraph_checkpoints::CheckpointError;
use stategraph_store::{Clock, SystemClock};

use crate::{CompiledGraph, State};

pub use stategraph_checkpoints::node_cache::{CacheEntry, CacheKey, MemoryCache, NodeCache};

/// The checkpoint metadata key under which a step that took tasks from the cache lists
/// them: `[{"node": …, "task": …}, …]`, in task order. A step without hits has no entry.
pub const CACHED_KEY: &str = "cached";

/// A user key function, type-erased: `None` when the state is not the one it was made for.
type KeyFn = Arc<dyn Fn(&dyn Any, Option<&serde_json::Value>) -> Option<String> + Send + Sync>;

/// A user key function and the state type it reads.
#[derive(Clone)]
pub(crate) struct UserKey {
    pub(crate) f: KeyFn,
    pub(crate) state: TypeId,
    pub(crate) state_name: &'static str,
}

/// How a node's results are cached: the key (by default a digest of the task's input) and
/// how long an entry lives (by default for ever).
///
/// ```
/// use std::time::Duration;
/// use stategraph::cache::CachePolicy;
/// # #[derive(stategraph::State, Clone, Default, Debug)]
/// # struct S { query: String, page: u32 }
/// // Entries for one query live ten minutes, whatever the other fields hold.
/// let policy = CachePolicy::new()
///     .key(|s: &S, _arg| s.query.clone())
///     .ttl(Duration::from_secs(600));
/// assert_eq!(policy.ttl_of(), Some(Duration::from_secs(600)));
/// ```
#[derive(Clone, Default)]
pub struct CachePolicy {
    pub(crate) key: Option<UserKey>,
    pub(crate) ttl: Option<Duration>,
}

impl fmt::Debug for CachePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachePolicy")
            .field("key", &self.key.as_ref().map(|k| k.state_name))
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl CachePolicy {
    /// The default policy: keyed by the task's whole input, entries never expire.
    pub fn new() -> Self {
        Self::default()
    }

    /// Key entries by the string `key` makes from the state and the task's `Send` argument
    /// (`None` for a task an edge started) instead of by the whole input. Tasks whose strings
    /// are equal share an entry. The state type must be the graph's:
    /// [`StateGraph::compile`](crate::StateGraph::compile) reports a policy made for another
    /// ([`GraphProblem::CacheKeyState`](crate::GraphProblem::CacheKeyState)).
    pub fn key<S: State>(
        mut self,
        key: impl Fn(&S, Option<&serde_json::Value>) -> String + Send + Sync + 'static,
    ) -> Self {
        let f: KeyFn =
            Arc::new(move |state: &dyn Any, arg| state.downcast_ref::<S>().map(|s| key(s, arg)));
        self.key = Some(UserKey {
            f,
            state: TypeId::of::<S>(),
            state_name: std::any::type_name::<S>(),
        });
        self
    }

    /// Entries expire `ttl` after they are stored.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// How long entries live (`None`: for ever).
    pub fn ttl_of(&self) -> Option<Duration> {
        self.ttl
    }
}

/// A graph's cache: where entries go and the clock their expiry reads.
#[derive(Clone)]
pub(crate) struct GraphCache {
    pub(crate) backend: Arc<dyn NodeCache>,
    pub(crate) clock: Arc<dyn Clock>,
}

/// Why [`CompiledGraph::clear_cache`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The graph has no cache ([`CompiledGraph::with_cache`]).
    #[error("graph {graph:?} has no cache to clear")]
    NoCache {
        /// The graph's name.
        graph: String,
    },
    /// A node name the graph does not have.
    #[error("graph {graph:?} has no node {node:?}")]
    UnknownNode {
        /// The graph's name.
        graph: String,
        /// The name given.
        node: String,
    },
    /// The cache's storage failed.
    #[error("clearing the cache of graph {graph:?}: {source}")]
    Storage {
        /// The graph's name.
        graph: String,
        /// The storage error.
        source: CheckpointError,
    },
}

/// The namespace of node `node`'s entries in graph `graph`.
pub(crate) fn namespace(graph: &str, node: &str) -> String {
    format!("{graph}/{node}")
}

impl<S: State> CompiledGraph<S> {
    /// The same graph, keeping the results of its nodes that have a [`CachePolicy`] in
    /// `cache` (expiry read from the system clock). A subgraph's nodes use the cache of the
    /// run's root graph, and the one the subgraph was compiled with only when the root has
    /// none.
    ///
    /// See [the module](crate::cache) for an example.
    pub fn with_cache(&self, cache: Arc<dyn NodeCache>) -> Self {
        self.with_cache_clock(cache, Arc::new(SystemClock))
    }

    /// [`CompiledGraph::with_cache`], with expiry read from `clock` (a
    /// [`ManualClock`](crate::store::ManualClock) in tests).
    pub fn with_cache_clock(&self, cache: Arc<dyn NodeCache>, clock: Arc<dyn Clock>) -> Self {
        let mut g = self.clone();
        g.cache = Some(GraphCache {
            backend: cache,
            clock,
        });
        g
    }

    /// The same graph without a cache: its nodes always run.
    pub fn without_cache(&self) -> Self {
        let mut g = self.clone();
        g.cache = None;
        g
    }

    /// The cache, if any.
    pub fn node_cache(&self) -> Option<&Arc<dyn NodeCache>> {
        self.cache.as_ref().map(|c| &c.backend)
    }

    /// Drop the cached entries of `nodes` (every node of the graph when `nodes` is empty);
    /// returns how many were dropped.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::cache::{CachePolicy, MemoryCache};
    /// use stategraph::prelude::*;
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct S { n: i64 }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node_with(
    ///         "inc",
    ///         |s: Arc<S>, _cx: NodeContext| async move { Ok::<_, BoxError>(S::update().n(s.n + 1)) },
    ///         NodeOptions::new().cache(CachePolicy::new()),
    ///     )
    ///     .add_edge(START, "inc")
    ///     .compile()?
    ///     .with_cache(Arc::new(MemoryCache::new()));
    /// graph.invoke(S::update(), &RunConfig::new()).await?;
    /// assert_eq!(graph.clear_cache(&["inc"]).await?, 1);
    /// assert_eq!(graph.clear_cache(&[]).await?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`CacheError::NoCache`] without a cache, [`CacheError::UnknownNode`] for a name the
    /// graph lacks (nothing is dropped then), [`CacheError::Storage`] if the cache fails.
    pub async fn clear_cache(&self, nodes: &[&str]) -> Result<usize, CacheError> {
        let graph = self.inner.name.clone();
        let Some(cache) = &self.cache else {
            return Err(CacheError::NoCache { graph });
        };
        let names: Vec<&str> = match nodes {
            [] => self.inner.nodes.iter().map(|n| &*n.name).collect(),
            given => given.to_vec(),
        };
        let mut namespaces = Vec::with_capacity(names.len());
        for node in names {
            if !self.inner.index.contains_key(node) {
                return Err(CacheError::UnknownNode {
                    graph,
                    node: node.to_owned(),
                });
            }
            namespaces.push(namespace(&graph, node));
        }
        cache
            .backend
            .clear_cached(&namespaces)
            .await
            .map_err(|source| CacheError::Storage { graph, source })
    }
}

/// The problems of cache policies whose key function reads another state than `S`.
pub(crate) fn key_state_problems<'a, S: State>(
    nodes: impl Iterator<Item = (&'a str, &'a crate::NodeOptions)>,
) -> Vec<crate::GraphProblem> {
    nodes
        .filter_map(|(node, options)| {
            let key = options.cache.as_ref()?.key.as_ref()?;
            (key.state != TypeId::of::<S>()).then(|| crate::GraphProblem::CacheKeyState {
                node: node.to_owned(),
                expected: std::any::type_name::<S>(),
                found: key.state_name,
            })
        })
        .collect()
}
