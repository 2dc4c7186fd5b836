//! Side-by-side benchmark of stategraph against LangGraph.
//!
//! Runs the workloads of `shared/bench/langgraph_bench.py` with identical shapes and prints
//! one JSON object per line per workload and variant, with the same keys plus
//! `"engine": "stategraph"`. Compare ratios measured in one session on one machine, never
//! absolute times across runs.
//!
//! ```text
//! cargo run --release -p stategraph-bench -- --only chain,fanout,wide --checkpointer none
//! ```
//!
//! Flags (as the Python script's): `--only chain,fanout,agent,wide,floor`, `agent_runtime`,
//! `subagent`, `settlement`, `verify` (`--verify-steps 10000,100000`: `stategraph verify`
//! against `PRAGMA integrity_check` on one long thread), `prune` (the same threads pruned to
//! their newest `--prune-keep 100`, against `integrity_check`), `studio` (the first view of
//! `stategraph studio` on the same threads: thread list, first history page, head checkpoint,
//! graph, over HTTP), `workers` (the PostgreSQL run queue served by 1 and by 8 workers;
//! `--pg-url`), `turn1000` (one agent turn of `--turn-calls 250,1000` parallel read-only tool
//! calls, in memory; `per_turn_ms`, `per_call_us`), `replay10k` (replay of a thread of
//! `--replay-steps 2500,10000` steps, in memory; `per_step_us`), `server` (`stategraph serve`
//! on SQLite against LangGraph's `langgraph dev` in memory, in one run, through the same
//! Python `langgraph-sdk` client at `--server-clients 1,32` clients of `--server-runs 30`
//! runs each; `--sdk-python PATH`, and `--lg-dev PATH --lg-app DIR` for LangGraph's side;
//! see `server.rs`), `stream` (a model's tokens through the `messages` mode in process, with
//! LangGraph's in the same run given `--lg-dev`, and through `stategraph serve`:
//! `--stream-chunks 100000`; see `stream.rs`), `store` (the long-term store beside LangGraph's
//! `InMemoryStore`, `SqliteStore` and `PostgresStore`: put, get, filtered and vector search
//! at `--store-items 10000,100000` on `--store-backends memory,sqlite,postgres`, LangGraph's
//! side run by `--lg-python PATH`; see `store_rows.rs`), `node_cache` (a cached node's hit
//! against its run, in memory and in a SQLite file; see `node_cache.rs`) and `sales_review` (ours only;
//! `sales_review` times the example's release binary, built first with `cargo build --release
//! --example sales_review`), `--checkpointer none|memory|sqlite|postgres` (a comma list is
//! accepted: `none,memory`; `postgres` runs chain, fanout, agent and wide on a fresh schema of
//! the server at `--pg-url` or `STATEGRAPH_PG_URL`, with `pg_floor_adjacent_ms` and
//! `per_commit_vs_pg_floor`: a one-row autocommit insert loop on the same server sampled
//! before and after each run), `--steps 1000`,
//! `--fanout-k 1000`, `--agent-turns 200`, `--wide-fields 100`, `--wide-steps 100`,
//! `--repeats 3`, `--durabilities async,sync,exit` (checkpointer runs; default `async,sync`
//! with `sqlite`, else all three), `--sqlite-synchronous FULL|NORMAL` (default FULL),
//! `--sqlite-preallocate-wal on|off` (the saver's `preallocate_wal`, default on),
//! `--workdir DIR` / `--keep-db` (where the SQLite files go; default a temporary directory,
//! removed), `--fanout-mem-ks 1000,10000` (fanout runs repeated each in a fresh process, so
//! that each K's own peak RSS shows), `--worker-threads N` (tokio worker threads; default one
//! per CPU), `--pg-prepared-statements on|off` (the Postgres saver's `prepared_statements`,
//! default off as in the saver; each Postgres row says `pg_prepared_statements`). With
//! `postgres`, the `env` row also prints the server's version (`postgres`) and the settings
//! that bear on what a commit costs (`pg_synchronous_commit`, `pg_fsync`,
//! `pg_wal_sync_method`, `pg_full_page_writes`, `pg_shared_buffers`, `pg_commit_delay`,
//! `pg_commit_siblings`) as a session opened with `--pg-url` has them, so that options the URL
//! passes show (such as a dearer commit emulated with `commit_delay`; decision 0066).
//!
//! SQLite runs of chain, agent and wide also print `per_commit_ms` (wall time over the
//! checkpoints the run committed) and `floor_adjacent_ms`: two short floor samples (200
//! commits) taken just before and just after the timed run, since fsync latency drifts on a
//! shared machine; `floor_preallocated_adjacent_ms` are the same samples on a WAL first given
//! the room the saver gives its own (decision 0017), the floor of a file whose WAL no longer
//! grows. Wide also prints its per-commit ratio to both (`per_commit_vs_floor_median`,
//! `per_commit_vs_preallocated_floor_median`).
//!
//! `floor` (in the default set when `sqlite` is among the checkpointers) is the physical
//! limit a durable step is compared with: a bare rusqlite loop committing one ~190-byte row
//! per WAL transaction, `--steps` times, at the same `synchronous`.
//!
//! With `sqlite`, each record also prints `bytes_written_by_steps`: the JSON bytes of the
//! field values the steps (the `__start__` input step included) wrote — for a last-value
//! field the JSON of the value, for an append field the JSON of each appended item, for a
//! `Send` the JSON of its argument — so that `db_file_bytes / bytes_written_by_steps` is the
//! storage overhead.

