//! Crash and resume: a long loop on a SQLite checkpoint file that can be killed at any
//! instant and started again with the same arguments.
//!
//! ```text
//! cargo run --release --example crash_resume -- --db FILE --thread ID --steps N \
//!     [--durability sync|async|exit] [--ledger FILE] [--pg URL [--schema NAME]]
//! ```
//!
//! With `--pg URL` the checkpoints go to that PostgreSQL database (in schema `NAME`, default
//! `stategraph`) instead of the file, which then only names the default ledger.
//!
//! The graph has one node, `step`, that loops on itself until the state holds `N` items. Each
//! execution appends one item and updates a running checksum, and records itself in a side
//! table `executions` of a separate SQLite file (the ledger, by default `FILE.executions`)
//! *before* it returns, keyed by the task id the engine hands it. A re-execution after a
//! crash therefore shows up as a second row with the same step (and, when the step's parent
//! checkpoint was committed, the same task id).
//!
//! Started on a thread that does not exist, it runs from fresh input; on a thread with
//! pending work it continues with [`Input::Continue`]; on a finished thread it only reports.
//! At the end it prints one JSON line:
//!
//! ```text
//! {"thread":"t1","steps":2000,"items":2000,"checksum":123,"executions":2003}
//! ```
//!
//! Exit codes: 0 done, 1 run or storage error, 2 bad arguments.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection};
use stategraph::checkpoints::sync::Unpoisoned;
use stategraph::checkpoints::{PostgresOptions, PostgresSaver, Saver, SqliteSaver};
use stategraph::prelude::*;

/// The thread state.
#[derive(State, Clone, Default, Debug)]
struct Tally {
    /// One item per executed step: the step index (append reducer).
    #[reduce(append)]
    items: Vec<u64>,
    /// Running checksum over the step indices (last value).
    checksum: u64,
}

/// The checksum after step `i` (0-based), given the one before it.
fn next_checksum(prev: u64, i: u64) -> u64 {
    prev.wrapping_mul(1_000_003).wrapping_add(i + 1)
}

const USAGE: &str = "usage: crash_resume --db FILE --thread ID --steps N \
                     [--durability sync|async|exit] [--ledger FILE] [--pg URL [--schema NAME]]";

/// Parsed command line.
#[derive(Debug)]
pub(crate) struct Args {
    pub(crate) db: PathBuf,
    ledger: PathBuf,
    thread: String,
    steps: u64,
    durability: Durability,
    /// A PostgreSQL URL: the checkpoints go there instead of `db`.
    pg: Option<String>,
    /// The schema of the PostgreSQL saver.
    schema: String,
}

/// A flag's value that must be text: not UTF-8 is a clear error, not a panic.
fn text_value(flag: &str, raw: OsString) -> Result<String, String> {
    raw.into_string().map_err(|raw| {
        format!(
            "{flag} must be valid UTF-8, got {:?}",
            raw.to_string_lossy()
        )
    })
}

/// `--durability`'s value.
fn durability_of(value: &str) -> Result<Durability, String> {
    match value {
        "sync" => Ok(Durability::Sync),
        "async" => Ok(Durability::Async),
        "exit" => Ok(Durability::Exit),
        other => Err(format!(
            "--durability must be sync, async or exit, got {other:?}"
        )),
    }
}

/// The flags `parse_args` knows.
const KNOWN: [&str; 7] = [
    "--db",
    "--ledger",
    "--thread",
    "--steps",
    "--durability",
    "--pg",
    "--schema",
];

/// The command line after the program name.
pub(crate) fn parse_args(mut it: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut db: Option<PathBuf> = None;
    let mut ledger: Option<PathBuf> = None;
    let mut thread: Option<String> = None;
    let mut steps: Option<u64> = None;
    let mut durability = Durability::Sync;
    let mut pg: Option<String> = None;
    let mut schema = "stategraph".to_owned();
    while let Some(flag) = it.next() {
        let Some(flag) = flag.to_str().map(str::to_owned) else {
            return Err(format!("unknown argument {:?}", flag.to_string_lossy()));
        };
        if flag == "--help" || flag == "-h" {
            return Err("help".to_owned());
        }
        if !KNOWN.contains(&flag.as_str()) {
            return Err(format!("unknown argument {flag:?}"));
        }
        let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        // A path may be any bytes the OS allows; every other value is text.
        match flag.as_str() {
            "--db" => {
                db = Some(PathBuf::from(raw));
                continue;
            }
            "--ledger" => {
                ledger = Some(PathBuf::from(raw));
                continue;
            }
            _ => {}
        }
        let value = text_value(&flag, raw)?;
        match flag.as_str() {
            "--pg" => pg = Some(value),
            "--schema" => schema = value,
            "--thread" => {
                if value.is_empty() {
                    return Err("--thread must not be empty".to_owned());
                }
                thread = Some(value);
            }
            "--steps" => {
                let n: u64 = value.parse().map_err(|_| {
                    format!("--steps must be a non-negative integer, got {value:?}")
                })?;
                if n > 1_000_000 {
                    return Err(format!("--steps must be at most 1000000, got {n}"));
                }
                steps = Some(n);
            }
            _ => durability = durability_of(&value)?,
        }
    }
    let db = db.ok_or("missing --db FILE")?;
    let thread = thread.ok_or("missing --thread ID")?;
    let steps = steps.ok_or("missing --steps N")?;
    let ledger = ledger.unwrap_or_else(|| {
        let mut name = db.clone().into_os_string();
        name.push(".executions");
        PathBuf::from(name)
    });
    Ok(Args {
        db,
        ledger,
        thread,
        steps,
        durability,
        pg,
        schema,
    })
}

