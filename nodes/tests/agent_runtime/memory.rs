//! Long-term memory: the memory tools over the run's user's namespace only, and the memory
//! layer that recalls and injects before a run's first model call and extracts after its
//! final answer, each step in the capability trace.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::store::{MemoryStore, Namespace, SearchOp, Store};
use stategraph_nodes::memory::{
    estimate_tokens, forget, recall, remember, MemoryConfig, MemoryLayer, MEMORY_CAPABILITY,
};
use stategraph_nodes::prelude::*;
use stategraph_nodes::{ModelError, ModelRequest, ModelResponse, ToolContext, Verdict};

use super::support::{tool_messages, R};

type E = Box<dyn std::error::Error + Send + Sync>;

/// A model answering from the memory message it was shown: the facts, or "I don't know.".
#[derive(Debug, Clone, Copy)]
pub(crate) struct FromMemory;

impl ChatModel for FromMemory {
    fn name(&self) -> &str {
        "from-memory"
    }

    fn invoke(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let facts = injected_facts(&request);
        let text = if facts.is_empty() {
            "I don't know.".to_owned()
        } else {
            format!("You told me: {}", facts.join("; "))
        };
        Box::pin(async move { Ok(AiMessage::text(text).into()) })
    }
}

/// The facts of the memory system messages of `request`.
pub(crate) fn injected_facts(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content, .. } => Some(content),
            _ => None,
        })
        .flat_map(|c| c.lines().filter_map(|l| l.strip_prefix("- ")))
        .map(str::to_owned)
        .collect()
}

pub(crate) fn fact(text: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut value = serde_json::Map::new();
    value.insert("text".to_owned(), text.into());
    value
}

pub(crate) async fn facts_of(store: &dyn Store, user: &str) -> Result<Vec<String>, E> {
    let ns = Namespace::new(["memories", user])?;
    let found = store.search(SearchOp::new(ns).page(100, 0)).await?;
    Ok(found
        .iter()
        .filter_map(|f| f.item.value.get("text")?.as_str().map(str::to_owned))
        .collect())
}

fn memory_call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

