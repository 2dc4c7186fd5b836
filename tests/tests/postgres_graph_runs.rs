//! Graphs run on the PostgreSQL saver: a chain, a fan-out of sends, an interrupt resumed by
//! another saver (another pool, as another process has), and a run that is SIGKILLed at
//! random instants and started again until it finishes (the `crash_resume` example with
//! `--pg`). Without `STATEGRAPH_PG_URL` each test says how to start the server and skips (it
//! fails under `CI=true`).
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

#[path = "pg_support/mod.rs"]
mod pg_support;

use std::path::PathBuf;
use std::process::{Command as Process, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use stategraph::checkpoints::{ListOptions, Namespace, PostgresSaver, Saver, ThreadId};
use stategraph::prelude::*;
use stategraph::SendTo;
use stategraph_tests::kill::{self, Rng};
use stategraph_tests::tally::{self, reference_checksum};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The thread's root-namespace history is one chain: each checkpoint's parent is the one
/// listed after it, and the steps count up by one.
async fn assert_one_chain(saver: &PostgresSaver, thread: &str) -> TestResult {
    let t = ThreadId::new(thread)?;
    let list = saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?;
    assert!(!list.is_empty(), "thread {thread} has no history");
    for pair in list.windows(2) {
        assert_eq!(
            pair[0].parent,
            Some(pair[1].id),
            "{thread}: a fork in the chain"
        );
        assert!(pair[0].id > pair[1].id, "{thread}: ids out of order");
        assert_eq!(
            pair[0].step,
            pair[1].step + 1,
            "{thread}: steps not contiguous"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_steps_runs_to_the_end_as_one_history() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, _guard) = pg_support::fresh(&url, "g_chain").await?;
    for durability in [Durability::Sync, Durability::Async] {
        let thread = format!("chain-{durability:?}");
        let g = tally::graph(30)?.with_checkpointer(Arc::new(saver.clone()));
        let cfg = RunConfig::new()
            .thread(thread.clone())
            .durability(durability);
        let out = g.invoke(tally::Tally::update(), &cfg).await?;
        assert_eq!(tally::check(&out.state, "result")?, 30);
        assert_eq!(out.state.checksum, reference_checksum(30));
        // What a fresh reader of the database sees is the same state.
        let reader = tally::graph(30)?.with_checkpointer(Arc::new(saver.clone()));
        let snap = reader.get_state(&thread, None).await?.ok_or("no state")?;
        assert_eq!(tally::check(&snap.values, "stored")?, 30);
        assert!(snap.next.is_empty());
        assert_one_chain(&saver, &thread).await?;
    }
    Ok(())
}

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Job {
    #[reduce(append)]
    pub results: Vec<u64>,
    pub total: u64,
}

fn fanout(k: u64) -> Result<CompiledGraph<Job>, stategraph::CompileError> {
    StateGraph::<Job>::new()
        .add_node_with(
            "emit",
            move |_s: Arc<Job>, _c: NodeContext| async move {
                Ok::<_, BoxError>(
                    Command::<Job>::new().goto_all((0..k).map(|i| SendTo::new("worker", i))),
                )
            },
            NodeOptions::new().destinations(["worker"]),
        )
        .add_node("worker", |_s: Arc<Job>, c: NodeContext| async move {
            let i: u64 = c.arg()?;
            Ok::<_, BoxError>(Job::update().results(vec![i * i]))
        })
        .add_node("reduce", |s: Arc<Job>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Job::update().total(s.results.iter().sum::<u64>()))
        })
        .add_edge(START, "emit")
        .add_edge("worker", "reduce")
        .add_edge("reduce", END)
        .compile()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_of_sends_stores_every_result_in_send_order() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, _guard) = pg_support::fresh(&url, "g_fanout").await?;
    let g = fanout(25)?.with_checkpointer(Arc::new(saver.clone()));
    let cfg = RunConfig::new().thread("fan");
    let out = g.invoke(Job::update(), &cfg).await?;
    let squares: Vec<u64> = (0..25).map(|i| i * i).collect();
    assert_eq!(out.state.results, squares);
    assert_eq!(out.state.total, squares.iter().sum::<u64>());
    let snap = g.get_state("fan", None).await?.ok_or("no state")?;
    assert_eq!(snap.values, out.state);
    assert_one_chain(&saver, "fan").await?;
    Ok(())
}

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    #[reduce(append)]
    pub log: Vec<String>,
}

