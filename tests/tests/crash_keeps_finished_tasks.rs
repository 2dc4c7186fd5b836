//! Per-task durability of writes: a step of 100 parallel tasks is SIGKILLed while it runs;
//! each task that had finished had its writes recorded as it finished, so the resumed step
//! runs only the tasks without recorded writes, and the final state holds every task's result
//! exactly once. On a SQLite file and on PostgreSQL (`STATEGRAPH_PG_URL`, a schema per test).
//! The child process is this test binary running [`fan_out_child_runs_until_killed`].
#![allow(clippy::expect_used)]

mod pg_support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stategraph::checkpoints::{Namespace, ThreadId, WriteKind};
use stategraph::prelude::*;
use stategraph::{CompiledGraph, Durability, Input, SendTo};
use stategraph_tests::child_store::ChildStore as Store;

const WIDTH: u64 = 100;
const THREAD: &str = "fan";
/// Kill once this many tasks have recorded their writes.
const KILL_AT: usize = 40;

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Fan {
    #[reduce(append)]
    results: Vec<u64>,
    width: u64,
}

/// Task `i` notes in `ledger` that it started, sleeps `(i + 1) × 15 ms` (the tasks finish one
/// after another over 1.5 s), and returns `i * i`.
fn graph(ledger: PathBuf) -> Result<CompiledGraph<Fan>, stategraph::CompileError> {
    StateGraph::<Fan>::new()
        .add_node_with(
            "fan",
            |s: Arc<Fan>, _ctx: NodeContext| async move {
                let sends: Vec<SendTo> = (0..s.width).map(|i| SendTo::new("work", i)).collect();
                Ok::<_, BoxError>(stategraph::Command::<Fan>::new().goto_all(sends))
            },
            NodeOptions::new().destinations(["work"]),
        )
        .add_node("work", move |_s: Arc<Fan>, ctx: NodeContext| {
            let ledger = ledger.clone();
            async move {
                let i: u64 = ctx.arg()?;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&ledger)?;
                f.write_all(format!("{i}\n").as_bytes())?;
                tokio::time::sleep(Duration::from_millis((i + 1) * 15)).await;
                Ok::<_, BoxError>(Fan::update().results(vec![i * i]))
            }
        })
        .add_edge(START, "fan")
        .add_edge("work", END)
        .compile()
}

/// The prefix of the environment variables naming the child's store.
const STORE_ENV: &str = "STATEGRAPH_FAN_CHILD";

fn durability(name: &str) -> Durability {
    match name {
        "async" => Durability::Async,
        _ => Durability::Sync,
    }
}

/// The child: start the fan-out (`STATEGRAPH_FAN_CHILD_MODE=start`) or resume it, on the
/// file `STATEGRAPH_FAN_CHILD_DB`, noting task starts in `STATEGRAPH_FAN_CHILD_LEDGER`.
/// Without those variables (a plain `--ignored` run) it does nothing.
#[test]
#[ignore = "the child process of per_task_writes_survive_a_kill_in_the_middle_of_a_step"]
fn fan_out_child_runs_until_killed() {
    let (Some(store), Ok(ledger), Ok(mode), Ok(dur)) = (
        Store::from_env(STORE_ENV),
        std::env::var("STATEGRAPH_FAN_CHILD_LEDGER"),
        std::env::var("STATEGRAPH_FAN_CHILD_MODE"),
        std::env::var("STATEGRAPH_FAN_CHILD_DURABILITY"),
    ) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let saver = store
            .open(false)
            .await
            .expect("open the store")
            .expect("a writable store");
        let g = graph(PathBuf::from(ledger))
            .expect("graph compiles")
            .with_checkpointer(saver);
        let config = RunConfig::new().thread(THREAD).durability(durability(&dur));
        let input = match mode.as_str() {
            "start" => Input::from(Fan::update().width(WIDTH)),
            _ => Input::Continue,
        };
        g.invoke(input, &config).await.expect("the run finishes");
    });
    println!("child done");
}

