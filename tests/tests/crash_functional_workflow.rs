//! A functional workflow survives SIGKILL: a child process runs a 50-task workflow and is
//! killed at random points 20 times; each time it is started again on the same thread and
//! goes on (`Entrypoint::continue_run`). Every task whose result the workflow had received
//! (noted `done i` in a ledger file right after `task` returned) never runs again; the run
//! ends with the result of an uninterrupted one. On a SQLite file and on PostgreSQL
//! (`STATEGRAPH_PG_URL`, a schema per test). The child is this test binary running
//! [`workflow_child_runs_until_killed`]; `STATEGRAPH_WORKFLOW_KILLS` sets the kill count and
//! `STATEGRAPH_WORKFLOW_SEED` the seed.
#![allow(clippy::expect_used)]

mod pg_support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use stategraph::func::{entrypoint, Entrypoint, WorkflowContext};
use stategraph::prelude::*;
use stategraph_tests::child_store::ChildStore as Store;
use stategraph_tests::kill::{env_u64, Rng};

const TASKS: u64 = 50;
const THREAD: &str = "workflow";

fn note(ledger: &Path, line: String) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ledger)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// Task `i` notes `start i`, sleeps 8 ms and returns `i * i`; the workflow notes `done i`
/// once the task's result is in hand, and returns the sum.
fn workflow(ledger: PathBuf) -> Result<Entrypoint<u64, u64>, stategraph::CompileError> {
    entrypoint("squares", move |n: u64, cx: WorkflowContext| {
        let ledger = ledger.clone();
        async move {
            let mut total = 0;
            for i in 0..n {
                let at = ledger.clone();
                total += cx
                    .task("square", async move {
                        note(&at, format!("start {i}"))?;
                        tokio::time::sleep(Duration::from_millis(8)).await;
                        Ok::<_, BoxError>(i * i)
                    })
                    .await?;
                note(&ledger, format!("done {i}"))?;
            }
            Ok::<_, BoxError>(total)
        }
    })
}

/// The prefix of the environment variables naming the child's store.
const STORE_ENV: &str = "STATEGRAPH_WF_CHILD";

/// The child: start the workflow (`STATEGRAPH_WF_CHILD_MODE=start`) or go on with it, and
/// print its result. Without the variables (a plain `--ignored` run) it does nothing.
#[test]
#[ignore = "the child process of a_workflow_killed_20_times_runs_each_finished_task_once"]
fn workflow_child_runs_until_killed() {
    let (Some(store), Ok(ledger), Ok(mode)) = (
        Store::from_env(STORE_ENV),
        std::env::var("STATEGRAPH_WF_CHILD_LEDGER"),
        std::env::var("STATEGRAPH_WF_CHILD_MODE"),
    ) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let result = rt.block_on(async {
        let wf = workflow(PathBuf::from(ledger))
            .expect("the workflow compiles")
            .with_checkpointer(
                store
                    .open(false)
                    .await
                    .expect("open the store")
                    .expect("a writable store"),
            );
        // Under `sync` a task's result is stored before `task` returns it.
        let config = RunConfig::new()
            .thread(THREAD)
            .durability(stategraph::Durability::Sync);
        let out = match mode.as_str() {
            "start" => wf.invoke(TASKS, &config).await,
            _ => wf.continue_run(&config).await,
        };
        out.expect("the workflow finishes").output
    });
    println!("result {}", result.expect("a result"));
}

fn child(store: &Store, ledger: &Path, mode: &str) -> Child {
    Process::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "workflow_child_runs_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .envs(store.env(STORE_ENV))
        .env("STATEGRAPH_WF_CHILD_LEDGER", ledger)
        .env("STATEGRAPH_WF_CHILD_MODE", mode)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child")
}

fn ledger_lines(ledger: &Path) -> Vec<String> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn starts(lines: &[String]) -> usize {
    lines.iter().filter(|l| l.starts_with("start ")).count()
}

/// Kill the child once it has started `more` tasks beyond `seen`, after a further pause of
/// up to 10 ms (so kills land inside tasks and between them); `false` if it ended first.
fn kill_after(running: &mut Child, ledger: &Path, seen: usize, more: usize, pause_ms: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = running.try_wait().expect("poll the child") {
            let mut err = String::new();
            if let Some(mut e) = running.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            assert!(status.success(), "the child failed ({status}): {err}");
            return false;
        }
        if starts(&ledger_lines(ledger)) >= seen + more {
            std::thread::sleep(Duration::from_millis(pause_ms));
            running.kill().expect("SIGKILL the child");
            running.wait().expect("reap the child");
            return true;
        }
        assert!(Instant::now() < deadline, "the child made no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn kill_and_continue(store: &Store) {
    let kills = env_u64("STATEGRAPH_WORKFLOW_KILLS", 20).expect("kill count");
    let mut rng = Rng(env_u64("STATEGRAPH_WORKFLOW_SEED", 40).expect("seed"));
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("ledger");
    let mut mode = "start";
    let mut killed = 0;
    while killed < kills {
        let seen = starts(&ledger_lines(&ledger));
        let mut running = child(store, &ledger, mode);
        let more = rng.between(1, 2) as usize;
        if !kill_after(&mut running, &ledger, seen, more, rng.between(0, 10)) {
            break;
        }
        killed += 1;
        mode = "continue";
    }
    assert_eq!(
        killed, kills,
        "the workflow finished before it was killed {kills} times"
    );
    let out = child(store, &ledger, mode)
        .wait_with_output()
        .expect("run the last child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the last run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: u64 = (0..TASKS).map(|i| i * i).sum();
    assert!(stdout.contains(&format!("result {want}")), "{stdout}");

    // A task whose result the workflow had received never started again.
    let lines = ledger_lines(&ledger);
    let mut done: BTreeMap<u64, usize> = BTreeMap::new();
    for (at, line) in lines.iter().enumerate() {
        let (kind, i) = line.split_once(' ').expect("a ledger line");
        let i: u64 = i.parse().expect("a task number");
        match kind {
            "done" => {
                done.entry(i).or_insert(at);
            }
            _ => assert!(
                !done.contains_key(&i),
                "task {i} started again at line {at}, after it was done"
            ),
        }
    }
    assert_eq!(done.len(), TASKS as usize, "every task done");
    // Each kill reran at most the one task it interrupted.
    let reruns = starts(&lines) - TASKS as usize;
    assert!(
        reruns as u64 <= killed,
        "{reruns} reruns for {killed} kills"
    );
}

#[test]
fn a_workflow_killed_20_times_runs_each_finished_task_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    kill_and_continue(&Store::File(dir.path().join("workflow.db")));
}

#[test]
fn a_workflow_killed_20_times_runs_each_finished_task_once_on_postgres() {
    let Some(url) = pg_support::url() else {
        return;
    };
    let schema = pg_support::unique_schema("wf_kill");
    let _guard = pg_support::SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    kill_and_continue(&Store::Postgres { url, schema });
}
