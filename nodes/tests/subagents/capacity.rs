//! Capacity end to end: the global limit under `multi_task`, the per-turn rewrite, and the
//! total limit's notice and stop reason.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph::{EventKind, StreamMode};
use stategraph_nodes::prelude::*;
use stategraph_nodes::subagent::{
    DelegationLimit, RunStopReason, SubagentLimiter, SubagentSpec, Subagents, LIMIT_NOTICE,
};

use super::support::{ask_then_cancel, lead, ok_tool, task_call, tool_messages, WorkOnce, R};
use stategraph_nodes::ToolError;

/// A tool that records how many of its calls run at once (the peak in `peak`).
fn gauge(now: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> FnTool {
    FnTool::new(
        ToolSpec::new("work", "works a while", ToolSource::BuiltIn),
        move |call, _cx| {
            let (now, peak) = (Arc::clone(&now), Arc::clone(&peak));
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(40)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolMessage::new(call.id, "work", "worked").into())
            }
        },
    )
}

fn multi(n: usize) -> ToolCall {
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"description": format!("part {i}"), "prompt": format!("do part {i}"), "subagent_type": "worker"}))
        .collect();
    ToolCall::new("m1", "multi_task", json!({ "tasks": tasks }))
}

#[tokio::test]
async fn the_global_limit_makes_the_fourth_of_four_delegations_wait_then_run() -> R {
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let subagents = Subagents::new(Arc::new(WorkOnce {
        tool: "work".into(),
    }))
    .builtin(Arc::new(gauge(now, Arc::clone(&peak))))
    .limiter(SubagentLimiter::new(3, Duration::from_secs(30)))
    .register(SubagentSpec::new("worker", "d", "p"));
    let parent = ScriptedModel::new(
        "lead",
        [AiMessage::calls([multi(4)]), AiMessage::text("ok")],
    );
    let (builder, log) = lead(parent, subagents);
    let agent = builder
        .assemble(RunContext::new("t", "ana").run("r1"))
        .await?;
    let mut stream = agent.graph().stream(
        ThreadState::human_input("go"),
        &agent.run_config(),
        StreamMode {
            custom: true,
            ..StreamMode::none()
        },
    );
    let mut events: Vec<serde_json::Value> = Vec::new();
    while let Some(event) = futures::StreamExt::next(&mut stream).await {
        if let EventKind::Custom { payload, .. } = event.kind {
            if let Some(sub) = payload.get("subagent") {
                events.push(sub.clone());
            }
        }
    }
    let out = stream.outcome().await?;
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    let messages = tool_messages(&out.state);
    assert_eq!(messages.len(), 4);
    assert!(messages
        .iter()
        .all(|m| m.content == "Task Succeeded. Result: done: worked" && m.tool_call_id == "m1"));
    let ids: Vec<String> = out.state.delegations.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids, ["m1/0", "m1/1", "m1/2", "m1/3"]);
    assert_eq!(log.reports().len(), 4);
    // Each child's progress reaches the parent's stream under its own delegation id.
    for id in &ids {
        let mine: Vec<&str> = events
            .iter()
            .filter(|e| e["call_id"] == id.as_str())
            .filter_map(|e| e["event"].as_str())
            .collect();
        assert_eq!(mine.first(), Some(&"task_started"), "{id}: {mine:?}");
        assert_eq!(mine.last(), Some(&"completed"), "{id}: {mine:?}");
        assert!(mine.contains(&"task_running"), "{id}: {mine:?}");
    }
    Ok(())
}

#[tokio::test]
async fn five_task_calls_with_a_per_turn_limit_of_3_run_the_first_3_and_the_other_call() -> R {
    let child = ScriptedModel::new("child", vec![AiMessage::text("fine"); 3]);
    let subagents =
        Subagents::new(Arc::new(child.clone())).register(SubagentSpec::new("worker", "d", "p"));
    let mut calls: Vec<ToolCall> = (1..=5)
        .map(|i| task_call(&format!("c{i}"), "worker", "x"))
        .collect();
    calls.insert(2, ToolCall::new("o1", "other", json!({})));
    let parent = ScriptedModel::new("lead", [AiMessage::calls(calls), AiMessage::text("ok")]);
    let agent = lead(parent, subagents)
        .0
        .tool(ok_tool("other", ToolSource::Config, true))
        .model_layer(DelegationLimit::new(3, 50))
        .assemble(RunContext::new("t", "ana").run("r1"))
        .await?;
    let out = agent.ask("go").await?;
    let answered: Vec<&str> = tool_messages(&out.state)
        .iter()
        .map(|m| m.tool_call_id.as_str())
        .collect();
    assert_eq!(answered, ["c1", "c2", "o1", "c3"]);
    let kept: Vec<&str> = out
        .state
        .messages
        .iter()
        .find_map(Message::as_ai)
        .map(|a| a.tool_calls.iter().map(|c| c.id.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(kept, ["c1", "c2", "o1", "c3"]);
    child.verify()?;
    Ok(())
}

#[tokio::test]
async fn reaching_the_total_limit_appends_the_notice_and_stops_with_subagent_limit_capped() -> R {
    let child = ScriptedModel::new("child", [AiMessage::text("first")]);
    let subagents =
        Subagents::new(Arc::new(child.clone())).register(SubagentSpec::new("worker", "d", "p"));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "x")]),
            AiMessage {
                content: "one more".into(),
                ..AiMessage::calls([task_call("c2", "worker", "y")])
            },
        ],
    );
    let agent = lead(parent.clone(), subagents)
        .0
        .model_layer(DelegationLimit::new(3, 1))
        .assemble(RunContext::new("t", "ana").run("r1"))
        .await?;
    let out = agent.ask("go").await?;
    let last = out.state.last_ai().ok_or("no answer")?;
    assert!(last.tool_calls.is_empty());
    assert_eq!(last.content, format!("one more\n\n{LIMIT_NOTICE}"));
    // The run's settlement carries the guard's stamp as its stop reason.
    assert_eq!(
        out.settlement.stop_reason.as_deref(),
        Some(RunStopReason::SubagentLimitCapped.as_str())
    );
    assert_eq!(out.state.delegations.len(), 1);
    parent.verify()?;
    child.verify()?;
    Ok(())
}

