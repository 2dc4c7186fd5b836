//! The memory tools: `remember`, `recall` and `forget`, over the run's user's namespace only.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph::store::{SearchOp, Store};

use super::{fact_put, user_namespace, MemoryError, MEMORY_GROUP};
use crate::tool::{FnTool, Tool, ToolContext, ToolSource, ToolSpec};
use crate::BoxError;

/// The most facts one `recall` returns.
pub const RECALL_LIMIT_MAX: usize = 50;

/// `remember`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RememberArgs {
    /// The fact about the user to keep, as one short sentence.
    pub fact: String,
}

/// `recall`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RecallArgs {
    /// What to look for.
    pub query: String,
    /// The most facts to return (default 5, at most 50).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `forget`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForgetArgs {
    /// The key `remember` or `recall` gave the fact.
    pub key: String,
}

/// The three memory tools.
pub fn memory_tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(remember()), Arc::new(recall()), Arc::new(forget())]
}

fn spec(name: &str, description: &str, read_only: bool) -> ToolSpec {
    ToolSpec::new(name, description, ToolSource::BuiltIn)
        .group(MEMORY_GROUP)
        .read_only(read_only)
        .deferrable(false)
}

/// The store the call was granted, and the run's user's namespace in it.
fn scope(cx: &ToolContext) -> Result<(Arc<dyn Store>, stategraph::store::Namespace), MemoryError> {
    let store = cx.store().ok_or(MemoryError::NotGranted)?;
    Ok((Arc::clone(store), user_namespace(&cx.run)?))
}

/// `remember`: keep a fact about the user, for every later thread of theirs.
///
/// ```
/// use std::sync::Arc;
/// use stategraph::store::{MemoryStore, Store};
/// use stategraph_nodes::memory::{remember, user_namespace};
/// use stategraph_nodes::{RunContext, ThreadState, Tool, ToolCall, ToolContext};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
/// let run = RunContext::new("t1", "alice");
/// let cx = ToolContext::detached(ThreadState::default(), run.clone()).with_store(store.clone());
/// let call = ToolCall::new("c1", "remember", serde_json::json!({"fact": "likes green tea"}));
/// remember().call(call, cx).await?;
/// let found = store.search(stategraph::store::SearchOp::new(user_namespace(&run)?)).await?;
/// assert_eq!(found[0].item.value["text"], "likes green tea");
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub fn remember() -> FnTool {
    let spec = spec(
        "remember",
        "Keep a fact about the user (a preference, a detail they told you) for later \
         conversations. Returns the fact's key.",
        false,
    );
    FnTool::typed(spec, |args: RememberArgs, cx: ToolContext| async move {
        let (store, ns) = scope(&cx)?;
        let fact = args.fact.trim();
        if fact.is_empty() {
            return Err::<String, BoxError>("the fact is empty".into());
        }
        let put = fact_put(&ns, fact, "remember");
        let key = put.key.clone();
        store
            .batch(vec![stategraph::store::Op::Put(put)])
            .await
            .map_err(MemoryError::from)?;
        Ok(format!("Remembered as {key}: {fact}"))
    })
}

/// `recall`: the user's facts that best match a query, one per line as `key: fact`.
pub fn recall() -> FnTool {
    let spec = spec(
        "recall",
        "Search the facts kept about the user. Returns one `key: fact` per line, best first.",
        true,
    );
    FnTool::typed(spec, |args: RecallArgs, cx: ToolContext| async move {
        let (store, ns) = scope(&cx)?;
        let limit = args.limit.unwrap_or(5).clamp(1, RECALL_LIMIT_MAX);
        let found = store
            .search(SearchOp::new(ns).query(args.query).page(limit, 0))
            .await
            .map_err(MemoryError::from)?;
        if found.is_empty() {
            return Ok::<_, BoxError>("No matching memories.".to_owned());
        }
        let lines: Vec<String> = found
            .iter()
            .map(|f| {
                let text = f.item.value.get("text").and_then(|t| t.as_str());
                format!("{}: {}", f.item.key, text.unwrap_or_default())
            })
            .collect();
        Ok(lines.join("\n"))
    })
}

/// `forget`: delete one of the user's facts by its key.
pub fn forget() -> FnTool {
    let spec = spec(
        "forget",
        "Delete a fact kept about the user, by the key `remember` or `recall` gave.",
        false,
    );
    FnTool::typed(spec, |args: ForgetArgs, cx: ToolContext| async move {
        let (store, ns) = scope(&cx)?;
        let existed = store
            .get(&ns, &args.key)
            .await
            .map_err(MemoryError::from)?
            .is_some();
        if !existed {
            return Ok::<_, BoxError>(format!("No memory has the key {:?}.", args.key));
        }
        store
            .delete(&ns, &args.key)
            .await
            .map_err(MemoryError::from)?;
        Ok(format!("Forgot {}.", args.key))
    })
}
