//! The branches of a thread: forking one from a checkpoint, in the thread or into a new
//! thread, and the thread's history as a tree of branches.

use stategraph_checkpoints::fork::{FieldEdit, FieldPath, ForkPlan};
use stategraph_checkpoints::tree::BranchTree;
use stategraph_checkpoints::{CheckpointError, CheckpointId, ListOptions, Namespace, ThreadId};
use stategraph_reducers::{Change, ReduceCtx};

use super::decode::decode_state;
use crate::graph::CompiledGraph;
use crate::state::{written_fields, Field};
use crate::{RunError, State};

impl<S: State> CompiledGraph<S> {
    /// Start a new branch at checkpoint `from` of `thread`, with `set` written into it as a
    /// node's write would be (through each field's reducer; an empty update makes a plain
    /// fork). The fork checkpoint (source `fork`) keeps what `from` had left to run, so a run
    /// on the new branch continues from there with the changed values.
    ///
    /// With `into`, the branch goes into that new thread, which first gets a copy of the
    /// branch ending at `from` (that branch only); without, it is a new branch of `thread`
    /// beside the others. It is the fork the `stategraph fork` command makes: the changed
    /// fields are stored whole at one new version, and the metadata names the forked
    /// checkpoint (`forked_from`) and the fields set (`set`). Returns the fork checkpoint.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use stategraph::prelude::*;
    /// #[derive(State, Clone, Default, Debug)]
    /// struct Doc { score: u32 }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let graph = StateGraph::<Doc>::new()
    ///     .add_node("grade", |s: Arc<Doc>, _ctx: NodeContext| async move {
    ///         Ok::<_, BoxError>(Doc::update().score(s.score + 1))
    ///     })
    ///     .add_edge(START, "grade")
    ///     .add_edge("grade", END)
    ///     .compile()?
    ///     .with_checkpointer(Arc::new(MemorySaver::new()));
    /// let config = RunConfig::new().thread("t");
    /// graph.invoke(Doc::update().score(1), &config).await?;
    /// let history = graph.get_state_history("t", Default::default()).await?;
    /// let started = history.iter().find(|s| s.checkpoint.step == 0).unwrap(); // input applied
    /// // A branch of the same thread from there, with another score; `grade` runs next.
    /// let fork = graph.fork("t", started.checkpoint.id, None, Doc::update().score(40)).await?;
    /// let out = graph.invoke(Input::Continue, &config).await?;
    /// assert_eq!(out.state.score, 41);
    /// // The history is a tree: two branches, the fork's the newer.
    /// let tree = graph.history_tree("t").await?;
    /// assert_eq!(tree.heads().len(), 2);
    /// assert!(tree.path(*tree.heads().last().unwrap()).unwrap().contains(&fork));
    /// # Ok::<(), stategraph::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`RunError::MissingThread`] without a checkpointer; [`CheckpointError::NotFound`] if
    /// `thread` has no checkpoint `from`; [`RunError::Reduce`] if a reducer refuses `set`;
    /// [`RunError::Fork`] (with [`CheckpointError::StaleParent`] inside when `into` already
    /// has checkpoints: nothing is written then); decode and storage errors.
    pub async fn fork(
        &self,
        thread: &str,
        from: CheckpointId,
        into: Option<&str>,
        set: S::Update,
    ) -> Result<CheckpointId, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let into = match into {
            Some(t) => ThreadId::new(t)?,
            None => thread_id.clone(),
        };
        let root = Namespace::root();
        let loaded = saver
            .get(&thread_id, &root, Some(from))
            .await?
            .ok_or_else(|| CheckpointError::NotFound {
                thread: thread_id.clone(),
                ns: root.clone(),
                id: from,
            })?;
        let edits = if written_fields::<S>(&set).is_empty() {
            Vec::new()
        } else {
            let state = decode_state::<S>(&loaded, &Some(thread_id.clone()))?;
            edits_of(state, set, loaded.checkpoint.step)?
        };
        let mut plan = ForkPlan::new(&thread_id, loaded, &into)?;
        for edit in &edits {
            plan.edit(edit).map_err(|e| RunError::Decode {
                field: edit.path.field().to_owned(),
                thread: Some(thread_id.clone()),
                detail: e.to_string(),
            })?;
        }
        Ok(plan.write(saver.as_ref()).await?)
    }

    /// The root namespace's checkpoints of `thread` as a tree of branches: parents,
    /// children, branch numbers, each branch's end and the path to it (see [`BranchTree`]).
    /// Only headers are read, no state.
    ///
    /// # Errors
    /// [`RunError::MissingThread`] without a checkpointer; storage errors.
    pub async fn history_tree(&self, thread: &str) -> Result<BranchTree, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let headers = saver
            .list(&thread_id, &Namespace::root(), ListOptions::default())
            .await?;
        Ok(BranchTree::new(headers))
    }
}

/// `set` applied to `state` through the reducers, as whole-field edits of the fields it
/// changed.
fn edits_of<S: State>(mut state: S, set: S::Update, step: i64) -> Result<Vec<FieldEdit>, RunError> {
    let mut ctx = ReduceCtx::new(step);
    let changed = state
        .apply(vec![set], &mut ctx)
        .map_err(|(field, source)| RunError::Reduce {
            field: field.name(),
            writers: vec!["fork".to_owned()],
            step,
            source,
        })?;
    changed
        .into_iter()
        .map(|(field, _)| {
            let name = field.name();
            let encode = |source| RunError::Encode {
                field: name,
                source,
            };
            let stored = state
                .encode_field(field, Change::Replaced)
                .map_err(encode)?;
            let bytes = match stored {
                stategraph_reducers::Stored::Whole(b) | stategraph_reducers::Stored::Tail(b) => b,
            };
            let value = serde_json::from_slice(&bytes).map_err(encode)?;
            let pointer = format!("/{}", name.replace('~', "~0").replace('/', "~1"));
            let path = FieldPath::parse(&pointer).map_err(|e| RunError::Decode {
                field: name.to_owned(),
                thread: None,
                detail: e.to_string(),
            })?;
            Ok(FieldEdit { path, value })
        })
        .collect()
}
