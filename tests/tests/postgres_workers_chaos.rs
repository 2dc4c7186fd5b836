//! Workers as real processes on a real PostgreSQL server (`STATEGRAPH_PG_URL`): a chaos
//! test (4 workers, 200 runs over 20 threads, one worker SIGKILLed and restarted every
//! ~300 ms) and a zombie test (a worker SIGSTOPped past its lease while another takes its
//! run over). The worker processes are this test binary running
//! [`worker_child_serves_until_killed`].
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod pg_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::process::{Child, Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stategraph::checkpoints::{
    ListOptions, MemorySaver, Multitask, Namespace, PostgresOptions, PostgresSaver, RunId,
    RunStatus, Saver, ThreadId,
};
use stategraph::prelude::*;
use stategraph::worker::{Worker, WorkerOptions};
use stategraph_tests::steps::Steps;

const LEASE: Duration = Duration::from_millis(1000);
const HEARTBEAT: Duration = Duration::from_millis(250);

/// The shared `a → b → c` graph, each node waiting `pause`.
fn steps(pause: Duration) -> CompiledGraph<Steps> {
    stategraph_tests::steps::steps(pause, Arc::default()).expect("the graph compiles")
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The worker process: serve the queue of `STATEGRAPH_WORKER_CHILD_SCHEMA` until killed,
/// printing one line per run it handled. Without its variables (a plain `--ignored` run) it
/// does nothing.
#[test]
#[ignore = "the worker process of the chaos and zombie tests"]
fn worker_child_serves_until_killed() {
    let (Some(url), Some(schema), Some(name), Some(pause)) = (
        env("STATEGRAPH_WORKER_CHILD_URL"),
        env("STATEGRAPH_WORKER_CHILD_SCHEMA"),
        env("STATEGRAPH_WORKER_CHILD_NAME"),
        env("STATEGRAPH_WORKER_CHILD_PAUSE_MS"),
    ) else {
        return;
    };
    let pause = Duration::from_millis(pause.parse().expect("a pause in ms"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let options = PostgresOptions {
            schema,
            pool_size: 3,
            create_schema: false,
            ..Default::default()
        };
        let saver = PostgresSaver::connect_with(&url, options)
            .await
            .expect("connect");
        let worker_options = WorkerOptions {
            name,
            lease: LEASE,
            heartbeat: HEARTBEAT,
            poll: Duration::from_millis(50),
            ..WorkerOptions::default()
        };
        let worker = Worker::new(saver, steps(pause), worker_options).expect("worker");
        loop {
            match worker.run_next().await {
                Ok(Some(w)) => println!("worked {} epoch {} {:?}", w.run, w.epoch, w.worked),
                Ok(None) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => eprintln!("queue error: {e}"),
            }
        }
    });
}

fn spawn_worker(url: &str, schema: &str, name: &str, pause_ms: u64) -> Child {
    Process::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "worker_child_serves_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env("STATEGRAPH_WORKER_CHILD_URL", url)
        .env("STATEGRAPH_WORKER_CHILD_SCHEMA", schema)
        .env("STATEGRAPH_WORKER_CHILD_NAME", name)
        .env("STATEGRAPH_WORKER_CHILD_PAUSE_MS", pause_ms.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a worker process")
}

fn signal(child: &Child, sig: &str) {
    let status = Process::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig}");
}

/// What each thread's runs would make, run one after another without a failure.
async fn uninterrupted(runs: &BTreeMap<ThreadId, Vec<String>>) -> BTreeMap<ThreadId, Steps> {
    let graph = steps(Duration::ZERO).with_checkpointer(Arc::new(MemorySaver::new()));
    let mut out = BTreeMap::new();
    for (thread, labels) in runs {
        let config = RunConfig::new().thread(thread.as_str());
        let mut last = Steps::default();
        for label in labels {
            last = (*graph
                .invoke(Steps::update().label(label.clone()), &config)
                .await
                .unwrap()
                .state)
                .clone();
        }
        out.insert(thread.clone(), last);
    }
    out
}

/// Each thread's history is one chain: every checkpoint's parent is the one before it and
/// the steps follow one another.
async fn assert_one_chain(saver: &PostgresSaver, thread: &ThreadId) {
    let mut history = saver
        .list(thread, &Namespace::root(), ListOptions::default())
        .await
        .unwrap();
    history.sort_by_key(|c| c.id);
    for pair in history.windows(2) {
        assert_eq!(pair[1].parent, Some(pair[0].id), "{thread}: one chain");
        assert_eq!(pair[1].step, pair[0].step + 1, "{thread}: contiguous steps");
    }
}

/// In the order writes took their fence, a lease (run, epoch) once followed by another
/// never writes again: no two workers ran the thread at once, and no epoch wrote after the
/// next one's first write.
async fn assert_leases_never_overlap(saver: &PostgresSaver, thread: &ThreadId) {
    let log = saver.queue().write_log(thread).await.unwrap();
    let mut done: BTreeSet<(RunId, u64)> = BTreeSet::new();
    let mut current: Option<(RunId, u64)> = None;
    for w in log {
        let lease = (w.run.clone(), w.epoch);
        if current.as_ref() != Some(&lease) {
            assert!(
                !done.contains(&lease),
                "{thread}: {lease:?} wrote after a later lease"
            );
            if let Some(previous) = current.replace(lease) {
                done.insert(previous);
            }
        }
    }
}

async fn thread_state(saver: &PostgresSaver, thread: &ThreadId) -> Steps {
    let graph = steps(Duration::ZERO).with_checkpointer(Arc::new(saver.clone()));
    let snap = graph
        .get_state(thread.as_str(), None)
        .await
        .unwrap()
        .expect("a state");
    (*snap.values).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_runs_survive_a_worker_killed_every_300_ms() {
    let Some(url) = pg_support::url() else { return };
    let options = PostgresOptions {
        pool_size: 4,
        ..Default::default()
    };
    let (saver, _guard) = pg_support::fresh_with(&url, "chaos", options)
        .await
        .unwrap();
    let queue = saver.queue();
    let mut labels: BTreeMap<ThreadId, Vec<String>> = BTreeMap::new();
    let mut runs = Vec::new();
    for i in 0..200 {
        let thread = ThreadId::new(format!("t{:02}", i % 20)).unwrap();
        let label = format!("r{i}");
        runs.push(
            queue
                .submit(
                    &thread,
                    serde_json::json!({ "label": label }),
                    Multitask::Enqueue,
                )
                .await
                .unwrap(),
        );
        labels.entry(thread).or_default().push(label);
    }
    let schema = saver.schema().to_owned();
    let mut workers: Vec<Child> = (0..4)
        .map(|i| spawn_worker(&url, &schema, &format!("w{i}"), 15))
        .collect();
    let (start, mut kills) = (Instant::now(), 0usize);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut open = 0;
        for run in &runs {
            if !queue.run(run).await.unwrap().unwrap().status.is_terminal() {
                open += 1;
            }
        }
        if open == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{open} runs still open after 300 s"
        );
        let k = kills % workers.len();
        workers[k].kill().expect("SIGKILL a worker");
        workers[k].wait().expect("reap it");
        kills += 1;
        workers[k] = spawn_worker(&url, &schema, &format!("w{k}-{kills}"), 15);
    }
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }

    let mut taken_over = 0;
    for run in &runs {
        let r = queue.run(run).await.unwrap().unwrap();
        assert_eq!(r.status, RunStatus::Success, "{r:?}");
        taken_over += usize::from(r.attempts > 1);
    }
    assert!(
        kills >= 5 && taken_over > 0,
        "the chaos happened: {kills} kills, {taken_over} runs taken over"
    );
    let expected = uninterrupted(&labels).await;
    for (thread, want) in &expected {
        assert_one_chain(&saver, thread).await;
        assert_leases_never_overlap(&saver, thread).await;
        assert_eq!(&thread_state(&saver, thread).await, want, "{thread}");
    }
    eprintln!(
        "chaos: {kills} kills, {taken_over} of 200 runs taken over, {:?}",
        start.elapsed()
    );
}

