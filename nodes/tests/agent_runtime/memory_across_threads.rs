//! The issue's agent test: a user's second thread answers from a fact their first thread
//! stored, and another user's thread does not see it.

use std::sync::Arc;

use stategraph::store::{MemoryStore, SqliteStore, Store, StoreConfig};
use stategraph_nodes::memory::{MemoryConfig, MemoryLayer};
use stategraph_nodes::prelude::*;
use stategraph_nodes::{Agent, AgentError};

use super::memory::{facts_of, FromMemory};
use super::support::R;

/// An agent answering from memory ([`FromMemory`]) for `user` on `thread`, whose memory layer
/// extracts with `extractor`.
async fn agent(
    store: &Arc<dyn Store>,
    extractor: &ScriptedModel,
    thread: &str,
    user: &str,
) -> Result<Agent, AgentError> {
    let layer = MemoryLayer::new(
        Arc::clone(store),
        Arc::new(extractor.clone()),
        MemoryConfig::default(),
    );
    AgentBuilder::new(FromMemory)
        .model_layer(layer)
        .assemble(RunContext::new(thread, user))
        .await
}

fn last_answer(out: &AgentOutcome) -> String {
    out.state
        .messages
        .last()
        .map(|m| m.text().to_owned())
        .unwrap_or_default()
}

/// Thread 1 of alice states a fact, which the extractor returns; thread 2 of alice asks and
/// is answered from it; thread 3 of bob asks the same and is not.
pub(crate) async fn second_thread_answers_from_the_first(store: Arc<dyn Store>) -> R {
    let extractor = ScriptedModel::new(
        "extractor",
        [
            AiMessage::text(r#"{"facts": ["drinks only green tea"]}"#),
            AiMessage::text(r#"{"facts": []}"#),
            AiMessage::text(r#"{"facts": []}"#),
        ],
    );
    let first = agent(&store, &extractor, "t-1", "alice").await?;
    let out = first.ask("I drink only green tea.").await?;
    assert_eq!(last_answer(&out), "I don't know.");
    assert!(first.trace().reached("memory.extract", Stage::Returned));
    assert_eq!(
        facts_of(store.as_ref(), "alice").await?,
        ["drinks only green tea"]
    );

    let second = agent(&store, &extractor, "t-2", "alice").await?;
    let out = second.ask("Which tea do I drink?").await?;
    assert_eq!(last_answer(&out), "You told me: drinks only green tea");
    let trace = second.trace();
    assert!(trace.reached("memory.recall", Stage::Executed));
    assert!(trace.reached("memory.inject", Stage::Visible));

    let other = agent(&store, &extractor, "t-3", "bob").await?;
    let out = other.ask("Which tea do I drink?").await?;
    assert_eq!(last_answer(&out), "I don't know.");
    assert!(other.trace().reached("memory.recall", Stage::Executed));
    assert!(!other.trace().reached("memory.inject", Stage::Visible));
    extractor.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_users_second_thread_answers_from_a_fact_the_first_stored_in_memory() -> R {
    second_thread_answers_from_the_first(Arc::new(MemoryStore::default())).await
}

#[tokio::test]
async fn a_users_second_thread_answers_from_a_fact_the_first_stored_in_sqlite() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("memory.db");
    let store = SqliteStore::open(&path, StoreConfig::default())?;
    second_thread_answers_from_the_first(Arc::new(store)).await?;
    // The fact outlives the handle: a new one on the file finds it.
    let reopened = SqliteStore::open(&path, StoreConfig::default())?;
    assert_eq!(
        facts_of(&reopened, "alice").await?,
        ["drinks only green tea"]
    );
    Ok(())
}
