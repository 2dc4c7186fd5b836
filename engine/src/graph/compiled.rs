//! The compiled form of a graph: the immutable [`CompiledGraph`] handle and the resolved
//! nodes, branches and joins the run loop reads.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use stategraph_checkpoints::graph_shape::GraphShape;
use stategraph_checkpoints::{CheckpointId, Namespace, Saver, ThreadId};
use stategraph_store::Store;

use super::control_order::ControlOrder;
use super::node_run::NodeRun;
use super::RouterFn;
use crate::node::NodeOptions;
use crate::State;
use stategraph_checkpoints::sync::Unpoisoned;

pub(crate) struct CompiledNode<S: State> {
    pub(crate) name: Arc<str>,
    pub(crate) branch_channel: Arc<str>,
    pub(crate) run: Arc<dyn NodeRun<S>>,
    pub(crate) options: Arc<NodeOptions>,
    pub(crate) destinations: Option<BTreeSet<String>>,
    pub(crate) out: Vec<usize>,
    pub(crate) joins: Vec<usize>,
    pub(crate) branches: Vec<usize>,
    pub(crate) subgraph: Option<Arc<dyn crate::mermaid::Render>>,
}

pub(crate) struct Branch<S: State> {
    pub(crate) from: String,
    pub(crate) router: RouterFn<S>,
    pub(crate) targets: BTreeSet<String>,
}

pub(crate) struct Join {
    pub(crate) channel: Arc<str>,
    pub(crate) sources: Vec<usize>,
    pub(crate) target: usize,
}

pub(crate) struct GraphInner<S: State> {
    pub(crate) name: String,
    pub(crate) nodes: Vec<CompiledNode<S>>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) entry: Vec<usize>,
    pub(crate) entry_branches: Vec<usize>,
    pub(crate) branches: Vec<Branch<S>>,
    pub(crate) joins: Vec<Join>,
    pub(crate) edges: Vec<(String, String)>,
    pub(crate) join_specs: Vec<(Vec<String>, String)>,
    /// The context type the graph declared, if any.
    pub(crate) context_schema: Option<crate::ContextSchema>,
    /// Whether a node runs a workflow's subtasks ([`crate::func`]).
    pub(crate) runs_subtasks: bool,
    pub(crate) interrupt_before: Vec<bool>,
    pub(crate) interrupt_after: Vec<bool>,
    /// The order control records list channels and nodes in (see [`ControlOrder`]).
    pub(crate) control_order: ControlOrder,
    /// The state each recently run thread was left in, by its head checkpoint.
    pub(crate) states: std::sync::Mutex<RememberedStates<S>>,
    /// The graph's shape, made on first use (see [`CompiledGraph::shape`]).
    pub(crate) shape: std::sync::OnceLock<Arc<GraphShape>>,
}

/// The state each remembered `(thread, namespace)` was left in, with its head checkpoint.
pub(crate) type RememberedStates<S> = HashMap<(ThreadId, Namespace), (CheckpointId, Arc<S>)>;

/// Threads whose last state a compiled graph keeps for its next run.
const REMEMBERED_THREADS: usize = 64;

impl<S: State> GraphInner<S> {
    /// Take the state remembered for `(thread, ns)`, with the checkpoint it is the state of.
    pub(crate) fn take_cached(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
    ) -> Option<(CheckpointId, Arc<S>)> {
        self.states
            .lock()
            .unpoisoned()
            .remove(&(thread.clone(), ns.clone()))
    }

    /// Remember the state at checkpoint `head` of `(thread, ns)`.
    pub(crate) fn remember(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
        head: CheckpointId,
        state: Arc<S>,
    ) {
        let mut states = self.states.lock().unpoisoned();
        if states.len() >= REMEMBERED_THREADS {
            states.clear();
        }
        states.insert((thread.clone(), ns.clone()), (head, state));
    }
}

/// A checked, immutable graph, ready to run. Cheap to clone.
pub struct CompiledGraph<S: State> {
    pub(crate) inner: Arc<GraphInner<S>>,
    pub(crate) saver: Option<Arc<dyn Saver>>,
    pub(crate) store: Option<Arc<dyn Store>>,
    pub(crate) cache: Option<crate::cache::GraphCache>,
}

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: self.saver.clone(),
            store: self.store.clone(),
            cache: self.cache.clone(),
        }
    }
}

impl<S: State> fmt::Debug for CompiledGraph<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledGraph")
            .field("name", &self.inner.name)
            .field(
                "nodes",
                &self
                    .inner
                    .nodes
                    .iter()
                    .map(|n| &*n.name)
                    .collect::<Vec<_>>(),
            )
            .field("checkpointer", &self.saver.is_some())
            .field("store", &self.store.is_some())
            .field("cache", &self.cache.is_some())
            .finish()
    }
}

impl<S: State> CompiledGraph<S> {
    /// The same graph, checkpointing every step of a thread into `saver`.
    pub fn with_checkpointer(&self, saver: Arc<dyn Saver>) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: Some(saver),
            store: self.store.clone(),
            cache: self.cache.clone(),
        }
    }

    /// The same graph without a checkpointer.
    pub fn without_checkpointer(&self) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: None,
            store: self.store.clone(),
            cache: self.cache.clone(),
        }
    }

    /// The checkpointer, if any.
    pub fn checkpointer(&self) -> Option<&Arc<dyn Saver>> {
        self.saver.as_ref()
    }

    /// The same graph, giving every node of every thread `store` through
    /// [`NodeContext::store`](crate::NodeContext::store): the long-term memory that outlives
    /// a thread. A subgraph run by one of its tasks (`add_subgraph`, `run_in_task`) sees its
    /// parent's store, and the store it was compiled with only when the parent has none.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::prelude::*;
    /// use stategraph::store::{MemoryStore, Namespace, Store};
    /// # #[derive(State, Clone, Default, Debug)]
    /// # struct S { seen: String }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    /// let ns = Namespace::new(["users", "alice"])?;
    /// let value = serde_json::json!({"text": "likes tea"});
    /// store.put(&ns, "drink", value.as_object().cloned().unwrap_or_default()).await?;
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("read", |_s: Arc<S>, cx: NodeContext| async move {
    ///         let store = cx.store().ok_or("no store")?;
    ///         let ns = Namespace::new(["users", "alice"])?;
    ///         let item = store.get(&ns, "drink").await?;
    ///         let text = item.and_then(|i| i.value.get("text")?.as_str().map(str::to_owned));
    ///         Ok::<_, BoxError>(S::update().seen(text.unwrap_or_default()))
    ///     })
    ///     .add_edge(START, "read")
    ///     .compile()?
    ///     .with_store(store);
    /// let out = graph.invoke(S::update(), &RunConfig::new()).await?;
    /// assert_eq!(out.state.seen, "likes tea");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn with_store(&self, store: Arc<dyn Store>) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: self.saver.clone(),
            store: Some(store),
            cache: self.cache.clone(),
        }
    }

    /// The same graph without a store.
    pub fn without_store(&self) -> Self {
        CompiledGraph {
            inner: self.inner.clone(),
            saver: self.saver.clone(),
            store: None,
            cache: self.cache.clone(),
        }
    }

    /// The store, if any.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node names, in declaration order.
    pub fn node_names(&self) -> Vec<&str> {
        self.inner.nodes.iter().map(|n| &*n.name).collect()
    }
}
