//! The PostgreSQL saver and the run queue through PgBouncer in transaction mode
//! (`STATEGRAPH_PGB_URL`, started by `.ci/pgbouncer.sh` in front of `.ci/postgres.sh`'s
//! server): each transaction may run on another server connection, and the pooler has fewer
//! server connections than the saver's pool has clients, so nothing may rest on session
//! state (decision 0047). Graph runs on many threads, racing writers, pruning and collection
//! under writers, workers serving the queue, and concurrent schema creation, each in a
//! schema of its own. Without the pooler each test says how to start it and skips (it fails
//! under `CI=true`).
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod pg_support;

use stategraph_tests::writes::{put_of, tail, whole};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use stategraph::checkpoints::{
    CheckpointError, FieldPart, ListOptions, MemorySaver, Multitask, Namespace, PostgresOptions,
    PostgresSaver, Retention, RunStatus, Saver, ThreadId,
};
use stategraph::prelude::*;
use stategraph::worker::{Worker, WorkerOptions};
use stategraph::SendTo;
use stategraph_tests::tally::{self, reference_checksum};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Connections in each saver's pool: more than the pooler's server connections (4).
const POOL: usize = 8;

/// A saver through the pooler on a fresh schema, and the guard that drops the schema
/// (directly on the server when its URL is known).
async fn fresh(prefix: &str) -> Option<(PostgresSaver, pg_support::SchemaGuard)> {
    let pgb = pg_support::pgb_url()?;
    let options = PostgresOptions {
        pool_size: POOL,
        ..PostgresOptions::default()
    };
    let (saver, mut guard) = pg_support::fresh_with(&pgb, prefix, options)
        .await
        .expect("a fresh schema through the pooler");
    if let Ok(server) = std::env::var("STATEGRAPH_PG_URL") {
        guard.url = server;
    }
    Some((saver, guard))
}

/// The pooler's admin console (the database `pgbouncer` on the pooler's address).
async fn admin(pgb: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = pgb.parse()?;
    config.dbname("pgbouncer");
    let (client, conn) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// The rows of an admin console command, each as column name → text.
async fn show(
    client: &tokio_postgres::Client,
    what: &str,
) -> Result<Vec<BTreeMap<String, String>>, tokio_postgres::Error> {
    let mut rows = Vec::new();
    for message in client.simple_query(&format!("SHOW {what}")).await? {
        if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
            let named = row
                .columns()
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name().to_owned(), row.get(i).unwrap_or("").to_owned()))
                .collect();
            rows.push(named);
        }
    }
    Ok(rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pooler_under_test_hands_out_fewer_server_connections_than_a_saver_has_clients(
) -> TestResult {
    let Some(pgb) = pg_support::pgb_url() else {
        return Ok(());
    };
    let console = admin(&pgb).await?;
    let config: BTreeMap<String, String> = show(&console, "CONFIG")
        .await?
        .into_iter()
        .map(|r| (r["key"].clone(), r["value"].clone()))
        .collect();
    assert_eq!(
        config["pool_mode"], "transaction",
        "not a transaction pooler"
    );
    let servers: usize = config["default_pool_size"].parse()?;
    assert!(
        servers < POOL,
        "{servers} server connections: nothing shared"
    );

    // Hold the saver's whole pool busy at once: its clients all get in, through fewer
    // server connections.
    let Some((saver, _guard)) = fresh("pgb_pool").await else {
        return Ok(());
    };
    let (t, root) = (ThreadId::new("t")?, Namespace::root());
    let reads = (0..4 * POOL).map(|_| saver.get(&t, &root, None));
    for read in futures::future::join_all(reads).await {
        assert!(read?.is_none());
    }
    let db = pgb.rsplit('/').next().unwrap_or_default().to_owned();
    let pools = show(&console, "POOLS").await?;
    let ours = pools
        .iter()
        .find(|p| p["database"] == db)
        .ok_or("no pool for the database")?;
    let server_conns: usize = ["sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"]
        .iter()
        .filter_map(|k| ours.get(*k)?.parse::<usize>().ok())
        .sum();
    assert!(server_conns <= servers, "{ours:?}");
    Ok(())
}

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Job {
    #[reduce(append)]
    results: Vec<u64>,
    total: u64,
}

/// `emit` sends `k` tasks to `worker` (parallel tasks: pending writes), then `reduce` sums.
fn fanout(k: u64) -> CompiledGraph<Job> {
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
            Ok::<_, BoxError>(Job::update().results(vec![i * i + 1]))
        })
        .add_node("reduce", |s: Arc<Job>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Job::update().total(s.results.iter().sum::<u64>()))
        })
        .add_edge(START, "emit")
        .add_edge("worker", "reduce")
        .add_edge("reduce", END)
        .compile()
        .expect("the graph compiles")
}

