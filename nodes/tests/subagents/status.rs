//! Status normalisation end to end: timeouts, the turn budget with and without a partial
//! answer, and a cancelled parent cancelling its children.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::state::DelegationStatus;
use stategraph_nodes::subagent::{SubagentSpec, Subagents};

use super::support::{ask_then_cancel, lead, ok_tool, task_call, tool_messages, R};

/// A tool that never finishes (sets `dropped` when its future is dropped, `started` when it
/// begins).
fn forever(started: Arc<tokio::sync::Notify>, dropped: Arc<AtomicBool>) -> FnTool {
    struct OnDrop(Arc<AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    FnTool::new(
        ToolSpec::new("forever", "never ends", ToolSource::BuiltIn),
        move |_call, _cx| {
            let started = Arc::clone(&started);
            let guard = OnDrop(Arc::clone(&dropped));
            async move {
                let _guard = guard;
                started.notify_one();
                futures::future::pending::<()>().await;
                Err(stategraph_nodes::ToolError::failed(
                    "forever",
                    "unreachable",
                ))
            }
        },
    )
}

fn calls_forever() -> AiMessage {
    AiMessage::calls([ToolCall::new("f1", "forever", json!({}))])
}

#[tokio::test(start_paused = true)]
async fn a_child_past_its_timeout_is_timed_out_and_stays_so() -> R {
    let dropped = Arc::new(AtomicBool::new(false));
    let child = ScriptedModel::new("child", [calls_forever()]);
    let subagents = Subagents::new(Arc::new(child.clone()))
        .builtin(Arc::new(forever(Arc::default(), Arc::clone(&dropped))))
        .register(SubagentSpec::new("slow", "d", "p").timeout(Duration::from_secs(5)));
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "slow", "x")]),
            AiMessage::text("ok"),
        ],
    );
    let out = lead(parent, subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?
        .ask("go")
        .await?;
    let msg = tool_messages(&out.state)[0];
    assert_eq!(
        msg.content,
        "Task timed out. Error: Execution timed out after 5 seconds"
    );
    assert!(msg.is_error());
    assert_eq!(out.state.delegations[0].status, DelegationStatus::TimedOut);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the child's tool was not cancelled"
    );
    child.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_turn_budget_keeps_a_partial_answer_or_fails_with_max_turns() -> R {
    for (text, expected) in [
        (
            "partial so far",
            "Task Succeeded (capped: turn budget). Result: partial so far",
        ),
        (
            "",
            "Task failed (capped: turn budget). Error: Reached max_turns=1",
        ),
    ] {
        let turn = AiMessage {
            content: text.to_owned(),
            ..AiMessage::calls([ToolCall::new("n1", "noop", json!({}))])
        };
        let child = ScriptedModel::new("child", vec![turn; 4]);
        let subagents = Subagents::new(Arc::new(child.clone()))
            .builtin(Arc::new(ok_tool("noop", ToolSource::BuiltIn, true)))
            .register(SubagentSpec::new("looper", "d", "p").max_turns(1));
        let parent = ScriptedModel::new(
            "lead",
            [
                AiMessage::calls([task_call("c1", "looper", "x")]),
                AiMessage::text("ok"),
            ],
        );
        let out = lead(parent, subagents)
            .0
            .assemble(RunContext::new("t", "ana"))
            .await?
            .ask("go")
            .await?;
        let msg = tool_messages(&out.state)[0];
        assert_eq!(msg.content, expected);
        assert_eq!(
            msg.metadata
                .get("subagent_stop_reason")
                .and_then(|v| v.as_str()),
            Some("turn_capped")
        );
        assert_eq!(
            out.state.delegations[0].stop_reason.as_deref(),
            Some("turn_capped")
        );
        child.clear();
    }
    Ok(())
}

