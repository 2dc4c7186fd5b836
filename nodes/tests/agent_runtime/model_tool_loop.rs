//! The model-tool loop: routing, concurrent calls, reducers, errors, streaming, task ids.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use stategraph::checkpoints::MemorySaver;
use stategraph::reducers::MessagesUpdate;
use stategraph::{EventKind, Resume, StreamMode};
use stategraph_nodes::prelude::*;
use stategraph_nodes::*;

use crate::support::*;

#[tokio::test]
async fn model_tool_loop_ends_when_the_model_stops_calling_tools() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "lookup")]),
            AiMessage::calls([call("c2", "lookup")]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("lookup", ToolSource::Config, &runs))
        .assemble(RunContext::new("t", "u"))
        .await?;
    let out = agent.ask("go").await?;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(out.state.messages.len(), 1 + 2 * 2 + 1);
    assert_eq!(
        out.state.last_ai().map(|m| m.content.as_str()),
        Some("done")
    );
    // Each tool message answers its call.
    let answered: Vec<&str> = tool_messages(&out.state)
        .iter()
        .map(|m| m.tool_call_id.as_str())
        .collect();
    assert_eq!(answered, ["c1", "c2"]);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn read_only_calls_of_one_message_run_concurrently() -> R {
    // Each call waits until both have started: only concurrent execution finishes.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let b = Arc::clone(&barrier);
    let wait = FnTool::new(
        ToolSpec::new("wait", "waits", ToolSource::Config).read_only(true),
        move |call, _cx| {
            let b = Arc::clone(&b);
            async move {
                tokio::time::timeout(Duration::from_secs(5), b.wait())
                    .await
                    .map_err(|_| ToolError::failed("wait", "the other call never started"))?;
                Ok(ToolMessage::new(call.id, "wait", "met").into())
            }
        },
    );
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "wait"), call("c2", "wait")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(wait)
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    let contents: Vec<&str> = tool_messages(&out.state)
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(contents, ["met", "met"]);
    model.verify()?;
    Ok(())
}

/// A tool that logs when each of its calls starts and ends, holding `hold` in between.
fn logging(
    name: &'static str,
    read_only: bool,
    log: &Arc<std::sync::Mutex<Vec<String>>>,
) -> FnTool {
    let log = Arc::clone(log);
    FnTool::new(
        ToolSpec::new(name, "logs", ToolSource::Config).read_only(read_only),
        move |call: ToolCall, _cx| {
            let log = Arc::clone(&log);
            async move {
                let push = |what: String| log.lock().map(|mut l| l.push(what)).unwrap_or(());
                push(format!("start {}", call.id));
                tokio::time::sleep(Duration::from_millis(30)).await;
                push(format!("end {}", call.id));
                Ok(ToolMessage::new(call.id, name, "ok").into())
            }
        },
    )
}