/// Wait until the thread's write log satisfies `done`.
async fn until_log(
    queue: &stategraph::checkpoints::RunQueue,
    thread: &ThreadId,
    what: &str,
    done: impl Fn(&[stategraph::checkpoints::FencedWrite]) -> bool,
) {
    let start = Instant::now();
    while !done(&queue.write_log(thread).await.unwrap()) {
        assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_worker_resumed_after_its_lease_writes_nothing() {
    let Some(url) = pg_support::url() else { return };
    let (saver, _guard) = pg_support::fresh(&url, "zombie").await.unwrap();
    let queue = saver.queue();
    let thread = ThreadId::new("z").unwrap();
    let run = queue
        .submit(
            &thread,
            serde_json::json!({ "label": "z" }),
            Multitask::Enqueue,
        )
        .await
        .unwrap();
    let schema = saver.schema().to_owned();
    let mut zombie = spawn_worker(&url, &schema, "zombie", 700);
    until_log(&queue, &thread, "the zombie writes", |log| {
        log.iter().any(|w| w.worker == "zombie")
    })
    .await;
    signal(&zombie, "-STOP");
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let mut heir = spawn_worker(&url, &schema, "heir", 700);
    until_log(&queue, &thread, "the heir writes", |log| {
        log.iter().any(|w| w.worker == "heir" && w.epoch == 2)
    })
    .await;
    signal(&zombie, "-CONT");
    let done = queue
        .wait_until_done(&run, Duration::from_millis(20))
        .await
        .unwrap();
    // The zombie has woken, found its lease gone (at its next write or heartbeat), and said so.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for child in [&mut zombie, &mut heir] {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut said = String::new();
    zombie
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(
        said.contains(&format!("worked {run} epoch 1 LeaseLost")),
        "zombie said: {said:?}"
    );

    assert_eq!(
        (done.status, done.epoch, done.worker.as_deref()),
        (RunStatus::Success, 2, Some("heir"))
    );
    let log = queue.write_log(&thread).await.unwrap();
    let first_heir = log.iter().position(|w| w.epoch == 2).unwrap();
    assert!(
        log[first_heir..].iter().all(|w| w.epoch == 2),
        "the zombie wrote after the takeover: {log:?}"
    );
    assert_eq!(
        thread_state(&saver, &thread).await.log,
        ["z/a", "z/b", "z/c"]
    );
    assert_one_chain(&saver, &thread).await;
}
