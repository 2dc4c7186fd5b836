//! Small graphs `stategraph serve` serves when it is given none of a user's: a chain, an
//! echo agent, an approval that interrupts, custom events, a slow loop, a subgraph, a
//! failing node and (with the `agent` feature) two chats whose model streams its tokens, one
//! of them asking approval first (the chat page's). The SDK tests and the server bench drive them; LangGraph's twins live beside
//! those tests, so both servers can be checked with the same client scripts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use stategraph::prelude::*;
use stategraph::CompileError;

use crate::ServerBuilder;

/// A list of strings, appended to.
#[derive(State, Clone, Default, Debug)]
pub struct Log {
    /// The entries.
    #[reduce(append)]
    pub log: Vec<String>,
}

/// A conversation of JSON messages (`{"type": "ai", "content": …}`), appended to.
#[derive(State, Clone, Default, Debug)]
pub struct Chat {
    /// The messages.
    #[reduce(append)]
    pub messages: Vec<Value>,
}

/// A log and the answer an approval got.
#[derive(State, Clone, Default, Debug)]
pub struct Approval {
    /// The entries.
    #[reduce(append)]
    pub log: Vec<String>,
    /// The answer.
    pub decision: Option<String>,
}

/// A loop of `steps` ticks of `delay_ms` each.
#[derive(State, Clone, Default, Debug)]
pub struct Slow {
    /// One entry per tick.
    #[reduce(append)]
    pub log: Vec<String>,
    /// Ticks to run.
    pub steps: u64,
    /// Milliseconds a tick takes.
    pub delay_ms: u64,
}

fn append(
    name: &'static str,
) -> impl Fn(Arc<Log>, NodeContext) -> futures::future::Ready<Result<LogUpdate, BoxError>>
       + Send
       + Sync
       + 'static {
    move |_s, _cx| futures::future::ready(Ok(Log::update().log(vec![name.to_owned()])))
}

/// `a → b → c`, each appending its name.
///
/// # Errors
/// Never in practice (the graph is fixed); a [`CompileError`] otherwise.
pub fn chain() -> Result<CompiledGraph<Log>, CompileError> {
    StateGraph::<Log>::new()
        .add_node("a", append("a"))
        .add_node("b", append("b"))
        .add_node("c", append("c"))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .compile()
}

/// One node, `model`, answering `You said: <the last message's content>`.
///
/// # Errors
/// As [`chain`].
pub fn agent() -> Result<CompiledGraph<Chat>, CompileError> {
    StateGraph::<Chat>::new()
        .add_node("model", |s: Arc<Chat>, _cx: NodeContext| async move {
            let last = s
                .messages
                .last()
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let reply = json!({ "type": "ai", "content": format!("You said: {last}") });
            Ok::<_, BoxError>(Chat::update().messages(vec![reply]))
        })
        .add_edge(START, "model")
        .add_edge("model", END)
        .compile()
}

/// `ask` interrupts with `{"question": "approve?"}` and keeps the answer; `finish` follows.
///
/// # Errors
/// As [`chain`].
pub fn approval() -> Result<CompiledGraph<Approval>, CompileError> {
    StateGraph::<Approval>::new()
        .add_node("ask", |_s: Arc<Approval>, cx: NodeContext| async move {
            let answer: String = cx.interrupt(json!({ "question": "approve?" }))?;
            Ok::<_, BoxError>(
                Approval::update()
                    .decision(Some(answer))
                    .log(vec!["asked".to_owned()]),
            )
        })
        .add_node("finish", |_s: Arc<Approval>, _cx: NodeContext| async move {
            Ok::<_, BoxError>(Approval::update().log(vec!["finished".to_owned()]))
        })
        .add_edge(START, "ask")
        .add_edge("ask", "finish")
        .add_edge("finish", END)
        .compile()
}

/// `work` emits `{"progress": 0..3}` as custom events, then appends `worked`.
///
/// # Errors
/// As [`chain`].
pub fn custom() -> Result<CompiledGraph<Log>, CompileError> {
    StateGraph::<Log>::new()
        .add_node("work", |_s: Arc<Log>, cx: NodeContext| async move {
            for progress in 0..3 {
                cx.emit(json!({ "progress": progress })).await;
            }
            Ok::<_, BoxError>(Log::update().log(vec!["worked".to_owned()]))
        })
        .add_edge(START, "work")
        .add_edge("work", END)
        .compile()
}