fn asking(done_runs: Arc<AtomicUsize>) -> Result<CompiledGraph<Log>, stategraph::CompileError> {
    StateGraph::<Log>::new()
        .add_node("ask", |_s: Arc<Log>, c: NodeContext| async move {
            let answer: String = c.interrupt("question")?;
            Ok::<_, BoxError>(Log::update().log(vec![format!("ask:{answer}")]))
        })
        .add_node("done", move |_s: Arc<Log>, _c: NodeContext| {
            done_runs.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, BoxError>(Log::update().log(vec!["done".into()])) }
        })
        .add_edge(START, "ask")
        .add_edge(START, "done")
        .add_edge("ask", END)
        .add_edge("done", END)
        .compile()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_is_resumed_through_another_pool_and_the_finished_sibling_does_not_rerun(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (first, guard) = pg_support::fresh(&url, "g_interrupt").await?;
    let done_runs = Arc::new(AtomicUsize::new(0));
    let cfg = RunConfig::new().thread("ask");
    let paused = asking(done_runs.clone())?
        .with_checkpointer(Arc::new(first))
        .invoke(Log::update().log(vec!["input".into()]), &cfg)
        .await?;
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.state.log, ["input"]);
    // Another process (its own pool) resumes the thread.
    let options = stategraph::checkpoints::PostgresOptions {
        schema: guard.schema.clone(),
        ..Default::default()
    };
    let second = PostgresSaver::connect_with(&url, options).await?;
    let resumed = asking(done_runs.clone())?
        .with_checkpointer(Arc::new(second.clone()))
        .invoke(Command::resume(Resume::value("yes")), &cfg)
        .await?;
    assert!(resumed.interrupts.is_empty());
    let mut log = resumed.state.log.clone();
    log.sort();
    assert_eq!(log, ["ask:yes", "done", "input"]);
    assert_eq!(
        done_runs.load(Ordering::SeqCst),
        1,
        "done ran again on resume"
    );
    assert_one_chain(&second, "ask").await?;
    Ok(())
}

/// Build the example once (same profile as this test) and return its path.
fn example_binary() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        stategraph_tests::build_target("stategraph-examples", "--example", "crash_resume")
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

fn spawn(url: &str, schema: &str, db: &std::path::Path, steps: u64) -> std::process::Child {
    Process::new(example_binary())
        .env_remove("STATEGRAPH_FAILPOINT")
        .arg("--db")
        .arg(db)
        .args(["--thread", "killed", "--steps", &steps.to_string()])
        .args(["--durability", "sync", "--pg", url, "--schema", schema])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crash_resume")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_at_random_instants_resumes_from_postgres_to_the_uninterrupted_result(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "g_kill").await?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("ledger-base.db");
    let steps = 600;
    let kills = kill::env_u64("STATEGRAPH_PG_KILLS", 12)?;
    let mut rng = Rng(kill::env_u64("STATEGRAPH_KILL_SEED", 0x9e37_79b9)?);
    let mut killed = 0;
    // Kills that landed after some steps had committed and before the last one.
    let mut mid_run = 0;
    for _ in 0..kills {
        let mut child = spawn(&url, &guard.schema, &db, steps);
        std::thread::sleep(Duration::from_millis(rng.between(30, 250)));
        if child.try_wait()?.is_some() {
            break; // finished before the kill
        }
        child.kill()?;
        child.wait()?;
        killed += 1;
        // Whatever was committed is one chain, never a fork or a torn state.
        let head = saver
            .get(&ThreadId::new("killed")?, &Namespace::root(), None)
            .await?;
        if let Some(head) = head {
            assert_one_chain(&saver, "killed").await?;
            let step = u64::try_from(head.checkpoint.step).unwrap_or(0);
            if step > 0 && step < steps {
                mid_run += 1;
            }
        }
    }
    let out = spawn(&url, &guard.schema, &db, steps).wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the last run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = kill::parse_report(&stdout, "killed")?;
    assert_eq!(report.items, steps);
    assert_eq!(report.checksum, reference_checksum(steps));
    // Under `sync` a kill costs at most one re-execution (the step whose node ran but whose
    // checkpoint did not commit).
    assert!(
        report.executions <= steps + killed,
        "{} executions for {steps} steps and {killed} kills",
        report.executions
    );
    eprintln!("{killed} kills, {mid_run} in the middle of the run");
    assert!(killed > 0, "no run was killed: make the runs longer");
    assert!(mid_run > 0, "no kill landed in the middle of the run");
    assert_one_chain(&saver, "killed").await?;
    Ok(())
}
