//! The run queue's contract, on each backend: the same behaviours on a SQLite file and on a
//! fresh PostgreSQL schema (`STATEGRAPH_PG_URL`; without it the PostgreSQL half skips,
//! except under `CI=true`, where it fails).

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use stategraph_runs::{
    CheckpointError, Multitask, RunEnd, RunId, RunQueue, RunStatus, SqliteRunQueue, StopRequest,
    ThreadId,
};

const LEASE: Duration = Duration::from_secs(30);

type Test = fn(Arc<dyn RunQueue>) -> futures::future::BoxFuture<'static, ()>;

fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).expect("thread id")
}

async fn submit(q: &dyn RunQueue, t: &ThreadId, strategy: Multitask) -> RunId {
    let run = RunId::generate();
    q.submit_as(&run, t, &json!({ "run": run.as_str() }), strategy)
        .await
        .expect("submitted");
    run
}

async fn status(q: &dyn RunQueue, run: &RunId) -> RunStatus {
    q.run(run).await.expect("read").expect("held").status
}

async fn runs_of_a_thread_run_one_at_a_time_in_submission_order(q: Arc<dyn RunQueue>) {
    let t = thread("order");
    let (a, b) = (
        submit(&*q, &t, Multitask::Enqueue).await,
        submit(&*q, &t, Multitask::Enqueue).await,
    );
    let first = q
        .lease("w1", LEASE)
        .await
        .expect("lease")
        .expect("a is runnable");
    assert_eq!(first.run, a);
    assert_eq!(first.input, json!({ "run": a.as_str() }));
    assert!(
        q.lease("w2", LEASE).await.expect("lease").is_none(),
        "b waits for a"
    );
    q.finish(&first, RunEnd::Success).await.expect("finished");
    let second = q
        .lease("w2", LEASE)
        .await
        .expect("lease")
        .expect("b is runnable");
    assert_eq!(second.run, b);
    assert_eq!((second.epoch, second.attempt), (1, 1));
    let listed = q.runs(&t).await.expect("runs");
    assert_eq!(
        listed[0].input,
        json!({ "run": a.as_str() }),
        "a run keeps its input"
    );
    let listed: Vec<RunId> = listed.into_iter().map(|r| r.run).collect();
    assert_eq!(listed, [a, b]);
}

async fn runs_of_different_threads_run_side_by_side(q: Arc<dyn RunQueue>) {
    let (t1, t2) = (thread("side-1"), thread("side-2"));
    submit(&*q, &t1, Multitask::Enqueue).await;
    submit(&*q, &t2, Multitask::Enqueue).await;
    let l1 = q.lease("w1", LEASE).await.expect("lease").expect("one");
    let l2 = q.lease("w2", LEASE).await.expect("lease").expect("two");
    assert_ne!(l1.thread, l2.thread);
}

async fn reject_refuses_a_run_while_the_thread_has_an_unfinished_one(q: Arc<dyn RunQueue>) {
    let t = thread("reject");
    let a = submit(&*q, &t, Multitask::Enqueue).await;
    let refused = q
        .submit_as(&RunId::generate(), &t, &json!({}), Multitask::Reject)
        .await;
    assert!(
        matches!(&refused, Err(CheckpointError::ThreadBusy { run, status: RunStatus::Pending, .. }) if *run == a),
        "{refused:?}"
    );
    let lease = q.lease("w", LEASE).await.expect("lease").expect("a");
    q.finish(&lease, RunEnd::Success).await.expect("finished");
    submit(&*q, &t, Multitask::Reject).await;
    assert_eq!(
        q.runs(&t).await.expect("runs").len(),
        2,
        "the refused run was not queued"
    );
}

