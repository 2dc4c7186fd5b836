//! The bench's command line: its flags, their defaults and their checks.

use std::path::PathBuf;

use stategraph::checkpoints::{SqliteOptions, Synchronous};
use stategraph::Durability;

use crate::wide_state::WIDE_MAX_FIELDS;
use crate::{WIDE_NODES, WORKLOADS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Saver {
    None,
    Memory,
    Sqlite,
    Postgres,
}

impl Saver {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Saver::None => "none",
            Saver::Memory => "memory",
            Saver::Sqlite => "sqlite",
            Saver::Postgres => "postgres",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Args {
    pub(crate) only: Vec<String>,
    pub(crate) checkpointers: Vec<Saver>,
    pub(crate) steps: usize,
    pub(crate) fanout_k: i64,
    /// Fanout workers finish in this many waves 1 ms apart (`--fanout-waves`; 0: at once).
    pub(crate) fanout_waves: u64,
    pub(crate) agent_turns: usize,
    pub(crate) wide_fields: usize,
    pub(crate) wide_steps: usize,
    pub(crate) repeats: usize,
    pub(crate) durabilities: Vec<(String, Durability)>,
    pub(crate) fanout_mem_ks: Vec<i64>,
    /// Thread lengths of the `verify` workload (`--verify-steps`).
    pub(crate) verify_steps: Vec<usize>,
    /// Tool calls of the `turn1000` workload's one turn, one row each (`--turn-calls`).
    pub(crate) turn_calls: Vec<usize>,
    /// Thread lengths of the `replay10k` workload, one row each (`--replay-steps`).
    pub(crate) replay_steps: Vec<usize>,
    /// Items of the `store` workload's stores, one size each (`--store-items`).
    pub(crate) store_items: Vec<usize>,
    /// Backends of the `store` workload (`--store-backends memory,sqlite,postgres`).
    pub(crate) store_backends: Vec<String>,
    /// The Python of a venv with LangGraph's stores, for the `store` workload's LangGraph
    /// side (`--lg-python`; without it only ours runs).
    pub(crate) lg_python: Option<PathBuf>,
    /// Chunks the `stream` workload's model streams (`--stream-chunks`).
    pub(crate) stream_chunks: usize,
    /// Checkpoints the `prune` workload keeps (`--prune-keep`).
    pub(crate) prune_keep: usize,
    /// `synchronous` of the SQLite saver and of the floor.
    pub(crate) sqlite_sync: Synchronous,
    /// The saver's `preallocate_wal` (`--sqlite-preallocate-wal on|off`, default on).
    pub(crate) preallocate_wal: bool,
    /// Where the SQLite files go (a temporary directory unless `--workdir`).
    pub(crate) workdir: PathBuf,
    /// Whether `--workdir` was given.
    pub(crate) workdir_given: bool,
    /// Keep the SQLite files.
    pub(crate) keep_db: bool,
    /// Tokio worker threads (default: tokio's, one per CPU).
    pub(crate) worker_threads: Option<usize>,
    /// The PostgreSQL server of `--checkpointer postgres` (`--pg-url`, default
    /// `STATEGRAPH_PG_URL`).
    pub(crate) pg_url: Option<String>,
    /// The Postgres saver's `prepared_statements` (`--pg-prepared-statements on|off`, default
    /// off, as the saver's default).
    pub(crate) pg_prepared: bool,
    /// Internal: run one fanout of this K in this (fresh) process and report its memory.
    pub(crate) internal_fanout_mem: Option<i64>,
    /// The Python of a venv with `langgraph-sdk` that runs the `server` row's client
    /// (`--sdk-python`).
    pub(crate) sdk_python: PathBuf,
    /// LangGraph's `langgraph` executable (`--lg-dev`), from `langgraph-cli[inmem]`.
    pub(crate) lg_dev: Option<PathBuf>,
    /// The folder with LangGraph's `langgraph.json` of the bench graphs (`--lg-app`).
    pub(crate) lg_app: Option<PathBuf>,
    /// Concurrent clients of the `server` row, one point each (`--server-clients`).
    pub(crate) server_clients: Vec<usize>,
    /// Runs each client of the `server` row makes (`--server-runs`).
    pub(crate) server_runs: usize,
    /// The `server` row's servers listen on the first free port from this one
    /// (`--server-port-base`; 0: any free port).
    pub(crate) server_port_base: u16,
}

impl Args {
    /// The options of every saver the bench opens.
    pub(crate) fn sqlite_options(&self) -> SqliteOptions {
        SqliteOptions {
            synchronous: self.sqlite_sync,
            preallocate_wal: self.preallocate_wal,
            ..SqliteOptions::default()
        }
    }
}

/// Where `.ci/sdk-clients.sh` makes the Python venv with `langgraph-sdk`.
const DEFAULT_SDK_PYTHON: &str = "target/sdk-clients/py/bin/python";

pub(crate) const USAGE: &str = "usage: stategraph-bench [--only chain,fanout,agent,wide,floor,agent_runtime,subagent,settlement,sales_review,verify,prune,studio,workers,turn1000,replay10k,server,stream,store,node_cache,func] \
[--checkpointer none|memory|sqlite|postgres] [--pg-url URL] [--steps 1000] [--fanout-k 1000] [--fanout-waves 0] [--agent-turns 200] \
[--wide-fields 100] [--wide-steps 100] [--repeats 3] [--durabilities async,sync,exit] \
[--sqlite-synchronous FULL|NORMAL] [--sqlite-preallocate-wal on|off] [--workdir DIR] [--keep-db] [--fanout-mem-ks 1000,10000] \
[--verify-steps 10000,100000] [--prune-keep 100] [--turn-calls 250,1000] [--replay-steps 2500,10000] [--stream-chunks 100000] [--store-items 10000,100000] [--store-backends memory,sqlite,postgres] [--lg-python PATH] [--worker-threads N] [--pg-prepared-statements on|off] \
[--sdk-python PATH] [--lg-dev PATH --lg-app DIR] [--server-clients 1,32] [--server-runs 30] [--server-port-base 0]";

/// A command-line problem: message and exit code.
pub(crate) struct Usage(pub(crate) String, pub(crate) u8);

pub(crate) fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, Usage> {
    v.trim()
        .parse()
        .map_err(|_| Usage(format!("{flag}: not a valid number: {v:?}\n{USAGE}"), 2))
}

/// The defaults, before any flag.
fn defaults() -> Args {
    Args {
        only: Vec::new(),
        checkpointers: vec![Saver::None],
        steps: 1000,
        fanout_k: 1000,
        fanout_waves: 0,
        agent_turns: 200,
        wide_fields: 100,
        wide_steps: 100,
        repeats: 3,
        durabilities: Vec::new(),
        fanout_mem_ks: vec![1000, 10_000],
        verify_steps: vec![10_000, 100_000],
        turn_calls: vec![250, 1000],
        replay_steps: vec![2500, 10_000],
        stream_chunks: 100_000,
        store_items: vec![10_000, 100_000],
        store_backends: crate::store_backends::BACKENDS
            .iter()
            .map(|b| (*b).to_owned())
            .collect(),
        lg_python: None,
        prune_keep: 100,
        sqlite_sync: Synchronous::Full,
        preallocate_wal: true,
        workdir: std::env::temp_dir(),
        workdir_given: false,
        keep_db: false,
        worker_threads: None,
        internal_fanout_mem: None,
        sdk_python: PathBuf::from(DEFAULT_SDK_PYTHON),
        lg_dev: None,
        lg_app: None,
        server_clients: vec![1, 32],
        server_runs: 30,
        server_port_base: 0,
        pg_prepared: false,
        pg_url: std::env::var("STATEGRAPH_PG_URL")
            .ok()
            .filter(|u| !u.is_empty()),
    }
}

/// What the flags gave that needs the others to be known first.
#[derive(Default)]
struct Pending {
    only: Option<Vec<String>>,
    durabilities: Option<Vec<String>>,
}

/// Parse the command line.
pub(crate) fn parse_args(argv: impl IntoIterator<Item = String>) -> Result<Args, Usage> {
    let mut args = defaults();
    let mut pending = Pending::default();
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        if flag == "-h" || flag == "--help" {
            return Err(Usage(USAGE.to_owned(), 0));
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| Usage(format!("{flag} needs a value\n{USAGE}"), 2))
        };
        apply_flag(&mut args, &mut pending, &flag, &mut value)?;
    }
    finish(args, pending)
}

