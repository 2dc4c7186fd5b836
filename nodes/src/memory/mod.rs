//! Long-term memory for the agent: what it keeps about a user across threads, in the graph's
//! [`Store`](stategraph::store::Store), always under the run's user's namespace
//! `("memories", <user_id>)` ([`user_namespace`]).
//!
//! - The memory tools [`remember`], [`recall`] and [`forget`] (group `memory`), which an
//!   agent has only when it was granted a store ([`AgentBuilder::memory`]); they take no
//!   namespace, so no call reaches another user's memories.
//! - [`MemoryGrant`]: the admission rule and the policy that keep memory tools out of an
//!   agent without the grant, when its catalog is assembled and again at call time.
//! - [`MemoryLayer`]: a model layer in DeerFlow's manner: before the first model call of a
//!   run it recalls the facts most relevant to the latest human message and injects them,
//!   bounded in tokens, as a system message; after the run's final answer it has the model
//!   extract facts from the conversation and stores them. Each step is in the capability
//!   trace under [`MEMORY_CAPABILITY`].
//!
//! [`AgentBuilder::memory`]: crate::AgentBuilder::memory

mod extract;
mod grant;
mod layer;
mod tools;

use stategraph::store::{Namespace, NamespaceError, StoreError};

use crate::context::RunContext;
use crate::tool::ToolSpec;

pub use extract::{parse_facts, FactsError, EXTRACTION_PROMPT};
pub use grant::MemoryGrant;
pub use layer::{MemoryConfig, MemoryLayer};
pub use tools::{
    forget, memory_tools, recall, remember, ForgetArgs, RecallArgs, RememberArgs, RECALL_LIMIT_MAX,
};

/// The tool group of the memory tools.
pub const MEMORY_GROUP: &str = "memory";
/// The names of the memory tools.
pub const MEMORY_TOOLS: [&str; 3] = ["remember", "recall", "forget"];
/// The name the trace gives the memory grant (admission and policy).
pub const MEMORY_GRANT: &str = "memory_grant";
/// The capability name under which [`MemoryLayer`] records its steps (`memory.recall`,
/// `memory.inject`, `memory.extract`).
pub const MEMORY_CAPABILITY: &str = "memory";
/// The first label of every user's memory namespace.
pub const MEMORIES: &str = "memories";

/// What keeps a memory operation from running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The run has no user id, so there is no namespace to use.
    #[error("the run has no user id: memory is kept per user")]
    NoUser,
    /// The user id cannot be a namespace label.
    #[error("user id {user:?} cannot name a memory namespace: {source}")]
    BadUser {
        /// The user id.
        user: String,
        /// Why.
        source: NamespaceError,
    },
    /// The agent was not granted a store.
    #[error("the agent was not granted a store")]
    NotGranted,
    /// The store failed.
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
}

/// The namespace of the run's user's memories: `("memories", <user_id>)`.
///
/// ```
/// use stategraph_nodes::memory::user_namespace;
/// use stategraph_nodes::RunContext;
/// let ns = user_namespace(&RunContext::new("t1", "alice"))?;
/// assert_eq!(ns.labels(), ["memories", "alice"]);
/// assert!(user_namespace(&RunContext::default()).is_err());
/// # Ok::<(), stategraph_nodes::memory::MemoryError>(())
/// ```
///
/// # Errors
/// [`MemoryError::NoUser`] without a user id (or an empty one); [`MemoryError::BadUser`]
/// for one that holds a `.`.
pub fn user_namespace(run: &RunContext) -> Result<Namespace, MemoryError> {
    let user = run
        .user_id
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or(MemoryError::NoUser)?;
    Namespace::new([MEMORIES, user]).map_err(|source| MemoryError::BadUser {
        user: user.to_owned(),
        source,
    })
}

/// Whether `spec` is one of the runtime's memory tools (built-in, group `memory`).
pub fn is_memory_tool(spec: &ToolSpec) -> bool {
    spec.group.as_deref() == Some(MEMORY_GROUP) && MEMORY_TOOLS.contains(&spec.name.as_str())
}

/// The key a fact is stored under: the same text (ignoring case and surrounding space) gets
/// the same key, so a fact remembered twice is kept once.
pub fn fact_key(text: &str) -> String {
    let normal = text.trim().to_lowercase();
    let hash = blake3::hash(normal.as_bytes()).to_hex();
    format!("fact-{}", &hash[..16])
}

/// A rough token count of `text`: a token per four bytes, rounded up (the estimate the
/// memory layer's budget is counted in; providers' tokenizers differ, so it is a bound to
/// aim at, not an exact count).
pub fn estimate_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// A stored fact's value: `{"text": ..., "source": ...}`.
pub(crate) fn fact_value(text: &str, source: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut value = serde_json::Map::new();
    value.insert("text".to_owned(), text.into());
    value.insert("source".to_owned(), source.into());
    value
}

/// The put of a fact under `ns`, indexed on its text.
pub(crate) fn fact_put(ns: &Namespace, text: &str, source: &str) -> stategraph::store::PutOp {
    stategraph::store::PutOp::new(ns.clone(), fact_key(text), fact_value(text, source)).index(
        stategraph::store::IndexFields::Fields(vec!["text".to_owned()]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_fact_in_other_case_gets_the_same_key() {
        assert_eq!(fact_key("Likes tea "), fact_key("likes TEA"));
        assert_ne!(fact_key("likes tea"), fact_key("likes coffee"));
    }

    #[test]
    fn a_user_id_with_a_dot_names_no_namespace() {
        let err = user_namespace(&RunContext::new("t", "a.b")).err();
        assert!(err.is_some_and(|e| e.to_string().contains("\"a.b\"")));
    }

    #[test]
    fn tokens_are_estimated_at_four_bytes_each_rounded_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