#[tokio::test]
async fn a_call_that_is_not_read_only_runs_alone_and_in_order() -> R {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([
                call("w1", "write"),
                call("r1", "read"),
                call("r2", "read"),
                call("w2", "write"),
            ]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(logging("write", false, &log))
        .tool(logging("read", true, &log))
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    let log = log.lock().map_err(|e| e.to_string())?.clone();
    // w1 alone, then r1 and r2 together (both start before either ends), then w2 alone.
    assert_eq!(&log[..2], ["start w1", "end w1"]);
    assert!(
        log[2].starts_with("start r") && log[3].starts_with("start r"),
        "{log:?}"
    );
    assert!(
        log[4].starts_with("end r") && log[5].starts_with("end r"),
        "{log:?}"
    );
    assert_eq!(&log[6..], ["start w2", "end w2"]);
    // Every call answered once, in the model's order, and the model ran once more.
    let answered: Vec<&str> = tool_messages(&out.state)
        .iter()
        .map(|m| m.tool_call_id.as_str())
        .collect();
    assert_eq!(answered, ["w1", "r1", "r2", "w2"]);
    assert_eq!(out.state.messages.last().map(Message::text), Some("ok"));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn tool_results_merge_through_reducers_in_call_order() -> R {
    // Two tools return Commands writing artifacts in one step; the slower first call still
    // lands first, and the artifacts reducer unions them.
    fn presenter(name: &'static str, files: &'static [&'static str], delay_ms: u64) -> FnTool {
        FnTool::new(
            ToolSpec::new(name, "presents", ToolSource::BuiltIn),
            move |call, _cx| async move {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                let update = ThreadState::update()
                    .artifacts(files.iter().map(|f| f.to_string()).collect())
                    .messages(MessagesUpdate::from(Message::Tool(ToolMessage::new(
                        call.id,
                        name,
                        "presented",
                    ))));
                Ok(ToolOutput::Command(
                    stategraph::Command::new().update(update),
                ))
            },
        )
    }
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "slow"), call("c2", "fast")]),
            AiMessage::text("ok"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(presenter("slow", &["a", "b"], 50))
        .tool(presenter("fast", &["b", "c"], 0))
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    assert_eq!(out.state.artifacts, ["a", "b", "c"]);
    let order: Vec<&str> = tool_messages(&out.state)
        .iter()
        .map(|m| m.tool_call_id.as_str())
        .collect();
    assert_eq!(order, ["c1", "c2"]);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn invented_tool_call_gets_an_error_message_and_no_handler_runs() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = call_then("c1", "rm_rf", "sorry");
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("lookup", ToolSource::Config, &runs))
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    let msgs = tool_messages(&out.state);
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].is_error());
    assert_eq!(msgs[0].content, "Error: tool \"rm_rf\" does not exist");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let why = agent.trace().why_not("rm_rf", Stage::Executed);
    assert!(matches!(why.map(|e| e.verdict), Some(Verdict::Denied { by, .. }) if by == "catalog"));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn failing_tool_becomes_an_error_tool_message_and_the_run_goes_on() -> R {
    let boom = FnTool::new(
        ToolSpec::new("boom", "fails", ToolSource::Config),
        |_call, _cx| async { Err(ToolError::failed("boom", "disk full")) },
    );
    let model = call_then("c1", "boom", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(boom)
        .assemble(RunContext::default())
        .await?;
    let out = agent.ask("go").await?;
    let msgs = tool_messages(&out.state);
    assert_eq!(msgs[0].content, "Error: tool \"boom\" failed: disk full");
    let returned = agent
        .trace()
        .for_tool("boom")
        .into_iter()
        .find(|e| e.stage == Stage::Returned);
    assert!(matches!(
        returned.map(|e| e.verdict),
        Some(Verdict::Failed { .. })
    ));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn model_failure_is_a_typed_run_error_naming_the_model() -> R {
    let model = ScriptedModel::new("scripted-x", Vec::<AiMessage>::new());
    let agent = AgentBuilder::new(model)
        .assemble(RunContext::default())
        .await?;
    let err = agent
        .ask("hi")
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("scripted-x") && err.contains("no scripted reply"),
        "{err}"
    );
    Ok(())
}

#[test]
fn agent_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Agent>();
    check::<AgentBuilder>();
    check::<CapabilityTrace>();
    check::<ScriptedModel>();
    check::<ThreadState>();
}

