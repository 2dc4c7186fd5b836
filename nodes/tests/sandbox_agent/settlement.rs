//! Run settlement: which outputs a run produced, whether it presented one, the one receipt per
//! run (also on error, interrupt and cancellation), stored before the terminal status in a real
//! SQLite file, and the trace's Delivered entries.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph::checkpoints::{RunId, RunRecord, RunStatus, Saver, SqliteSaver, ThreadId};
use stategraph::CancelToken;
use stategraph_nodes::delivery::{DeliveryIncomplete, DeliveryStage};
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{SandboxOptions, SandboxProvider};
use stategraph_nodes::sandbox_tools::{present_files, write_file};
use stategraph_nodes::{
    Agent, AgentOutcome, DeliveryFailure, Recorded, Settlement, Verdict, DROPPED_REASON,
    RECEIPT_NOT_STORED,
};
use stategraph_tests::{RecordingSaver, RunCall};

use crate::support::*;

pub(crate) const THREAD: &str = "t1";

/// A thread's sandbox root and a SQLite file, behind a saver that records run writes.
pub(crate) struct Setup {
    pub(crate) tmp: tempfile::TempDir,
    saver: RecordingSaver,
}

impl Setup {
    pub(crate) fn new() -> Result<Setup, Box<dyn std::error::Error + Send + Sync>> {
        let tmp = tempfile::tempdir()?;
        let sqlite = SqliteSaver::open(tmp.path().join("threads.db"))?;
        Ok(Setup {
            saver: RecordingSaver::over(Arc::new(sqlite)),
            tmp,
        })
    }

    fn provider(&self) -> Counting {
        Counting::new(&self.tmp.path().join("sandboxes"))
    }

    /// The thread's outputs directory, created (as an earlier run or an upload would).
    async fn outputs(&self) -> Result<PathBuf, Box<dyn std::error::Error + Send + Sync>> {
        let provider = self.provider();
        let id = provider.acquire("ana", THREAD).await?;
        let sandbox = provider.get(&id).await?.ok_or("no sandbox")?;
        Ok(sandbox.dirs.outputs)
    }

    pub(crate) async fn agent(
        &self,
        model: &ScriptedModel,
        extra: Vec<FnTool>,
    ) -> Result<Agent, Box<dyn std::error::Error + Send + Sync>> {
        let mut builder = AgentBuilder::new(model.clone())
            .tool(write_file())
            .tool(present_files())
            .sandbox(self.provider(), SandboxOptions::lazy());
        for tool in extra {
            builder = builder.tool(tool);
        }
        Ok(builder
            .assemble(RunContext::new(THREAD, "ana"))
            .await?
            .with_checkpointer(self.saver.shared()))
    }

    pub(crate) async fn stored(
        &self,
        run: &RunId,
    ) -> Result<RunRecord, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self
            .saver
            .get_run(Some(&ThreadId::new(THREAD)?), run)
            .await?
            .ok_or("the run was not stored")?)
    }

    async fn stored_receipt(
        &self,
        run: &RunId,
    ) -> Result<Option<serde_json::Value>, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.saver.get_receipt(run).await?.map(|r| r.into_json()))
    }

    fn receipt_writes(&self, run: &RunId) -> usize {
        self.saver
            .run_log
            .lock()
            .map(|log| {
                log.iter()
                    .filter(|c| matches!(c, RunCall::Receipt(r) if r == run))
                    .count()
            })
            .unwrap_or(0)
    }
}

pub(crate) fn write(id: &str, path: &str) -> AiMessage {
    AiMessage::calls([call(
        id,
        "write_file",
        json!({"path": path, "content": format!("written by {id}")}),
    )])
}

pub(crate) fn present(id: &str, paths: &[&str]) -> AiMessage {
    AiMessage::calls([call(id, "present_files", json!({ "filepaths": paths }))])
}

pub(crate) fn script(mut turns: Vec<AiMessage>) -> ScriptedModel {
    turns.push(AiMessage::text("done"));
    ScriptedModel::new("m", turns)
}

fn stage(s: &Settlement) -> Option<DeliveryStage> {
    s.receipt.verdict.as_ref().map(|v| v.stage)
}