fn child(store: &Store, ledger: &Path, mode: &str, durability: &str) -> Child {
    Process::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "fan_out_child_runs_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .envs(store.env(STORE_ENV))
        .env("STATEGRAPH_FAN_CHILD_LEDGER", ledger)
        .env("STATEGRAPH_FAN_CHILD_MODE", mode)
        .env("STATEGRAPH_FAN_CHILD_DURABILITY", durability)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child")
}

/// How many tasks have recorded an output against the thread's head checkpoint, read by
/// another process while the child writes (`None` before the thread has one).
fn recorded_outputs(store: &Store) -> Option<usize> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let thread = ThreadId::new(THREAD).ok()?;
    rt.block_on(async {
        let saver = store.open(true).await.ok()??;
        let head = saver.head(&thread, &Namespace::root()).await.ok()??;
        Some(
            head.pending
                .iter()
                .filter(|w| matches!(w.kind, WriteKind::Output(_)))
                .count(),
        )
    })
}

/// The task numbers a ledger noted, in order.
fn ledger_lines(ledger: &Path) -> Vec<u64> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().expect("a task number"))
        .collect()
}

fn kill_mid_step_and_resume(store: &Store, durability: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));

    let mut running = child(store, &first, "start", durability);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = running.try_wait().expect("poll the child") {
            panic!("the child ended ({status}) before it was killed");
        }
        if recorded_outputs(store).is_some_and(|n| n >= KILL_AT) {
            break;
        }
        assert!(Instant::now() < deadline, "no task recorded its writes");
        std::thread::sleep(Duration::from_millis(5));
    }
    running.kill().expect("SIGKILL the child");
    running.wait().expect("reap the child");

    let recorded = recorded_outputs(store).expect("the thread's head after the kill");
    let started = ledger_lines(&first);
    assert!(
        (KILL_AT..WIDTH as usize).contains(&recorded),
        "{recorded} tasks recorded at the kill"
    );
    assert!(started.len() >= recorded, "more recorded than started");

    let out = child(store, &second, "resume", durability)
        .wait_with_output()
        .expect("run the resuming child");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("child done"),
        "the resume failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rerun = ledger_lines(&second);
    assert_eq!(
        rerun.len(),
        WIDTH as usize - recorded,
        "the resumed step ran {} tasks; {recorded} of {WIDTH} had recorded their writes",
        rerun.len()
    );
    assert_eq!(
        rerun.iter().collect::<BTreeSet<_>>().len(),
        rerun.len(),
        "a task ran twice on resume"
    );

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let saver = rt
        .block_on(store.open(true))
        .expect("open the store")
        .expect("the file exists");
    let g = graph(dir.path().join("unused"))
        .expect("graph compiles")
        .with_checkpointer(saver);
    let state = rt
        .block_on(g.get_state(THREAD, None))
        .expect("read the final state")
        .expect("the thread has a checkpoint");
    let mut results = state.values.results.clone();
    results.sort_unstable();
    let want: Vec<u64> = (0..WIDTH).map(|i| i * i).collect();
    assert_eq!(results, want, "every task's result exactly once");
    assert!(state.next.is_empty(), "the thread finished");
}

fn on_a_file(durability: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    kill_mid_step_and_resume(&Store::File(dir.path().join("fan.db")), durability);
}

fn on_postgres(durability: &str) {
    let Some(url) = pg_support::url() else {
        return;
    };
    let schema = pg_support::unique_schema("fan_kill");
    let _guard = pg_support::SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    kill_mid_step_and_resume(&Store::Postgres { url, schema }, durability);
}

#[test]
fn per_task_writes_survive_a_kill_in_the_middle_of_a_step_under_sync() {
    on_a_file("sync");
}

#[test]
fn per_task_writes_survive_a_kill_in_the_middle_of_a_step_under_async() {
    on_a_file("async");
}

#[test]
fn per_task_writes_survive_a_kill_in_the_middle_of_a_step_on_postgres_under_sync() {
    on_postgres("sync");
}

#[test]
fn per_task_writes_survive_a_kill_in_the_middle_of_a_step_on_postgres_under_async() {
    on_postgres("async");
}
