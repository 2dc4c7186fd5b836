//! A run record always reaches a terminal status: an invocation dropped with no runtime
//! current is settled before the drop returns, and a run left `running` (a settlement that
//! never ran, a process that ended) is cancelled, with a reason, when its thread is next
//! opened — on every saver. A run still running elsewhere is left alone.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph::checkpoints::{
    MemorySaver, RunId, RunRecord, RunStatus, Saver, SqliteSaver, ThreadId,
};
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::SandboxOptions;
use stategraph_nodes::sandbox_tools::write_file;
use stategraph_nodes::{Agent, DROPPED_REASON, LEFT_RUNNING_REASON, OWNER_KEY};

use crate::support::*;

const THREAD: &str = "t1";

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
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

/// A model that writes a file (acquiring the sandbox), then hangs in a tool.
fn writes_then_hangs() -> ScriptedModel {
    ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call(
                "w",
                "write_file",
                json!({"path": "/mnt/user-data/workspace/a.md", "content": "a"}),
            )]),
            AiMessage::calls([call("h", "hang", json!({}))]),
        ],
    )
}

async fn agent(
    model: &ScriptedModel,
    provider: &Counting,
    saver: Arc<dyn Saver>,
) -> Result<Agent, Box<dyn std::error::Error + Send + Sync>> {
    Ok(AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(hanging())
        .sandbox(provider.clone(), SandboxOptions::lazy())
        .assemble(RunContext::new(THREAD, "ana"))
        .await?
        .with_checkpointer(saver))
}

/// The thread's runs as stored, read on a runtime of its own.
fn stored_runs(
    saver: &Arc<dyn Saver>,
) -> Result<Vec<RunRecord>, Box<dyn std::error::Error + Send + Sync>> {
    let thread = ThreadId::new(THREAD)?;
    Ok(runtime()?.block_on(saver.list_runs(&thread))?)
}

#[test]
fn an_invocation_dropped_outside_any_runtime_is_cancelled_in_the_file_and_released() -> R {
    let tmp = tempfile::tempdir()?;
    let saver: Arc<dyn Saver> = Arc::new(SqliteSaver::open(tmp.path().join("threads.db"))?);
    let provider = Counting::new(&tmp.path().join("sandboxes"));
    let model = writes_then_hangs();
    let started = runtime()?;
    let agent = started.block_on(agent(&model, &provider, saver.clone()))?;
    let mut run = Box::pin(agent.ask("go"));
    let hung = started.block_on(async {
        tokio::time::timeout(Duration::from_millis(300), &mut run)
            .await
            .is_err()
    });
    assert!(hung, "the hanging run finished");
    assert_eq!(stored_runs(&saver)?[0].status, RunStatus::Running);
    drop(started);
    assert!(tokio::runtime::Handle::try_current().is_err());
    drop(run);
    // Settled before the drop returned: no runtime ran anything since.
    let runs = stored_runs(&saver)?;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Cancelled);
    assert_eq!(runs[0].reason.as_deref(), Some(DROPPED_REASON));
    let receipt = runtime()?.block_on(saver.get_receipt(&runs[0].run_id))?;
    assert!(receipt.is_some(), "no receipt");
    assert_eq!(provider.acquired(), 1);
    assert_eq!(provider.released(), 1, "the sandbox was not released");
    model.clear();
    Ok(())
}

#[test]
fn a_run_whose_settlement_never_ran_is_cancelled_when_its_thread_is_next_opened() -> R {
    let tmp = tempfile::tempdir()?;
    let saver: Arc<dyn Saver> = Arc::new(SqliteSaver::open(tmp.path().join("threads.db"))?);
    let provider = Counting::new(&tmp.path().join("sandboxes"));
    let model = writes_then_hangs();
    let first = runtime()?;
    let agent = first.block_on(agent(&model, &provider, saver.clone()))?;
    let mut run = Box::pin(agent.ask("go"));
    let hung = first.block_on(async {
        tokio::time::timeout(Duration::from_millis(300), &mut run)
            .await
            .is_err()
    });
    assert!(hung, "the hanging run finished");
    // Dropped on the runtime, which shuts down before the settlement it spawned ever runs.
    first.block_on(async move { drop(run) });
    drop(first);
    let left = stored_runs(&saver)?;
    assert_eq!(left[0].status, RunStatus::Running);
    assert_eq!(provider.released(), 0);
    model.clear();
    model.push(AiMessage::text("done"));
    let next = runtime()?.block_on(agent.ask("again"))?;
    let runs = stored_runs(&saver)?;
    let old = runs
        .iter()
        .find(|r| r.run_id == left[0].run_id)
        .ok_or("the left run is gone")?;
    assert_eq!(old.status, RunStatus::Cancelled);
    let reason = old.reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with(LEFT_RUNNING_REASON), "{reason}");
    assert!(reason.contains("in this process"), "{reason}");
    assert!(reason.contains(&format!("thread `{THREAD}`")), "{reason}");
    assert_eq!(next.settlement.status, RunStatus::Success);
    // The id the dropped run could not release was released by the agent's next lease.
    assert_eq!(provider.released(), 1);
    model.verify()?;
    Ok(())
}

