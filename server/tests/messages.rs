//! A model's tokens on the wire, compared with LangGraph's recorded answers for the same graph
//! and input (`fixtures/langgraph/chat-*.sse`): the same frames in the same order, the same
//! chunk text, the same last-chunk marker and metadata keys.

mod common;

use common::{recorded, Reply, Served};
use serde_json::{json, Value};

type TestResult = Result<(), Box<dyn std::error::Error>>;

async fn ours(mode: &str) -> Result<Reply, Box<dyn std::error::Error>> {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let reply = api
        .post(
            &format!("/threads/{t}/runs/stream"),
            json!({
                "assistant_id": "chat",
                "input": {"messages": [{"type": "human", "content": "hello there"}]},
                "stream_mode": mode,
            }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    Ok(reply)
}

/// What of a `messages` frame both servers must agree on.
fn tuple_shape(data: &Value) -> Value {
    let (chunk, meta) = (&data[0], &data[1]);
    json!({
        "type": chunk["type"],
        "content": chunk["content"],
        "last": chunk.get("chunk_position"),
        "node": meta["langgraph_node"],
        "step": meta["langgraph_step"],
        "ns_is_the_task": meta["langgraph_checkpoint_ns"].as_str().map(|ns| ns.starts_with("model:")),
        "graph": meta["graph_id"],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_tuple_frames_match_langgraphs_for_the_same_chat() -> TestResult {
    let theirs = recorded("chat-messages-tuple.sse")?;
    let ours = ours("messages-tuple").await?;
    assert_eq!(ours.event_names(), theirs.event_names());
    let shapes = |r: &Reply| -> Vec<Value> {
        r.events()
            .iter()
            .filter(|e| e.0 == "messages")
            .map(|e| tuple_shape(&e.1))
            .collect()
    };
    assert_eq!(shapes(&ours), shapes(&theirs));
    let ids: std::collections::BTreeSet<String> = ours
        .events()
        .iter()
        .filter(|e| e.0 == "messages")
        .filter_map(|e| e.1[0]["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 1, "one message, one id: {ids:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_mode_partials_match_langgraphs_and_end_complete() -> TestResult {
    let theirs = recorded("chat-messages.sse")?;
    let ours = ours("messages").await?;
    let mut names = ours.event_names();
    assert_eq!(names.pop().as_deref(), Some("messages/complete"));
    assert_eq!(
        names,
        theirs.event_names(),
        "the rest as LangGraph sends it"
    );
    let partials = |r: &Reply| -> Vec<Value> {
        r.events()
            .iter()
            .filter(|e| e.0 == "messages/partial")
            .map(|e| json!([e.1[0]["type"], e.1[0]["content"]]))
            .collect()
    };
    assert_eq!(partials(&ours), partials(&theirs));
    let complete = ours.events().pop().map(|e| e.1).unwrap_or_default();
    assert_eq!(complete[0]["content"], "You said: hello there");
    assert_eq!(complete[0]["type"], "ai");
    let meta_keys = |r: &Reply| -> Vec<String> {
        let events = r.events();
        let meta = &events[1].1;
        let (_, m) = meta
            .as_object()
            .and_then(|o| o.iter().next())
            .unwrap_or_else(|| {
                panic!("no message metadata in {meta}");
            });
        let mut keys: Vec<String> = m["metadata"]
            .as_object()
            .map(|o| {
                o.keys()
                    .filter(|k| k.starts_with("langgraph_n") || k.starts_with("langgraph_s"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        keys.sort();
        keys
    };
    assert_eq!(meta_keys(&ours), meta_keys(&theirs));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subgraphs_tokens_are_named_with_its_namespace_under_stream_subgraphs() -> TestResult {
    use stategraph::{Checkpointing, END, START};
    use stategraph_server::demo::{chat, Conversation};
    let outer = stategraph::StateGraph::<Conversation>::new()
        .add_subgraph(
            "inner",
            chat()?,
            Checkpointing::Inherit,
            |s: &Conversation| Conversation::update().messages(s.messages.to_vec().into()),
            |c: &Conversation| Conversation::update().messages(c.messages.to_vec().into()),
        )
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()?;
    let s = Served::start_with(|b| b.graph("outer", &outer)).await?;
    let api = s.api();
    let t = api.thread().await;
    let body = |subgraphs: bool| {
        json!({
            "assistant_id": "outer",
            "input": {"messages": [{"type": "human", "content": "deep"}]},
            "stream_mode": "messages-tuple",
            "stream_subgraphs": subgraphs,
        })
    };
    let reply = api
        .post(&format!("/threads/{t}/runs/stream"), body(true))
        .await;
    let names: Vec<String> = reply
        .event_names()
        .into_iter()
        .filter(|n| n.starts_with("messages"))
        .collect();
    assert!(names.len() >= 3, "{names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("messages|inner:")),
        "{names:?}"
    );
    let joined: String = reply
        .events()
        .iter()
        .filter(|e| e.0.starts_with("messages|"))
        .filter_map(|e| e.1[0]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(joined, "You said: deep");
    let quiet = api
        .post(&format!("/threads/{t}/runs/stream"), body(false))
        .await;
    assert_eq!(
        quiet.event_names(),
        ["metadata"],
        "no subgraph tokens without subgraphs"
    );
    Ok(())
}