async fn interrupt_asks_the_running_run_to_stop_and_ends_the_pending_ones(q: Arc<dyn RunQueue>) {
    let t = thread("interrupt");
    submit(&*q, &t, Multitask::Enqueue).await;
    let running = q.lease("w", LEASE).await.expect("lease").expect("running");
    let pending = submit(&*q, &t, Multitask::Enqueue).await;
    let mut wake = q.wakeups().await;
    let next = RunId::generate();
    let ended = q
        .submit_as(&next, &t, &json!({}), Multitask::Interrupt)
        .await
        .expect("submitted");
    assert_eq!(
        ended,
        std::slice::from_ref(&pending),
        "the pending run it ended, not the running one"
    );
    // Its worker hears of the stop at once, not at its next heartbeat.
    assert!(
        wake.wait_for_run(running.run.as_str(), Duration::from_secs(10))
            .await
    );
    assert_eq!(status(&*q, &pending).await, RunStatus::Cancelled);
    let asked = q.heartbeat(&running, LEASE).await.expect("beat");
    assert_eq!(asked, Some(StopRequest::Interrupt));
    q.finish(&running, RunEnd::Stopped(StopRequest::Interrupt))
        .await
        .expect("ended");
    assert_eq!(status(&*q, &running.run).await, RunStatus::Interrupted);
    let lease = q
        .lease("w", LEASE)
        .await
        .expect("lease")
        .expect("the new run");
    assert_eq!(lease.run, next);
}

async fn rollback_asks_the_running_run_to_roll_back(q: Arc<dyn RunQueue>) {
    let t = thread("rollback");
    submit(&*q, &t, Multitask::Enqueue).await;
    let running = q.lease("w", LEASE).await.expect("lease").expect("running");
    submit(&*q, &t, Multitask::Rollback).await;
    let asked = q.heartbeat(&running, LEASE).await.expect("beat");
    assert_eq!(asked, Some(StopRequest::Rollback));
    q.finish(&running, RunEnd::Stopped(StopRequest::Rollback))
        .await
        .expect("ended");
    let ended = q.run(&running.run).await.expect("read").expect("held");
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert!(
        ended.reason.is_some_and(|r| r.contains("rollback")),
        "the stop's reason stays"
    );
}

async fn a_stop_ends_a_pending_run_at_once_and_is_asked_of_a_running_one(q: Arc<dyn RunQueue>) {
    let t = thread("stop");
    let a = submit(&*q, &t, Multitask::Enqueue).await;
    let b = submit(&*q, &t, Multitask::Enqueue).await;
    let lease = q.lease("w", LEASE).await.expect("lease").expect("a");
    assert_eq!(
        q.stop(&b, StopRequest::Interrupt).await.expect("stop"),
        RunStatus::Interrupted
    );
    assert_eq!(
        q.stop(&a, StopRequest::Cancel).await.expect("stop"),
        RunStatus::Running
    );
    assert_eq!(
        q.heartbeat(&lease, LEASE).await.expect("beat"),
        Some(StopRequest::Cancel)
    );
    q.finish(&lease, RunEnd::Stopped(StopRequest::Cancel))
        .await
        .expect("ended");
    assert_eq!(status(&*q, &a).await, RunStatus::Cancelled);
    let missing = q.stop(&RunId::generate(), StopRequest::Cancel).await;
    assert!(
        matches!(missing, Err(CheckpointError::RunNotFound { .. })),
        "{missing:?}"
    );
}

async fn an_ended_lease_is_taken_over_and_its_old_holder_changes_nothing(q: Arc<dyn RunQueue>) {
    let t = thread("takeover");
    let run = submit(&*q, &t, Multitask::Enqueue).await;
    let old = q
        .lease("dead", Duration::from_millis(300))
        .await
        .expect("lease")
        .expect("run");
    assert!(
        q.lease("other", LEASE).await.expect("lease").is_none(),
        "the lease holds"
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        q.run(&run)
            .await
            .expect("read")
            .expect("held")
            .lease_expired
    );
    let new = q
        .lease("other", LEASE)
        .await
        .expect("lease")
        .expect("taken over");
    assert_eq!(
        (new.run.clone(), new.epoch, new.attempt),
        (run.clone(), 2, 2)
    );
    let beat = q.heartbeat(&old, LEASE).await;
    assert!(
        matches!(beat, Err(CheckpointError::LeaseLost { epoch: 1, .. })),
        "{beat:?}"
    );
    let end = q.finish(&old, RunEnd::Failed("zombie".into())).await;
    assert!(
        matches!(end, Err(CheckpointError::LeaseLost { .. })),
        "{end:?}"
    );
    q.finish(&new, RunEnd::Success)
        .await
        .expect("the holder ends it");
    let ended = q.run(&run).await.expect("read").expect("held");
    assert_eq!(
        (ended.status, ended.worker.as_deref()),
        (RunStatus::Success, Some("other"))
    );
}

