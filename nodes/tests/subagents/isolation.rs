//! The executor's isolation: no child checkpoint anywhere, a fresh state with one system
//! prompt, the parent's identity and sandbox, the child's answer as the parent call's message.

use std::path::Path;
use std::sync::{Arc, Mutex};

use stategraph::checkpoints::{Saver, SqliteSaver};
use stategraph::Durability;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxOptions};
use stategraph_nodes::state::DelegationStatus;
use stategraph_nodes::subagent::{SubagentSpec, Subagents};

use super::support::{lead, task_call, tool_messages, R};

/// Run a lead with three `task` calls on a SQLite file; `delegate: false` gives the lead a
/// plain tool named `task` instead (the same parent steps, no child at all).
async fn lead_on_sqlite(
    path: &Path,
    durability: Durability,
    delegate: bool,
) -> Result<Arc<ThreadState>, Box<dyn std::error::Error + Send + Sync>> {
    let saver = Arc::new(SqliteSaver::open(path)?);
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([
                task_call("c1", "worker", "one"),
                task_call("c2", "worker", "two"),
                task_call("c3", "worker", "three"),
            ]),
            AiMessage::text("all done"),
        ],
    );
    let child = ScriptedModel::new("child", vec![AiMessage::text("child answer"); 3]);
    let subagents = Subagents::new(Arc::new(child.clone())).register(SubagentSpec::new(
        "worker",
        "does one thing",
        "You do one thing.",
    ));
    let builder = if delegate {
        lead(parent.clone(), subagents).0
    } else {
        child.clear();
        AgentBuilder::new(parent.clone()).tool(FnTool::new(
            ToolSpec::new("task", "stand-in", ToolSource::BuiltIn),
            |call, _cx| async move { Ok(ToolMessage::new(call.id, "task", "stand-in").into()) },
        ))
    };
    let agent = builder
        .assemble(RunContext::new("lead-thread", "ana").run("r1"))
        .await?
        .with_checkpointer(saver.clone());
    let config = agent
        .run_config()
        .thread("lead-thread")
        .durability(durability);
    let out = agent
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    saver.flush().await?;
    saver.close()?;
    parent.verify()?;
    child.verify()?;
    Ok(out.state)
}

/// (rows, distinct threads, rows outside the root namespace) of the file's checkpoints.
fn checkpoint_rows(path: &Path) -> Result<(i64, i64, i64), rusqlite::Error> {
    let db = rusqlite::Connection::open(path)?;
    db.query_row(
        "SELECT COUNT(*), COUNT(DISTINCT thread), SUM(ns <> '') FROM sg_checkpoints",
        [],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get::<_, Option<i64>>(2)?.unwrap_or(0),
            ))
        },
    )
}

#[tokio::test]
async fn three_delegations_leave_only_the_parents_checkpoint_rows_in_the_sqlite_file() -> R {
    for durability in [Durability::Async, Durability::Sync] {
        let tmp = tempfile::tempdir()?;
        let with = tmp.path().join("with.db");
        let without = tmp.path().join("without.db");
        let state = lead_on_sqlite(&with, durability, true).await?;
        lead_on_sqlite(&without, durability, false).await?;
        let (rows, threads, nested) = checkpoint_rows(&with)?;
        // Exactly the rows of the same parent run with no child at all (a stand-in `task`).
        assert_eq!(checkpoint_rows(&without)?, (rows, 1, 0), "{durability:?}");
        // Input, the model, one step per `task` call (a delegation is not read-only, so the
        // three run one after another), the model again.
        assert_eq!(rows, 7, "{durability:?}");
        assert_eq!((threads, nested), (1, 0), "{durability:?}");
        let answers: Vec<&str> = tool_messages(&state)
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(answers, ["Task Succeeded. Result: child answer"; 3]);
        assert_eq!(state.delegations.len(), 3);
        for (entry, id) in state.delegations.iter().zip(["c1", "c2", "c3"]) {
            assert_eq!(entry.id, id);
            assert_eq!(entry.status, DelegationStatus::Completed);
            assert_eq!(entry.run_id.as_deref(), Some("r1"));
            assert_eq!(entry.result_brief.as_deref(), Some("child answer"));
            assert!(entry.created_at > 0);
        }
    }
    Ok(())
}