mod agent;
mod agent_runtime;
mod args;
mod chain;
mod floor;
mod func_rows;
mod node_cache;
mod postgres_db;
mod postgres_runs;
mod postgres_workers;
mod prune_scan;
mod replay_run;
mod report;
mod sales_review;
mod server;
mod server_procs;
mod server_summary;
mod settlement;
mod settlement_run;
mod sqlite_db;
mod store_backends;
mod store_floor;
mod store_rows;
mod stream;
mod studio_page;
mod subagent;
mod turn_calls;
mod verify_scan;
mod wide;
mod wide_state;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::json;
use stategraph::checkpoints::MemorySaver;
use stategraph::{
    BoxError, Command, CompiledGraph, List, NodeContext, NodeOptions, RunConfig, State, StateGraph,
    END, START,
};

use args::{parse_args, Args, Saver, Usage};
use report::{median, min, peak_rss_mb, round, rss_mb, Record};
use sqlite_db::SqliteDb;
use wide::WIDE_NODES;

pub(crate) const ENGINE: &str = "stategraph";
const WORKLOADS: [&str; 20] = [
    "chain",
    "fanout",
    "agent",
    "wide",
    "floor",
    "agent_runtime",
    "subagent",
    "settlement",
    "sales_review",
    "verify",
    "prune",
    "studio",
    "workers",
    "turn1000",
    "replay10k",
    "server",
    "stream",
    "store",
    "node_cache",
    "func",
];

/// `"x" * 160`: keeps each chain message at about 190 bytes serialized.
pub(crate) fn pad(n: usize) -> String {
    "x".repeat(n)
}

/// The floor's row: the bytes one chain step changes (one message, about 190 B).
pub(crate) fn floor_row() -> Vec<u8> {
    serde_json::to_vec(&chain::make_msg("node", 1000)).unwrap_or_default()
}

/// Commits of each floor sample taken next to a SQLite run.
pub(crate) const ADJACENT_FLOOR_STEPS: usize = 200;

/// A floor sample next to a timed run (see `floor::adjacent`).
pub(crate) fn adjacent_floor(args: &Args) -> Result<floor::Adjacent, BoxError> {
    floor::adjacent(
        &args.workdir,
        args.sqlite_sync,
        ADJACENT_FLOOR_STEPS,
        &floor_row(),
    )
}

/// The length of `v` as JSON.
pub(crate) fn json_len<T: Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

// ---------------------------------------------------------------------------------- fanout

#[derive(State, Clone, Default, Debug)]
struct FanState {
    k: i64,
    #[reduce(append)]
    results: Vec<i64>,
    total: i64,
}

