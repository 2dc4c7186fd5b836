//! The `server` workload: `stategraph serve` against LangGraph's `langgraph dev`, side by
//! side in one run, driven by the same Python `langgraph-sdk` client
//! (`benches/server/client.py`).
//!
//! Ours: the demo graphs served in-process on a fresh SQLite file (durable: checkpoints,
//! threads and runs committed there), on a free loopback port. LangGraph's (with
//! `--lg-dev` and `--lg-app`): `langgraph dev` (in memory) started in a copy of the app
//! folder, stopped with its process group after its side. One side runs at a time.
//!
//! For each graph (`chain`: three nodes appending to `log`; `agent`: an echo over
//! `messages`) and each `--server-clients` count N, N clients make `--server-runs` runs each,
//! each run a new thread and a `runs.wait` (rows `server`: `runs_per_s`, `wait_p50_ms`,
//! `wait_p99_ms`, `first_event_p50_ms` of 20 `runs.stream`; `client_cpu_share`, the client's
//! CPU over the wall time, near 1 when the client is the limit; `server_cpu_ms_per_run`, the
//! server's CPU time — this process's, or `langgraph dev`'s process group's — over every run
//! of the point, warm-up and streams included). Rows `server_ceiling`: the
//! same client and loop on `GET /ok` (two calls per run, as a run makes two), the client's
//! own limit. Row `server_raw` (ours only): the chain's runs through Python's
//! `http.client` on one keep-alive connection, at least 200 of them: the server's own cost
//! with as little client as Python has. Row `server_floor`: the chain invoked in-process on
//! a SQLite saver, a new thread per run. Row `server_summary`: the ratios against LangGraph measured in this run
//! and the targets.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use stategraph::checkpoints::SqliteSaver;
use stategraph::{BoxError, RunConfig};
use stategraph_server::demo::{self, Log};
use stategraph_server::Server;

use crate::report::{round, Record};
use crate::server_procs::{cpu_s, free_port, run_client, LgDev};
use crate::server_summary::summary;
use crate::{Args, ENGINE};

/// Warm-up runs of one client before each measured point (not counted).
const WARMUP_RUNS: usize = 5;
/// `runs.stream` calls timed to their first event, per point.
const STREAMS: usize = 20;
/// In-process runs of the floor, and their warm-up.
const FLOOR_RUNS: usize = 300;
const FLOOR_WARMUP: usize = 20;

/// One bench graph: its name on both servers, a run's input, what its answer must hold.
struct Bench {
    name: &'static str,
    input: Value,
    expect: Value,
}

fn benches() -> [Bench; 2] {
    [
        Bench {
            name: "chain",
            input: json!({ "log": [] }),
            expect: json!({ "log": ["a", "b", "c"] }),
        },
        Bench {
            name: "agent",
            input: json!({ "messages": [{ "type": "human", "content": "hi" }] }),
            expect: json!({ "messages": [
                { "type": "human", "content": "hi" },
                { "type": "ai", "content": "You said: hi" },
            ] }),
        },
    ]
}

/// One server under test.
pub(crate) struct Side {
    /// `stategraph` or `langgraph`.
    pub(crate) engine: &'static str,
    /// Where it keeps threads: `sqlite` or `inmem`.
    pub(crate) store: &'static str,
    /// Whether its threads, checkpoints and runs outlive the process (ours: one SQLite file,
    /// the checkpoints committed under `synchronous=FULL`).
    pub(crate) durable: bool,
}

const OURS: Side = Side {
    engine: ENGINE,
    store: "sqlite",
    durable: true,
};
const LANGGRAPH: Side = Side {
    engine: "langgraph",
    store: "inmem",
    durable: false,
};

/// What one side measured: per (graph, clients) the client's line; per clients the ceiling.
#[derive(Default)]
pub(crate) struct Measured {
    pub(crate) runs: BTreeMap<(String, usize), Value>,
    pub(crate) ceiling: BTreeMap<usize, Value>,
    /// Ours only: the chain's runs through a lean HTTP client (`raw` mode).
    pub(crate) raw: Option<Value>,
}