/// Linux: a run record stamped as a process with `pid` (and `started`, clock ticks after
/// boot) of this machine's boot and pid namespace would stamp it.
#[cfg(target_os = "linux")]
fn stamped_by(
    pid: u32,
    started: u64,
    run: &str,
) -> Result<RunRecord, Box<dyn std::error::Error + Send + Sync>> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?;
    let ns = std::fs::read_link("/proc/self/ns/pid")?;
    let mut record = RunRecord::new(
        RunId::new(run)?,
        ThreadId::new(THREAD)?,
        RunStatus::Running,
        1,
    );
    record.metadata.insert(
        OWNER_KEY.to_owned(),
        json!({"process": "another", "pid": pid, "boot": boot.trim(),
               "pid_ns": ns.to_string_lossy(), "started": started}),
    );
    Ok(record)
}

/// Linux: when the process `pid` started, in clock ticks after boot.
#[cfg(target_os = "linux")]
fn start_of(pid: u32) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (_, rest) = stat.rsplit_once(')').ok_or("stat does not read")?;
    Ok(rest
        .split_whitespace()
        .nth(19)
        .ok_or("no start time")?
        .parse()?)
}

/// The savers the recovery must hold on: memory, a SQLite file, and PostgreSQL when
/// `STATEGRAPH_PG_URL` names a server.
async fn savers(
    tmp: &std::path::Path,
) -> Result<Vec<(&'static str, Arc<dyn Saver>)>, Box<dyn std::error::Error + Send + Sync>> {
    let mut out: Vec<(&'static str, Arc<dyn Saver>)> = vec![
        ("memory", Arc::new(MemorySaver::new())),
        (
            "sqlite",
            Arc::new(SqliteSaver::open(tmp.join("threads.db"))?),
        ),
    ];
    if let Ok(url) = std::env::var("STATEGRAPH_PG_URL") {
        let options = stategraph::checkpoints::PostgresOptions {
            schema: format!("left_running_{}", std::process::id()),
            ..Default::default()
        };
        let pg = stategraph::checkpoints::PostgresSaver::connect_with(&url, options).await?;
        pg.delete_thread(&ThreadId::new(THREAD)?).await?;
        out.push(("postgres", Arc::new(pg)));
    }
    Ok(out)
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_run_left_running_by_an_ended_process_is_cancelled_and_a_live_ones_is_not() -> R {
    let tmp = tempfile::tempdir()?;
    let mut ended = std::process::Command::new("true").spawn()?;
    ended.wait()?;
    let mut live = std::process::Command::new("sleep").arg("30").spawn()?;
    let live_start = start_of(live.id())?;
    for (name, saver) in savers(tmp.path()).await? {
        let crashed = stamped_by(ended.id(), 1, &format!("crashed-{name}"))?;
        let running = stamped_by(live.id(), live_start, &format!("elsewhere-{name}"))?;
        saver.put_run(crashed.clone()).await?;
        saver.put_run(running.clone()).await?;
        let provider = Counting::new(&tmp.path().join(name));
        let model = ScriptedModel::new("m", [AiMessage::text("done")]);
        agent(&model, &provider, saver.clone())
            .await?
            .ask("go")
            .await?;
        let thread = ThreadId::new(THREAD)?;
        let cancelled = saver
            .get_run(Some(&thread), &crashed.run_id)
            .await?
            .ok_or("the crashed run is gone")?;
        assert_eq!(cancelled.status, RunStatus::Cancelled, "{name}");
        let reason = cancelled.reason.as_deref().unwrap_or_default();
        assert!(reason.starts_with(LEFT_RUNNING_REASON), "{name}: {reason}");
        assert!(
            reason.contains(&format!("process {}, which has ended", ended.id())),
            "{name}: {reason}"
        );
        let untouched = saver
            .get_run(Some(&thread), &running.run_id)
            .await?
            .ok_or("the live run is gone")?;
        assert_eq!(
            untouched.status,
            RunStatus::Running,
            "{name}: a live run was cancelled"
        );
        model.verify()?;
    }
    live.kill()?;
    live.wait()?;
    Ok(())
}

#[tokio::test]
async fn a_queued_run_under_a_live_lease_is_not_touched_when_its_thread_is_opened() -> R {
    let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else {
        eprintln!("skipped: STATEGRAPH_PG_URL is not set");
        return Ok(());
    };
    let options = stategraph::checkpoints::PostgresOptions {
        schema: format!("left_running_queue_{}", std::process::id()),
        ..Default::default()
    };
    let pg = stategraph::checkpoints::PostgresSaver::connect_with(&url, options).await?;
    let thread = ThreadId::new(THREAD)?;
    pg.delete_thread(&thread).await?;
    let queue = pg.queue();
    let queued = queue
        .submit(
            &thread,
            json!(null),
            stategraph::checkpoints::Multitask::Enqueue,
        )
        .await?;
    let lease = queue
        .lease("another-worker", Duration::from_secs(600))
        .await?
        .ok_or("the queued run was not leased")?;
    assert_eq!(lease.run, queued);
    let tmp = tempfile::tempdir()?;
    let model = ScriptedModel::new("m", [AiMessage::text("done")]);
    let provider = Counting::new(tmp.path());
    agent(&model, &provider, Arc::new(pg.clone()))
        .await?
        .ask("go")
        .await?;
    let stored = pg.get_run(Some(&thread), &queued).await?.ok_or("gone")?;
    assert_eq!(stored.status, RunStatus::Running, "{:?}", stored.reason);
    let in_queue = queue.run(&queued).await?.ok_or("not in the queue")?;
    assert_eq!(in_queue.status, RunStatus::Running);
    model.verify()?;
    Ok(())
}
