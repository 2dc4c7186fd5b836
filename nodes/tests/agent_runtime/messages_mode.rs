//! The `messages` stream mode: model calls made through a node's context stream their chunks
//! with node, step and namespace; the chunks join to the message the state keeps; parallel
//! calls keep theirs apart; nothing streams when nobody listens.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use stategraph::checkpoints::Namespace;
use stategraph::prelude::*;
use stategraph::{Checkpointing, Event, EventKind, MessagePart, Node, RunOutcome, RunStream};
use stategraph_nodes::tokens::{call_model, AiMessageChunk};
use stategraph_nodes::{
    AgentBuilder, AiMessage, ChatModel, Message, ModelChunk, ModelError, ModelRequest,
    ModelResponse, RunContext, ScriptedModel, ThreadState,
};

use crate::support::R;

#[derive(State, Clone, Default, Debug)]
struct Talk {
    #[reduce(append)]
    answers: Vec<AiMessage>,
}

/// A node that asks `model` and appends its answer.
fn asking(model: ScriptedModel) -> impl Node<Talk> {
    move |_s: Arc<Talk>, cx: NodeContext| {
        let model = model.clone();
        async move {
            let request = ModelRequest::new(vec![Message::human("hi")]);
            let reply = call_model(&cx, &model, request).await?;
            Ok::<_, BoxError>(Talk::update().answers(vec![reply.message]))
        }
    }
}

/// A streamed run's events, in order, and its outcome.
async fn drain<S: State>(
    mut stream: RunStream<S>,
) -> Result<(Vec<Event>, RunOutcome<S>), BoxError> {
    let mut events = Vec::new();
    while let Some(ev) = stream.next().await {
        events.push(ev);
    }
    Ok((events, stream.outcome().await?))
}

/// The run's `messages` events, in order.
async fn messages_of(
    graph: &CompiledGraph<Talk>,
    mode: StreamMode,
) -> Result<Vec<Event>, BoxError> {
    let (events, _) = drain(graph.stream(Talk::update(), &RunConfig::new(), mode)).await?;
    Ok(events
        .into_iter()
        .filter(|ev| matches!(ev.kind, EventKind::Messages { .. }))
        .collect())
}

fn chunk(ev: &Event) -> Option<&AiMessageChunk> {
    match &ev.kind {
        EventKind::Messages {
            part: MessagePart::Chunk,
            message,
            ..
        } => message.get::<AiMessageChunk>(),
        _ => None,
    }
}

fn whole(ev: &Event) -> Option<&AiMessage> {
    match &ev.kind {
        EventKind::Messages {
            part: MessagePart::End,
            message,
            ..
        } => message.get::<Message>().and_then(Message::as_ai),
        _ => None,
    }
}

fn inner_graph(model: ScriptedModel) -> Result<CompiledGraph<Talk>, BoxError> {
    Ok(StateGraph::<Talk>::new()
        .add_node("ask", asking(model))
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .compile()?)
}

fn outer_graph(model: ScriptedModel) -> Result<CompiledGraph<Talk>, BoxError> {
    Ok(StateGraph::<Talk>::new()
        .add_subgraph(
            "inner",
            inner_graph(model)?,
            Checkpointing::Inherit,
            |_| Talk::update(),
            |c: &Talk| Talk::update().answers(c.answers.clone()),
        )
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()?)
}

#[tokio::test]
async fn a_user_nodes_model_call_in_a_subgraph_streams_chunks_with_node_step_and_namespace() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("one two three four")]);
    let graph = outer_graph(model)?;
    let mut mode = StreamMode::messages();
    mode.subgraphs = true;
    let events = messages_of(&graph, mode).await?;

    let chunks: Vec<&AiMessageChunk> = events.iter().filter_map(chunk).collect();
    assert_eq!(chunks.len(), 5, "four words and the last chunk: {chunks:?}");
    assert!(chunks[4].last && !chunks[3].last);
    for ev in &events {
        let EventKind::Messages { node, .. } = &ev.kind else {
            unreachable!()
        };
        assert_eq!(&**node, "ask");
        assert_eq!(ev.step, 1, "the inner graph's step");
        let levels = ev.ns.levels();
        assert_eq!(levels.len(), 1, "{}", ev.ns);
        assert!(levels[0].starts_with("inner:"), "{}", ev.ns);
    }
    let joined = AiMessageChunk::join("m", chunks.iter().copied())?;
    let end = events.iter().find_map(whole).ok_or("no end message")?;
    assert_eq!(&joined, end, "the chunks join to the whole message");
    assert_eq!(end.content, "one two three four");
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::Messages {
            part: MessagePart::End,
            ..
        })
    ));
    Ok(())
}