#[tokio::test]
async fn streamed_model_chunks_arrive_as_events_and_assemble_into_the_answer() -> R {
    let model = ScriptedModel::new("m", [AiMessage::text("streamed answer")]);
    let agent = AgentBuilder::new(model.clone())
        .stream_tokens(true)
        .assemble(RunContext::default())
        .await?;
    let mut stream = agent.graph().stream(
        ThreadState::human_input("go"),
        &agent.run_config(),
        StreamMode::default(),
    );
    let mut chunks = Vec::new();
    while let Some(event) = stream.next().await {
        if let EventKind::Custom { payload, .. } = event.kind {
            if let Some(chunk) = payload.get("chunk") {
                chunks.push(serde_json::from_value::<ModelChunk>(chunk.clone())?);
            }
        }
    }
    assert_eq!(
        chunks,
        [
            ModelChunk::Text {
                delta: "streamed ".into()
            },
            ModelChunk::Text {
                delta: "answer".into()
            }
        ]
    );
    let out = stream.outcome().await?;
    assert_eq!(
        out.state.last_ai().map(|m| m.content.as_str()),
        Some("streamed answer")
    );
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn each_tool_call_has_a_stable_task_id_usable_as_an_idempotency_key() -> R {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let ask = FnTool::new(
        ToolSpec::new("charge", "charges once", ToolSource::Config),
        move |call, cx| {
            let s = Arc::clone(&s);
            async move {
                let id = cx
                    .node
                    .as_ref()
                    .map(|n| n.task_id().to_string())
                    .unwrap_or_default();
                if let Ok(mut v) = s.lock() {
                    v.push(id);
                }
                let answer: String = cx
                    .interrupt("confirm?")
                    .map_err(|e| ToolError::failed("charge", e))?;
                Ok(ToolMessage::new(call.id, "charge", answer).into())
            }
        },
    );
    let model = call_then("c1", "charge", "done");
    let agent = AgentBuilder::new(model.clone())
        .tool(ask)
        .assemble(RunContext::new("t-id", "u"))
        .await?;
    let graph = agent
        .graph()
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let config = agent.run_config().thread("t-id");
    graph
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    graph
        .invoke(
            stategraph::Command::<ThreadState>::resume(Resume::value("yes")),
            &config,
        )
        .await?;
    let seen = seen.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], seen[1]);
    assert!(!seen[0].is_empty());
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_model_sees_a_message_edited_in_place_not_a_stale_copy() -> R {
    // The agent shares one message list across model calls and appends to it; an in-place
    // edit (same id, new content) must still reach the model.
    let redact = FnTool::new(
        ToolSpec::new("redact", "redacts", ToolSource::BuiltIn),
        |call, cx| async move {
            let first = cx
                .state
                .messages
                .first()
                .cloned()
                .ok_or_else(|| ToolError::failed("redact", "empty"))?;
            let id = stategraph::reducers::Message::id(&first).map(str::to_owned);
            let mut redacted = Message::human("[redacted]");
            if let Some(id) = id {
                stategraph::reducers::Message::set_id(&mut redacted, id);
            }
            let mut update = MessagesUpdate::from(redacted);
            update.push(Message::Tool(ToolMessage::new(call.id, "redact", "done")));
            Ok(ToolOutput::Command(
                stategraph::Command::new().update(ThreadState::update().messages(update)),
            ))
        },
    );
    let model = call_then("c1", "redact", "ok");
    let agent = AgentBuilder::new(model.clone())
        .tool(redact)
        .assemble(RunContext::default())
        .await?;
    agent.ask("my card is 4111 1111 1111 1111").await?;
    let requests = model.requests();
    assert_eq!(
        requests[0].messages[0].text(),
        "my card is 4111 1111 1111 1111"
    );
    assert_eq!(requests[1].messages[0].text(), "[redacted]");
    assert_eq!(requests[1].messages.len(), 3);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_turn_limit_counts_model_calls_not_steps() -> R {
    // Each turn asks for four writes (four steps of tools each); two turns fit a limit of two,
    // the third model call is refused with the turn limit, not the recursion limit.
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let turn = |t: usize| AiMessage::calls((0..4).map(|i| call(&format!("t{t}w{i}"), "write")));
    let model = ScriptedModel::new("m", [turn(0), turn(1), AiMessage::text("never")]);
    let agent = AgentBuilder::new(model.clone())
        .tool(logging("write", false, &log))
        .max_turns(2)
        .assemble(RunContext::default())
        .await?;
    let err = agent
        .ask("go")
        .await
        .err()
        .ok_or("the run was not capped")?;
    let run_error = err.run_error().ok_or("not a run error")?;
    assert_eq!(
        TurnLimitReached::in_run_error(run_error),
        Some(TurnLimitReached { max_turns: 2 })
    );
    let settled = err.settlement().ok_or("no settlement")?;
    assert_eq!(settled.stop_reason.as_deref(), Some(TURN_CAPPED));
    assert_eq!(model.remaining(), 1, "the third model call was made");
    assert_eq!(
        log.lock().map(|l| l.len()).unwrap_or(0),
        16,
        "8 calls, start and end"
    );
    model.clear();
    Ok(())
}

#[tokio::test]
async fn each_runs_trace_holds_its_own_entries_and_the_assemblys() -> R {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("a1", "read")]),
            AiMessage::text("first"),
            AiMessage::text("second"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(counted("read", ToolSource::Config, &runs))
        .assemble(RunContext::default())
        .await?;
    let first = agent.ask("one").await?.settlement.run_id;
    let second = agent.ask("two").await?.settlement.run_id;
    let executed = |run| {
        agent
            .run_trace(run)
            .iter()
            .filter(|e| e.stage == Stage::Executed)
            .count()
    };
    assert_eq!(executed(&first), 1);
    assert_eq!(
        executed(&second),
        0,
        "the first run's call is in the second's trace"
    );
    // Both start with the assembly's entries.
    for run in [&first, &second] {
        assert!(agent
            .run_trace(run)
            .iter()
            .any(|e| e.stage == Stage::Available && e.run_id.is_none()));
    }
    model.verify()?;
    Ok(())
}