/// Apply one flag; `value` takes its value.
fn apply_flag(
    args: &mut Args,
    pending: &mut Pending,
    flag: &str,
    value: &mut dyn FnMut() -> Result<String, Usage>,
) -> Result<(), Usage> {
    match flag {
        "--only" => pending.only = Some(list(&value()?)),
        "--checkpointer" => args.checkpointers = checkpointers(&value()?)?,
        "--steps" => args.steps = number(flag, &value()?)?,
        "--fanout-k" => args.fanout_k = number(flag, &value()?)?,
        "--fanout-waves" => args.fanout_waves = number(flag, &value()?)?,
        "--agent-turns" => args.agent_turns = number(flag, &value()?)?,
        "--wide-fields" => args.wide_fields = number(flag, &value()?)?,
        "--wide-steps" => args.wide_steps = number(flag, &value()?)?,
        "--repeats" => args.repeats = number(flag, &value()?)?,
        "--durabilities" => pending.durabilities = Some(list(&value()?)),
        "--sqlite-synchronous" => args.sqlite_sync = synchronous(&value()?)?,
        "--sqlite-preallocate-wal" => args.preallocate_wal = on_off(flag, &value()?)?,
        "--workdir" => {
            args.workdir = PathBuf::from(value()?);
            args.workdir_given = true;
        }
        "--keep-db" => args.keep_db = true,
        "--fanout-mem-ks" => args.fanout_mem_ks = numbers(flag, &value()?)?,
        "--verify-steps" => args.verify_steps = numbers(flag, &value()?)?,
        "--turn-calls" => args.turn_calls = numbers(flag, &value()?)?,
        "--replay-steps" => args.replay_steps = numbers(flag, &value()?)?,
        "--prune-keep" => args.prune_keep = number(flag, &value()?)?,
        "--stream-chunks" => args.stream_chunks = number(flag, &value()?)?,
        "--store-items" => args.store_items = numbers(flag, &value()?)?,
        "--store-backends" => args.store_backends = list(&value()?),
        "--lg-python" => args.lg_python = Some(PathBuf::from(value()?)),
        "--pg-url" => args.pg_url = Some(value()?),
        "--pg-prepared-statements" => args.pg_prepared = on_off(flag, &value()?)?,
        "--worker-threads" => args.worker_threads = Some(number(flag, &value()?)?),
        "--sdk-python" => args.sdk_python = PathBuf::from(value()?),
        "--lg-dev" => args.lg_dev = Some(PathBuf::from(value()?)),
        "--lg-app" => args.lg_app = Some(PathBuf::from(value()?)),
        "--server-clients" => args.server_clients = numbers(flag, &value()?)?,
        "--server-runs" => args.server_runs = number(flag, &value()?)?,
        "--server-port-base" => args.server_port_base = number(flag, &value()?)?,
        "--internal-fanout-mem" => args.internal_fanout_mem = Some(number(flag, &value()?)?),
        other => return Err(Usage(format!("unknown argument {other:?}\n{USAGE}"), 2)),
    }
    Ok(())
}

