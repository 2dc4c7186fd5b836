//! Commands through the run queue on a real PostgreSQL server (`STATEGRAPH_PG_URL`, a schema
//! per test): a queued run that updates the state, routes, or answers an interrupt and edits
//! the state at once (`RunQueue::submit_command`), as `Command` does as an invoke's input;
//! and a queued row that does not read (a newer build's, a damaged one) ends as an error
//! instead of blocking the queue. Also a saver whose hot calls are prepared statements
//! (`PostgresOptions::prepared_statements`) serving the queue.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod pg_support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph::checkpoints::{
    Multitask, PostgresOptions, PostgresSaver, QueuedCommand, QueuedGoto, RunEnd, RunId, RunStatus,
    ThreadId,
};
use stategraph::prelude::*;
use stategraph::worker::{CommandNotQueueable, Worked, Worker, WorkerOptions};
use stategraph::SendTo;

/// What ran, in order.
#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Log {
    /// One entry per node run (and whatever inputs and updates add).
    #[reduce(append)]
    pub log: Vec<String>,
}

/// `START → ask → main → END`, where `ask` asks for approval by an interrupt and logs the
/// answer; `side → END` runs only when a command routes to it.
fn graph() -> CompiledGraph<Log> {
    StateGraph::<Log>::new()
        .add_node("ask", |_s: Arc<Log>, c: NodeContext| async move {
            let answer: String = c.interrupt("approve?")?;
            Ok::<_, BoxError>(Log::update().log(vec![format!("ask:{answer}")]))
        })
        .add_node_with(
            "main",
            |_s: Arc<Log>, _c: NodeContext| async move {
                Ok::<_, BoxError>(Log::update().log(vec!["main".to_owned()]))
            },
            // It never routes there; declared so `side` compiles as reachable.
            NodeOptions::new().destinations(["side"]),
        )
        .add_node("side", |_s: Arc<Log>, c: NodeContext| async move {
            let entry = match c.arg::<String>() {
                Ok(arg) => format!("side({arg})"),
                Err(_) => "side".to_owned(),
            };
            Ok::<_, BoxError>(Log::update().log(vec![entry]))
        })
        .add_edge(START, "ask")
        .add_edge("ask", "main")
        .add_edge("main", END)
        .add_edge("side", END)
        .compile()
        .expect("the graph compiles")
}

fn worker(saver: &PostgresSaver) -> Worker<Log> {
    let options = WorkerOptions {
        lease: Duration::from_secs(30),
        heartbeat: Duration::from_secs(5),
        ..WorkerOptions::default()
    };
    Worker::new(saver.clone(), graph(), options).expect("the worker options are valid")
}

/// Queue `command` on `thread`, let `worker` run it; its id and how it ended.
async fn run_command(
    saver: &PostgresSaver,
    worker: &Worker<Log>,
    thread: &ThreadId,
    command: &QueuedCommand,
) -> (RunId, Worked) {
    let run = saver
        .queue()
        .submit_command(thread, command, Multitask::Enqueue)
        .await
        .unwrap();
    let worked = worker
        .run_next()
        .await
        .unwrap()
        .expect("the command is leased");
    assert_eq!(worked.run, run);
    (run, worked.worked)
}

/// Submit `{"log": ["input"]}` to `thread` and run it: it pauses at `ask`.
async fn paused(saver: &PostgresSaver, worker: &Worker<Log>, thread: &ThreadId) {
    saver
        .queue()
        .submit(thread, json!({ "log": ["input"] }), Multitask::Enqueue)
        .await
        .unwrap();
    let worked = worker.run_next().await.unwrap().expect("the run is leased");
    assert_eq!(worked.worked, Worked::Ended(RunStatus::Interrupted));
}

async fn log_of(saver: &PostgresSaver, thread: &ThreadId) -> Vec<String> {
    graph()
        .with_checkpointer(Arc::new(saver.clone()))
        .get_state(thread.as_str(), None)
        .await
        .unwrap()
        .expect("the thread has a state")
        .values
        .log
        .clone()
}