/// `tick` sleeps `delay_ms`, appends `tick<n>`, and loops until the log has `steps` entries.
///
/// # Errors
/// As [`chain`].
pub fn slow() -> Result<CompiledGraph<Slow>, CompileError> {
    StateGraph::<Slow>::new()
        .add_node("tick", |s: Arc<Slow>, _cx: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(s.delay_ms)).await;
            Ok::<_, BoxError>(Slow::update().log(vec![format!("tick{}", s.log.len())]))
        })
        .add_edge(START, "tick")
        .add_conditional_edges(
            "tick",
            |s: &Slow| {
                if (s.log.len() as u64) < s.steps {
                    "tick"
                } else {
                    END
                }
            },
            ["tick", END],
        )
        .compile()
}

/// `child` (the [`chain`] as a subgraph sharing `log`) then `after`.
///
/// # Errors
/// As [`chain`].
pub fn nested() -> Result<CompiledGraph<Log>, CompileError> {
    StateGraph::<Log>::new()
        .add_subgraph(
            "child",
            chain()?,
            Checkpointing::Inherit,
            |s: &Log| Log::update().log(s.log.clone()),
            |c: &Log| Log::update().log(c.log.clone()),
        )
        .add_node("after", append("after"))
        .add_edge(START, "child")
        .add_edge("child", "after")
        .add_edge("after", END)
        .compile()
}

/// `explode` fails with `boom` unless the log holds `ok`; then it appends `survived`.
///
/// # Errors
/// As [`chain`].
pub fn boom() -> Result<CompiledGraph<Log>, CompileError> {
    StateGraph::<Log>::new()
        .add_node("explode", |s: Arc<Log>, _cx: NodeContext| async move {
            if !s.log.iter().any(|e| e == "ok") {
                return Err::<LogUpdate, BoxError>("boom".into());
            }
            Ok(Log::update().log(vec!["survived".to_owned()]))
        })
        .add_edge(START, "explode")
        .add_edge("explode", END)
        .compile()
}

/// The runtime context of the [`greet`] graph: who a run is for. Every field has a default,
/// so a run given no context greets the default caller, as LangGraph's server does.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Caller {
    /// The caller's name (empty when not given).
    #[serde(default)]
    pub user: String,
    /// Their tier (1 when not given).
    #[serde(default = "first_tier")]
    pub tier: u8,
}

fn first_tier() -> u8 {
    1
}

/// `greet` appends `hello <user> (tier <tier>)` for the run's [`Caller`] context (`no caller`
/// for a run started without one, from Rust). It declares `Caller` as its context type, so a
/// run's JSON `context` is decoded as one (a 422 when it does not fit).
///
/// # Errors
/// As [`chain`].
pub fn greet() -> Result<CompiledGraph<Log>, CompileError> {
    StateGraph::<Log>::new()
        .context_schema::<Caller>()
        .add_node("greet", |_s: Arc<Log>, cx: NodeContext| async move {
            let line = match cx.context::<Caller>() {
                Ok(c) => format!("hello {} (tier {})", c.user, c.tier),
                Err(_) => "no caller".to_owned(),
            };
            Ok::<_, BoxError>(Log::update().log(vec![line]))
        })
        .add_edge(START, "greet")
        .add_edge("greet", END)
        .compile()
}

#[cfg(feature = "agent")]
pub use chat::{chat, guarded_chat, Conversation, EchoModel};

#[cfg(feature = "agent")]
mod chat {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::future::BoxFuture;
    use futures::stream::BoxStream;
    use futures::StreamExt;
    use serde_json::json;
    use stategraph::prelude::*;
    use stategraph::reducers::MessagesUpdate;
    use stategraph::{Command, CompileError, List, NodeOptions};
    use stategraph_nodes::toolbox::{model_node, Toolbox};
    use stategraph_nodes::{
        impl_messages_state, AiMessage, ChatModel, Message, ModelChunk, ModelError, ModelRequest,
        ModelResponse,
    };