/// What a thread ended with on a saver: the tally's items and checksum, the fan-out's
/// results and total, and how many checkpoints each thread kept.
#[derive(Debug, PartialEq)]
struct Outcome {
    items: Vec<u64>,
    checksum: u64,
    results: Vec<u64>,
    total: u64,
    history: (usize, usize),
}

/// Run the tally graph (`steps` steps) on thread `t-tally` and the fan-out (`k` sends) on
/// `t-fan` with `saver` at `durability`, then read both back through a fresh graph.
async fn run_and_read(
    saver: Arc<dyn Saver>,
    name: &str,
    durability: Durability,
    steps: u64,
    k: u64,
) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
    let (tally_thread, fan_thread) = (format!("{name}-tally"), format!("{name}-fan"));
    let cfg = |t: &str| RunConfig::new().thread(t).durability(durability);
    tally::graph(steps)?
        .with_checkpointer(saver.clone())
        .invoke(tally::Tally::update(), &cfg(&tally_thread))
        .await?;
    fanout(k)
        .with_checkpointer(saver.clone())
        .invoke(Job::update(), &cfg(&fan_thread))
        .await?;
    // A fresh graph reads what is stored (after an async run, once it has all landed).
    let tally_state = tally::graph(steps)?
        .with_checkpointer(saver.clone())
        .get_state(&tally_thread, None)
        .await?
        .ok_or("no tally state")?;
    let fan_state = fanout(k)
        .with_checkpointer(saver.clone())
        .get_state(&fan_thread, None)
        .await?
        .ok_or("no fan-out state")?;
    let count = |t: String| {
        let saver = saver.clone();
        async move {
            let t = ThreadId::new(t)?;
            let list = saver
                .list(&t, &Namespace::root(), ListOptions::default())
                .await?;
            Ok::<_, CheckpointError>(list.len())
        }
    };
    Ok(Outcome {
        items: tally_state.values.items.iter().copied().collect(),
        checksum: tally_state.values.checksum,
        results: fan_state.values.results.clone(),
        total: fan_state.values.total,
        history: (count(tally_thread).await?, count(fan_thread).await?),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graph_runs_on_many_threads_at_once_through_the_pooler_store_what_a_memory_saver_does(
) -> TestResult {
    let Some((saver, _guard)) = fresh("pgb_runs").await else {
        return Ok(());
    };
    let (steps, k) = (25, 12);
    let mut runs = Vec::new();
    for i in 0..12 {
        let durability = if i % 2 == 0 {
            Durability::Sync
        } else {
            Durability::Async
        };
        let saver: Arc<dyn Saver> = Arc::new(saver.clone());
        runs.push(tokio::spawn(async move {
            let name = format!("run{i}");
            run_and_read(saver, &name, durability, steps, k).await
        }));
    }
    for (i, run) in runs.into_iter().enumerate() {
        let durability = if i % 2 == 0 {
            Durability::Sync
        } else {
            Durability::Async
        };
        let pooled = run.await??;
        let memory = run_and_read(
            Arc::new(MemorySaver::new()),
            &format!("run{i}"),
            durability,
            steps,
            k,
        )
        .await?;
        assert_eq!(pooled, memory, "run {i} ({durability:?})");
        assert_eq!(pooled.checksum, reference_checksum(steps));
        assert_eq!(
            pooled.results,
            (0..k).map(|i| i * i + 1).collect::<Vec<_>>()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_writers_on_one_thread_through_the_pooler_commit_one_child_and_the_other_is_stale(
) -> TestResult {
    let Some((saver, _guard)) = fresh("pgb_race").await else {
        return Ok(());
    };
    let rounds = 15;
    // Several threads race at once, so the writers contend for the pooler's connections.
    let threads = (0..6).map(|n| {
        let saver = saver.clone();
        tokio::spawn(async move {
            let t = ThreadId::new(format!("race{n}"))?;
            let root = put_of(&t, None, -1, vec![whole("w", "0")]);
            let mut head = root.checkpoint.id;
            saver.put(root).await?;
            for round in 0..rounds {
                let json = |who: &str| format!("\"{who}{round}\"");
                let pa = put_of(&t, Some(head), round, vec![whole("w", json("a"))]);
                let pb = put_of(&t, Some(head), round, vec![whole("w", json("b"))]);
                let (ida, idb) = (pa.checkpoint.id, pb.checkpoint.id);
                let (a, b) = (saver.clone(), saver.clone());
                let (ra, rb) = tokio::join!(
                    tokio::spawn(async move { a.put(pa).await }),
                    tokio::spawn(async move { b.put(pb).await })
                );
                let (won, lost) = match (ra?, rb?) {
                    (Ok(()), Err(CheckpointError::StaleParent { .. })) => (ida, idb),
                    (Err(CheckpointError::StaleParent { .. }), Ok(())) => (idb, ida),
                    other => return Err(format!("{t} round {round}: {other:?}").into()),
                };
                let gone = saver.get(&t, &Namespace::root(), Some(lost)).await;
                assert!(
                    matches!(gone, Err(CheckpointError::NotFound { .. })),
                    "{gone:?}"
                );
                head = won;
            }
            let list = saver
                .list(&t, &Namespace::root(), ListOptions::default())
                .await?;
            assert_eq!(list.len(), rounds as usize + 1);
            for pair in list.windows(2) {
                assert_eq!(pair[0].parent, Some(pair[1].id), "{t}: a fork");
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        })
    });
    for thread in futures::future::join_all(threads).await {
        thread??;
    }
    Ok(())
}

/// The items of a list field as loaded (a whole part and tails, concatenated).
fn items(parts: &[FieldPart]) -> Result<Vec<i64>, serde_json::Error> {
    let mut out = Vec::new();
    for p in parts {
        let (FieldPart::Whole(b) | FieldPart::Tail(b)) = p;
        out.extend(serde_json::from_slice::<Vec<i64>>(b)?);
    }
    Ok(out)
}

/// Write `steps` checkpoints on `t`: each appends its step to `log` (so a load needs the
/// tails of every ancestor) and sets `n` to a value other threads share.
async fn write_chain(saver: PostgresSaver, t: ThreadId, steps: i64) -> Result<(), CheckpointError> {
    let mut parent = None;
    for step in 0..steps {
        let log = if step == 0 {
            whole("log", "[0]")
        } else {
            tail("log", format!("[{step}]"))
        };
        let shared = whole("n", format!("\"shared {}\"", step % 5));
        let put = put_of(&t, parent, step, vec![log, shared]);
        parent = Some(put.checkpoint.id);
        saver.put(put).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pruning_and_collecting_while_others_write_through_the_pooler_keeps_every_needed_value(
) -> TestResult {
    let Some((saver, _guard)) = fresh("pgb_gc").await else {
        return Ok(());
    };
    let steps = 40;
    let threads: Vec<ThreadId> = (0..6)
        .map(|n| ThreadId::new(format!("w{n}")))
        .collect::<Result<_, _>>()?;
    let writers: Vec<_> = threads
        .iter()
        .map(|t| tokio::spawn(write_chain(saver.clone(), t.clone(), steps)))
        .collect();
    // Prune every thread to its last 3 checkpoints and collect, over and over, while they
    // are written.
    let (mut pruned, mut rounds) = (0, 0);
    while writers.iter().any(|w| !w.is_finished()) || rounds < 2 {
        for t in &threads {
            pruned += saver.prune(t, Retention::KeepLast(3)).await?;
        }
        saver.collect_garbage().await?;
        rounds += 1;
    }
    for writer in writers {
        writer.await??;
    }
    assert!(pruned > 0, "nothing was pruned in {rounds} rounds");
    // A last round after the writers: the steps written since the one before are pruned too.
    for t in &threads {
        saver.prune(t, Retention::KeepLast(3)).await?;
    }
    saver.collect_garbage().await?;
    for t in &threads {
        let kept = saver
            .list(t, &Namespace::root(), ListOptions::default())
            .await?;
        assert_eq!(kept.len(), 3, "{t}");
        for c in kept {
            let loaded = saver
                .get(t, &Namespace::root(), Some(c.id))
                .await?
                .ok_or("a kept checkpoint is missing")?;
            let step = loaded.checkpoint.step;
            assert_eq!(
                items(&loaded.fields["log"])?,
                (0..=step).collect::<Vec<_>>()
            );
            let n = format!("\"shared {}\"", step % 5);
            assert_eq!(loaded.fields["n"], [FieldPart::Whole(n.into_bytes())]);
        }
    }
    let report = saver.verify().await?;
    assert!(report.is_ok(), "{:?}", report.problems);
    Ok(())
}

/// The shared `a → b → c` graph, each node waiting 5 ms.
fn steps() -> CompiledGraph<stategraph_tests::steps::Steps> {
    stategraph_tests::steps::steps(Duration::from_millis(5), Arc::default())
        .expect("the graph compiles")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queued_runs_served_by_workers_through_the_pooler_all_end_in_success() -> TestResult {
    let Some((saver, guard)) = fresh("pgb_queue").await else {
        return Ok(());
    };
    let pgb = pg_support::pgb_url().ok_or("no pooler")?;
    let queue = saver.queue();
    let mut submitted = Vec::new();
    for n in 0..6 {
        let t = ThreadId::new(format!("q{n}"))?;
        for label in ["first", "second"] {
            let input = serde_json::json!({ "label": format!("{n}{label}") });
            submitted.push((
                t.clone(),
                queue.submit(&t, input, Multitask::Enqueue).await?,
            ));
        }
    }
    // Two workers, each with its own pool (as two processes have), serving through the
    // pooler: their LISTEN goes through it too, so they may only wake by polling.
    let mut workers = Vec::new();
    for w in 0..2 {
        let options = PostgresOptions {
            schema: guard.schema.clone(),
            pool_size: POOL,
            ..PostgresOptions::default()
        };
        let own = PostgresSaver::connect_with(&pgb, options).await?;
        let worker = Worker::new(
            own,
            steps(),
            WorkerOptions {
                name: format!("pgb-worker-{w}"),
                poll: Duration::from_millis(50),
                ..WorkerOptions::default()
            },
        )?;
        workers.push(pg_support::Serving::start(worker));
    }
    for (t, run) in &submitted {
        let done = tokio::time::timeout(
            Duration::from_secs(120),
            queue.wait_until_done(run, Duration::from_millis(20)),
        )
        .await
        .map_err(|_| format!("run {run} of {t} never ended"))??;
        assert_eq!(done.status, RunStatus::Success, "{done:?}");
    }
    for n in 0..6 {
        let state = steps()
            .with_checkpointer(Arc::new(saver.clone()))
            .get_state(&format!("q{n}"), None)
            .await?
            .ok_or("no state")?;
        let want: Vec<String> = ["first", "second"]
            .iter()
            .flat_map(|l| ["a", "b", "c"].map(|node| format!("{n}{l}/{node}")))
            .collect();
        assert_eq!(state.values.log, want, "runs of one thread in order");
    }
    for w in workers {
        w.stop().await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_behind_the_pooler_listening_on_the_server_is_woken_by_a_submission() -> TestResult
{
    let Some((saver, guard)) = fresh("pgb_listen").await else {
        return Ok(());
    };
    let pgb = pg_support::pgb_url().ok_or("no pooler")?;
    let direct = pg_support::url().ok_or("no server")?;
    let options = PostgresOptions {
        schema: guard.schema.clone(),
        pool_size: POOL,
        listen_url: Some(direct),
        ..PostgresOptions::default()
    };
    let own = PostgresSaver::connect_with(&pgb, options).await?;
    // It polls once an hour: only a notification can start the run in time.
    let worker = Worker::new(
        own,
        steps(),
        WorkerOptions {
            poll: Duration::from_secs(3600),
            ..WorkerOptions::default()
        },
    )?;
    let serving = pg_support::Serving::start(worker);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t = ThreadId::new("woken")?;
    let input = serde_json::json!({ "label": "w" });
    let run = saver.queue().submit(&t, input, Multitask::Enqueue).await?;
    let done = tokio::time::timeout(
        Duration::from_secs(60),
        saver
            .queue()
            .wait_until_done(&run, Duration::from_millis(20)),
    )
    .await
    .map_err(|_| "the worker was not woken by the notification")??;
    assert_eq!(done.status, RunStatus::Success);
    serving.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_connects_through_the_pooler_create_a_fresh_schema_once() -> TestResult {
    let Some(pgb) = pg_support::pgb_url() else {
        return Ok(());
    };
    let schema = pg_support::unique_schema("pgb_openers");
    let _guard = pg_support::SchemaGuard {
        url: std::env::var("STATEGRAPH_PG_URL").unwrap_or_else(|_| pgb.clone()),
        schema: schema.clone(),
    };
    let opens = (0..8).map(|_| {
        let options = PostgresOptions {
            schema: schema.clone(),
            pool_size: 2,
            ..PostgresOptions::default()
        };
        let pgb = pgb.clone();
        tokio::spawn(async move { PostgresSaver::connect_with(&pgb, options).await })
    });
    let mut savers = Vec::new();
    for open in opens {
        savers.push(open.await??);
    }
    // A simple query: a named prepared statement would not survive the pooler.
    let raw = pg_support::raw(&pgb).await?;
    let meta = raw
        .simple_query(&format!("SELECT count(*) FROM \"{schema}\".sg_meta"))
        .await?;
    let count = meta.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
        _ => None,
    });
    assert_eq!(count.as_deref(), Some("1"), "one format record");
    // Each opener's saver works on the one set of tables.
    let t = ThreadId::new("t")?;
    savers[0]
        .put(put_of(&t, None, -1, vec![whole("n", "1")]))
        .await?;
    for saver in &savers {
        assert!(saver.get(&t, &Namespace::root(), None).await?.is_some());
    }
    Ok(())
}
