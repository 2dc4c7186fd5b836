//! Human-in-the-loop through the run queue on a real PostgreSQL server (`STATEGRAPH_PG_URL`,
//! a schema per test): a run that paused on an interrupt is answered by a queued run
//! (`RunQueue::submit_resume`), which a worker (any worker) takes and resumes.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod pg_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use stategraph::checkpoints::{
    Multitask, PostgresSaver, QueuedCommand, RunId, RunStatus, ThreadId,
};
use stategraph::prelude::*;
use stategraph::worker::{Worked, Worker, WorkerOptions};

/// What the askers answered, in the order their steps applied.
#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    /// `name:answer` per asker, after the input's entries.
    #[reduce(append)]
    pub log: Vec<String>,
}

/// Nodes named `askers`, all run by the first step; each asks by an interrupt and logs
/// `name:answer`.
fn asking(askers: &[&'static str]) -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    for &name in askers {
        g = g
            .add_node(name, move |_s: Arc<Log>, c: NodeContext| async move {
                let answer: String = c.interrupt(name)?;
                Ok::<_, BoxError>(Log::update().log(vec![format!("{name}:{answer}")]))
            })
            .add_edge(START, name)
            .add_edge(name, END);
    }
    g.compile().expect("the graph compiles")
}

fn worker(saver: &PostgresSaver, graph: CompiledGraph<Log>) -> Worker<Log> {
    let options = WorkerOptions {
        lease: Duration::from_secs(30),
        heartbeat: Duration::from_secs(5),
        ..WorkerOptions::default()
    };
    Worker::new(saver.clone(), graph, options).expect("the worker options are valid")
}

/// Submit `{"log": ["input"]}` to `thread` and run it: it pauses on its interrupts.
async fn paused(saver: &PostgresSaver, worker: &Worker<Log>, thread: &ThreadId) {
    saver
        .queue()
        .submit(
            thread,
            serde_json::json!({ "log": ["input"] }),
            Multitask::Enqueue,
        )
        .await
        .unwrap();
    let worked = worker.run_next().await.unwrap().expect("the run is leased");
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Interrupted));
}

/// Pause `thread` (see [`paused`]), then queue `answer` to its one interrupt.
async fn paused_and_answered(
    saver: &PostgresSaver,
    worker: &Worker<Log>,
    thread: &ThreadId,
    answer: &str,
) -> RunId {
    paused(saver, worker, thread).await;
    saver
        .queue()
        .submit_resume(thread, &Resume::value(answer), Multitask::Enqueue)
        .await
        .unwrap()
}

async fn sorted_log(
    saver: &PostgresSaver,
    graph: &CompiledGraph<Log>,
    thread: &ThreadId,
) -> Vec<String> {
    let snap = graph
        .with_checkpointer(Arc::new(saver.clone()))
        .get_state(thread.as_str(), None)
        .await
        .unwrap()
        .expect("the thread has a state");
    assert!(snap.interrupts.is_empty(), "{:?}", snap.interrupts);
    let mut log = snap.values.log.clone();
    log.sort();
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_is_answered_by_a_queued_resume_that_a_worker_runs_to_success() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qr_value").await else {
        return;
    };
    let t = ThreadId::new("review").unwrap();
    let w = worker(&saver, asking(&["ask"]));
    let run = paused_and_answered(&saver, &w, &t, "yes").await;
    let worked = w.run_next().await.unwrap().expect("the resume is leased");
    assert_eq!(worked.run, run);
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Success));
    assert_eq!(
        sorted_log(&saver, &asking(&["ask"]), &t).await,
        ["ask:yes", "input"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_resume_by_interrupt_id_answers_each_pending_interrupt() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qr_map").await else {
        return;
    };
    let t = ThreadId::new("two").unwrap();
    let graph = asking(&["left", "right"]);
    let w = worker(&saver, graph.clone());
    paused(&saver, &w, &t).await;
    let snap = graph
        .with_checkpointer(Arc::new(saver.clone()))
        .get_state(t.as_str(), None)
        .await
        .unwrap()
        .expect("the paused thread has a state");
    let answers: BTreeMap<String, serde_json::Value> = snap
        .interrupts
        .iter()
        .map(|i| (i.id.clone(), serde_json::json!(format!("to-{}", i.node))))
        .collect();
    assert_eq!(answers.len(), 2, "both nodes are waiting");
    saver
        .queue()
        .submit_resume(&t, &Resume::Map(answers), Multitask::Enqueue)
        .await
        .unwrap();
    let worked = w.run_next().await.unwrap().expect("the resume is leased");
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Success));
    assert_eq!(
        sorted_log(&saver, &graph, &t).await,
        ["input", "left:to-left", "right:to-right"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_resume_of_a_thread_with_nothing_pending_ends_as_an_error_saying_so() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qr_none").await else {
        return;
    };
    let t = ThreadId::new("idle").unwrap();
    let w = worker(&saver, asking(&["ask"]));
    let run = saver
        .queue()
        .submit_resume(&t, &Resume::value("yes"), Multitask::Enqueue)
        .await
        .unwrap();
    let worked = w.run_next().await.unwrap().expect("the resume is leased");
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Error));
    let ended = saver
        .queue()
        .run(&run)
        .await
        .unwrap()
        .expect("the run is kept");
    let reason = ended.reason.unwrap_or_default();
    assert!(reason.contains("no pending interrupt"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_whose_worker_died_before_writing_is_resumed_again_by_the_next_lease() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qr_dead").await else {
        return;
    };
    let t = ThreadId::new("dead").unwrap();
    let w = worker(&saver, asking(&["ask"]));
    let run = paused_and_answered(&saver, &w, &t, "later").await;
    // A worker leases it and dies at once: it wrote nothing and never heart-beats.
    let dead = saver
        .queue()
        .lease("dead-worker", Duration::from_millis(200))
        .await
        .unwrap()
        .expect("the resume is runnable");
    assert_eq!(dead.run, run);
    assert_eq!(
        dead.command,
        Some(QueuedCommand::resume(Resume::value("later")))
    );
    assert!(dead.input.is_null());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let worked = w
        .run_next()
        .await
        .unwrap()
        .expect("the expired lease is taken over");
    assert_eq!((worked.run, worked.epoch), (run, 2));
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Success));
    assert_eq!(
        sorted_log(&saver, &asking(&["ask"]), &t).await,
        ["ask:later", "input"]
    );
}
