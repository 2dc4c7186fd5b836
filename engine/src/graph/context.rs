//! What a graph knows of the runtime context: routers that see it (with the step counters),
//! and the context type it declares.

use std::sync::Arc;

use super::{BranchSpec, StateGraph};
use crate::command::Route;
use crate::{RouteContext, State};

impl<S: State> StateGraph<S> {
    /// A conditional edge like [`StateGraph::add_conditional_edges`], whose router also gets a
    /// [`RouteContext`]: the run's context ([`RouteContext::context`]) and the managed values
    /// of the step its node ran in ([`RouteContext::remaining_steps`],
    /// [`RouteContext::is_last_step`]), as a LangGraph router gets `Runtime` and the managed
    /// values in its state.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::prelude::*;
    /// use stategraph::RouteContext;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { n: u32 }
    /// struct Plan { premium: bool }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<S>::new()
    ///     .add_node("triage", |_s: Arc<S>, _cx: NodeContext| async { Ok::<_, BoxError>(S::update()) })
    ///     .add_node("fast", |_s: Arc<S>, _cx: NodeContext| async { Ok::<_, BoxError>(S::update().n(1)) })
    ///     .add_node("slow", |_s: Arc<S>, _cx: NodeContext| async { Ok::<_, BoxError>(S::update().n(2)) })
    ///     .add_edge(START, "triage")
    ///     .add_conditional_edges_with_context(
    ///         "triage",
    ///         |_s: &S, cx: &RouteContext<'_>| match cx.context::<Plan>() {
    ///             Ok(plan) if plan.premium => "fast",
    ///             _ => "slow",
    ///         },
    ///         ["fast", "slow"],
    ///     )
    ///     .add_edge("fast", END)
    ///     .add_edge("slow", END)
    ///     .compile()?;
    /// let config = RunConfig::new().context(Plan { premium: true });
    /// assert_eq!(graph.invoke(S::update(), &config).await?.state.n, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn add_conditional_edges_with_context<R, I, T>(
        mut self,
        from: impl Into<String>,
        router: impl Fn(&S, &RouteContext<'_>) -> R + Send + Sync + 'static,
        targets: I,
    ) -> Self
    where
        R: Into<Route>,
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.branches.push(BranchSpec {
            from: from.into(),
            router: Arc::new(move |s: &S, cx: &RouteContext<'_>| router(s, cx).into()),
            targets: targets.into_iter().map(Into::into).collect(),
        });
        self
    }
}

impl<S: State> StateGraph<S> {
    /// Declare the graph's context type `C` (LangGraph's `context_schema`): a front end that
    /// gets a run's context as JSON (the server's `context` field) decodes it as a `C`
    /// ([`CompiledGraph::context_schema`](crate::CompiledGraph::context_schema)). A run started
    /// from Rust is given its context with [`RunConfig::context`](crate::RunConfig::context)
    /// whether or not the graph declares one.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph::prelude::*;
    ///
    /// #[derive(State, Clone, Default, Debug)]
    /// struct S { n: u32 }
    /// #[derive(serde::Deserialize)]
    /// struct Ctx { user: String }
    ///
    /// let graph = StateGraph::<S>::new()
    ///     .context_schema::<Ctx>()
    ///     .add_node("n", |_s: Arc<S>, _cx: NodeContext| async { Ok::<_, BoxError>(S::update()) })
    ///     .add_edge(START, "n")
    ///     .add_edge("n", END)
    ///     .compile()?;
    /// let schema = graph.context_schema().expect("declared");
    /// let ctx = schema.decode(&serde_json::json!({"user": "ada"}))?;
    /// assert_eq!(ctx.get::<Ctx>()?.user, "ada");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context_schema<C>(mut self) -> Self
    where
        C: serde::de::DeserializeOwned + Send + Sync + 'static,
    {
        self.context_schema = Some(crate::ContextSchema::of::<C>());
        self
    }
}

impl<S: State> crate::CompiledGraph<S> {
    /// The context type the graph declared ([`StateGraph::context_schema`]), if any.
    pub fn context_schema(&self) -> Option<crate::ContextSchema> {
        self.inner.context_schema
    }
}