#[tokio::test]
async fn the_child_starts_fresh_with_one_system_prompt_sent_first() -> R {
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "the task")]),
            AiMessage::text("ok"),
        ],
    );
    let child = ScriptedModel::new("child", [AiMessage::text("fine")]);
    let subagents = Subagents::new(Arc::new(child.clone())).register(SubagentSpec::new(
        "worker",
        "d",
        "You are the worker.",
    ));
    let agent = lead(parent.clone(), subagents)
        .0
        .system_prompt("You lead.")
        .assemble(RunContext::new("t", "ana"))
        .await?;
    agent.ask("lots of parent history").await?;
    let requests = child.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].system.as_deref(), Some("You are the worker."));
    let messages: Vec<(&str, &str)> = requests[0]
        .messages
        .iter()
        .map(|m| match m {
            Message::Human { content, .. } => ("human", content.as_str()),
            other => ("other", other.text()),
        })
        .collect();
    assert_eq!(messages, [("human", "the task")]);
    parent.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_child_runs_as_the_parents_user_run_and_sandbox_with_the_thread_as_context() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = LocalSandboxProvider::new(tmp.path());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = Arc::clone(&seen);
    let whoami = FnTool::new(
        ToolSpec::new("whoami", "identity", ToolSource::BuiltIn).read_only(true),
        move |call, cx| {
            let s = Arc::clone(&s);
            async move {
                let sandbox = cx
                    .sandbox()
                    .await
                    .map_err(|e| stategraph_nodes::ToolError::failed("whoami", e))?;
                let run = &cx.run;
                s.lock()
                    .map_err(|_| stategraph_nodes::ToolError::failed("whoami", "poisoned"))?
                    .push(format!(
                        "{:?} {:?} {:?} {} {}",
                        run.user_id, run.thread_id, run.run_id, run.is_subagent, sandbox.sandbox.id
                    ));
                Ok(ToolMessage::new(call.id, "whoami", "me").into())
            }
        },
    );
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "worker", "who?")]),
            AiMessage::text("ok"),
        ],
    );
    let child = ScriptedModel::new(
        "child",
        [
            AiMessage::calls([ToolCall::new("w", "whoami", serde_json::json!({}))]),
            AiMessage::text("known"),
        ],
    );
    let subagents = Subagents::new(Arc::new(child.clone()))
        .builtin(Arc::new(whoami))
        .sandbox(Arc::new(provider.clone()), SandboxOptions::lazy())
        .register(SubagentSpec::new("worker", "d", "p"));
    let agent = lead(parent.clone(), subagents)
        .0
        .sandbox(provider, SandboxOptions::eager())
        .assemble(RunContext::new("lead-thread", "ana").run("r7"))
        .await?;
    let out = agent.ask("go").await?;
    let parent_sandbox = out
        .state
        .sandbox
        .as_ref()
        .and_then(|s| s.sandbox_id.clone())
        .ok_or("no sandbox")?;
    let seen = seen.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(
        seen,
        [format!(
            "Some(\"ana\") Some(\"lead-thread\") Some(\"r7\") true {parent_sandbox}"
        )]
    );
    assert_eq!(
        tool_messages(&out.state)[0].content,
        "Task Succeeded. Result: known"
    );
    Ok(())
}

#[tokio::test]
async fn an_unknown_type_fails_naming_the_available_ones() -> R {
    let parent = ScriptedModel::new(
        "lead",
        [
            AiMessage::calls([task_call("c1", "wizard", "x")]),
            AiMessage::text("ok"),
        ],
    );
    let subagents = Subagents::new(Arc::new(ScriptedModel::new(
        "child",
        Vec::<AiMessage>::new(),
    )))
    .register(SubagentSpec::new("worker", "d", "p"))
    .register(SubagentSpec::new("researcher", "d", "p"));
    let (builder, log) = lead(parent, subagents);
    let out = builder
        .assemble(RunContext::new("t", "ana"))
        .await?
        .ask("go")
        .await?;
    let msg = tool_messages(&out.state)[0];
    assert_eq!(
        msg.content,
        "Task failed. Error: Unknown subagent type 'wizard'. Available: worker, researcher"
    );
    assert!(msg.is_error());
    assert_eq!(
        msg.metadata.get("subagent_status").and_then(|v| v.as_str()),
        Some("failed")
    );
    assert_eq!(out.state.delegations[0].status, DelegationStatus::Failed);
    assert!(log.reports()[0].pool.is_none());
    Ok(())
}