/// Run the whole row.
pub(crate) async fn run_server(args: &Args) -> Result<(), BoxError> {
    let python = &sdk_python(&args.sdk_python);
    if !python.is_file() {
        return Err(format!(
            "--sdk-python {}: no such interpreter (a venv with langgraph-sdk==0.4.14; \
             .ci/sdk-clients.sh makes target/sdk-clients/py)",
            python.display()
        )
        .into());
    }
    let floor = run_floor(&args.workdir).await?;
    floor_record(&floor).emit();
    let ours = run_ours(args, python).await?;
    let theirs = match (&args.lg_dev, &args.lg_app) {
        (Some(exe), Some(app)) => Some(run_langgraph(args, python, exe, app).await?),
        _ => {
            eprintln!("# server: LangGraph's side not run (give --lg-dev and --lg-app)");
            None
        }
    };
    summary(args, &ours, theirs.as_ref(), &floor).emit();
    Ok(())
}

/// `--sdk-python` as given, or, relative and missing here, under the workspace's root.
fn sdk_python(given: &Path) -> PathBuf {
    let beside_workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(given);
    if given.is_relative() && !given.exists() && beside_workspace.exists() {
        beside_workspace
    } else {
        given.to_path_buf()
    }
}

/// Ours, on a fresh SQLite file in the work directory.
async fn run_ours(args: &Args, python: &Path) -> Result<Measured, BoxError> {
    let file = args.workdir.join("server.db");
    let port = match args.server_port_base {
        0 => 0,
        base => free_port(base, &[])?,
    };
    let server = demo::register(Server::builder())?
        .file(&file)
        .addr(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .start()
        .await?;
    let measured = drive(args, python, &OURS, &server.url(), None).await;
    server.shutdown().await;
    if !args.keep_db {
        crate::sqlite_db::remove_files(&file);
    }
    measured
}

/// LangGraph's `langgraph dev`, started for its side and stopped after it.
async fn run_langgraph(
    args: &Args,
    python: &Path,
    exe: &Path,
    app: &Path,
) -> Result<Measured, BoxError> {
    let port = free_port(args.server_port_base, &[])?;
    let t0 = Instant::now();
    let dev = LgDev::start(exe, app, &args.workdir, port).await?;
    eprintln!(
        "# server: langgraph dev answered /ok after {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let measured = drive(args, python, &LANGGRAPH, &dev.url(), Some(dev.group())).await;
    dev.stop().await;
    measured
}

/// Every point of one side, each printed as it is measured; `group` is the server's process
/// group (`None`: this process), whose CPU time each point reports per run.
async fn drive(
    args: &Args,
    python: &Path,
    side: &Side,
    url: &str,
    group: Option<u32>,
) -> Result<Measured, BoxError> {
    let mut m = Measured::default();
    for bench in benches() {
        for &clients in &args.server_clients {
            let cpu0 = cpu_s(group);
            let line = run_client(
                python,
                &client_args(url, "runs", Some(&bench), clients, args.server_runs),
            )
            .await?;
            let runs = clients * args.server_runs + WARMUP_RUNS + STREAMS;
            let cpu_ms = (cpu_s(group) - cpu0) * 1e3 / runs as f64;
            let mut line = line;
            if let Value::Object(map) = &mut line {
                map.insert("server_cpu_ms_per_run".to_owned(), json!(round(cpu_ms, 3)));
            }
            record(side, "server", &line)
                .kv("graph", bench.name)
                .kv("runs_per_client", args.server_runs)
                .emit();
            m.runs.insert((bench.name.to_owned(), clients), line);
        }
    }
    if let (Some(chain), None) = (benches().first(), group) {
        // Our side only: the server's own cost, with a client as lean as Python's.
        let line = run_client(
            python,
            &client_args(url, "raw", Some(chain), 1, args.server_runs.max(200)),
        )
        .await?;
        record(side, "server_raw", &line)
            .kv("graph", chain.name)
            .kv("client", "http.client, one keep-alive connection")
            .emit();
        m.raw = Some(line);
    }
    for &clients in &args.server_clients {
        let line = run_client(
            python,
            &client_args(url, "ceiling", None, clients, args.server_runs),
        )
        .await?;
        record(side, "server_ceiling", &line)
            .kv("endpoint", "GET /ok")
            .kv("requests_per_run", 2)
            .kv("runs_per_client", args.server_runs)
            .emit();
        m.ceiling.insert(clients, line);
    }
    Ok(m)
}

fn client_args(
    url: &str,
    mode: &str,
    bench: Option<&Bench>,
    clients: usize,
    runs: usize,
) -> Vec<String> {
    let mut v: Vec<String> = vec![url.to_owned(), "--mode".to_owned(), mode.to_owned()];
    let mut flag = |k: &str, val: String| {
        v.push(k.to_owned());
        v.push(val);
    };
    flag("--clients", clients.to_string());
    flag("--runs", runs.to_string());
    flag("--warmup", WARMUP_RUNS.to_string());
    flag("--streams", STREAMS.to_string());
    if let Some(b) = bench {
        flag("--assistant", b.name.to_owned());
        flag("--input", b.input.to_string());
        flag("--expect", b.expect.to_string());
    }
    v
}

/// The client's keys a row prints, in this order (those it printed).
const CLIENT_KEYS: [&str; 12] = [
    "clients",
    "runs",
    "wall_s",
    "runs_per_s",
    "wait_p50_ms",
    "wait_p99_ms",
    "first_event_p50_ms",
    "first_event_p99_ms",
    "streams",
    "create_p50_ms",
    "client_cpu_share",
    "server_cpu_ms_per_run",
];

/// A row of `side` with the client's measurements.
fn record(side: &Side, workload: &str, line: &Value) -> Record {
    let mut r = Record::new()
        .kv("engine", side.engine)
        .kv("workload", workload)
        .kv("store", side.store)
        .kv("durable", side.durable);
    for key in CLIENT_KEYS {
        if let Some(v) = line.get(key) {
            r = r.kv(key, v.clone());
        }
    }
    r
}

/// The in-process floor: per-run seconds of `invoke` of the demo chain on a SQLite saver.
pub(crate) struct Floor {
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) runs: usize,
}

async fn run_floor(workdir: &Path) -> Result<Floor, BoxError> {
    let path: PathBuf = workdir.join("server-floor.db");
    let saver = SqliteSaver::open(&path)?;
    let graph = demo::chain()?.with_checkpointer(Arc::new(saver.clone()));
    let mut times = Vec::with_capacity(FLOOR_RUNS);
    for i in 0..FLOOR_WARMUP + FLOOR_RUNS {
        let config = RunConfig::new().thread(format!("floor-{i}"));
        let t0 = Instant::now();
        let out = graph.invoke(Log::update().log(Vec::new()), &config).await?;
        let s = t0.elapsed().as_secs_f64();
        if out.state.log != ["a", "b", "c"] {
            return Err(format!("the floor's chain logged {:?}", out.state.log).into());
        }
        if i >= FLOOR_WARMUP {
            times.push(s);
        }
    }
    drop(graph);
    saver.close()?;
    crate::sqlite_db::remove_files(&path);
    Ok(Floor {
        p50_ms: round(percentile(&times, 0.5) * 1e3, 3),
        p99_ms: round(percentile(&times, 0.99) * 1e3, 3),
        runs: times.len(),
    })
}

fn floor_record(f: &Floor) -> Record {
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "server_floor")
        .kv("graph", "chain")
        .kv("checkpointer", "sqlite")
        .kv("durability", "async")
        .kv("runs", f.runs)
        .kv("invoke_p50_ms", f.p50_ms)
        .kv("invoke_p99_ms", f.p99_ms)
}

/// Nearest rank, as the client computes it (NaN for none).
fn percentile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil() as usize;
    v.get(rank.saturating_sub(1)).copied().unwrap_or(f64::NAN)
}

/// `line[key]` as a number.
pub(crate) fn num(line: Option<&Value>, key: &str) -> Option<f64> {
    line.and_then(|l| l.get(key)).and_then(Value::as_f64)
}