async fn an_end_records_its_status_and_reason(q: Arc<dyn RunQueue>) {
    for (i, (end, want)) in [
        (RunEnd::Success, RunStatus::Success),
        (RunEnd::Paused, RunStatus::Interrupted),
        (RunEnd::Failed("boom".into()), RunStatus::Error),
    ]
    .into_iter()
    .enumerate()
    {
        let t = thread(&format!("end-{i}"));
        let run = submit(&*q, &t, Multitask::Enqueue).await;
        let lease = q.lease("w", LEASE).await.expect("lease").expect("run");
        q.finish(&lease, end.clone()).await.expect("ended");
        let r = q.run(&run).await.expect("read").expect("held");
        assert_eq!(r.status, want, "{end:?}");
        assert_eq!(r.reason, end.reason(), "{end:?}");
        assert!(!r.lease_expired);
    }
}

async fn an_end_stores_the_runs_usage_when_given(q: Arc<dyn RunQueue>) {
    let t = thread("usage");
    let run = submit(&*q, &t, Multitask::Enqueue).await;
    assert_eq!(q.run(&run).await.expect("read").expect("held").usage, None);
    let lease = q.lease("w", LEASE).await.expect("lease").expect("run");
    let usage = stategraph_runs::TokenUsage::of_call(120, 30, 150);
    q.finish_with(&lease, RunEnd::Failed("boom".into()), Some(usage))
        .await
        .expect("ended");
    let r = q.run(&run).await.expect("read").expect("held");
    assert_eq!((r.status, r.usage), (RunStatus::Error, Some(usage)));
    assert_eq!(q.runs(&t).await.expect("list")[0].usage, Some(usage));
    // An end without usage stores none.
    let other = submit(&*q, &t, Multitask::Enqueue).await;
    let lease = q.lease("w", LEASE).await.expect("lease").expect("run");
    q.finish(&lease, RunEnd::Success).await.expect("ended");
    assert_eq!(
        q.run(&other).await.expect("read").expect("held").usage,
        None
    );
}

async fn only_an_ended_run_can_be_forgotten(q: Arc<dyn RunQueue>) {
    let t = thread("forget");
    let run = submit(&*q, &t, Multitask::Enqueue).await;
    assert!(
        !q.forget(&run).await.expect("forget"),
        "a pending run stays"
    );
    let lease = q.lease("w", LEASE).await.expect("lease").expect("run");
    assert!(
        !q.forget(&run).await.expect("forget"),
        "a running run stays"
    );
    q.finish(&lease, RunEnd::Success).await.expect("ended");
    assert!(q.forget(&run).await.expect("forget"));
    assert!(q.run(&run).await.expect("read").is_none());
}

async fn a_submission_and_an_end_wake_a_waiter(q: Arc<dyn RunQueue>) {
    let mut wake = q.wakeups().await;
    assert!(wake.is_listening());
    let t = thread("wake");
    let run = submit(&*q, &t, Multitask::Enqueue).await;
    assert!(
        wake.wait_for_run(run.as_str(), Duration::from_secs(10))
            .await
    );
    let lease = q.lease("w", LEASE).await.expect("lease").expect("run");
    q.finish(&lease, RunEnd::Success).await.expect("ended");
    assert!(
        wake.wait_for_run(run.as_str(), Duration::from_secs(10))
            .await
    );
}