#[tokio::test]
async fn the_streamed_id_is_the_id_the_state_keeps() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("kept")]);
    let graph = inner_graph(model)?;
    let (events, out) =
        drain(graph.stream(Talk::update(), &RunConfig::new(), StreamMode::messages())).await?;
    let ids: Vec<String> = events
        .iter()
        .filter_map(chunk)
        .map(|c| c.id.clone())
        .collect();
    let kept = out.state.answers[0].id.clone().ok_or("no id")?;
    assert!(!ids.is_empty());
    assert!(ids.iter().all(|id| *id == kept), "{ids:?} vs {kept}");
    Ok(())
}

#[tokio::test]
async fn two_runs_without_checkpoints_stream_under_ids_of_their_own() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("a"), AiMessage::text("a")]);
    let graph = inner_graph(model)?;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let events = messages_of(&graph, StreamMode::messages()).await?;
        ids.push(chunk(&events[0]).map(|c| c.id.clone()).ok_or("no chunk")?);
    }
    assert_ne!(
        ids[0], ids[1],
        "a run's task ids repeat without checkpoints; its ids do not"
    );
    Ok(())
}

#[tokio::test]
async fn a_resumed_task_streams_its_model_call_again_under_the_same_id() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("asked"), AiMessage::text("asked")]);
    let graph = StateGraph::<Talk>::new()
        .add_node("ask", move |_s: Arc<Talk>, cx: NodeContext| {
            let model = model.clone();
            async move {
                let reply = call_model(&cx, &model, ModelRequest::default()).await?;
                let _ok: bool = cx.interrupt("keep it?")?;
                Ok::<_, BoxError>(Talk::update().answers(vec![reply.message]))
            }
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .compile()?
        .with_checkpointer(Arc::new(stategraph::checkpoints::MemorySaver::new()));
    let config = RunConfig::new().thread("t");
    let first_id = |events: Vec<Event>| events.iter().find_map(chunk).map(|c| c.id.clone());
    let (events, out) =
        drain(graph.stream(Talk::update(), &config, StreamMode::messages())).await?;
    assert!(out.is_interrupted());
    let asked = first_id(events);
    let (events, out) = drain(graph.stream(
        stategraph::Command::resume(stategraph::Resume::value(serde_json::json!(true))),
        &config,
        StreamMode::messages(),
    ))
    .await?;
    assert!(asked.is_some());
    assert_eq!(
        first_id(events),
        asked,
        "the task ran again from the top: the same id"
    );
    assert_eq!(out.state.answers[0].id, asked, "and the thread keeps it");
    Ok(())
}

#[tokio::test]
async fn subgraph_tokens_stream_only_with_subgraphs() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("quiet words")]);
    let graph = outer_graph(model)?;
    let events = messages_of(&graph, StreamMode::messages()).await?;
    assert!(events.is_empty(), "{events:?}");
    Ok(())
}

#[tokio::test]
async fn two_parallel_model_calls_keep_their_chunks_apart() -> R {
    let a = ScriptedModel::new("a", [AiMessage::text("alpha beta gamma delta")]);
    let b = ScriptedModel::new("b", [AiMessage::text("uno dos tres cuatro cinco")]);
    let graph = StateGraph::<Talk>::new()
        .add_node("a", asking(a))
        .add_node("b", asking(b))
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", END)
        .add_edge("b", END)
        .compile()?;
    let events = messages_of(&graph, StreamMode::messages()).await?;
    let mut by_id: BTreeMap<String, (String, Vec<&AiMessageChunk>)> = BTreeMap::new();
    for ev in &events {
        if let (Some(c), EventKind::Messages { node, .. }) = (chunk(ev), &ev.kind) {
            let entry = by_id
                .entry(c.id.clone())
                .or_insert_with(|| (node.to_string(), Vec::new()));
            assert_eq!(entry.0, &**node, "one id, one node");
            entry.1.push(c);
        }
    }
    assert_eq!(by_id.len(), 2);
    let mut texts: Vec<(String, String)> = Vec::new();
    for (node, chunks) in by_id.values() {
        let joined = AiMessageChunk::join("m", chunks.iter().copied())?;
        texts.push((node.clone(), joined.content));
    }
    texts.sort();
    assert_eq!(
        texts,
        [
            ("a".to_owned(), "alpha beta gamma delta".to_owned()),
            ("b".to_owned(), "uno dos tres cuatro cinco".to_owned()),
        ]
    );
    Ok(())
}

/// A model that counts how often it is asked to stream.
#[derive(Clone, Default)]
struct CountsStreams {
    streams: Arc<AtomicUsize>,
}

impl ChatModel for CountsStreams {
    fn name(&self) -> &str {
        "counts"
    }

