//! The run queue and its workers on a real PostgreSQL server (`STATEGRAPH_PG_URL`, a schema
//! per test): which run a lease takes, one running run per thread enforced by the database,
//! the fence on every write, the multitask strategies, cancellation, wake-ups, and a dead
//! worker's run taken over and resumed.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod pg_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use stategraph::checkpoints::{
    CheckpointError, ListOptions, Multitask, Namespace, PostgresSaver, RunEnd, RunStatus, Saver,
    StopRequest, ThreadId,
};
use stategraph::prelude::*;
use stategraph::worker::{Worked, Worker, WorkerOptions};
use stategraph::RunError;
use stategraph_tests::steps::Steps;

const LONG: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_millis(20);

/// The shared `a → b → c` graph, each node waiting `pause` and counted in `runs`.
fn steps(pause: Duration, runs: Arc<AtomicUsize>) -> CompiledGraph<Steps> {
    stategraph_tests::steps::steps(pause, runs).expect("the graph compiles")
}

fn input(label: &str) -> serde_json::Value {
    serde_json::json!({ "label": label })
}

fn options(lease: Duration) -> WorkerOptions {
    WorkerOptions {
        lease,
        heartbeat: lease / 4,
        poll: Duration::from_millis(50),
        ..WorkerOptions::default()
    }
}

fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).expect("a valid thread id")
}

async fn state_of(saver: &PostgresSaver, t: &ThreadId) -> Steps {
    let graph = steps(Duration::ZERO, Arc::default()).with_checkpointer(Arc::new(saver.clone()));
    let snap = graph
        .get_state(t.as_str(), None)
        .await
        .expect("the state reads")
        .expect("the thread has a state");
    (*snap.values).clone()
}

#[tokio::test]
async fn a_lease_takes_the_oldest_runnable_run_and_never_two_of_one_thread() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_order").await else {
        return;
    };
    let queue = saver.queue();
    let (t1, t2) = (thread("t1"), thread("t2"));
    let r1 = queue
        .submit(&t1, input("1"), Multitask::Enqueue)
        .await
        .unwrap();
    let r2 = queue
        .submit(&t1, input("2"), Multitask::Enqueue)
        .await
        .unwrap();
    let r3 = queue
        .submit(&t2, input("3"), Multitask::Enqueue)
        .await
        .unwrap();

    let a = queue
        .lease("a", LONG)
        .await
        .unwrap()
        .expect("the oldest run");
    assert_eq!(
        (a.run.clone(), a.epoch, a.attempt, a.resumed),
        (r1.clone(), 1, 1, false)
    );
    let b = queue
        .lease("b", LONG)
        .await
        .unwrap()
        .expect("the other thread's run");
    assert_eq!(b.run, r3, "t1 is busy, so its second run waits");
    assert!(queue.lease("c", LONG).await.unwrap().is_none());

    queue.finish(&a, RunEnd::Success).await.unwrap();
    let c = queue
        .lease("c", LONG)
        .await
        .unwrap()
        .expect("t1's next run");
    assert_eq!(c.run, r2);
    let listed: Vec<RunStatus> = saver
        .list_runs(&t1)
        .await
        .unwrap()
        .iter()
        .map(|r| r.status)
        .collect();
    assert!(
        listed.contains(&RunStatus::Success) && listed.contains(&RunStatus::Running),
        "{listed:?}"
    );
}

#[tokio::test]
async fn racing_leases_and_the_database_itself_refuse_a_second_running_run_of_a_thread() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_race").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("busy");
    for i in 0..6 {
        queue
            .submit(&t, input(&i.to_string()), Multitask::Enqueue)
            .await
            .unwrap();
    }
    let leases = futures::future::join_all((0..6).map(|i| {
        let queue = queue.clone();
        async move { queue.lease(&format!("w{i}"), LONG).await }
    }))
    .await;
    let taken = leases
        .into_iter()
        .map(|l| l.unwrap())
        .filter(Option::is_some)
        .count();
    assert_eq!(taken, 1, "one run of the thread leased, whatever the race");

    // Not the worker's politeness: the table refuses a second running run outright.
    let url = pg_support::url().unwrap();
    let raw = pg_support::raw(&url).await.unwrap();
    let refused = raw
        .execute(
            &format!(
                "UPDATE \"{}\".sg_run_queue SET status = 'running' WHERE thread = 'busy' AND status = 'pending'",
                saver.schema()
            ),
            &[],
        )
        .await
        .expect_err("a unique index refuses it");
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
    );
}