/// A worker's `Send` argument: `{"i": i}`.
#[derive(Serialize, Deserialize)]
struct WorkerIn {
    i: i64,
}

/// The fanout graph; with `waves` > 0, worker `i` sleeps `i % waves` ms, so the workers of a
/// step finish in that many waves (their writes are then recorded as each wave finishes).
fn build_fanout(waves: u64) -> Result<CompiledGraph<FanState>, BoxError> {
    let g = StateGraph::<FanState>::new()
        .add_node_with(
            "emit",
            |s: Arc<FanState>, _ctx: NodeContext| async move {
                let mut cmd = Command::<FanState>::new();
                for i in 0..s.k {
                    cmd = cmd.goto(stategraph::SendTo::new("worker", WorkerIn { i }));
                }
                Ok::<_, BoxError>(cmd)
            },
            NodeOptions::new().destinations(["worker"]),
        )
        .add_node(
            "worker",
            move |_s: Arc<FanState>, ctx: NodeContext| async move {
                let inp: WorkerIn = ctx.arg()?;
                if waves > 0 {
                    let wave = inp.i.unsigned_abs() % waves;
                    tokio::time::sleep(std::time::Duration::from_millis(wave)).await;
                }
                Ok::<_, BoxError>(FanState::update().results(vec![inp.i * 2]))
            },
        )
        .add_node("reduce", |s: Arc<FanState>, _ctx: NodeContext| async move {
            Ok::<_, BoxError>(FanState::update().total(s.results.iter().sum::<i64>()))
        })
        .add_edge(START, "emit")
        .add_edge("worker", "reduce")
        .add_edge("reduce", END)
        .compile()?;
    Ok(g)
}

fn fan_input(k: i64) -> FanStateUpdate {
    FanState::update().k(k).results(Vec::new())
}

/// Run the fanout `repeats` times on `graph`; the wall times, checking every total.
async fn time_fanout(
    graph: &CompiledGraph<FanState>,
    k: i64,
    repeats: usize,
    config: impl Fn(usize) -> RunConfig,
) -> Result<Vec<f64>, BoxError> {
    let expected: i64 = (0..k).map(|i| i * 2).sum();
    let mut times = Vec::new();
    for r in 0..repeats {
        let cfg = config(r);
        let input = fan_input(k);
        let t0 = Instant::now();
        let out = graph.invoke(input, &cfg).await?;
        times.push(t0.elapsed().as_secs_f64());
        if out.state.total != expected {
            return Err(format!("fanout total {} != {expected}", out.state.total).into());
        }
    }
    Ok(times)
}

fn fan_record(cp: &str, k: i64, waves: u64, repeats: usize, times: &[f64]) -> Record {
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "fanout")
        .kv("checkpointer", cp)
        .kv("k", k)
        .kv("waves", waves)
        .kv("supersteps_per_run", 4) // __start__, emit, K workers, reduce
        .kv("repeats", repeats)
        .kv("wall_s_median", round(median(times), 6))
        .kv("wall_s_min", round(min(times), 6))
        .kv(
            "per_send_task_us",
            round(median(times) * 1e6 / k.max(1) as f64, 3),
        )
}

/// The config of repeat `r` of a fanout on a saver: a thread of its own per repeat.
fn thread_per_repeat(durability: stategraph::Durability) -> impl Fn(usize) -> RunConfig {
    move |r| {
        RunConfig::new()
            .thread(format!("fan-{r}"))
            .durability(durability)
    }
}

