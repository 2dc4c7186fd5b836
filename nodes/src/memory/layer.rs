//! [`MemoryLayer`]: recall and inject before a run's first model call, extract after its
//! final answer, each step in the capability trace.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use stategraph::checkpoints::sync::Unpoisoned;
use stategraph::store::{Op, SearchItem, SearchOp, Store};

use super::extract::{extraction_request, parse_facts};
use super::{estimate_tokens, fact_put, user_namespace, MEMORY_CAPABILITY};
use crate::message::Message;
use crate::middleware::{ModelCall, ModelLayer, ModelNext};
use crate::model::{ChatModel, ModelError, ModelResponse};
use crate::trace::{Stage, TraceEntry, Verdict};

/// The trace names of the layer's steps.
const RECALL: &str = "memory.recall";
const INJECT: &str = "memory.inject";
const EXTRACT: &str = "memory.extract";

/// How much the layer recalls and injects, and whether it extracts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// The most tokens the injected message may take ([`estimate_tokens`]); facts are taken
    /// best first while they fit.
    pub budget_tokens: usize,
    /// The most facts a recall asks the store for.
    pub recall_limit: usize,
    /// Extract facts after a run's final answer.
    pub extract: bool,
}

impl Default for MemoryConfig {
    /// 400 tokens, 10 facts, extraction on.
    fn default() -> Self {
        MemoryConfig {
            budget_tokens: 400,
            recall_limit: 10,
            extract: true,
        }
    }
}

/// Runs remembered per layer before the oldest are forgotten.
const REMEMBERED_RUNS: usize = 64;

/// A model layer giving the agent long-term memory of its user, in DeerFlow's manner.
///
/// - **Recall and inject**: on the first model call of a run (the request ends with a human
///   message), it searches the user's namespace ([`user_namespace`]) with that message as the
///   query, and puts the best facts that fit [`MemoryConfig::budget_tokens`] before the
///   conversation as a system message. The later calls of the run get the same message (the
///   recall is made once per run). The state is not changed: the message is in the requests
///   only.
/// - **Extract**: after a call whose answer has no tool call (the run's final answer), it
///   asks `extractor` for the conversation's lasting facts (JSON, see
///   [`EXTRACTION_PROMPT`](super::EXTRACTION_PROMPT)) and puts them in one batch, keyed by
///   [`fact_key`](super::fact_key). A failed extraction is in the trace and does not fail
///   the run.
///
/// The trace gets `memory` at Available and Authorized (or Removed at Authorized when the run
/// has no usable user id, and the layer then passes the call through untouched),
/// `memory.recall` Executed, `memory.inject` Visible on the model call it reached, and
/// `memory.extract` Executed then Returned (the facts were stored).
///
/// ```
/// use std::sync::Arc;
/// use stategraph::store::MemoryStore;
/// use stategraph_nodes::memory::{MemoryConfig, MemoryLayer};
/// use stategraph_nodes::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::default());
/// let extractor = ScriptedModel::new("x", [AiMessage::text(r#"{"facts": ["likes green tea"]}"#)]);
/// let layer = MemoryLayer::new(store.clone(), Arc::new(extractor), MemoryConfig::default());
/// let model = ScriptedModel::new("m", [AiMessage::text("noted")]);
/// let agent = AgentBuilder::new(model)
///     .model_layer(layer)
///     .assemble(RunContext::new("t1", "alice"))
///     .await?;
/// agent.ask("I like green tea").await?;
/// assert!(agent.trace().reached("memory.extract", Stage::Returned));
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub struct MemoryLayer {
    store: Arc<dyn Store>,
    extractor: Arc<dyn ChatModel>,
    config: MemoryConfig,
    /// The message each run in progress injects (`None`: nothing to inject), by run.
    recalled: Mutex<HashMap<String, Option<String>>>,
}