/// `--checkpointer none,memory,sqlite`.
fn checkpointers(v: &str) -> Result<Vec<Saver>, Usage> {
    list(v)
        .iter()
        .map(|c| match c.as_str() {
            "none" => Ok(Saver::None),
            "memory" => Ok(Saver::Memory),
            "sqlite" => Ok(Saver::Sqlite),
            "postgres" => Ok(Saver::Postgres),
            other => Err(Usage(
                format!(
                    "--checkpointer: unknown checkpointer {other:?} (none, memory, sqlite, postgres)"
                ),
                2,
            )),
        })
        .collect()
}

/// `--sqlite-synchronous FULL|NORMAL`.
fn synchronous(v: &str) -> Result<Synchronous, Usage> {
    match v.to_ascii_uppercase().as_str() {
        "FULL" => Ok(Synchronous::Full),
        "NORMAL" => Ok(Synchronous::Normal),
        other => Err(Usage(
            format!("--sqlite-synchronous: {other:?} is not FULL or NORMAL"),
            2,
        )),
    }
}

/// A flag's `on` or `off`.
fn on_off(flag: &str, v: &str) -> Result<bool, Usage> {
    match v.to_ascii_lowercase().as_str() {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(Usage(format!("{flag}: {other:?} is not on or off"), 2)),
    }
}