/// `fanout` without a saver, in memory and on SQLite, as `--checkpointer` asks.
async fn run_fanout(args: &Args) -> Result<(), BoxError> {
    let k = args.fanout_k;
    let graph = build_fanout(args.fanout_waves)?;
    graph.invoke(fan_input(10), &RunConfig::new()).await?; // warm-up
    if args.checkpointers.contains(&Saver::None) {
        fanout_unsaved(args, &graph).await?;
    }
    if args.checkpointers.contains(&Saver::Memory) {
        for (dname, durability) in &args.durabilities {
            let saver = MemorySaver::new();
            let g = graph.with_checkpointer(Arc::new(saver.clone()));
            let times = time_fanout(&g, k, args.repeats, thread_per_repeat(*durability)).await?;
            fan_record("memory", k, args.fanout_waves, args.repeats, &times)
                .kv("durability", dname.as_str())
                .kv("threads", args.repeats)
                .kv("checkpoint_rows", saver.checkpoint_count())
                .kv("peak_rss_mb", peak_rss_mb())
                .emit();
        }
    }
    if args.checkpointers.contains(&Saver::Sqlite) {
        fanout_sqlite(args, &graph).await?;
    }
    Ok(())
}

/// Without a saver; then each K of `--fanout-mem-ks` again in a fresh process, for its own
/// peak RSS, so memory against K shows.
async fn fanout_unsaved(args: &Args, graph: &CompiledGraph<FanState>) -> Result<(), BoxError> {
    let k = args.fanout_k;
    let times = time_fanout(graph, k, args.repeats, |_| RunConfig::new()).await?;
    fan_record("none", k, args.fanout_waves, args.repeats, &times)
        .kv("peak_rss_mb", peak_rss_mb())
        .emit();
    for &mk in &args.fanout_mem_ks {
        let exe = std::env::current_exe()?;
        let status = std::process::Command::new(exe)
            .args([
                "--internal-fanout-mem".to_owned(),
                mk.to_string(),
                "--repeats".to_owned(),
                args.repeats.to_string(),
            ])
            .args(
                args.worker_threads
                    .into_iter()
                    .flat_map(|n| ["--worker-threads".to_owned(), n.to_string()]),
            )
            .args(["--checkpointer", "none"])
            .status()?;
        if !status.success() {
            return Err(format!("the fanout K={mk} child failed: {status}").into());
        }
    }
    Ok(())
}

/// On SQLite, per durability, with the bytes the runs' steps wrote.
async fn fanout_sqlite(args: &Args, graph: &CompiledGraph<FanState>) -> Result<(), BoxError> {
    let k = args.fanout_k;
    // Bytes one run writes: the input's `k`, each Send's `{"i": i}`, each worker's item,
    // the total (the input's empty list appends nothing).
    let expected: i64 = (0..k).map(|i| i * 2).sum();
    let per_run: usize = json_len(&k)
        + (0..k)
            .map(|i| json_len(&WorkerIn { i }) + json_len(&(i * 2)))
            .sum::<usize>()
        + json_len(&expected);
    for (dname, durability) in &args.durabilities {
        let db = SqliteDb::open(
            &args.workdir,
            &format!("fanout-{dname}"),
            args.sqlite_options(),
        )?;
        let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
        let times = time_fanout(&g, k, args.repeats, thread_per_repeat(*durability)).await?;
        drop(g);
        let st = db.close(args.keep_db)?;
        let rec = fan_record("sqlite", k, args.fanout_waves, args.repeats, &times)
            .kv("durability", dname.as_str())
            .kv("sqlite_synchronous", args.sqlite_sync.as_str())
            .kv("threads", args.repeats);
        st.add_to(rec)
            .kv("bytes_written_by_steps", per_run * args.repeats)
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }
    Ok(())
}

/// The child side of `--fanout-mem-ks`: one K in a fresh process.
async fn fanout_mem_child(k: i64, repeats: usize) -> Result<(), BoxError> {
    let graph = build_fanout(0)?;
    graph.invoke(fan_input(10), &RunConfig::new()).await?; // warm-up
    let before = rss_mb();
    let times = time_fanout(&graph, k, repeats, |_| RunConfig::new()).await?;
    let peak = peak_rss_mb();
    fan_record("none", k, 0, repeats, &times)
        .kv("variant", "fresh_process")
        .kv("fanout_k", k)
        .kv("rss_before_mb", before)
        .kv("peak_rss_mb", peak)
        .kv("peak_rss_delta_mb", round(peak - before, 1))
        .emit();
    Ok(())
}