async fn reason_of(saver: &PostgresSaver, run: &RunId) -> String {
    let ended = saver
        .queue()
        .run(run)
        .await
        .unwrap()
        .expect("the run is kept");
    ended.reason.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_resume_with_an_update_answers_the_interrupt_and_keeps_the_edit() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qc_edit").await else {
        return;
    };
    let (t, w) = (ThreadId::new("review").unwrap(), worker(&saver));
    paused(&saver, &w, &t).await;
    let command =
        QueuedCommand::resume(Resume::value("yes")).with_update(json!({ "log": ["edited"] }));
    let (_, worked) = run_command(&saver, &w, &t, &command).await;
    assert_eq!(worked, Worked::Ended(RunStatus::Success));
    assert_eq!(
        log_of(&saver, &t).await,
        ["input", "edited", "ask:yes", "main"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_update_with_a_route_applies_the_update_and_runs_the_nodes_named() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qc_goto").await else {
        return;
    };
    let (t, w) = (ThreadId::new("routed").unwrap(), worker(&saver));
    let command = QueuedCommand::update(json!({ "log": ["start"] }))
        .with_goto(QueuedGoto::node("side"))
        .with_goto(QueuedGoto::send("side", json!("sent")));
    let (_, worked) = run_command(&saver, &w, &t, &command).await;
    assert_eq!(worked, Worked::Ended(RunStatus::Success));
    let mut log = log_of(&saver, &t).await;
    log[1..].sort();
    assert_eq!(log, ["start", "side", "side(sent)"], "`ask` never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_update_that_does_not_fit_the_state_ends_as_an_error_saying_so() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qc_misfit").await else {
        return;
    };
    let (t, w) = (ThreadId::new("misfit").unwrap(), worker(&saver));
    let command = QueuedCommand::update(json!({ "log": 5 }));
    let (run, worked) = run_command(&saver, &w, &t, &command).await;
    assert_eq!(worked, Worked::Ended(RunStatus::Error));
    let reason = reason_of(&saver, &run).await;
    assert!(
        reason.contains("does not fit the graph's state"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_route_to_no_node_of_the_graph_ends_as_an_error_naming_it() {
    let Some((saver, _guard)) = pg_support::fresh_or_skip("qc_nowhere").await else {
        return;
    };
    let (t, w) = (ThreadId::new("nowhere").unwrap(), worker(&saver));
    let command = QueuedCommand::default().with_goto(QueuedGoto::node("nowhere"));
    let (run, worked) = run_command(&saver, &w, &t, &command).await;
    assert_eq!(worked, Worked::Ended(RunStatus::Error));
    let reason = reason_of(&saver, &run).await;
    assert!(reason.contains("nowhere"), "{reason}");
}

#[test]
fn a_typed_command_queues_as_the_json_its_worker_reads_back() {
    let typed: Command<Log> = Command::resume(Resume::value("ok"))
        .update(Log::update().log(vec!["note".to_owned()]))
        .goto("side")
        .goto(SendTo::new("side", "x"));
    let queued = typed.to_queued().expect("the command queues");
    assert_eq!(
        serde_json::to_value(&queued).unwrap(),
        json!({
            "resume": {"value": "ok"},
            "update": {"log": ["note"]},
            "goto": [{"node": "side"}, {"send": {"node": "side", "arg": "x"}}]
        })
    );
    let for_parent: Command<Log> = Command::to_parent(Command::<Log>::new());
    assert_eq!(for_parent.to_queued(), Err(CommandNotQueueable::ForParent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_only_resumes_is_stored_where_workers_that_predate_commands_read_it() {
    let Some((saver, guard)) = pg_support::fresh_or_skip("qc_columns").await else {
        return;
    };
    let t = ThreadId::new("columns").unwrap();
    let queue = saver.queue();
    let bare = QueuedCommand::resume(Resume::value("yes"));
    let edited = bare.clone().with_update(json!({ "log": ["x"] }));
    let mut runs = Vec::new();
    for command in [&bare, &edited] {
        runs.push(
            queue
                .submit_command(&t, command, Multitask::Enqueue)
                .await
                .unwrap(),
        );
    }
    let row = queue_row(&guard, &runs[0], "resume, command").await;
    let (resume, command): (Option<&str>, Option<&str>) = (row.get(0), row.get(1));
    assert_eq!((resume, command), (Some(r#"{"value":"yes"}"#), None));
    let row = queue_row(&guard, &runs[1], "resume, command").await;
    let (resume, command): (Option<&str>, Option<&str>) = (row.get(0), row.get(1));
    assert_eq!(resume, None);
    let command: Option<QueuedCommand> = command.map(|c| serde_json::from_str(c).unwrap());
    assert_eq!(command, Some(edited));
}

/// `columns` of `run`'s queue row, read over a plain connection.
async fn queue_row(
    guard: &pg_support::SchemaGuard,
    run: &RunId,
    columns: &str,
) -> tokio_postgres::Row {
    let raw = pg_support::raw(&pg_support::url().unwrap()).await.unwrap();
    let sql = format!(
        "SELECT {columns} FROM \"{}\".sg_run_queue WHERE run_id = $1",
        guard.schema
    );
    raw.query_one(&sql, &[&run.as_str()]).await.unwrap()
}

/// Set `column` of `run`'s queue row to `value`, as a newer build or a damaged row could.
async fn overwrite(guard: &pg_support::SchemaGuard, run: &RunId, column: &str, value: &str) {
    let raw = pg_support::raw(&pg_support::url().unwrap()).await.unwrap();
    let sql = format!(
        "UPDATE \"{}\".sg_run_queue SET {column} = $1 WHERE run_id = $2",
        guard.schema
    );
    let changed = raw.execute(&sql, &[&value, &run.as_str()]).await.unwrap();
    assert_eq!(changed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_stored_command_does_not_read_ends_as_an_error_and_the_queue_goes_on() {
    let Some((saver, guard)) = pg_support::fresh_or_skip("qc_unreadable").await else {
        return;
    };
    let (t, w, queue) = (
        ThreadId::new("newer").unwrap(),
        worker(&saver),
        saver.queue(),
    );
    let update = QueuedCommand::update(json!({ "log": ["x"] }));
    let newer = queue
        .submit_command(&t, &update, Multitask::Enqueue)
        .await
        .unwrap();
    // A key this build does not know, as a newer build might write.
    overwrite(
        &guard,
        &newer,
        "command",
        r#"{"update": {}, "priority": 1}"#,
    )
    .await;
    let other = ThreadId::new("other").unwrap();
    let next = queue
        .submit_command(
            &other,
            &QueuedCommand::update(json!({ "log": ["y"] })),
            Multitask::Enqueue,
        )
        .await
        .unwrap();
    let worked = w
        .run_next()
        .await
        .unwrap()
        .expect("the unreadable run is leased");
    assert_eq!(
        (&worked.run, &worked.worked),
        (&newer, &Worked::Ended(RunStatus::Error))
    );
    let reason = reason_of(&saver, &newer).await;
    assert!(reason.contains("stored command does not read"), "{reason}");
    assert!(reason.contains("priority"), "{reason}");
    let worked = w.run_next().await.unwrap().expect("the next run is leased");
    assert_eq!(
        (&worked.run, &worked.worked),
        (&next, &Worked::Ended(RunStatus::Success))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_thread_does_not_read_is_ended_by_its_lease_and_the_next_lease_goes_past_it() {
    let Some((saver, guard)) = pg_support::fresh_or_skip("qc_badthread").await else {
        return;
    };
    let queue = saver.queue();
    let t = ThreadId::new("fine").unwrap();
    let damaged = queue
        .submit(&t, json!({}), Multitask::Enqueue)
        .await
        .unwrap();
    overwrite(&guard, &damaged, "thread", "").await;
    let next = queue
        .submit(&t, json!({}), Multitask::Enqueue)
        .await
        .unwrap();
    let refused = queue.lease("w", Duration::from_secs(30)).await;
    assert!(
        matches!(&refused, Err(stategraph::checkpoints::CheckpointError::Integrity { blob, .. })
            if blob.contains(damaged.as_str())),
        "{refused:?}"
    );
    let status: String = queue_row(&guard, &damaged, "status").await.get(0);
    assert_eq!(status, "error", "ended by the lease that read it");
    let leased = queue.lease("w", Duration::from_secs(30)).await.unwrap();
    assert_eq!(leased.map(|l| l.run), Some(next));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_with_prepared_statements_serves_leases_heartbeats_ends_and_resumes() {
    let Some(url) = pg_support::url() else { return };
    let options = PostgresOptions {
        pool_size: 2,
        prepared_statements: true,
        ..PostgresOptions::default()
    };
    let (saver, _guard) = pg_support::fresh_with(&url, "qc_prepared", options)
        .await
        .unwrap();
    let (t, w, queue) = (
        ThreadId::new("prepared").unwrap(),
        worker(&saver),
        saver.queue(),
    );
    // Every hot call runs many times on the pool's two connections: prepared by each once,
    // then reused.
    for round in 0..3 {
        paused(&saver, &w, &t).await;
        let command = QueuedCommand::resume(Resume::value(format!("r{round}")));
        let (_, worked) = run_command(&saver, &w, &t, &command).await;
        assert_eq!(worked, Worked::Ended(RunStatus::Success));
    }
    let log = log_of(&saver, &t).await;
    let answers: Vec<&String> = log.iter().filter(|e| e.starts_with("ask:")).collect();
    assert_eq!(answers, ["ask:r0", "ask:r1", "ask:r2"]);
    queue
        .submit(&t, json!({}), Multitask::Enqueue)
        .await
        .unwrap();
    let lease = queue
        .lease("by-hand", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("a run");
    for _ in 0..3 {
        let beat = queue.heartbeat(&lease, Duration::from_secs(30)).await;
        assert_eq!(beat.unwrap(), None, "the lease holds and no stop was asked");
    }
    queue.finish(&lease, RunEnd::Success).await.unwrap();
    let ended = queue.run(&lease.run).await.unwrap().map(|r| r.status);
    assert_eq!(ended, Some(RunStatus::Success));
}
