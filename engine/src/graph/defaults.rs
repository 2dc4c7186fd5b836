//! Graph-wide node defaults: [`StateGraph::set_node_defaults`], and how a node's own options
//! and the defaults combine.

use super::{NodeSpec, StateGraph};
use crate::error::GraphProblem;
use crate::node::NodeOptions;
use crate::State;

impl<S: State> StateGraph<S> {
    /// Options every node of this graph gets where its own leave a field unset: the retry
    /// policy, the timeout policy, the error handler and the cache policy (see
    /// [`NodeOptions::with_defaults`]).
    /// A node's own setting wins, field by field. They apply when the graph compiles, to
    /// every node (a subgraph node included), but not inside a subgraph, which keeps its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::prelude::*;
    /// use stategraph::{NodeError, RetryPolicy};
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S {
    ///     #[reduce(append)]
    ///     log: Vec<String>,
    /// }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let failing = |_s: Arc<S>, _cx: NodeContext| async move {
    ///     Err::<SUpdate, BoxError>("down".into())
    /// };
    /// let note = |_s: Arc<S>, e: NodeError, _cx: NodeContext| async move {
    ///     Ok::<_, BoxError>(S::update().log(vec![format!("{} after {}", e.node, e.attempts)]))
    /// };
    /// let quick = RetryPolicy::attempts(2).initial_interval(std::time::Duration::ZERO);
    /// let graph = StateGraph::<S>::new()
    ///     .set_node_defaults(NodeOptions::new().retry(quick).error_handler(note))
    ///     .add_node("a", failing)
    ///     .add_node_with("b", failing, NodeOptions::new().retry(RetryPolicy::attempts(1)))
    ///     .add_edge(START, "a")
    ///     .add_edge(START, "b")
    ///     .add_edge("a", END)
    ///     .add_edge("b", END)
    ///     .compile()?;
    /// let out = graph.invoke(S::update(), &RunConfig::new()).await?;
    /// assert_eq!(out.state.log, ["a after 2", "b after 1"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn set_node_defaults(mut self, defaults: NodeOptions) -> Self {
        self.node_defaults = Some(defaults);
        self
    }
}

impl NodeOptions {
    /// These options, with `defaults` filling each field they leave unset: the retry policy,
    /// the timeout policy, the error handler, the cache policy. The other fields (defer,
    /// spawn, destinations, role) are the node's own.
    ///
    /// ```
    /// use std::time::Duration;
    /// use stategraph::{NodeOptions, RetryPolicy};
    ///
    /// let defaults = NodeOptions::new().retry(RetryPolicy::attempts(3)).timeout(Duration::from_secs(30));
    /// let own = NodeOptions::new().timeout(Duration::from_secs(5));
    /// let merged = own.with_defaults(&defaults);
    /// assert_eq!(merged.timeout_of().and_then(|p| p.run_timeout), Some(Duration::from_secs(5)));
    /// assert_eq!(merged.retry_of().map(|r| r.max_attempts), Some(3));
    /// ```
    pub fn with_defaults(&self, defaults: &NodeOptions) -> NodeOptions {
        NodeOptions {
            retry: self.retry.clone().or_else(|| defaults.retry.clone()),
            timeout: self.timeout.or(defaults.timeout),
            error_handler: self
                .error_handler
                .clone()
                .or_else(|| defaults.error_handler.clone()),
            cache: self.cache.clone().or_else(|| defaults.cache.clone()),
            ..self.clone()
        }
    }

    /// The retry policy these options set.
    pub fn retry_of(&self) -> Option<&crate::RetryPolicy> {
        self.retry.as_ref()
    }

    /// The timeout policy these options set.
    pub fn timeout_of(&self) -> Option<crate::TimeoutPolicy> {
        self.timeout
    }
}

/// The nodes with the graph's defaults applied, after the problems of their error handlers:
/// each must be written for the graph's state `S` (the defaults' is named `*`).
pub(super) fn apply<S: State>(
    mut nodes: Vec<NodeSpec<S>>,
    defaults: Option<NodeOptions>,
    problems: &mut Vec<GraphProblem>,
) -> Vec<NodeSpec<S>> {
    let own = nodes.iter().map(|n| (n.name.as_str(), &n.options));
    let all = own.chain(defaults.as_ref().map(|d| ("*", d)));
    for (name, options) in all {
        if let Some(h) = options
            .error_handler
            .as_ref()
            .filter(|h| h.get::<S>().is_none())
        {
            problems.push(GraphProblem::HandlerState {
                node: name.to_owned(),
                expected: std::any::type_name::<S>(),
                found: h.state_name(),
            });
        }
    }
    if let Some(defaults) = defaults {
        for n in &mut nodes {
            n.options = n.options.with_defaults(&defaults);
        }
    }
    nodes
}