const TESTS: &[(&str, Test)] = &[
    ("order", |q| {
        Box::pin(runs_of_a_thread_run_one_at_a_time_in_submission_order(q))
    }),
    ("side_by_side", |q| {
        Box::pin(runs_of_different_threads_run_side_by_side(q))
    }),
    ("reject", |q| {
        Box::pin(reject_refuses_a_run_while_the_thread_has_an_unfinished_one(
            q,
        ))
    }),
    ("interrupt", |q| {
        Box::pin(interrupt_asks_the_running_run_to_stop_and_ends_the_pending_ones(q))
    }),
    ("rollback", |q| {
        Box::pin(rollback_asks_the_running_run_to_roll_back(q))
    }),
    ("stop", |q| {
        Box::pin(a_stop_ends_a_pending_run_at_once_and_is_asked_of_a_running_one(q))
    }),
    ("takeover", |q| {
        Box::pin(an_ended_lease_is_taken_over_and_its_old_holder_changes_nothing(q))
    }),
    ("ends", |q| {
        Box::pin(an_end_records_its_status_and_reason(q))
    }),
    ("usage", |q| {
        Box::pin(an_end_stores_the_runs_usage_when_given(q))
    }),
    ("forget", |q| {
        Box::pin(only_an_ended_run_can_be_forgotten(q))
    }),
    ("wakeups", |q| {
        Box::pin(a_submission_and_an_end_wake_a_waiter(q))
    }),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_queue_keeps_the_contract() {
    for (name, test) in TESTS {
        let dir = tempfile::tempdir().expect("tempdir");
        let q = SqliteRunQueue::open(dir.path().join("runs.db")).expect("open");
        eprintln!("sqlite: {name}");
        test(Arc::new(q)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_queue_keeps_the_contract() {
    let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "STATEGRAPH_PG_URL is not set and CI=true: start one with .ci/postgres.sh"
        );
        eprintln!("skipped: STATEGRAPH_PG_URL is not set");
        return;
    };
    for (name, test) in TESTS {
        let options = PostgresOptions {
            schema: format!("runs_{name}_{}", std::process::id()),
            ..PostgresOptions::default()
        };
        let saver = PostgresSaver::connect_with(&url, options)
            .await
            .expect("connect");
        eprintln!("postgres: {name}");
        test(Arc::new(saver.queue())).await;
        saver.drop_schema().await.expect("drop the schema");
    }
}

#[test]
fn a_sqlite_queue_reopened_keeps_its_runs_and_can_end_the_leases_of_its_dead_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runs.db");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let run = rt.block_on(async {
        let q = SqliteRunQueue::open(&path).expect("open");
        let run = submit(&q, &thread("reopen"), Multitask::Enqueue).await;
        q.lease("dead", LEASE).await.expect("lease").expect("run");
        run
    });
    rt.block_on(async {
        let q = SqliteRunQueue::open(&path).expect("reopen");
        assert!(
            q.lease("next", LEASE).await.expect("lease").is_none(),
            "its lease holds"
        );
        assert_eq!(q.expire_leases().expect("expire"), 1);
        let lease = q
            .lease("next", LEASE)
            .await
            .expect("lease")
            .expect("taken over");
        assert_eq!((lease.run, lease.attempt, lease.resumed), (run, 2, true));
    });
}

#[test]
fn a_sqlite_row_whose_thread_does_not_read_ends_as_an_error_and_the_queue_goes_past_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runs.db");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let q = SqliteRunQueue::open(&path).expect("open");
    rusqlite::Connection::open(&path)
        .and_then(|c| {
            c.execute(
                "INSERT INTO sg_run_queue (run_id, thread, input, status, created_at, updated_at)
                 VALUES ('run-bad', '', 'null', 'pending', 1, 1)",
                [],
            )
        })
        .expect("a damaged row");
    rt.block_on(async {
        let good = submit(&q, &thread("after-bad"), Multitask::Enqueue).await;
        let first = q.lease("w", LEASE).await;
        assert!(
            matches!(first, Err(CheckpointError::Integrity { .. })),
            "{first:?}"
        );
        let next = q
            .lease("w", LEASE)
            .await
            .expect("lease")
            .expect("the good run");
        assert_eq!(next.run, good);
        assert!(q.lease("w", LEASE).await.expect("lease").is_none());
    });
}