// ------------------------------------------------------------------------------------ main

async fn run(mut args: Args) -> Result<(), BoxError> {
    if let Some(k) = args.internal_fanout_mem {
        return fanout_mem_child(k, args.repeats).await;
    }
    // The SQLite files go to a temporary directory (removed at the end) unless --workdir.
    let _tmp = if args.workdir_given {
        std::fs::create_dir_all(&args.workdir)?;
        None
    } else {
        let t = tempfile::Builder::new()
            .prefix("sgbench-")
            .tempdir_in(&args.workdir)?;
        args.workdir = t.path().to_path_buf();
        Some(t)
    };
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let env = Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "env")
        .kv("stategraph", env!("CARGO_PKG_VERSION"))
        .kv("build", if cfg!(debug_assertions) { "debug" } else { "release" })
        .kv("runtime", "tokio multi_thread")
        .kv("worker_threads", args.worker_threads.unwrap_or(cpus))
        .kv("cpus", cpus)
        .kv(
            "args",
            json!({
                "only": args.only,
                "checkpointer": args.checkpointers.iter().map(|c| c.name()).collect::<Vec<_>>(),
                "steps": args.steps,
                "fanout_k": args.fanout_k,
                "agent_turns": args.agent_turns,
                "wide_fields": args.wide_fields,
                "wide_steps": args.wide_steps,
                "repeats": args.repeats,
                "durabilities": args.durabilities.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>(),
                "fanout_mem_ks": args.fanout_mem_ks,
                "turn_calls": args.turn_calls,
                "replay_steps": args.replay_steps,
                "sqlite_synchronous": args.sqlite_sync.as_str(),
                "keep_db": args.keep_db,
                "server_clients": args.server_clients,
                "server_runs": args.server_runs,
            }),
        );
    let env = match args.pg_url.as_deref() {
        Some(url) if args.checkpointers.contains(&Saver::Postgres) => {
            postgres_db::server_keys(url, env).await?
        }
        _ => env,
    };
    env.emit();
    for name in &args.only {
        let t0 = Instant::now();
        match name.as_str() {
            "chain" => postgres_runs::chain_everywhere(&args).await?,
            "fanout" => postgres_runs::fanout_everywhere(&args).await?,
            "wide" => postgres_runs::wide_everywhere(&args).await?,
            "agent" => agent::run_agent(&args).await?,
            "agent_runtime" => agent_runtime::run_agent_runtime(&args).await?,
            "subagent" => subagent::run_subagent(&args).await?,
            "sales_review" => sales_review::run_sales_review(&args)?,
            "verify" => verify_scan::run_verify(&args).await?,
            "studio" => studio_page::run_studio(&args).await?,
            "prune" => prune_scan::run_prune(&args).await?,
            "workers" => postgres_workers::run_workers(&args).await?,
            "turn1000" => turn_calls::run_turn_calls(&args).await?,
            "replay10k" => replay_run::run_replay(&args).await?,
            "server" => server::run_server(&args).await?,
            "stream" => stream::run_stream(&args).await?,
            "store" => store_rows::run_store(&args).await?,
            "node_cache" => node_cache::run_node_cache(&args).await?,
            "func" => func_rows::run_func(&args).await?,
            "settlement" => {
                settlement::run_settlement(&args)?;
                settlement_run::run_agent_settlement(&args).await?;
            }
            "floor" => {
                let row = floor_row();
                floor::run_floor(
                    &args.workdir,
                    args.sqlite_sync,
                    args.steps,
                    args.repeats,
                    args.keep_db,
                    &row,
                )?;
            }
            _ => continue,
        }
        eprintln!("# {name} done in {:.1}s", t0.elapsed().as_secs_f64());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(Usage(msg, code)) => {
            if code == 0 {
                println!("{msg}");
            } else {
                eprintln!("stategraph-bench: {msg}");
            }
            return ExitCode::from(code);
        }
    };
    postgres_db::set_prepared(args.pg_prepared);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.worker_threads {
        builder.worker_threads(n.max(1));
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stategraph-bench: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stategraph-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