    fn invoke(&self, _: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        Box::pin(async { Ok(ModelResponse::from(AiMessage::text("whole"))) })
    }

    fn stream(&self, _: ModelRequest) -> BoxStream<'_, Result<ModelChunk, ModelError>> {
        self.streams.fetch_add(1, Ordering::SeqCst);
        Box::pin(futures::stream::iter([Ok(ModelChunk::Done(
            AiMessage::text("whole").into(),
        ))]))
    }
}

#[tokio::test]
async fn without_the_messages_mode_the_model_is_not_streamed_and_nothing_is_emitted() -> R {
    let model = CountsStreams::default();
    let node_model = model.clone();
    let graph = StateGraph::<Talk>::new()
        .add_node("ask", move |_s: Arc<Talk>, cx: NodeContext| {
            let model = node_model.clone();
            async move {
                let reply = call_model(&cx, &model, ModelRequest::default()).await?;
                Ok::<_, BoxError>(Talk::update().answers(vec![reply.message]))
            }
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .compile()?;
    let mut all = StreamMode::all();
    all.messages = false;
    let (events, out) = drain(graph.stream(Talk::update(), &RunConfig::new(), all)).await?;
    for ev in &events {
        assert!(!matches!(ev.kind, EventKind::Messages { .. }), "{ev:?}");
    }
    assert_eq!(model.streams.load(Ordering::SeqCst), 0);
    assert_eq!(out.state.answers[0].content, "whole");
    assert_eq!(out.state.answers[0].id, None, "no id is made for nobody");

    let _ = messages_of(&graph, StreamMode::messages()).await?;
    assert_eq!(
        model.streams.load(Ordering::SeqCst),
        1,
        "streamed when asked"
    );
    Ok(())
}

/// An agent's run on "go", streamed with the `messages` mode.
async fn agent_messages(
    agent: &stategraph_nodes::Agent,
) -> Result<(Vec<Event>, RunOutcome<ThreadState>), BoxError> {
    drain(agent.graph().stream(
        ThreadState::human_input("go"),
        &agent.run_config(),
        StreamMode::messages(),
    ))
    .await
}

#[tokio::test]
async fn an_agents_answer_streams_as_messages_with_the_id_its_thread_keeps() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("the agent answers")]);
    let agent = AgentBuilder::new(model)
        .assemble(RunContext::new("t", "u"))
        .await?;
    let (events, out) = agent_messages(&agent).await?;
    let chunks: Vec<AiMessageChunk> = events.iter().filter_map(chunk).cloned().collect();
    let ns: Vec<&Namespace> = events
        .iter()
        .filter(|ev| chunk(ev).is_some())
        .map(|ev| &ev.ns)
        .collect();
    let kept = out.state.last_ai().ok_or("no answer")?;
    let joined = AiMessageChunk::join("m", &chunks)?;
    assert_eq!(joined.content, kept.content);
    assert_eq!(joined.id, kept.id);
    assert!(chunks.len() >= 3, "{chunks:?}");
    assert!(ns.iter().all(|ns| ns.is_root()));
    Ok(())
}

#[tokio::test]
async fn a_tool_result_streams_whole_under_the_id_its_thread_keeps() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = crate::support::call_then("c1", "lookup", "found it");
    let agent = AgentBuilder::new(model)
        .tool(crate::support::counted(
            "lookup",
            stategraph_nodes::ToolSource::Config,
            &runs,
        ))
        .assemble(RunContext::new("t", "u"))
        .await?;
    let (events, out) = agent_messages(&agent).await?;
    let mut wholes = Vec::new();
    let mut ends = Vec::new();
    for ev in &events {
        if let EventKind::Messages {
            part,
            message,
            node,
            ..
        } = &ev.kind
        {
            let Some(m) = message.get::<Message>() else {
                continue;
            };
            match part {
                MessagePart::Whole => wholes.push((node.to_string(), m.clone())),
                MessagePart::End => ends.push(m.clone()),
                MessagePart::Chunk => {}
            }
        }
    }
    assert_eq!(wholes.len(), 1, "{wholes:?}");
    let (_, tool) = &wholes[0];
    let kept = out
        .state
        .messages
        .iter()
        .find(|m| m.as_tool().is_some())
        .ok_or("no tool message")?;
    assert_eq!(tool, kept, "streamed as the thread keeps it, id included");
    assert_eq!(ends.len(), 2, "the call turn and the answer: {ends:?}");
    let kept_ai: Vec<&Message> = out
        .state
        .messages
        .iter()
        .filter(|m| m.as_ai().is_some())
        .collect();
    assert_eq!(ends.iter().collect::<Vec<_>>(), kept_ai);
    Ok(())
}