    /// A conversation of typed messages, merged by id (LangChain's message JSON on the wire).
    #[derive(State, Clone, Default, Debug)]
    pub struct Conversation {
        /// The messages.
        #[reduce(add_messages)]
        pub messages: List<Message>,
    }
    impl_messages_state!(Conversation, messages);

    /// A chat model that answers `You said: <the last message's text>`, streamed word by
    /// word (a pause before each word, if paced): a model with no provider behind it, for
    /// demos and tests of token streaming.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct EchoModel {
        pace: Duration,
    }

    impl EchoModel {
        /// An echo that waits `pace` before each streamed word, as a model writes.
        pub fn paced(pace: Duration) -> Self {
            EchoModel { pace }
        }
    }

    impl ChatModel for EchoModel {
        fn name(&self) -> &str {
            "echo"
        }

        fn invoke(
            &self,
            request: ModelRequest,
        ) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
            let last = request
                .messages
                .last()
                .map(|m| m.text().to_owned())
                .unwrap_or_default();
            Box::pin(async move { Ok(AiMessage::text(format!("You said: {last}")).into()) })
        }

        fn stream(&self, request: ModelRequest) -> BoxStream<'_, Result<ModelChunk, ModelError>> {
            let words = stategraph_nodes::tokens::stream_words(self.invoke(request));
            let pace = self.pace;
            if pace.is_zero() {
                return words;
            }
            Box::pin(words.then(move |piece| async move {
                tokio::time::sleep(pace).await;
                piece
            }))
        }
    }

    /// One node, `model`: the [`EchoModel`] answering the conversation through
    /// [`model_node`], so its tokens stream in the `messages` modes.
    ///
    /// # Errors
    /// As [`chain`](super::chain).
    pub fn chat() -> Result<CompiledGraph<Conversation>, CompileError> {
        StateGraph::<Conversation>::new()
            .add_node("model", model_node(EchoModel::default(), &Toolbox::new()))
            .add_edge(START, "model")
            .add_edge("model", END)
            .compile()
    }

    /// The chat page's graph: `guard`, then the [`EchoModel`] paced at 40 ms a word. When the
    /// last message asks to `approve`, `guard` interrupts with `{"question": …}` first; a
    /// resume of `"yes"` lets the model answer, anything else answers `Declined.`.
    ///
    /// # Errors
    /// As [`chain`](super::chain).
    pub fn guarded_chat() -> Result<CompiledGraph<Conversation>, CompileError> {
        StateGraph::<Conversation>::new()
            .add_node_with(
                "guard",
                guard,
                NodeOptions::new().destinations(["model", END]),
            )
            .add_node(
                "model",
                model_node(EchoModel::paced(Duration::from_millis(40)), &Toolbox::new()),
            )
            .add_edge(START, "guard")
            .add_edge("model", END)
            .compile()
    }

    async fn guard(
        s: Arc<Conversation>,
        cx: NodeContext,
    ) -> Result<Command<Conversation>, BoxError> {
        let asks = s
            .messages
            .last()
            .is_some_and(|m| matches!(m, Message::Human { .. }) && m.text().contains("approve"));
        if !asks {
            return Ok(Command::new().goto("model"));
        }
        let answer: String = cx.interrupt(json!({ "question": "Approve this request?" }))?;
        if answer == "yes" {
            return Ok(Command::new().goto("model"));
        }
        let declined = Message::Ai(AiMessage::text("Declined."));
        Ok(Command::new()
            .update(Conversation::update().messages(MessagesUpdate::from(declined)))
            .goto(END))
    }
}

/// Register every demo graph, by its function's name.
///
/// # Errors
/// As [`chain`].
pub fn register(builder: ServerBuilder) -> Result<ServerBuilder, CompileError> {
    let builder = builder
        .graph("chain", &chain()?)
        .graph("agent", &agent()?)
        .graph("approval", &approval()?)
        .graph("custom", &custom()?)
        .graph("slow", &slow()?)
        .graph("nested", &nested()?)
        .graph("boom", &boom()?)
        .graph("greet", &greet()?);
    #[cfg(feature = "agent")]
    let builder = builder
        .graph("chat", &chat()?)
        .graph("guarded_chat", &guarded_chat()?);
    Ok(builder)
}