/// Open the ledger and create its table.
/// Open the ledger; several processes starting on a new ledger at once race to create its
/// table, and the loser of that race is told "busy" without waiting (a stale read snapshot
/// cannot be upgraded to a write), so a busy set-up is tried again for up to 10 s.
fn open_ledger(path: &PathBuf) -> Result<Connection, rusqlite::Error> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match try_open_ledger(path) {
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn try_open_ledger(path: &PathBuf) -> Result<Connection, rusqlite::Error> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // A small log, kept small: the ledger must not eat a nearly full disk before the
    // checkpoint file does (the disk-full tests run this example on a tiny file system).
    conn.pragma_update(None, "wal_autocheckpoint", 64)?;
    conn.pragma_update(None, "journal_size_limit", 256 * 1024)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS executions (
             thread    TEXT NOT NULL,
             task_id   TEXT NOT NULL,
             step      INTEGER NOT NULL,
             superstep INTEGER NOT NULL,
             at        INTEGER NOT NULL
         );
         CREATE INDEX IF NOT EXISTS executions_thread ON executions(thread, step);",
    )?;
    Ok(conn)
}

fn count_executions(ledger: &Mutex<Connection>, thread: &str) -> Result<i64, rusqlite::Error> {
    let conn = ledger.lock().unpoisoned();
    conn.query_row(
        "SELECT COUNT(*) FROM executions WHERE thread = ?1",
        params![thread],
        |r| r.get(0),
    )
}

fn build_graph(
    steps: u64,
    ledger: Arc<Mutex<Connection>>,
) -> Result<CompiledGraph<Tally>, stategraph::CompileError> {
    let step = move |s: Arc<Tally>, ctx: NodeContext| {
        let ledger = ledger.clone();
        async move {
            let i = s.items.len() as u64;
            let checksum = next_checksum(s.checksum, i);
            let at = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_micros() as i64)
                .unwrap_or(0);
            let thread = ctx.thread().map(|t| t.to_string()).unwrap_or_default();
            // The side effect, recorded before the node returns: a kill after this line and
            // before the step's checkpoint commits makes the step run (and record) again.
            {
                let conn = ledger.lock().unpoisoned();
                conn.execute(
                    "INSERT INTO executions (thread, task_id, step, superstep, at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![thread, ctx.task_id().to_string(), i as i64, ctx.step(), at],
                )?;
            }
            Ok::<_, BoxError>(Tally::update().items(vec![i]).checksum(checksum))
        }
    };
    StateGraph::<Tally>::new()
        .add_node("step", step)
        .add_conditional_edges(START, move |s: &Tally| route(s, steps), ["step", END])
        .add_conditional_edges("step", move |s: &Tally| route(s, steps), ["step", END])
        .compile()
}

fn route(s: &Tally, steps: u64) -> &'static str {
    if (s.items.len() as u64) < steps {
        "step"
    } else {
        END
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let ledger =
        Arc::new(Mutex::new(open_ledger(&args.ledger).map_err(|e| {
            format!("cannot open ledger {}: {e}", args.ledger.display())
        })?));
    if let Some(url) = &args.pg {
        let options = PostgresOptions {
            schema: args.schema.clone(),
            ..PostgresOptions::default()
        };
        let saver = PostgresSaver::connect_with(url, options)
            .await
            .map_err(|e| format!("cannot open the PostgreSQL saver: {e}"))?;
        return run_thread(&args, Arc::new(saver), ledger).await;
    }
    let saver = SqliteSaver::open(&args.db)
        .map_err(|e| format!("cannot open checkpoint file {}: {e}", args.db.display()))?;
    let ran = run_thread(&args, Arc::new(saver.clone()), ledger).await;
    // Closing folds the log into the file; on a full disk it cannot, and says so even when
    // the run failed first: the main file alone does not hold the thread then.
    let closed = saver.close().map_err(|e| {
        format!(
            "the committed steps are in {} and its -wal, not in the file alone: {e}",
            args.db.display()
        )
    });
    match (ran, closed) {
        (Err(run), Err(close)) => Err(format!("{run}; {close}").into()),
        (Err(e), Ok(())) => Err(e),
        (Ok(()), closed) => Ok(closed?),
    }
}

/// Run the thread to its end (or go on from where it stopped) and print the result line.
async fn run_thread(
    args: &Args,
    saver: Arc<dyn Saver>,
    ledger: Arc<Mutex<Connection>>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let graph = build_graph(args.steps, ledger.clone())?.with_checkpointer(saver);
    let config = RunConfig::new()
        .thread(args.thread.clone())
        .durability(args.durability)
        .recursion_limit(usize::try_from(args.steps)?.saturating_add(16));

    let snapshot = graph.get_state(&args.thread, None).await?;
    let state = match snapshot {
        None => graph.invoke(Tally::update(), &config).await?.state,
        Some(snap) if !snap.next.is_empty() => graph.invoke(Input::Continue, &config).await?.state,
        Some(snap) => snap.values,
    };

    let items = state.items.len() as u64;
    let executions = count_executions(&ledger, &args.thread)?;
    let line = serde_json::json!({
        "thread": args.thread,
        "steps": args.steps,
        "items": items,
        "checksum": state.checksum,
        "executions": executions,
    });
    println!("{line}");
    if items != args.steps {
        return Err(format!(
            "thread {:?} ended with {items} items, not {} (started with another --steps?)",
            args.thread, args.steps
        )
        .into());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(a) => a,
        Err(e) if e == "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("crash_resume: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crash_resume: {e}");
            ExitCode::from(1)
        }
    }
}