#[tokio::test]
async fn a_cancelled_parent_cancels_its_children() -> R {
    let started = Arc::new(tokio::sync::Notify::new());
    let dropped = Arc::new(AtomicBool::new(false));
    let child = ScriptedModel::new("child", [calls_forever()]);
    let subagents = Subagents::new(Arc::new(child.clone()))
        .builtin(Arc::new(forever(
            Arc::clone(&started),
            Arc::clone(&dropped),
        )))
        .register(SubagentSpec::new("slow", "d", "p"));
    let parent = ScriptedModel::new("lead", [AiMessage::calls([task_call("c1", "slow", "x")])]);
    let agent = lead(parent.clone(), subagents)
        .0
        .assemble(RunContext::new("t", "ana"))
        .await?;
    let result = ask_then_cancel(&agent, agent.run_config(), &started).await;
    assert!(
        matches!(
            result.as_ref().err().and_then(|e| e.run_error()),
            Some(stategraph::RunError::Cancelled { .. })
        ),
        "{result:?}"
    );
    tokio::time::timeout(Duration::from_secs(5), async {
        while !dropped.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await?;
    parent.verify()?;
    child.verify()?;
    Ok(())
}

/// A lead on a SQLite file whose one `multi_task` call delegates to `quick` (answers at once)
/// and `slow` (its child's tool never finishes), cancelled once the slow child's tool runs.
#[tokio::test]
async fn a_cancelled_lead_records_every_delegation_it_started_with_its_terminal_status() -> R {
    let dir = tempfile::tempdir()?;
    let saver = Arc::new(stategraph::checkpoints::SqliteSaver::open(
        dir.path().join("lead.db"),
    )?);
    let started = Arc::new(tokio::sync::Notify::new());
    let dropped = Arc::new(AtomicBool::new(false));
    let used = |mut m: AiMessage| {
        m.usage = Some(stategraph_nodes::Usage {
            input_tokens: 10,
            output_tokens: 1,
            total_tokens: 11,
        });
        m
    };
    let quick = ScriptedModel::new("quick", [used(AiMessage::text("quick answer"))]);
    let slow = ScriptedModel::new("slow", [used(calls_forever())]);
    let subagents = Subagents::new(Arc::new(quick.clone()))
        .builtin(Arc::new(forever(
            Arc::clone(&started),
            Arc::clone(&dropped),
        )))
        // One slot: the quick delegation ends before the slow one starts.
        .limiter(stategraph_nodes::subagent::SubagentLimiter::new(
            1,
            Duration::from_secs(10),
        ))
        .register(SubagentSpec::new("quick", "d", "p"))
        .register(SubagentSpec::new("slow", "d", "p").model(slow.clone()));
    let multi = ToolCall::new(
        "m1",
        "multi_task",
        json!({"tasks": [
            {"description": "fast part", "prompt": "a", "subagent_type": "quick"},
            {"description": "slow part", "prompt": "b", "subagent_type": "slow"},
        ]}),
    );
    let parent = ScriptedModel::new("lead", [AiMessage::calls([multi])]);
    let (builder, log) = lead(parent.clone(), subagents);
    let agent = builder
        .assemble(RunContext::new("t", "ana").run("r1"))
        .await?
        .with_checkpointer(saver.clone());
    let result = ask_then_cancel(&agent, agent.run_config().thread("t"), &started).await;
    let (status, usage) = result
        .err()
        .and_then(|e| e.settlement().map(|s| (s.status, s.usage)))
        .ok_or("the lead was not cancelled")?;
    assert_eq!(status, stategraph::checkpoints::RunStatus::Cancelled);
    // Both children's calls count in the cancelled lead's usage, with the lead's own call.
    assert_eq!(
        (usage.model_calls, usage.total_tokens),
        (3, 22),
        "{usage:?}"
    );
    // The log has a report per delegation: the quick one as it ended, the slow one cancelled.
    let mut reports: Vec<(String, &str)> = log
        .reports()
        .iter()
        .map(|r| (r.id.clone(), r.outcome.status.as_str()))
        .collect();
    reports.sort();
    assert_eq!(
        reports,
        [
            ("m1/0".to_owned(), "completed"),
            ("m1/1".to_owned(), "cancelled")
        ]
    );
    // The thread's ledger holds both, with their terminal statuses and the lead's run; the
    // tool step it was cancelled in is still what the thread runs next.
    let state = agent
        .graph()
        .get_state("t", None)
        .await?
        .ok_or("no state")?;
    let ledger: Vec<(&str, DelegationStatus, Option<&str>)> = state
        .values
        .delegations
        .iter()
        .map(|d| (d.id.as_str(), d.status, d.run_id.as_deref()))
        .collect();
    assert_eq!(
        ledger,
        [
            ("m1/0", DelegationStatus::Completed, Some("r1")),
            ("m1/1", DelegationStatus::Cancelled, Some("r1"))
        ]
    );
    assert_eq!(state.values.delegations[1].description, "slow part");
    assert_eq!(state.next, ["tools"]);
    tokio::time::timeout(Duration::from_secs(5), async {
        while !dropped.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await?;
    parent.verify()?;
    quick.verify()?;
    slow.verify()?;
    Ok(())
}
