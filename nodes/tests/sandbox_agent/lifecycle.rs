//! Acquisition (lazy, eager, behind authorization), the id in the state through the tool's
//! update, and release once per invocation (success, error, cancel, fork).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph::checkpoints::ListOptions;
use stategraph::checkpoints::MemorySaver;
use stategraph::Input;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxOptions};
use stategraph_nodes::sandbox_tools::{read_file, write_file};
use stategraph_nodes::{Agent, AgentError, Authorization, RoleTable, ToolError};

use crate::support::*;

fn write(id: &str, path: &str, text: &str) -> ToolCall {
    call(id, "write_file", json!({"path": path, "content": text}))
}

fn read(id: &str, path: &str) -> ToolCall {
    call(id, "read_file", json!({"path": path}))
}

async fn agent(
    model: &ScriptedModel,
    provider: &Counting,
    options: SandboxOptions,
) -> Result<Agent, AgentError> {
    AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(read_file())
        .sandbox(provider.clone(), options)
        .assemble(RunContext::new("t1", "ana"))
        .await
}

#[tokio::test]
async fn lazy_the_first_tool_acquires_and_a_second_finds_the_id_in_state() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([write("c1", "/mnt/user-data/workspace/a.md", "hello")]),
            AiMessage::calls([read("c2", "/mnt/user-data/workspace/a.md")]),
            AiMessage::text("done"),
        ],
    );
    let agent = agent(&model, &provider, SandboxOptions::lazy()).await?;
    let out = agent.ask("go").await?;
    assert_eq!(sandbox_id(&out.state), Some("local:ana:t1"));
    assert_eq!(provider.acquired(), 1, "the second tool acquired again");
    assert_eq!(
        answer(&out.state, "c2").map(|m| m.content.as_str()),
        Some("hello")
    );
    assert_eq!(provider.released(), 1);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn eager_acquires_before_the_first_step_only_with_a_thread() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new("m", [AiMessage::text("hi")]);
    let agent = agent(&model, &provider, SandboxOptions::eager()).await?;
    let out = agent.ask("go").await?;
    assert_eq!(sandbox_id(&out.state), Some("local:ana:t1"));
    assert_eq!((provider.acquired(), provider.released()), (1, 1));
    model.verify()?;

    let model = ScriptedModel::new("m", [AiMessage::text("hi")]);
    let threadless = AgentBuilder::new(model.clone())
        .sandbox(provider.clone(), SandboxOptions::eager())
        .assemble(RunContext::default())
        .await?;
    let out = threadless.ask("go").await?;
    assert_eq!(sandbox_id(&out.state), None);
    assert_eq!(provider.acquired(), 1, "acquired without a thread");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_call_that_is_not_authorized_cannot_acquire_a_sandbox() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([write("c1", "/mnt/user-data/workspace/a.md", "x")]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(read_file())
        .sandbox(provider.clone(), SandboxOptions::lazy())
        .authorization(Authorization::new(
            RoleTable::new().allow("user", ["read_file"]),
        ))
        .assemble(RunContext::new("t1", "ana"))
        .await?;
    let out = agent.ask("go").await?;
    assert!(answer(&out.state, "c1").is_some_and(ToolMessage::is_error));
    assert_eq!(provider.acquired(), 0, "a refused call acquired a sandbox");
    assert_eq!(sandbox_id(&out.state), None);
    assert!(!tmp.path().join("threads").exists());
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn two_parallel_calls_acquiring_the_same_id_succeed() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [
            // Read-only calls of one turn run together, in one step.
            AiMessage::calls([
                read("c1", "/mnt/user-data/workspace/a.md"),
                read("c2", "/mnt/user-data/workspace/b.md"),
            ]),
            AiMessage::text("done"),
        ],
    );
    let agent = agent(&model, &provider, SandboxOptions::lazy()).await?;
    let out = agent.ask("go").await?;
    assert_eq!(provider.acquired(), 2);
    assert_eq!(sandbox_id(&out.state), Some("local:ana:t1"));
    assert_eq!(provider.released(), 1, "one id, released once");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn two_writes_of_one_turn_run_in_order_and_the_second_finds_the_id() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([
                write("c1", "/mnt/user-data/workspace/a.md", "a"),
                write("c2", "/mnt/user-data/workspace/a.md", "b"),
            ]),
            AiMessage::text("done"),
        ],
    );
    let agent = agent(&model, &provider, SandboxOptions::lazy()).await?;
    agent.ask("go").await?;
    assert_eq!(provider.acquired(), 1, "the second write acquired again");
    // In the model's order: the second write is the one that stays.
    let file = tmp.path().join("threads/t1/user-data/workspace/a.md");
    assert_eq!(std::fs::read_to_string(file)?, "b");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn two_different_ids_in_one_step_are_a_conflict_and_neither_is_stored() -> R {
    let tmp = tempfile::tempdir()?;
    let mut provider = Counting::new(tmp.path());
    provider.distinct_ids = true;
    let saver = Arc::new(MemorySaver::new());
    let model = ScriptedModel::new(
        "m",
        [AiMessage::calls([
            read("c1", "/mnt/user-data/workspace/a.md"),
            read("c2", "/mnt/user-data/workspace/b.md"),
        ])],
    );
    let agent = agent(&model, &provider, SandboxOptions::lazy())
        .await?
        .with_checkpointer(saver);
    let err = agent.ask("go").await.err().ok_or("the conflict passed")?;
    assert!(err.to_string().contains("sandbox"), "{err}");
    let stored = agent
        .graph()
        .get_state("t1", None)
        .await?
        .ok_or("no state")?;
    assert_eq!(
        sandbox_id(&stored.values),
        None,
        "a conflicting id was stored"
    );
    assert_eq!(provider.released(), 2, "each acquired id is released once");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn release_runs_once_when_the_run_errors() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    // The script ends after the tool call: the next model turn fails.
    let model = ScriptedModel::new(
        "m",
        [AiMessage::calls([write(
            "c1",
            "/mnt/user-data/workspace/a.md",
            "a",
        )])],
    );
    let agent = agent(&model, &provider, SandboxOptions::lazy()).await?;
    assert!(agent.ask("go").await.is_err());
    assert_eq!((provider.acquired(), provider.released()), (1, 1));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn release_runs_once_when_the_run_is_cancelled() -> R {
    let tmp = tempfile::tempdir()?;
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [AiMessage::calls([
            write("c1", "/mnt/user-data/workspace/a.md", "a"),
            call("c2", "wait", json!({})),
        ])],
    );
    let wait = FnTool::new(
        ToolSpec::new("wait", "waits forever", ToolSource::Config),
        |_call, _cx| async move {
            futures::future::pending::<()>().await;
            Err(ToolError::Unknown {
                tool: "wait".to_owned(),
            })
        },
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(wait)
        .sandbox(provider.clone(), SandboxOptions::lazy())
        .assemble(RunContext::new("t1", "ana"))
        .await?;
    let run = tokio::time::timeout(Duration::from_millis(300), agent.ask("go")).await;
    assert!(run.is_err(), "the run finished");
    for _ in 0..100 {
        if provider.released() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!((provider.acquired(), provider.released()), (1, 1));
    model.clear();
    Ok(())
}

#[tokio::test]
async fn a_second_run_with_a_new_provider_finds_the_workspace() -> R {
    let tmp = tempfile::tempdir()?;
    let saver = Arc::new(MemorySaver::new());
    let first = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([write("c1", "/mnt/user-data/workspace/notes.md", "kept")]),
            AiMessage::text("done"),
        ],
    );
    let provider = Counting::new(tmp.path());
    agent(&first, &provider, SandboxOptions::lazy())
        .await?
        .with_checkpointer(saver.clone())
        .ask("write")
        .await?;
    assert_eq!(provider.released(), 1);
    // Another process: a new provider over the same root, a new agent, the same thread.
    let second = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([read("c2", "/mnt/user-data/workspace/notes.md")]),
            AiMessage::text("done"),
        ],
    );
    let again = AgentBuilder::new(second.clone())
        .tool(read_file())
        .sandbox(
            LocalSandboxProvider::new(tmp.path()),
            SandboxOptions::lazy(),
        )
        .assemble(RunContext::new("t1", "ana"))
        .await?
        .with_checkpointer(saver);
    let out = again.ask("read").await?;
    assert_eq!(
        answer(&out.state, "c2").map(|m| m.content.as_str()),
        Some("kept")
    );
    first.verify()?;
    second.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_sandbox_restored_by_a_fork_is_not_released_by_the_fork() -> R {
    let tmp = tempfile::tempdir()?;
    let saver = Arc::new(MemorySaver::new());
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([write("c1", "/mnt/user-data/workspace/a.md", "a")]),
            AiMessage::text("done"),
            AiMessage::calls([read("c2", "/mnt/user-data/workspace/a.md")]),
            AiMessage::text("forked"),
        ],
    );
    let agent = agent(&model, &provider, SandboxOptions::lazy())
        .await?
        .with_checkpointer(saver);
    agent.ask("write").await?;
    assert_eq!((provider.acquired(), provider.released()), (1, 1));
    // Fork from the checkpoint after the tool step (the sandbox id is in it).
    let history = agent
        .graph()
        .get_state_history("t1", ListOptions::default())
        .await?;
    let at = history
        .iter()
        .find(|s| sandbox_id(&s.values).is_some() && s.values.messages.len() == 3)
        .ok_or("no checkpoint after the tool step")?;
    let config = agent.run_config().thread("t1").checkpoint(at.checkpoint.id);
    let out = agent.invoke(Input::Continue, &config).await?;
    assert_eq!(out.state.messages.last().map(Message::text), Some("forked"));
    assert_eq!(
        (provider.acquired(), provider.released()),
        (1, 1),
        "the fork acquired or released the restored sandbox"
    );
    model.clear();
    Ok(())
}