impl fmt::Debug for MemoryLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryLayer")
            .field("extractor", &self.extractor.name())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl MemoryLayer {
    /// A layer over `store`, extracting facts with `extractor`.
    pub fn new(store: Arc<dyn Store>, extractor: Arc<dyn ChatModel>, config: MemoryConfig) -> Self {
        MemoryLayer {
            store,
            extractor,
            config,
            recalled: Mutex::new(HashMap::new()),
        }
    }

    /// The message the run of `call` injects: recalled now on the run's first call, else the
    /// one recalled then.
    async fn injection(
        &self,
        call: &ModelCall,
        ns: &stategraph::store::Namespace,
    ) -> Option<String> {
        let messages = &call.request.messages;
        let human = messages
            .iter()
            .rposition(|m| matches!(m, Message::Human { .. }))?;
        let key = format!(
            "{:?}/{:?}/{ns}/{human}",
            call.run.thread_id, call.run.run_id
        );
        let first = matches!(messages.last(), Some(Message::Human { .. }));
        if !first {
            if let Some(block) = self.recalled.lock().unpoisoned().get(&key) {
                return block.clone();
            }
        }
        let query = messages.get(human).map(Message::text).unwrap_or_default();
        let search = SearchOp::new(ns.clone())
            .query(query)
            .page(self.config.recall_limit, 0);
        let block = match self.store.search(search).await {
            Ok(found) => {
                call.trace.record(
                    TraceEntry::new(RECALL, Stage::Executed, Verdict::Passed)
                        .on_model_call(call.number),
                );
                self.block(&found)
            }
            Err(e) => {
                call.trace.record(
                    TraceEntry::new(
                        RECALL,
                        Stage::Executed,
                        Verdict::Failed {
                            reason: e.to_string(),
                        },
                    )
                    .on_model_call(call.number),
                );
                None
            }
        };
        let mut recalled = self.recalled.lock().unpoisoned();
        if recalled.len() >= REMEMBERED_RUNS {
            recalled.clear();
        }
        recalled.insert(key, block.clone());
        block
    }

    /// The system message of `found`, best first while within the budget (`None` if no fact
    /// fits).
    fn block(&self, found: &[SearchItem]) -> Option<String> {
        let header = "What you remember about the user (from earlier conversations):";
        let mut used = estimate_tokens(header);
        let mut lines = Vec::new();
        for f in found {
            let Some(text) = f.item.value.get("text").and_then(|t| t.as_str()) else {
                continue;
            };
            let line = format!("- {text}");
            let cost = estimate_tokens(&line) + 1;
            if used + cost > self.config.budget_tokens {
                break;
            }
            used += cost;
            lines.push(line);
        }
        (!lines.is_empty()).then(|| format!("{header}\n{}", lines.join("\n")))
    }

    /// Extract the facts of the conversation `call` and `response` make, and store them.
    async fn extract(
        &self,
        call: &ModelCall,
        ns: &stategraph::store::Namespace,
        response: &ModelResponse,
    ) {
        let answer = Message::Ai(response.message.clone());
        let request = extraction_request(call.request.messages.iter().chain([&answer]));
        let entry =
            |stage, verdict| TraceEntry::new(EXTRACT, stage, verdict).on_model_call(call.number);
        let fail = |reason: String| entry(Stage::Executed, Verdict::Failed { reason });
        let reply = match self.extractor.invoke(request).await {
            Ok(reply) => reply,
            Err(e) => return call.trace.record(fail(e.to_string())),
        };
        if let Some(node) = &call.node {
            node.record_usage(crate::tokens::call_usage(&reply));
        }
        let facts = match parse_facts(&reply.message.content) {
            Ok(facts) => facts,
            Err(e) => return call.trace.record(fail(e.to_string())),
        };
        call.trace.record(entry(Stage::Executed, Verdict::Passed));
        let puts: Vec<Op> = facts
            .iter()
            .map(|f| Op::Put(fact_put(ns, f, "extraction")))
            .collect();
        if puts.is_empty() {
            return;
        }
        match self.store.batch(puts).await {
            Ok(_) => call.trace.record(entry(Stage::Returned, Verdict::Passed)),
            Err(e) => call.trace.record(entry(
                Stage::Returned,
                Verdict::Failed {
                    reason: e.to_string(),
                },
            )),
        }
    }
}

impl ModelLayer for MemoryLayer {
    fn name(&self) -> &str {
        MEMORY_CAPABILITY
    }

    fn call<'a>(
        &'a self,
        mut call: ModelCall,
        next: ModelNext<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let first = matches!(call.request.messages.last(), Some(Message::Human { .. }));
            let ns = match user_namespace(&call.run) {
                Ok(ns) => ns,
                Err(e) => {
                    if first {
                        call.trace.record(TraceEntry::new(
                            MEMORY_CAPABILITY,
                            Stage::Available,
                            Verdict::Passed,
                        ));
                        call.trace.record(TraceEntry::new(
                            MEMORY_CAPABILITY,
                            Stage::Authorized,
                            Verdict::removed(MEMORY_CAPABILITY, e.to_string()),
                        ));
                    }
                    return next.run(call).await;
                }
            };
            if first {
                call.trace.pass(MEMORY_CAPABILITY, Stage::Available);
                call.trace.pass(MEMORY_CAPABILITY, Stage::Authorized);
            }
            let original = call.request.messages.clone();
            if let Some(block) = self.injection(&call, &ns).await {
                let mut messages = vec![Message::system(block)];
                messages.extend(original.iter().cloned());
                call.request.messages = messages.into();
                call.trace.record(
                    TraceEntry::new(INJECT, Stage::Visible, Verdict::Passed)
                        .on_model_call(call.number),
                );
            }
            let trace_call = ModelCall {
                request: crate::model::ModelRequest {
                    messages: original,
                    ..call.request.clone()
                },
                ..call.clone()
            };
            let response = next.run(call).await?;
            if self.config.extract && response.message.tool_calls.is_empty() {
                self.extract(&trace_call, &ns, &response).await;
            }
            Ok(response)
        })
    }
}