#[tokio::test]
async fn a_write_under_a_lost_lease_fails_with_a_typed_error_and_stores_nothing() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_fence").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("fenced");
    let run = queue
        .submit(&t, input("x"), Multitask::Enqueue)
        .await
        .unwrap();
    let old = queue
        .lease("old", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let new = queue
        .lease("new", LONG)
        .await
        .unwrap()
        .expect("the expired lease is taken over");
    assert_eq!(
        (new.run.clone(), new.epoch, new.attempt),
        (run.clone(), 2, 2)
    );

    let zombie =
        steps(Duration::ZERO, Arc::default()).with_checkpointer(Arc::new(saver.fenced(&old)));
    let config = RunConfig::new()
        .thread("fenced")
        .durability(Durability::Sync);
    let err = zombie
        .invoke(Steps::update().label("zombie".to_owned()), &config)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::Checkpoint(CheckpointError::LeaseLost { run: r, epoch: 1 }) if *r == run),
        "{err}"
    );
    assert!(
        saver
            .get(&t, &Namespace::root(), None)
            .await
            .unwrap()
            .is_none(),
        "nothing stored"
    );
    assert!(matches!(
        queue.heartbeat(&old, LONG).await,
        Err(CheckpointError::LeaseLost { .. })
    ));
    assert!(matches!(
        queue.finish(&old, RunEnd::Success).await,
        Err(CheckpointError::LeaseLost { .. })
    ));

    let other = thread("elsewhere");
    let outside =
        steps(Duration::ZERO, Arc::default()).with_checkpointer(Arc::new(saver.fenced(&new)));
    let err = outside
        .invoke(
            Steps::update().label("x".to_owned()),
            &RunConfig::new().thread(other.as_str()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Checkpoint(CheckpointError::OutsideLease { .. })
        ),
        "{err}"
    );

    let current =
        steps(Duration::ZERO, Arc::default()).with_checkpointer(Arc::new(saver.fenced(&new)));
    current
        .invoke(Steps::update().label("new".to_owned()), &config)
        .await
        .expect("the current lease writes");
    let log = queue.write_log(&t).await.unwrap();
    assert!(
        !log.is_empty() && log.iter().all(|w| w.epoch == 2 && w.worker == "new"),
        "{log:?}"
    );
}

#[tokio::test]
async fn a_dead_workers_run_shows_its_lease_expired_then_is_leased_again_and_resumes() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_resume").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("resumed");
    let run = queue
        .submit(&t, input("r"), Multitask::Enqueue)
        .await
        .unwrap();
    // A worker that ran `a` and `b`, then died (it stops before `c` and never ends the run).
    let lease = Duration::from_secs(1);
    let leased_at = std::time::Instant::now();
    let dead = queue.lease("dead", lease).await.unwrap().unwrap();
    let held = queue.run(&run).await.unwrap().unwrap();
    assert_eq!(
        (held.status, held.lease_expired),
        (RunStatus::Running, false)
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let partial =
        steps(Duration::ZERO, runs.clone()).with_checkpointer(Arc::new(saver.fenced(&dead)));
    let config = RunConfig::new().thread("resumed").interrupt_before(["c"]);
    partial
        .invoke(Steps::update().label("r".to_owned()), &config)
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // Past its lease the run still shows running, and says its lease ended.
    tokio::time::sleep((lease + Duration::from_millis(200)).saturating_sub(leased_at.elapsed()))
        .await;
    let stale = queue.run(&run).await.unwrap().unwrap();
    assert_eq!(
        (stale.status, stale.lease_expired),
        (RunStatus::Running, true)
    );

    let worker = Worker::new(
        saver.clone(),
        steps(Duration::ZERO, runs.clone()),
        options(LONG),
    )
    .unwrap();
    let worked = loop {
        if let Some(w) = worker.run_next().await.unwrap() {
            break w;
        }
        tokio::time::sleep(WAIT).await;
    };
    assert_eq!((worked.run.clone(), worked.epoch), (run.clone(), 2));
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Success));
    assert_eq!(runs.load(Ordering::SeqCst), 3, "only `c` ran again");
    assert_eq!(state_of(&saver, &t).await.log, ["r/a", "r/b", "r/c"]);
    let done = queue.run(&run).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.attempts, done.epoch, done.lease_expired),
        (RunStatus::Success, 2, 2, false)
    );
}

#[tokio::test]
async fn reject_refuses_a_busy_thread_and_queues_nothing() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_reject").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("r");
    let first = queue
        .submit(&t, input("1"), Multitask::Reject)
        .await
        .expect("an idle thread accepts");
    let err = queue
        .submit(&t, input("2"), Multitask::Reject)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CheckpointError::ThreadBusy { run, status: RunStatus::Pending, .. } if *run == first),
        "{err}"
    );
    assert_eq!(queue.runs(&t).await.unwrap().len(), 1);
}