#[tokio::test]
async fn a_different_id_after_one_is_stored_is_a_conflict_and_the_stored_id_stays() -> R {
    let tmp = tempfile::tempdir()?;
    let saver = Arc::new(MemorySaver::new());
    let provider = Counting::new(tmp.path());
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([write("c1", "/mnt/user-data/workspace/a.md", "a")]),
            AiMessage::calls([call("c2", "rebind", json!({}))]),
        ],
    );
    // A tool writing another sandbox id into the state: a lifecycle bug the reducer catches.
    let rebind = FnTool::new(
        ToolSpec::new("rebind", "writes another id", ToolSource::Config),
        |call, _cx| async move {
            let message = ToolMessage::new(call.id, "rebind", "ok");
            Ok(stategraph::Command::new()
                .update(
                    ThreadState::update()
                        .sandbox(stategraph::reducers::SandboxState::with_id("other"))
                        .messages(Message::Tool(message).into()),
                )
                .into())
        },
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(rebind)
        .sandbox(provider.clone(), SandboxOptions::lazy())
        .assemble(RunContext::new("t1", "ana"))
        .await?
        .with_checkpointer(saver);
    let err = agent.ask("go").await.err().ok_or("the conflict passed")?;
    assert!(err.to_string().contains("sandbox"), "{err}");
    let stored = agent
        .graph()
        .get_state("t1", None)
        .await?
        .ok_or("no state")?;
    assert_eq!(sandbox_id(&stored.values), Some("local:ana:t1"));
    assert_eq!(provider.released(), 1);
    model.verify()?;
    Ok(())
}