#[tokio::test]
async fn the_memory_tools_keep_each_users_facts_apart() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let alice = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([memory_call(
                "r1",
                "remember",
                json!({"fact": "likes green tea"}),
            )]),
            AiMessage::calls([memory_call(
                "r2",
                "recall",
                json!({"query": "tea", "limit": 3}),
            )]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(alice)
        .memory(Arc::clone(&store))
        .assemble(RunContext::new("t1", "alice"))
        .await?;
    let out = agent.ask("remember my tea").await?;
    let recalled = &tool_messages(&out.state)[1].content;
    assert!(recalled.ends_with(": likes green tea"), "{recalled}");
    let bob = ScriptedModel::new(
        "m",
        [
            // A namespace argument is not a parameter: it is ignored.
            AiMessage::calls([memory_call(
                "r1",
                "recall",
                json!({"query": "tea", "namespace": ["memories", "alice"]}),
            )]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(bob)
        .memory(Arc::clone(&store))
        .assemble(RunContext::new("t2", "bob"))
        .await?;
    let out = agent.ask("what do you know?").await?;
    assert_eq!(
        tool_messages(&out.state)[0].content,
        "No matching memories."
    );
    assert_eq!(
        facts_of(store.as_ref(), "alice").await?,
        ["likes green tea"]
    );
    assert!(facts_of(store.as_ref(), "bob").await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn the_memory_tools_schemas_name_no_namespace() -> R {
    for tool in [remember(), recall(), forget()] {
        let schema = tool.spec().schema();
        let text = schema.parameters.to_string();
        assert!(!text.contains("namespace"), "{text}");
    }
    Ok(())
}

#[tokio::test]
async fn forget_cannot_delete_another_users_fact_by_its_key() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let alice = RunContext::new("t1", "alice");
    let cx = ToolContext::detached(ThreadState::default(), alice).with_store(Arc::clone(&store));
    let said = remember()
        .call(
            memory_call("c1", "remember", json!({"fact": "likes green tea"})),
            cx,
        )
        .await?;
    let text = said
        .message()
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let key = text
        .strip_prefix("Remembered as ")
        .and_then(|t| t.split(':').next())
        .ok_or("no key in the answer")?;
    let bob = RunContext::new("t2", "bob");
    let cx = ToolContext::detached(ThreadState::default(), bob).with_store(Arc::clone(&store));
    let out = forget()
        .call(memory_call("c2", "forget", json!({"key": key})), cx)
        .await?;
    let answer = out.message().map(|m| m.content.clone()).unwrap_or_default();
    assert!(answer.starts_with("No memory has the key"), "{answer}");
    assert_eq!(
        facts_of(store.as_ref(), "alice").await?,
        ["likes green tea"]
    );
    Ok(())
}

#[tokio::test]
async fn a_memory_tool_without_a_granted_store_fails_before_touching_one() -> R {
    let cx = ToolContext::detached(ThreadState::default(), RunContext::new("t", "alice"));
    let err = remember()
        .call(memory_call("c1", "remember", json!({"fact": "x"})), cx)
        .await
        .err()
        .ok_or("the call ran without a store")?;
    assert!(err.to_string().contains("not granted a store"), "{err}");
    Ok(())
}

fn layer(store: &Arc<dyn Store>, extractor: ScriptedModel, config: MemoryConfig) -> MemoryLayer {
    MemoryLayer::new(Arc::clone(store), Arc::new(extractor), config)
}

fn no_facts() -> ScriptedModel {
    ScriptedModel::new("x", [AiMessage::text(r#"{"facts": []}"#)])
}

#[tokio::test]
async fn the_injected_facts_stay_within_the_token_budget_best_first() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let ns = Namespace::new(["memories", "alice"])?;
    store
        .put(&ns, "best", fact("tea tea tea: green tea, no sugar"))
        .await?;
    for i in 0..20 {
        store
            .put(
                &ns,
                &format!("f{i}"),
                fact(&format!("fact {i} about tea and more words")),
            )
            .await?;
    }
    let config = MemoryConfig {
        budget_tokens: 40,
        ..MemoryConfig::default()
    };
    let model = ScriptedModel::new("m", [AiMessage::text("ok")]);
    let agent = AgentBuilder::new(model.clone())
        .model_layer(layer(&store, no_facts(), config))
        .assemble(RunContext::new("t1", "alice"))
        .await?;
    agent.ask("which tea?").await?;
    let request = &model.requests()[0];
    let Some(Message::System { content, .. }) = request.messages.first() else {
        return Err("no memory message first".into());
    };
    assert!(estimate_tokens(content) <= 40, "{content}");
    let facts = injected_facts(request);
    assert_eq!(facts[0], "tea tea tea: green tea, no sugar");
    // 16 tokens of header, 10 for each line: two of the ten recalled facts fit in 40.
    assert_eq!(facts.len(), 2, "{facts:?}");
    assert!(agent.trace().reached("memory.inject", Stage::Visible));
    Ok(())
}

#[tokio::test]
async fn the_runs_later_model_calls_get_the_same_facts_from_one_recall() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let ns = Namespace::new(["memories", "alice"])?;
    store.put(&ns, "tea", fact("likes green tea")).await?;
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([memory_call("r1", "recall", json!({"query": "tea"}))]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .memory(Arc::clone(&store))
        .model_layer(layer(&store, no_facts(), MemoryConfig::default()))
        .assemble(RunContext::new("t1", "alice"))
        .await?;
    let out = agent.ask("which tea do I like?").await?;
    let requests = model.requests();
    assert_eq!(injected_facts(&requests[0]), ["likes green tea"]);
    assert_eq!(injected_facts(&requests[1]), ["likes green tea"]);
    let trace = agent.trace();
    assert_eq!(trace.for_tool("memory.recall").len(), 1);
    assert_eq!(trace.for_tool("memory.inject").len(), 2);
    // The injected message never reaches the state.
    assert!(!out
        .state
        .messages
        .iter()
        .any(|m| matches!(m, Message::System { .. })));
    Ok(())
}

#[tokio::test]
async fn a_bad_extraction_answer_is_traced_and_the_run_still_answers() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let extractor = ScriptedModel::new("x", [AiMessage::text("sorry, no JSON here")]);
    let agent = AgentBuilder::new(ScriptedModel::new("m", [AiMessage::text("fine")]))
        .model_layer(layer(&store, extractor, MemoryConfig::default()))
        .assemble(RunContext::new("t1", "alice"))
        .await?;
    let out = agent.ask("I like tea").await?;
    assert_eq!(out.state.messages.last().map(Message::text), Some("fine"));
    let why = agent
        .trace()
        .why_not("memory.extract", Stage::Executed)
        .ok_or("the failed extraction is not in the trace")?;
    assert!(
        matches!(&why.verdict, Verdict::Failed { reason } if reason.contains("not JSON")),
        "{why}"
    );
    assert!(facts_of(store.as_ref(), "alice").await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_run_without_a_user_passes_through_and_the_trace_says_why() -> R {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    let extractor = ScriptedModel::new("x", [AiMessage::text(r#"{"facts": ["x"]}"#)]);
    let model = ScriptedModel::new("m", [AiMessage::text("fine")]);
    let agent = AgentBuilder::new(model.clone())
        .model_layer(layer(&store, extractor.clone(), MemoryConfig::default()))
        .assemble(RunContext::default())
        .await?;
    agent.ask("I like tea").await?;
    let why = agent
        .trace()
        .why_not(MEMORY_CAPABILITY, Stage::Authorized)
        .ok_or("no Authorized line for memory")?;
    assert!(
        matches!(&why.verdict, Verdict::Removed { reason, .. } if reason.contains("no user id")),
        "{why}"
    );
    assert_eq!(extractor.remaining(), 1, "the extractor was called");
    assert!(injected_facts(&model.requests()[0]).is_empty());
    Ok(())
}