#[tokio::test]
async fn a_file_written_but_never_presented_fails_the_run_with_a_not_started_receipt() -> R {
    let setup = Setup::new()?;
    let model = script(vec![write("w", "/mnt/user-data/outputs/report.md")]);
    let agent = setup.agent(&model, vec![]).await?;
    let err = agent.ask("go").await.err().ok_or("the run succeeded")?;
    let stategraph_nodes::AgentRunError::Delivery { failure, outcome } = err else {
        return Err(format!("not a delivery failure: {err}").into());
    };
    assert_eq!(
        failure,
        DeliveryFailure::Incomplete(DeliveryIncomplete),
        "{failure}"
    );
    let settled = &outcome.settlement;
    assert_eq!(settled.status, RunStatus::Error);
    assert_eq!(stage(settled), Some(DeliveryStage::NotStarted));
    let stored = setup.stored(&settled.run_id).await?;
    assert_eq!(stored.status, RunStatus::Error);
    assert_eq!(
        stored.reason.as_deref(),
        Some("Artifact delivery incomplete: no produced output artifact was presented")
    );
    let receipt = setup
        .stored_receipt(&settled.run_id)
        .await?
        .ok_or("no receipt")?;
    assert_eq!(receipt["verdict"]["satisfied"], json!(false));
    assert_eq!(receipt["verdict"]["stage"], json!("not_started"));
    assert_eq!(
        receipt["verdict"]["produced_paths"],
        json!(["/mnt/user-data/outputs/report.md"])
    );
    // The state is committed all the same: the model's last turn is in the thread.
    assert_eq!(
        outcome.state.messages.last().map(Message::text),
        Some("done")
    );
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn presenting_only_an_unrelated_unchanged_file_is_mismatched() -> R {
    let setup = Setup::new()?;
    std::fs::write(setup.outputs().await?.join("old.md"), "from last week")?;
    let model = script(vec![
        write("w", "/mnt/user-data/outputs/new.md"),
        present("p", &["/mnt/user-data/outputs/old.md"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let err = agent.ask("go").await.err().ok_or("the run succeeded")?;
    let settled = err.settlement().ok_or("no settlement")?;
    assert_eq!(stage(settled), Some(DeliveryStage::Mismatched));
    assert_eq!(
        setup.stored(&settled.run_id).await?.status,
        RunStatus::Error
    );
    let receipt = setup
        .stored_receipt(&settled.run_id)
        .await?
        .ok_or("no receipt")?;
    assert_eq!(receipt["verdict"]["stage"], json!("mismatched"));
    assert_eq!(
        receipt["verdict"]["presented_paths"],
        json!(["/mnt/user-data/outputs/old.md"])
    );
    assert_eq!(receipt["verdict"]["matched_paths"], json!([]));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_presented_directory_covers_both_files_it_holds() -> R {
    let setup = Setup::new()?;
    let model = script(vec![
        write("a", "/mnt/user-data/outputs/charts/a.png"),
        write("b", "/mnt/user-data/outputs/charts/b.png"),
        present("p", &["/mnt/user-data/outputs/charts/"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    let settled = &out.settlement;
    assert_eq!(settled.status, RunStatus::Success);
    let verdict = settled.receipt.verdict.as_ref().ok_or("no verdict")?;
    assert_eq!(
        verdict.matched_paths,
        [
            "/mnt/user-data/outputs/charts/a.png",
            "/mnt/user-data/outputs/charts/b.png"
        ]
    );
    assert!(verdict.satisfied);
    assert_eq!(
        setup.stored(&settled.run_id).await?.status,
        RunStatus::Success
    );
    assert!(matches!(settled.recorded, Recorded::Stored));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn two_produced_and_one_presented_is_a_success() -> R {
    let setup = Setup::new()?;
    let model = script(vec![
        write("a", "/mnt/user-data/outputs/a.md"),
        write("b", "/mnt/user-data/outputs/b.md"),
        present("p", &["/mnt/user-data/outputs/a.md"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    let verdict = out
        .settlement
        .receipt
        .verdict
        .as_ref()
        .ok_or("no verdict")?;
    assert_eq!(out.settlement.status, RunStatus::Success);
    assert_eq!(
        verdict.produced_paths,
        ["/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"]
    );
    assert_eq!(verdict.matched_paths, ["/mnt/user-data/outputs/a.md"]);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_stored_run_holds_its_capability_trace_with_the_delivered_entry() -> R {
    let setup = Setup::new()?;
    let model = script(vec![
        write("a", "/mnt/user-data/outputs/a.md"),
        present("p", &["/mnt/user-data/outputs/a.md"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    let stored = setup.stored(&out.settlement.run_id).await?;
    let trace: Vec<stategraph_nodes::TraceEntry> = serde_json::from_value(
        stored
            .metadata
            .get(stategraph_nodes::TRACE_KEY)
            .cloned()
            .ok_or("no trace in the run's metadata")?,
    )?;
    assert_eq!(trace, agent.run_trace(&out.settlement.run_id));
    let delivered = trace
        .iter()
        .find(|e| e.stage == stategraph_nodes::trace::Stage::Delivered)
        .ok_or("no delivered entry")?;
    assert_eq!(
        delivered.path.as_deref(),
        Some("/mnt/user-data/outputs/a.md")
    );
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn only_excluded_folders_changed_means_no_verification() -> R {
    let setup = Setup::new()?;
    let model = script(vec![
        write("a", "/mnt/user-data/outputs/.tool-results/call-1.json"),
        write("b", "/mnt/user-data/outputs/node_modules/x/index.js"),
        write("c", "/mnt/user-data/workspace/notes.md"),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    assert_eq!(out.settlement.status, RunStatus::Success);
    assert_eq!(out.settlement.receipt.verdict, None);
    let receipt = setup
        .stored_receipt(&out.settlement.run_id)
        .await?
        .ok_or("no receipt")?;
    assert_eq!(receipt, json!({"presented": 0, "paths": [], "by_tool": {}}));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_failing_run_still_writes_exactly_one_receipt() -> R {
    let setup = Setup::new()?;
    // The script ends after the write: the second model call fails.
    let model = ScriptedModel::new("m", [write("w", "/mnt/user-data/outputs/a.md")]);
    let agent = setup.agent(&model, vec![]).await?;
    let err = agent.ask("go").await.err().ok_or("the run succeeded")?;
    assert!(err.run_error().is_some(), "{err}");
    let settled = err.settlement().ok_or("no settlement")?;
    assert_eq!(settled.status, RunStatus::Error);
    // A run that did not complete is not verified: facts only.
    assert_eq!(settled.receipt.verdict, None);
    let stored = setup.stored(&settled.run_id).await?;
    assert_eq!(stored.status, RunStatus::Error);
    assert!(stored.reason.is_some_and(|r| r.contains("script")));
    assert!(setup.stored_receipt(&settled.run_id).await?.is_some());
    assert_eq!(setup.receipt_writes(&settled.run_id), 1);
    model.clear();
    Ok(())
}

/// A tool that cancels the run's token when called.
fn cancelling(token: CancelToken) -> FnTool {
    FnTool::new(
        ToolSpec::new("stop", "cancels the run", ToolSource::Config),
        move |call: ToolCall, _cx| {
            let token = token.clone();
            async move {
                token.cancel();
                Ok(ToolOutput::Message(ToolMessage::new(call.id, "stop", "ok")))
            }
        },
    )
}

#[tokio::test]
async fn a_cancelled_run_writes_exactly_one_receipt() -> R {
    let setup = Setup::new()?;
    let token = CancelToken::new();
    let model = ScriptedModel::new(
        "m",
        [
            present("p", &["/mnt/user-data/outputs/a.md"]),
            AiMessage::calls([call("s", "stop", json!({}))]),
            AiMessage::text("never reached"),
        ],
    );
    let agent = setup.agent(&model, vec![cancelling(token.clone())]).await?;
    let config = agent
        .run_config()
        .thread(THREAD)
        .cancel_token(token.clone());
    let err = agent
        .invoke(ThreadState::human_input("go"), &config)
        .await
        .err()
        .ok_or("the run finished")?;
    let settled = err.settlement().ok_or("no settlement")?;
    assert_eq!(settled.status, RunStatus::Cancelled);
    assert_eq!(
        setup.stored(&settled.run_id).await?.status,
        RunStatus::Cancelled
    );
    let receipt = setup
        .stored_receipt(&settled.run_id)
        .await?
        .ok_or("no receipt")?;
    assert_eq!(receipt["paths"], json!(["/mnt/user-data/outputs/a.md"]));
    assert_eq!(setup.receipt_writes(&settled.run_id), 1);
    model.clear();
    Ok(())
}

/// A tool that never finishes.
fn hanging() -> FnTool {
    FnTool::new(
        ToolSpec::new("hang", "waits forever", ToolSource::Config),
        |_call: ToolCall, _cx| async move {
            std::future::pending::<()>().await;
            Ok(ToolOutput::Message(ToolMessage::new("x", "hang", "never")))
        },
    )
}

/// The runs of the thread, once the newest is settled (dropped runs settle in the background).
async fn settled_runs(
    saver: &dyn Saver,
) -> Result<Vec<RunRecord>, Box<dyn std::error::Error + Send + Sync>> {
    let thread = ThreadId::new(THREAD)?;
    for _ in 0..500 {
        let runs = saver.list_runs(&thread).await?;
        if runs.first().is_some_and(|r| r.status.is_terminal()) {
            return Ok(runs);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("the dropped run was never settled".into())
}

#[tokio::test]
async fn a_dropped_invocation_is_settled_as_cancelled_with_one_receipt() -> R {
    let setup = Setup::new()?;
    let model = ScriptedModel::new("m", [AiMessage::calls([call("h", "hang", json!({}))])]);
    let agent = setup.agent(&model, vec![hanging()]).await?;
    let dropped = tokio::time::timeout(Duration::from_millis(300), agent.ask("go")).await;
    assert!(dropped.is_err(), "the hanging run finished");
    let runs = settled_runs(&setup.saver).await?;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Cancelled);
    assert_eq!(runs[0].reason.as_deref(), Some(DROPPED_REASON));
    assert!(setup.stored_receipt(&runs[0].run_id).await?.is_some());
    assert_eq!(setup.receipt_writes(&runs[0].run_id), 1);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn an_interrupted_run_is_settled_as_interrupted_with_a_receipt() -> R {
    let setup = Setup::new()?;
    let model = ScriptedModel::new("m", [write("w", "/mnt/user-data/outputs/a.md")]);
    let agent = setup.agent(&model, vec![]).await?;
    let config = agent
        .run_config()
        .thread(THREAD)
        .interrupt_before(["tools"]);
    let out = agent
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    assert!(out.is_interrupted());
    assert_eq!(out.settlement.status, RunStatus::Interrupted);
    assert_eq!(
        setup.stored(&out.settlement.run_id).await?.status,
        RunStatus::Interrupted
    );
    assert!(setup
        .stored_receipt(&out.settlement.run_id)
        .await?
        .is_some());
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_receipt_store_failure_downgrades_a_producing_success() -> R {
    let setup = Setup::new()?;
    setup.saver.fail_receipts.store(3, Ordering::SeqCst);
    let model = script(vec![
        write("w", "/mnt/user-data/outputs/a.md"),
        present("p", &["/mnt/user-data/outputs/a.md"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let err = agent.ask("go").await.err().ok_or("the run succeeded")?;
    let stategraph_nodes::AgentRunError::Delivery { failure, outcome } = err else {
        return Err(format!("not a delivery failure: {err}").into());
    };
    assert_eq!(failure, DeliveryFailure::ReceiptNotStored);
    let settled = &outcome.settlement;
    assert!(matches!(&settled.recorded, Recorded::Failed(errors) if errors.len() == 3));
    let stored = setup.stored(&settled.run_id).await?;
    assert_eq!(stored.status, RunStatus::Error);
    assert_eq!(stored.reason.as_deref(), Some(RECEIPT_NOT_STORED));
    assert_eq!(setup.stored_receipt(&settled.run_id).await?, None);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_receipt_store_failure_keeps_a_success_that_produced_nothing() -> R {
    let setup = Setup::new()?;
    setup.saver.fail_receipts.store(3, Ordering::SeqCst);
    let model = script(vec![]);
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    assert_eq!(out.settlement.status, RunStatus::Success);
    assert!(matches!(out.settlement.recorded, Recorded::Failed(_)));
    assert_eq!(
        setup.stored(&out.settlement.run_id).await?.status,
        RunStatus::Success
    );
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_receipt_stored_on_the_third_attempt_keeps_the_success() -> R {
    let setup = Setup::new()?;
    setup.saver.fail_receipts.store(2, Ordering::SeqCst);
    let model = script(vec![
        write("w", "/mnt/user-data/outputs/a.md"),
        present("p", &["/mnt/user-data/outputs/a.md"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    assert_eq!(out.settlement.status, RunStatus::Success);
    assert!(matches!(out.settlement.recorded, Recorded::Stored));
    assert!(setup
        .stored_receipt(&out.settlement.run_id)
        .await?
        .is_some());
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_receipt_is_stored_before_the_terminal_status() -> R {
    let setup = Setup::new()?;
    let model = script(vec![]);
    let agent = setup.agent(&model, vec![]).await?;
    let run = agent.ask("go").await?.settlement.run_id;
    let log = setup
        .saver
        .run_log
        .lock()
        .map_err(|e| e.to_string())?
        .clone();
    let order: Vec<String> = log
        .iter()
        .map(|c| match c {
            RunCall::Run(r) => format!("{} {}", r.run_id, r.status),
            RunCall::Receipt(r) => format!("{r} receipt"),
        })
        .collect();
    assert_eq!(
        order,
        [
            format!("{run} running"),
            format!("{run} receipt"),
            format!("{run} success")
        ]
    );
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn the_trace_marks_delivered_paths_and_says_why_not_for_the_rest() -> R {
    let setup = Setup::new()?;
    let model = script(vec![
        write("w", "/mnt/user-data/outputs/a.md"),
        present(
            "p",
            &["/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"],
        ),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    agent.ask("go").await?;
    let delivered: Vec<_> = agent
        .trace()
        .entries()
        .into_iter()
        .filter(|e| e.stage == Stage::Delivered)
        .collect();
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    assert_eq!(
        delivered[0].path.as_deref(),
        Some("/mnt/user-data/outputs/a.md")
    );
    assert_eq!(delivered[0].verdict, Verdict::Passed);
    assert_eq!(delivered[0].call_id.as_deref(), Some("p"));
    assert!(matches!(
        &delivered[1].verdict,
        Verdict::Unverified { reason } if reason.contains("covers no file")
    ));
    assert!(agent.trace().reached("present_files", Stage::Delivered));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn two_invocations_of_one_agent_run_one_after_the_other() -> R {
    let setup = Setup::new()?;
    let model = ScriptedModel::new("m", [AiMessage::text("one"), AiMessage::text("two")]);
    let agent = setup.agent(&model, vec![]).await?;
    let (a, b) = tokio::join!(agent.ask("first"), agent.ask("second"));
    let (a, b): (AgentOutcome, AgentOutcome) = (a?, b?);
    // Serialised: the second saw the first's conversation (no lost update, no stale parent).
    assert_eq!(a.state.messages.len(), 2);
    assert_eq!(b.state.messages.len(), 4);
    assert_ne!(a.settlement.run_id, b.settlement.run_id);
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_run_id_already_used_is_refused_before_anything_runs() -> R {
    let setup = Setup::new()?;
    let model = ScriptedModel::new("m", [AiMessage::text("one")]);
    let agent = AgentBuilder::new(model.clone())
        .assemble(RunContext::new(THREAD, "ana").run("r-1"))
        .await?
        .with_checkpointer(setup.saver.shared());
    agent.ask("first").await?;
    let err = agent
        .ask("again")
        .await
        .err()
        .ok_or("the run id was reused")?;
    assert!(
        matches!(err, stategraph_nodes::AgentRunError::Start(_)),
        "{err}"
    );
    let state = agent
        .graph()
        .get_state(THREAD, None)
        .await?
        .ok_or("no state")?;
    assert_eq!(state.values.messages.len(), 2, "the refused run ran");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn an_agent_without_a_checkpointer_settles_without_storing() -> R {
    let tmp = tempfile::tempdir()?;
    let model = script(vec![write("w", "/mnt/user-data/outputs/a.md")]);
    let agent = AgentBuilder::new(model.clone())
        .tool(write_file())
        .sandbox(Counting::new(tmp.path()), SandboxOptions::lazy())
        .assemble(RunContext::new(THREAD, "ana"))
        .await?;
    let err = agent.ask("go").await.err().ok_or("the run succeeded")?;
    let settled = err.settlement().ok_or("no settlement")?;
    assert!(matches!(settled.recorded, Recorded::NotStored));
    assert_eq!(stage(settled), Some(DeliveryStage::NotStarted));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn an_agent_invoked_on_another_thread_follows_that_thread() -> R {
    let setup = Setup::new()?;
    let model = script(vec![
        write("w", "/mnt/user-data/outputs/a.md"),
        present("p", &["/mnt/user-data/outputs/a.md"]),
    ]);
    // Assembled for t1, run on t2: the sandbox, the outputs and the run are t2's.
    let agent = setup.agent(&model, vec![]).await?;
    let config = agent.run_config().thread("t2");
    let out = agent
        .invoke(ThreadState::human_input("go"), &config)
        .await?;
    assert_eq!(sandbox_id(&out.state), Some("local:ana:t2"));
    assert_eq!(stage(&out.settlement), Some(DeliveryStage::Presented));
    let t2 = ThreadId::new("t2")?;
    let stored = setup
        .saver
        .get_run(Some(&t2), &out.settlement.run_id)
        .await?
        .ok_or("the run is not t2's")?;
    assert_eq!(stored.status, RunStatus::Success);
    let written = setup
        .tmp
        .path()
        .join("sandboxes/threads/t2/user-data/outputs/a.md");
    assert!(written.exists(), "the file is not in t2's outputs");
    model.verify()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_run_shows_its_steps_and_is_settled_as_an_invoked_one() -> R {
    use futures::StreamExt;
    let setup = Setup::new()?;
    let model = script(vec![
        write("a", "/mnt/user-data/outputs/a.md"),
        present("p", &["/mnt/user-data/outputs/a.md"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let config = agent.run_config().thread(THREAD);
    let mut stream = agent.stream(
        ThreadState::human_input("go"),
        &config,
        stategraph::StreamMode::updates(),
    );
    let mut nodes = Vec::new();
    while let Some(ev) = stream.next().await {
        if let stategraph::EventKind::Updates { node, .. } = ev.kind {
            nodes.push(node.to_string());
        }
    }
    let out = stream.outcome().await?;
    assert_eq!(nodes.first().map(String::as_str), Some("model"));
    assert!(nodes.iter().any(|n| n == "tools"), "{nodes:?}");
    assert_eq!(out.settlement.status, RunStatus::Success);
    assert_eq!(
        setup.stored(&out.settlement.run_id).await?.status,
        RunStatus::Success
    );
    assert_eq!(setup.receipt_writes(&out.settlement.run_id), 1);
    model.verify()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_cancels_its_run_and_settles_it_with_one_receipt() -> R {
    use futures::StreamExt;
    let setup = Setup::new()?;
    let model = ScriptedModel::new("m", [AiMessage::calls([call("h", "hang", json!({}))])]);
    let agent = setup.agent(&model, vec![hanging()]).await?;
    let config = agent.run_config().thread(THREAD);
    let mut stream = agent.stream(
        ThreadState::human_input("go"),
        &config,
        stategraph::StreamMode::updates(),
    );
    // The model's step streams; the hanging tool never ends.
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next()).await?;
    assert!(first.is_some());
    drop(stream);
    let runs = settled_runs(&setup.saver).await?;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Cancelled);
    assert_eq!(setup.receipt_writes(&runs[0].run_id), 1);
    Ok(())
}
