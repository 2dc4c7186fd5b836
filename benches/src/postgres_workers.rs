//! `workers` (needs `--pg-url`): how run throughput scales with workers on the PostgreSQL run
//! queue. 8 threads, each with [`RUNS_PER_THREAD`] queued runs of a 3-node graph whose nodes
//! each wait `IO_MS` (a model or tool call: agent steps wait on I/O, not on the CPU), run by
//! 1 and then 8 workers, each a [`Worker`] with its own connection pool serving the queue as a
//! deployment does ([`Worker::serve`]: woken by the queue's notifications), `sync` durability,
//! after one warm-up run per thread (not timed).
//! Keys: `workers`, `runs`, `supersteps`, `wall_s`, `steps_per_s`, and on the 8-worker row
//! `speedup_vs_1` (its steps per second over the 1-worker row's).

use std::time::Duration;

use stategraph::checkpoints::{
    Multitask, PostgresOptions, PostgresSaver, RunId, RunStatus, ThreadId,
};
use stategraph::worker::{Worker, WorkerOptions};
use stategraph::CancelToken;

use super::*;
use crate::postgres_db::PgDb;

/// Threads served at once (one running run each at most).
const THREADS: usize = 8;
/// Runs queued on each thread.
const RUNS_PER_THREAD: usize = 12;
/// Each node's wait, in ms.
const IO_MS: u64 = 5;
/// Supersteps of one run (its three nodes).
const RUN_STEPS: usize = 3;

#[derive(stategraph::State, Clone, Default, Debug)]
struct Work {
    #[reduce(append)]
    log: Vec<String>,
    label: String,
}

fn graph() -> Result<CompiledGraph<Work>, BoxError> {
    let node = |name: &'static str| {
        move |s: Arc<Work>, _ctx: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(IO_MS)).await;
            Ok::<_, BoxError>(Work::update().log(vec![format!("{}/{name}", s.label)]))
        }
    };
    Ok(StateGraph::<Work>::new()
        .add_node("a", node("a"))
        .add_node("b", node("b"))
        .add_node("c", node("c"))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .compile()?)
}

/// The `workers` rows: 1 worker, then 8.
pub(crate) async fn run_workers(args: &Args) -> Result<(), BoxError> {
    let Some(url) = args.pg_url.as_deref() else {
        return Err("the workers workload needs --pg-url (or STATEGRAPH_PG_URL)".into());
    };
    let mut one = None;
    for workers in [1usize, 8] {
        let db = PgDb::open(url, &format!("workers_{workers}")).await?;
        let wall = serve_all(url, &db.saver, workers).await?;
        let runs = THREADS * RUNS_PER_THREAD;
        let rate = (runs * RUN_STEPS) as f64 / wall;
        let mut rec = Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "workers")
            .kv("checkpointer", "postgres")
            .kv("durability", "sync")
            .kv("workers", workers)
            .kv("threads", THREADS)
            .kv("runs", runs)
            .kv("node_io_ms", IO_MS)
            .kv("supersteps", runs * RUN_STEPS)
            .kv("wall_s", round(wall, 4))
            .kv("steps_per_s", round(rate, 1));
        match one {
            None => one = Some(rate),
            Some(base) => rec = rec.kv("speedup_vs_1", round(rate / base, 2)),
        }
        db.close(rec).await?.emit();
    }
    Ok(())
}

/// Start `workers` workers, warm them with one run per thread (each worker's connections
/// then hold the plans of the server-side functions, as a worker that has been serving
/// does), then queue every measured run and let the workers serve the queue (as deployed:
/// [`Worker::serve`], woken by the queue's notifications) until all have ended; the seconds
/// from the start of serving them to the end of the last one.
async fn serve_all(url: &str, saver: &PostgresSaver, workers: usize) -> Result<f64, BoxError> {
    let mut pool = Vec::new();
    for w in 0..workers {
        let options = PostgresOptions {
            create_schema: false,
            ..crate::postgres_db::options(saver.schema().to_owned(), 2)
        };
        let own = PostgresSaver::connect_with(url, options).await?;
        let worker_options = WorkerOptions {
            name: format!("bench-{w}"),
            ..WorkerOptions::default()
        };
        pool.push(Arc::new(Worker::new(own, graph()?, worker_options)?));
    }
    let warm = queue_runs(saver, 1, "warm").await?;
    serve_until_done(saver, &pool, &warm).await?;
    let lasts = queue_runs(saver, RUNS_PER_THREAD, "run").await?;
    let start = Instant::now();
    serve_until_done(saver, &pool, &lasts).await?;
    Ok(start.elapsed().as_secs_f64())
}

/// Queue `per_thread` runs on each thread; each thread's last run.
async fn queue_runs(
    saver: &PostgresSaver,
    per_thread: usize,
    label: &str,
) -> Result<Vec<RunId>, BoxError> {
    let queue = saver.queue();
    let mut lasts = Vec::new();
    for t in 0..THREADS {
        let thread = ThreadId::new(format!("w{t}"))?;
        for r in 0..per_thread {
            let input = serde_json::json!({ "label": format!("{label} {t}.{r}") });
            let run = queue.submit(&thread, input, Multitask::Enqueue).await?;
            if r + 1 == per_thread {
                lasts.push(run);
            }
        }
    }
    Ok(lasts)
}

/// Let `pool` serve the queue until each of `lasts` has ended (a thread's runs end in the
/// order they were queued), then stop them; an error unless each succeeded.
async fn serve_until_done(
    saver: &PostgresSaver,
    pool: &[Arc<Worker<Work>>],
    lasts: &[RunId],
) -> Result<(), BoxError> {
    let queue = saver.queue();
    let mut wakeups = queue.wakeups().await;
    let shutdown = CancelToken::new();
    let tasks: Vec<_> = pool
        .iter()
        .map(|worker| {
            let (worker, shutdown) = (worker.clone(), shutdown.clone());
            tokio::spawn(async move { worker.serve(shutdown).await })
        })
        .collect();
    for run in lasts {
        loop {
            match queue.run(run).await?.map(|r| r.status) {
                Some(status) if status.is_terminal() => break,
                Some(_) => {
                    wakeups.wait_for_run(run, Duration::from_millis(50)).await;
                }
                None => return Err(format!("run {run} is not queued").into()),
            }
        }
    }
    shutdown.cancel();
    for t in tasks {
        t.await?;
    }
    for run in lasts {
        let status = queue.run(run).await?.map(|r| r.status);
        if status != Some(RunStatus::Success) {
            return Err(format!("run {run} ended {status:?}").into());
        }
    }
    Ok(())
}