/// A comma list of numbers.
fn numbers<T: std::str::FromStr>(flag: &str, v: &str) -> Result<Vec<T>, Usage> {
    list(v).iter().map(|k| number(flag, k)).collect()
}

/// The workloads and durabilities (their defaults depend on the checkpointers), then the
/// checks across flags.
fn finish(mut args: Args, pending: Pending) -> Result<Args, Usage> {
    let sqlite = args.checkpointers.contains(&Saver::Sqlite)
        || args.checkpointers.contains(&Saver::Postgres);
    if args.checkpointers.contains(&Saver::Postgres) && args.pg_url.is_none() {
        return Err(Usage(
            "--checkpointer postgres needs --pg-url URL or STATEGRAPH_PG_URL (start a server \
             with: eval \"export $(.ci/postgres.sh | tail -n 1)\")"
                .to_owned(),
            2,
        ));
    }
    args.only = pending.only.unwrap_or_else(|| {
        let mut w = list("chain,fanout,agent,wide");
        if sqlite {
            w.insert(0, "floor".to_owned());
        }
        w
    });
    if let Some(w) = args.only.iter().find(|w| !WORKLOADS.contains(&w.as_str())) {
        return Err(Usage(
            format!("--only: unknown workload {w:?} ({})", WORKLOADS.join(", ")),
            2,
        ));
    }
    let durabilities = pending.durabilities.unwrap_or_else(|| {
        list(if sqlite {
            "async,sync"
        } else {
            "async,sync,exit"
        })
    });
    for d in durabilities {
        let mode = match d.as_str() {
            "async" => Durability::Async,
            "sync" => Durability::Sync,
            "exit" => Durability::Exit,
            other => {
                return Err(Usage(
                    format!("--durabilities: unknown durability {other:?} (async, sync, exit)"),
                    2,
                ))
            }
        };
        args.durabilities.push((d, mode));
    }
    if args.repeats == 0 {
        return Err(Usage("--repeats must be at least 1".to_owned(), 2));
    }
    if args.lg_dev.is_some() != args.lg_app.is_some() {
        return Err(Usage(
            "--lg-dev and --lg-app go together (LangGraph's `langgraph` and its app folder)"
                .to_owned(),
            2,
        ));
    }
    if args.server_runs == 0 || args.server_clients.is_empty() || args.server_clients.contains(&0) {
        return Err(Usage(
            "--server-runs and each of --server-clients must be at least 1".to_owned(),
            2,
        ));
    }
    if let Some(b) = args
        .store_backends
        .iter()
        .find(|b| !crate::store_backends::BACKENDS.contains(&b.as_str()))
    {
        return Err(Usage(
            format!(
                "--store-backends: unknown backend {b:?} ({})",
                crate::store_backends::BACKENDS.join(", ")
            ),
            2,
        ));
    }
    if args.store_items.contains(&0) {
        return Err(Usage(
            "each of --store-items must be at least 1".to_owned(),
            2,
        ));
    }
    if args.prune_keep == 0 {
        return Err(Usage("--prune-keep must be at least 1".to_owned(), 2));
    }
    if args.wide_fields < WIDE_NODES || args.wide_fields > WIDE_MAX_FIELDS {
        return Err(Usage(
            format!(
                "--wide-fields must be between {WIDE_NODES} (the writer nodes) and \
                 {WIDE_MAX_FIELDS} (the fields the typed state declares)"
            ),
            2,
        ));
    }
    Ok(args)
}