/// Start a worker serving in the background.
fn serve(saver: &PostgresSaver, graph: CompiledGraph<Steps>) -> pg_support::Serving {
    let worker = Worker::new(saver.clone(), graph, options(LONG)).unwrap();
    pg_support::Serving::start(worker)
}

/// Wait until `run` is running and has written a checkpoint.
async fn until_it_wrote(saver: &PostgresSaver, t: &ThreadId) {
    for _ in 0..500 {
        if !saver.queue().write_log(t).await.unwrap().is_empty() {
            return;
        }
        tokio::time::sleep(WAIT).await;
    }
    panic!("the run never wrote");
}

#[tokio::test]
async fn interrupt_stops_the_running_run_at_a_step_boundary_and_keeps_its_checkpoints() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_interrupt").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("i");
    let serving = serve(&saver, steps(Duration::from_millis(600), Arc::default()));
    let first = queue
        .submit(&t, input("one"), Multitask::Enqueue)
        .await
        .unwrap();
    // The input's checkpoint and `a`'s step are stored; `b` is running.
    until_it_wrote_past(&saver, &t, 2).await;
    let second = queue
        .submit(&t, input("two"), Multitask::Interrupt)
        .await
        .unwrap();
    let first = queue.wait_until_done(&first, WAIT).await.unwrap();
    assert_eq!(first.status, RunStatus::Interrupted);
    assert!(
        first
            .reason
            .as_deref()
            .unwrap_or("")
            .contains(second.as_str()),
        "{first:?}"
    );
    let second = queue.wait_until_done(&second, WAIT).await.unwrap();
    assert_eq!(second.status, RunStatus::Success);
    let log = state_of(&saver, &t).await.log;
    assert!(
        log.first().is_some_and(|l| l.starts_with("one/")),
        "the first run's steps stay: {log:?}"
    );
    assert!(
        !log.contains(&"one/c".to_owned()),
        "it stopped before its end: {log:?}"
    );
    assert_eq!(log[log.len() - 3..], ["two/a", "two/b", "two/c"]);
    serving.stop().await;
}

#[tokio::test]
async fn rollback_stops_the_running_run_and_deletes_every_checkpoint_it_wrote() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_rollback").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("rb");
    let serving = serve(&saver, steps(Duration::from_millis(600), Arc::default()));
    let before = queue
        .submit(&t, input("zero"), Multitask::Enqueue)
        .await
        .unwrap();
    queue.wait_until_done(&before, WAIT).await.unwrap();
    let kept = saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await
        .unwrap()
        .len();

    let first = queue
        .submit(&t, input("one"), Multitask::Enqueue)
        .await
        .unwrap();
    until_it_wrote_past(&saver, &t, kept).await;
    let second = queue
        .submit(&t, input("two"), Multitask::Rollback)
        .await
        .unwrap();
    let first_done = queue.wait_until_done(&first, WAIT).await.unwrap();
    assert_eq!(first_done.status, RunStatus::Cancelled);
    assert_eq!(
        queue.wait_until_done(&second, WAIT).await.unwrap().status,
        RunStatus::Success
    );

    let history = saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await
        .unwrap();
    assert!(
        history
            .iter()
            .all(|c| c.metadata.get("run_id") != Some(&serde_json::json!(first.as_str()))),
        "no checkpoint of the rolled-back run is left"
    );
    assert_eq!(
        state_of(&saver, &t).await.log,
        ["zero/a", "zero/b", "zero/c", "two/a", "two/b", "two/c"]
    );
    serving.stop().await;
}

/// Wait until the thread has more than `n` checkpoints.
async fn until_it_wrote_past(saver: &PostgresSaver, t: &ThreadId, n: usize) {
    for _ in 0..500 {
        let now = saver
            .list(t, &Namespace::root(), ListOptions::default())
            .await
            .unwrap()
            .len();
        if now > n {
            return;
        }
        tokio::time::sleep(WAIT).await;
    }
    panic!("the run never wrote");
}

#[tokio::test]
async fn cancel_ends_a_pending_run_at_once_and_stops_a_running_one() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_cancel").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("c");
    let running = queue
        .submit(&t, input("one"), Multitask::Enqueue)
        .await
        .unwrap();
    let pending = queue
        .submit(&t, input("two"), Multitask::Enqueue)
        .await
        .unwrap();
    assert_eq!(queue.cancel(&pending).await.unwrap(), RunStatus::Cancelled);
    let serving = serve(&saver, steps(Duration::from_millis(600), Arc::default()));
    until_it_wrote(&saver, &t).await;
    // Asked to stop: still running, or already stopped if its worker was quicker.
    let asked = queue.cancel(&running).await.unwrap();
    assert!(
        matches!(asked, RunStatus::Running | RunStatus::Cancelled),
        "{asked:?}"
    );
    let done = queue.wait_until_done(&running, WAIT).await.unwrap();
    assert_eq!(
        (done.status, done.stop),
        (RunStatus::Cancelled, Some(StopRequest::Cancel))
    );
    let unknown = stategraph::checkpoints::RunId::new("run-nope").unwrap();
    assert!(matches!(
        queue.cancel(&unknown).await,
        Err(CheckpointError::RunNotFound { .. })
    ));
    serving.stop().await;
}