#[tokio::test]
async fn without_a_run_id_the_limit_counts_only_this_runs_delegations() -> R {
    let child = ScriptedModel::new("child", [AiMessage::text("a"), AiMessage::text("b")]);
    let subagents =
        Subagents::new(Arc::new(child.clone())).register(SubagentSpec::new("worker", "d", "p"));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "x")]),
            AiMessage::text("first run done"),
            AiMessage::calls([task_call("c2", "worker", "y")]),
            AiMessage::text("second run done"),
        ],
    );
    let saver = Arc::new(stategraph::checkpoints::MemorySaver::new());
    let agent = lead(parent.clone(), subagents)
        .0
        .model_layer(DelegationLimit::new(3, 1))
        .assemble(RunContext::new("t", "ana"))
        .await?
        .with_checkpointer(saver);
    let first = agent.ask("go").await?;
    // The second run of the thread gets its own generated run id, which its tools and the
    // ledger see: the first run's delegation does not use up the second run's total.
    let second = agent.ask("again").await?;
    assert_ne!(first.settlement.run_id, second.settlement.run_id);
    assert_eq!(second.settlement.stop_reason, None);
    let runs: Vec<_> = second
        .state
        .delegations
        .iter()
        .map(|d| d.run_id.clone())
        .collect();
    assert_eq!(
        runs,
        [
            Some(first.settlement.run_id.to_string()),
            Some(second.settlement.run_id.to_string())
        ]
    );
    parent.verify()?;
    child.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_reused_agent_reports_each_runs_own_stop_reason() -> R {
    let child = ScriptedModel::new("child", [AiMessage::text("first")]);
    let subagents =
        Subagents::new(Arc::new(child.clone())).register(SubagentSpec::new("worker", "d", "p"));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "x")]),
            AiMessage::calls([task_call("c2", "worker", "y")]),
            AiMessage::text("second run answers without delegating"),
        ],
    );
    // One layer serves both runs: a run's stop reason lives with that run only.
    let agent = lead(parent.clone(), subagents)
        .0
        .model_layer(DelegationLimit::new(3, 1))
        .assemble(RunContext::new("t", "ana"))
        .await?;
    let first = agent.ask("go").await?;
    assert_eq!(
        first.settlement.stop_reason.as_deref(),
        Some("subagent_limit_capped")
    );
    let second = agent.ask("again").await?;
    assert_eq!(second.settlement.stop_reason, None);
    parent.verify()?;
    child.verify()?;
    Ok(())
}

/// A tool that signals `started`, never finishes, and whose future takes `linger` to drop
/// (a child that needs time to stop); `stopped` is set when that drop is done.
fn slow_to_stop(
    started: Arc<tokio::sync::Notify>,
    stopped: Arc<std::sync::atomic::AtomicBool>,
    linger: Duration,
) -> FnTool {
    struct Linger(Arc<std::sync::atomic::AtomicBool>, Duration);
    impl Drop for Linger {
        fn drop(&mut self) {
            std::thread::sleep(self.1);
            self.0.store(true, Ordering::SeqCst);
        }
    }
    FnTool::new(
        ToolSpec::new("linger", "stops slowly", ToolSource::BuiltIn),
        move |_call, _cx| {
            let started = Arc::clone(&started);
            let guard = Linger(Arc::clone(&stopped), linger);
            async move {
                let _guard = guard;
                started.notify_one();
                futures::future::pending::<()>().await;
                Err(ToolError::failed("linger", "unreachable"))
            }
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_slot_is_free_only_once_a_cancelled_child_has_stopped() -> R {
    let started = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let limiter = SubagentLimiter::new(1, Duration::from_secs(10));
    let child = ScriptedModel::new(
        "child",
        [AiMessage::calls([ToolCall::new("l1", "linger", json!({}))])],
    );
    let subagents = Subagents::new(Arc::new(child.clone()))
        .builtin(Arc::new(slow_to_stop(
            Arc::clone(&started),
            Arc::clone(&stopped),
            Duration::from_millis(300),
        )))
        .limiter(limiter.clone())
        .register(SubagentSpec::new("slow", "d", "p"));
    let parent = ScriptedModel::new("lead", [AiMessage::calls([task_call("c1", "slow", "x")])]);
    let agent = lead(parent.clone(), subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?;
    let result = ask_then_cancel(&agent, agent.run_config(), &started).await;
    assert!(result.is_err(), "the lead was cancelled: {result:?}");
    // The slot is taken again only after the child's run has stopped.
    let _slot = limiter.acquire().await?;
    assert!(
        stopped.load(Ordering::SeqCst),
        "the slot was released while the cancelled child was still stopping"
    );
    parent.verify()?;
    child.verify()?;
    Ok(())
}