#[tokio::test]
async fn an_input_that_does_not_fit_the_state_ends_the_run_as_an_error() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_badinput").await else {
        return;
    };
    let queue = saver.queue();
    let t = thread("bad");
    let run = queue
        .submit(&t, serde_json::json!({"label": 7}), Multitask::Enqueue)
        .await
        .unwrap();
    let worker = Worker::new(
        saver.clone(),
        steps(Duration::ZERO, Arc::default()),
        options(LONG),
    )
    .unwrap();
    let worked = worker.run_next().await.unwrap().expect("the run is leased");
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Error));
    let done = queue.run(&run).await.unwrap().unwrap();
    assert!(done.reason.unwrap_or_default().contains("does not fit"));
    assert!(saver
        .get(&t, &Namespace::root(), None)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_submission_wakes_an_idle_worker_long_before_its_poll() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_notify").await else {
        return;
    };
    let worker = Worker::new(
        saver.clone(),
        steps(Duration::ZERO, Arc::default()),
        WorkerOptions {
            poll: Duration::from_secs(3600),
            ..options(LONG)
        },
    )
    .unwrap();
    let serving = pg_support::Serving::start(worker);
    // The worker found nothing and sleeps for an hour unless notified.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let run = saver
        .queue()
        .submit(&thread("n"), input("n"), Multitask::Enqueue)
        .await
        .unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(60),
        saver.queue().wait_until_done(&run, WAIT),
    )
    .await
    .expect("woken by the notification, not the hour-long poll")
    .unwrap();
    assert_eq!(done.status, RunStatus::Success);
    serving.stop().await;
}

#[test]
fn worker_options_that_cannot_work_are_refused() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async {
        let Some((saver, _guard)) = pg_support::fresh_or_skip("q_options").await else {
            return;
        };
        let g = || steps(Duration::ZERO, Arc::default());
        for bad in [
            WorkerOptions {
                heartbeat: LONG,
                lease: LONG,
                ..WorkerOptions::default()
            },
            WorkerOptions {
                lease: Duration::ZERO,
                ..WorkerOptions::default()
            },
        ] {
            assert!(Worker::new(saver.clone(), g(), bad).is_err());
        }
    });
}

#[tokio::test]
async fn trimming_the_write_log_deletes_only_the_log_of_runs_that_ended_before_the_cutoff() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("q_trim").await else {
        return;
    };
    let queue = saver.queue();
    let (ended, open) = (thread("ended"), thread("open"));
    let graph = || steps(Duration::ZERO, Arc::default());
    queue
        .submit(&ended, input("done"), Multitask::Enqueue)
        .await
        .unwrap();
    let worker = Worker::new(saver.clone(), graph(), options(LONG)).unwrap();
    let worked = worker.run_next().await.unwrap().expect("the run is leased");
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Success));
    let ended_log = queue.write_log(&ended).await.unwrap().len();
    assert!(ended_log > 0, "the ended run logged its writes");
    // A run still running: leased, it wrote under its fence and has not ended.
    let running = queue
        .submit(&open, input("open"), Multitask::Enqueue)
        .await
        .unwrap();
    let lease = queue.lease("w", LONG).await.unwrap().expect("runnable");
    assert_eq!(lease.run, running);
    graph()
        .with_checkpointer(Arc::new(saver.fenced(&lease)))
        .invoke(
            Steps::update().label("open".to_owned()),
            &RunConfig::new().thread("open"),
        )
        .await
        .unwrap();
    let open_log = queue.write_log(&open).await.unwrap();
    assert!(!open_log.is_empty());

    let past = std::time::SystemTime::now() - Duration::from_secs(3600);
    assert_eq!(
        queue.trim_write_log(past).await.unwrap(),
        0,
        "nothing ended an hour ago"
    );
    let later = std::time::SystemTime::now() + Duration::from_secs(1);
    let trimmed = queue.trim_write_log(later).await.unwrap();
    assert_eq!(trimmed, u64::try_from(ended_log).unwrap());
    assert!(queue.write_log(&ended).await.unwrap().is_empty());
    assert_eq!(queue.write_log(&open).await.unwrap(), open_log);
    let status = queue.run(&worked.run).await.unwrap().map(|r| r.status);
    assert_eq!(status, Some(RunStatus::Success), "the run's status stays");
    assert_eq!(state_of(&saver, &ended).await.label, "done");
}
