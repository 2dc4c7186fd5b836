//! Random kill sweep (design doc reliability.md, R-01 / R-05 / R-06), driven as a separate
//! process: the `crash_resume` example runs a long self-loop on a SQLite checkpoint file; the
//! test SIGKILLs it at seeded random instants, starts it again with the same arguments, and
//! checks after every kill and at the end:
//!
//! - `PRAGMA integrity_check` on the checkpoint file is `ok` (every kill, read-only open);
//! - a process never starts past the last step an earlier process ran (no step committed
//!   without running);
//! - the newest checkpoint of the thread is a prefix of the uninterrupted run: items
//!   `0..c` and the reference checksum after `c` steps, never a torn state (every 2nd kill,
//!   through the engine's own `get_state`);
//! - `sync`: no acknowledged step is lost (the node for step `m` ran, so the checkpoint with
//!   `m` items was committed), at most one re-execution per kill, and every re-execution of a
//!   step carries the task id of its first execution;
//! - `async`: at most `MAX_INFLIGHT + 2` steps lost per kill (the checkpoints the engine
//!   lets be in flight, plus the step whose node just ran); lost steps are recomputed;
//! - the final items and checksum equal the uninterrupted reference run's, and
//!   re-executions (ledger rows minus steps) are at most the number of kills (`sync`) or
//!   `MAX_INFLIGHT + 2` per kill (`async`).
//!
//! The same file holds the failpoint crash matrices: the SQLite writer aborts the
//! process at named points (see `stategraph_checkpoints`' failpoint module) at every hit of a
//! run, for the example's steps and for a fork, a prune and a thread copy.
//!
//! Kill count: `STATEGRAPH_KILLS=N` (default 50 per test, the PR tier of R-01; the nightly
//! tier is `STATEGRAPH_KILLS=200`). Seed: `STATEGRAPH_KILL_SEED=S` (default a fixed seed per
//! test). A thread that finishes before enough kills is checked and the sweep goes on with a
//! new thread in the same file. `STATEGRAPH_KILL_VERBOSE=1` prints one line per kill.
#![cfg(unix)]
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use stategraph::checkpoints::SqliteSaver;
use stategraph::prelude::*;
use stategraph::run::MAX_INFLIGHT;
use stategraph_tests::kill::{self, Job, Report, Rng};
use stategraph_tests::tally::{self, next_checksum, Tally};

/// Steps per thread under `sync` (each step waits for a commit with `synchronous=FULL`).
const SYNC_STEPS: u64 = 400;
/// Steps per thread under `async` (steps share commits, so a process gets much further).
const ASYNC_STEPS: u64 = 2000;
/// Kill delays after spawn, in milliseconds (inclusive).
const DELAY_MS: (u64, u64) = (2, 40);

/// The example's graph, with the SQLite file `db` (used here to read what the example wrote;
/// the state is the example's, and stored `Vec` and `List` fields read the same).
fn reader_graph(db: &Path, steps: u64) -> CompiledGraph<Tally> {
    tally::graph(steps)
        .expect("tally graph compiles")
        .with_checkpointer(Arc::new(
            SqliteSaver::open(db).expect("open checkpoint file"),
        ))
}

fn env_u64(name: &str, default: u64) -> u64 {
    kill::env_u64(name, default).unwrap_or_else(|e| panic!("{e}"))
}

/// Build the example once (same profile as this test) and return its path.
fn example_binary() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        stategraph_tests::build_target("stategraph-examples", "--example", "crash_resume")
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The report on the last line of `stdout`.
fn parse_report(stdout: &str, thread: &str) -> Report {
    kill::parse_report(stdout, thread).unwrap_or_else(|e| panic!("{e}\nstdout: {stdout}"))
}

fn spawn(bin: &Path, db: &Path, thread: &str, steps: u64, durability: &str) -> std::process::Child {
    spawn_env(bin, db, thread, steps, durability, &[])
}

fn spawn_env(
    bin: &Path,
    db: &Path,
    thread: &str,
    steps: u64,
    durability: &str,
    env: &[(&str, &str)],
) -> std::process::Child {
    let job = Job {
        db,
        thread,
        steps,
        durability,
    };
    kill::spawn_with(bin, &job, env).unwrap_or_else(|e| panic!("{e}"))
}

/// Run to completion without a kill.
fn run_to_end(bin: &Path, db: &Path, thread: &str, steps: u64, durability: &str) -> Report {
    let out = spawn(bin, db, thread, steps, durability)
        .wait_with_output()
        .expect("wait crash_resume");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "crash_resume failed ({}): {}\n{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    parse_report(&stdout, thread)
}

/// `PRAGMA integrity_check` on the checkpoint file, read-only so that the next process
/// finds the WAL as the kill left it. A kill while the first process created the file (in
/// rollback-journal mode, before `journal_mode=WAL` took effect) leaves a hot journal that
/// only a writer may roll back (`SQLITE_READONLY_ROLLBACK`); then the check opens the file
/// read-write, as the next process would, and `rolled_back` says so.
fn integrity_check(db: &Path) -> (String, bool) {
    if !db.exists() {
        // Killed before the saver created the file: nothing to check.
        return ("ok".to_owned(), false);
    }
    let check = |flags: OpenFlags| -> rusqlite::Result<String> {
        let conn = Connection::open_with_flags(db, flags)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        let rows: Vec<String> = conn
            .prepare("PRAGMA integrity_check")?
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<_, _>>()?;
        Ok(rows.join("; "))
    };
    match check(OpenFlags::SQLITE_OPEN_READ_ONLY) {
        Ok(result) => (result, false),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK =>
        {
            let result = check(OpenFlags::SQLITE_OPEN_READ_WRITE)
                .unwrap_or_else(|e| panic!("integrity_check (read-write): {e}"));
            (result, true)
        }
        Err(e) => panic!("integrity_check: {e}"),
    }
}

/// The ledger (the example's `executions` side table).
struct Ledger(Connection);

impl Ledger {
    fn open(db: &Path) -> Self {
        let mut name = db.as_os_str().to_owned();
        name.push(".executions");
        let conn = Connection::open(PathBuf::from(name)).expect("open ledger");
        conn.busy_timeout(Duration::from_secs(10))
            .expect("busy timeout");
        Ledger(conn)
    }

    fn scalar(&self, sql: &str, thread: &str) -> i64 {
        // Before the first child creates the table, everything counts zero.
        self.0
            .query_row(sql, [thread], |r| r.get::<_, Option<i64>>(0))
            .map(|v| v.unwrap_or(-1))
            .unwrap_or(-1)
    }

    /// Newest row id (the boundary between two processes' rows).
    fn last_rowid(&self) -> i64 {
        self.0
            .query_row("SELECT MAX(rowid) FROM executions", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// Rows of `thread` after row id `after`: (count, max step, min step).
    fn since(&self, thread: &str, after: i64) -> (i64, i64, i64) {
        self.0
            .query_row(
                "SELECT COUNT(*), MAX(step), MIN(step) FROM executions
                 WHERE thread = ?1 AND rowid > ?2",
                rusqlite::params![thread, after],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<i64>>(1)?.unwrap_or(-1),
                        r.get::<_, Option<i64>>(2)?.unwrap_or(-1),
                    ))
                },
            )
            .unwrap_or((0, -1, -1))
    }

    /// Steps of `thread` executed under more than one task id.
    fn steps_with_several_keys(&self, thread: &str) -> i64 {
        self.scalar(
            "SELECT COUNT(*) FROM (SELECT step FROM executions WHERE thread = ?1
             GROUP BY step HAVING COUNT(DISTINCT task_id) > 1)",
            thread,
        )
    }
}

/// What happened at one kill (for failure messages).
#[derive(Debug, Clone)]
#[allow(dead_code)] // read through Debug
struct KillLog {
    kill: u64,
    thread: String,
    delay_ms: u64,
    /// Ledger rows the killed process added.
    rows: i64,
    /// Highest step index the killed process executed (-1: none).
    max_step: i64,
    /// Items in the newest checkpoint after the kill (None: not read at this kill).
    committed: Option<u64>,
}

#[derive(Debug, Default)]
struct Summary {
    kills: u64,
    /// Kills that landed after the process had executed at least one step.
    kills_mid_run: u64,
    threads: u64,
    re_executions: u64,
    max_re_executions_per_kill: i64,
    max_lost_per_kill: i64,
    steps_with_several_keys: i64,
    /// Kills that left a hot rollback journal (while the file was being created).
    hot_journals: u64,
}

/// The checks on a thread that ran to its end.
struct Finished<'a> {
    thread: &'a str,
    kills: u64,
    steps: u64,
    reference: u64,
    sync: bool,
    context: String,
}

impl Finished<'_> {
    fn verify(&self, report: Report, ledger: &Ledger, summary: &mut Summary) {
        let (thread, ctx) = (self.thread, &self.context);
        assert_eq!(report.items, self.steps, "items of {thread}; {ctx}");
        assert_eq!(
            report.checksum, self.reference,
            "checksum of {thread}; {ctx}"
        );
        assert!(
            report.executions >= self.steps,
            "{thread}: {} executions recorded for {} steps; {ctx}",
            report.executions,
            self.steps
        );
        let re = report.executions - self.steps;
        // sync: only the step in flight at a kill runs again. async: also the steps whose
        // checkpoints were still queued.
        let bound = if self.sync {
            self.kills
        } else {
            self.kills * ASYNC_LOSS_BOUND
        };
        assert!(
            re <= bound,
            "{thread}: {re} re-executions after {} kills (bound {bound}); {ctx}",
            self.kills
        );
        summary.re_executions += re;
        summary.threads += 1;
        let keys = ledger.steps_with_several_keys(thread);
        // Task ids derive from the (durable) input checkpoint and the step: a step computed
        // again, under either durability, has the id it had the first time.
        assert_eq!(
            keys, 0,
            "{thread}: a re-executed step got another task id; {ctx}"
        );
        summary.steps_with_several_keys += keys.max(0);
    }
}

/// Most steps a kill may lose under `async`: the checkpoints in flight (the engine's
/// `MAX_INFLIGHT`, one more while the oldest is awaited) plus the step whose node just ran.
const ASYNC_LOSS_BOUND: u64 = MAX_INFLIGHT as u64 + 2;

fn sweep(durability: &str, steps: u64, default_seed: u64) -> Summary {
    let started = Instant::now();
    let kills_wanted = env_u64("STATEGRAPH_KILLS", 50);
    let seed = env_u64("STATEGRAPH_KILL_SEED", default_seed);
    let sync = durability == "sync";
    let dir = tempfile::tempdir().expect("tempdir");
    // A private copy: a concurrent `cargo build`/`cargo test` may replace the shared one.
    let bin = dir.path().join("crash_resume");
    std::fs::copy(example_binary(), &bin).expect("copy the example binary");

    // The uninterrupted reference run, checked against the formula.
    let reference = run_to_end(&bin, &dir.path().join("ref.db"), "ref", steps, durability);
    let mut checksums = vec![0u64];
    for i in 0..steps {
        let prev = checksums[i as usize];
        checksums.push(next_checksum(prev, i));
    }
    assert_eq!(
        reference,
        Report {
            steps,
            items: steps,
            checksum: checksums[steps as usize],
            executions: steps,
        },
        "uninterrupted reference run"
    );

    let db = dir.path().join("kill.db");
    let ledger = Ledger::open(&db);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut rng = Rng(seed);
    let mut summary = Summary::default();
    let mut log: Vec<KillLog> = Vec::new();
    let mut thread_no = 0u64;
    let mut thread_kills = 0u64;
    let ctx = |log: &[KillLog]| {
        format!(
            "durability {durability}, seed {seed}, last kills: {:#?}",
            &log[log.len().saturating_sub(3)..]
        )
    };

    while summary.kills < kills_wanted {
        let thread = format!("t{thread_no}");
        let before = ledger.last_rowid();
        let (_, prev_max, _) = ledger.since(&thread, 0);
        let delay_ms = rng.between(DELAY_MS.0, DELAY_MS.1);
        let mut child = spawn(&bin, &db, &thread, steps, durability);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let exited_by_itself = child.try_wait().expect("try_wait").is_some();
        if !exited_by_itself {
            child.kill().expect("kill");
        }
        let status: ExitStatus = child.wait().expect("wait");
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut s) = child.stdout.take() {
            s.read_to_string(&mut stdout).expect("read stdout");
        }
        if let Some(mut s) = child.stderr.take() {
            s.read_to_string(&mut stderr).expect("read stderr");
        }
        let (rows, max_step, min_step) = ledger.since(&thread, before);
        // Re-executions by this process: steps it ran that an earlier process had run.
        if rows > 0 {
            assert!(
                min_step <= prev_max + 1,
                "{thread}: a process started at step {min_step}, but earlier processes only \
                 ran up to step {prev_max}: steps were committed without running; {}",
                ctx(&log)
            );
            let again = (prev_max - min_step + 1).max(0);
            summary.max_re_executions_per_kill = summary.max_re_executions_per_kill.max(again);
            let bound = if sync { 1 } else { ASYNC_LOSS_BOUND as i64 };
            assert!(
                again <= bound,
                "{thread}: a process re-ran {again} steps (from {min_step}, earlier \
                 processes reached {prev_max}; bound {bound}); {}",
                ctx(&log)
            );
        }
        if status.signal() != Some(9) {
            // It finished (possibly just before the kill).
            assert!(
                status.success(),
                "crash_resume on {thread} failed ({status}) after {thread_kills} kills: \
                 {stdout}\n{stderr}\n{}",
                ctx(&log)
            );
            let check = Finished {
                thread: &thread,
                kills: thread_kills,
                steps,
                reference: reference.checksum,
                sync,
                context: ctx(&log),
            };
            check.verify(parse_report(&stdout, &thread), &ledger, &mut summary);
            thread_no += 1;
            thread_kills = 0;
            continue;
        }
        summary.kills += 1;
        thread_kills += 1;
        if rows > 0 {
            summary.kills_mid_run += 1;
        }
        let (integrity, rolled_back) = integrity_check(&db);
        summary.hot_journals += u64::from(rolled_back);
        assert_eq!(
            integrity,
            "ok",
            "integrity_check after kill {}; {}",
            summary.kills,
            ctx(&log)
        );
        let mut entry = KillLog {
            kill: summary.kills,
            thread: thread.clone(),
            delay_ms,
            rows,
            max_step,
            committed: None,
        };
        if summary.kills % 2 == 0 {
            let graph = reader_graph(&db, steps);
            let snap = rt
                .block_on(graph.get_state(&thread, None))
                .unwrap_or_else(|e| panic!("get_state after kill: {e}; {}", ctx(&log)));
            let executed = ledger.since(&thread, 0).1;
            if snap.is_none() {
                // Nothing stored yet: under sync no node may have run (the input and start
                // checkpoints are committed before the first node body).
                let bound = if sync {
                    -1
                } else {
                    ASYNC_LOSS_BOUND as i64 - 1
                };
                assert!(
                    executed <= bound,
                    "after kill {}: no checkpoint of {thread}, but the ledger reached step \
                     {executed}; {}",
                    summary.kills,
                    ctx(&log)
                );
            }
            if let Some(snap) = snap {
                let c = snap.values.items.len() as u64;
                let expected: Vec<u64> = (0..c).collect();
                assert!(
                    snap.values.items == expected && snap.values.checksum == checksums[c as usize],
                    "torn or wrong checkpoint after kill: {c} items, checksum {} \
                     (expected {}); {}",
                    snap.values.checksum,
                    checksums[c as usize],
                    ctx(&log)
                );
                entry.committed = Some(c);
                // Steps whose node ran (and recorded) but whose result is not committed.
                let lost = executed + 1 - c as i64;
                summary.max_lost_per_kill = summary.max_lost_per_kill.max(lost);
                let bound = if sync { 1 } else { ASYNC_LOSS_BOUND as i64 };
                assert!(
                    (0..=bound).contains(&lost),
                    "after kill {}: the ledger reached step {executed} but the thread holds \
                     {c} items ({lost} steps lost, bound {bound}); {}",
                    summary.kills,
                    ctx(&log)
                );
            }
            // Dropping the last clone closes the saver (its writer thread ends).
            drop(graph);
        }
        if std::env::var_os("STATEGRAPH_KILL_VERBOSE").is_some() {
            eprintln!("{durability} {entry:?} at {:?}", started.elapsed());
        }
        log.push(entry);
    }
    // Finish the current thread without kills.
    let thread = format!("t{thread_no}");
    let report = run_to_end(&bin, &db, &thread, steps, durability);
    let check = Finished {
        thread: &thread,
        kills: thread_kills,
        steps,
        reference: reference.checksum,
        sync,
        context: ctx(&log),
    };
    check.verify(report, &ledger, &mut summary);
    assert_eq!(integrity_check(&db).0, "ok", "final integrity_check");
    eprintln!(
        "crash_resume {durability}: seed {seed}, {} kills ({} mid-run) over {} threads, \
         {} re-executions (max {} per kill), max {} steps lost per kill, \
         {} steps with several task ids, {} hot journals, {:.1} s",
        summary.kills,
        summary.kills_mid_run,
        summary.threads,
        summary.re_executions,
        summary.max_re_executions_per_kill,
        summary.max_lost_per_kill,
        summary.steps_with_several_keys,
        summary.hot_journals,
        started.elapsed().as_secs_f64()
    );
    summary
}

#[test]
fn kill_sweep_sync_loses_nothing_acknowledged() {
    let s = sweep("sync", SYNC_STEPS, 0x5EED_0001);
    assert!(s.kills >= env_u64("STATEGRAPH_KILLS", 50));
}

#[test]
fn kill_sweep_async_recomputes_lost_steps() {
    let s = sweep("async", ASYNC_STEPS, 0x5EED_0002);
    assert!(s.kills >= env_u64("STATEGRAPH_KILLS", 50));
}

/// Several processes write distinct threads of one checkpoint file at the same time: every
/// run finishes with the reference result and no busy error reaches a caller (R-17, process
/// half).
#[test]
fn several_processes_share_one_checkpoint_file() {
    let bin = example_binary();
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("shared.db");
    let steps = 150;
    let reference = run_to_end(
        &bin,
        &dir.path().join("reference.db"),
        "reference",
        steps,
        "sync",
    );
    for durability in ["sync", "async"] {
        let children: Vec<(String, std::process::Child)> = (0..4)
            .map(|i| {
                let thread = format!("{durability}-{i}");
                let child = spawn(&bin, &db, &thread, steps, durability);
                (thread, child)
            })
            .collect();
        for (thread, child) in children {
            let out = child.wait_with_output().expect("wait crash_resume");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{thread} failed ({}): {stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            let report = parse_report(&stdout, &thread);
            assert_eq!(
                (report.items, report.checksum),
                (reference.items, reference.checksum),
                "{thread}"
            );
            assert_eq!(report.executions, steps, "{thread}: no step ran twice");
        }
    }
    assert_eq!(integrity_check(&db).0, "ok");
}

/// A failpoint ends its process with `abort` (SIGABRT), as a crash would.
fn assert_aborted(out: &std::process::Output, ctx: &str) {
    assert_eq!(
        out.status.signal(),
        Some(6),
        "{ctx}: expected an abort, got {}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The failpoint crash matrix (reliability.md R-02): the writer aborts the process at a named
/// point — before `BEGIN`, after a checkpoint's values, after its row, before `COMMIT`, after
/// `COMMIT` but before the run hears of it — at its first, second, … hit, until a run gets
/// through without reaching it. After every crash: `integrity_check` is ok; the newest
/// checkpoint is a prefix of the reference run that lost at most the step in flight (`sync`;
/// none at all once `COMMIT` returned) or the checkpoints in flight (`async`); and resuming
/// ends with the reference items and checksum, each re-executed step under its first task id.
///
/// Steps per run: `STATEGRAPH_FAILPOINT_STEPS` (default 50: about 370 crashes, R-02's matrix).
/// Failpoints exist in debug builds (and with the `failpoints` feature of
/// `stategraph-checkpoints`), so a release-profile run of this test only says it skipped.
#[test]
fn failpoint_matrix_loses_at_most_the_step_in_flight() {
    if !cfg!(debug_assertions) {
        eprintln!("failpoints are compiled out of release builds: matrix skipped");
        return;
    }
    const POINTS: [&str; 5] = [
        "group.before_begin",
        "put.after_values",
        "put.after_row",
        "group.before_commit",
        "group.after_commit",
    ];
    let bin = example_binary();
    let steps = env_u64("STATEGRAPH_FAILPOINT_STEPS", 50);
    let reference = (0..steps).fold(0, next_checksum);
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("failpoints.db");
    let ledger = Ledger::open(&db);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let graph = reader_graph(&db, steps);
    let mut crashes = 0;
    for durability in ["sync", "async"] {
        let sync = durability == "sync";
        for point in POINTS {
            let mut reached = 0;
            for n in 1..=(4 * steps + 10) {
                let thread = format!("{durability}-{point}-{n}");
                let spec = format!("{point}@{n}");
                let out = spawn_env(
                    &bin,
                    &db,
                    &thread,
                    steps,
                    durability,
                    &[("STATEGRAPH_FAILPOINT", spec.as_str())],
                )
                .wait_with_output()
                .expect("wait crash_resume");
                let ctx = format!("{spec} under {durability}");
                if out.status.success() {
                    // The point is reached fewer than n times in a run: the matrix of this
                    // point is complete.
                    let report = parse_report(&String::from_utf8_lossy(&out.stdout), &thread);
                    assert_eq!((report.items, report.checksum), (steps, reference), "{ctx}");
                    break;
                }
                assert_aborted(&out, &ctx);
                reached = n;
                crashes += 1;
                let (integrity, _) = integrity_check(&db);
                assert_eq!(integrity, "ok", "{ctx}");
                let executed = u64::try_from(ledger.since(&thread, 0).1 + 1).unwrap_or(0);
                let committed = rt
                    .block_on(graph.get_state(&thread, None))
                    .unwrap_or_else(|e| panic!("get_state after {ctx}: {e}"))
                    .map_or(0, |snap| {
                        let items = &snap.values.items;
                        assert!(
                            items.iter().copied().eq(0..items.len() as u64),
                            "{ctx}: torn items {items:?}"
                        );
                        assert_eq!(
                            snap.values.checksum,
                            (0..items.len() as u64).fold(0, next_checksum),
                            "{ctx}: checksum of a prefix"
                        );
                        items.len() as u64
                    });
                assert!(
                    committed <= executed,
                    "{ctx}: {committed} committed, {executed} ran"
                );
                let lost = executed - committed;
                let bound = match (sync, point) {
                    (true, "group.after_commit") => 0,
                    (true, _) => 1,
                    (false, _) => ASYNC_LOSS_BOUND,
                };
                assert!(
                    lost <= bound,
                    "{ctx}: {lost} executed steps lost (bound {bound})"
                );
                let report = run_to_end(&bin, &db, &thread, steps, durability);
                assert_eq!((report.items, report.checksum), (steps, reference), "{ctx}");
                assert!(
                    report.executions <= steps + bound,
                    "{ctx}: {} executions for {steps} steps",
                    report.executions
                );
                assert_eq!(
                    ledger.steps_with_several_keys(&thread),
                    0,
                    "{ctx}: new task id"
                );
            }
            assert!(reached >= 1, "{point} was never reached under {durability}");
        }
    }
    assert_eq!(integrity_check(&db).0, "ok");
    eprintln!(
        "failpoint matrix: {crashes} crashes over {} points",
        POINTS.len()
    );
}

/// Steps of the thread the fork/prune/copy child runs.
const CHILD_STEPS: u64 = 12;

/// The child process of [`failpoint_matrix_of_fork_prune_and_copy`]: on the file named by
/// `STATEGRAPH_FAILPOINT_CHILD_DB`, run thread `main` to its end, fork it once from the
/// checkpoint holding 5 items (the new branch runs to the end), prune it to its newest 6
/// checkpoints, and copy it to `copy`. Every phase is idempotent, so a run after a crash
/// finishes what the crashed one left.
#[test]
#[ignore = "a child process of failpoint_matrix_of_fork_prune_and_copy"]
fn failpoint_child_runs_fork_prune_copy() {
    use stategraph::checkpoints::{ListOptions, Retention, Saver, Source, ThreadId};
    let db = std::env::var("STATEGRAPH_FAILPOINT_CHILD_DB")
        .expect("run by failpoint_matrix_of_fork_prune_and_copy");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let saver = Arc::new(SqliteSaver::open(&db)?);
        let g = tally::graph(CHILD_STEPS)?.with_checkpointer(saver.clone());
        let cfg = RunConfig::new().thread("main").durability(Durability::Sync);
        match g.get_state("main", None).await? {
            None => {
                g.invoke(Tally::update(), &cfg).await?;
            }
            Some(s) if (s.values.items.len() as u64) < CHILD_STEPS => {
                g.invoke(Input::Continue, &cfg).await?;
            }
            Some(_) => {}
        }
        let history = g.get_state_history("main", ListOptions::default()).await?;
        // Forked already if a fork checkpoint is there, or if the checkpoint to fork from is
        // gone: only the prune (which comes after the fork) removes it.
        let forked = history.iter().any(|s| s.checkpoint.source == Source::Fork);
        let from = history.iter().find(|s| s.values.items.len() == 5);
        if let (false, Some(at)) = (forked, from) {
            g.invoke(Input::Continue, &cfg.clone().checkpoint(at.checkpoint.id))
                .await?;
        }
        let main = ThreadId::new("main")?;
        saver.prune(&main, Retention::KeepLast(6)).await?;
        if g.get_state("copy", None).await?.is_none() {
            saver.copy_thread(&main, &ThreadId::new("copy")?).await?;
        }
        println!("child done");
        Ok::<(), BoxError>(())
    })
    .expect("child run");
}

/// Every checkpoint of `thread` in `db` loads, through the history and on its own, as a
/// prefix of the reference run, and names a parent that is in the thread (or none).
fn verify_thread(db: &Path, thread: &str, ctx: &str) -> Vec<u64> {
    use stategraph::checkpoints::ListOptions;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let g = reader_graph(db, CHILD_STEPS);
    rt.block_on(async {
        let history = g
            .get_state_history(thread, ListOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{ctx}: history of {thread}: {e}"));
        let ids: Vec<_> = history.iter().map(|s| s.checkpoint.id).collect();
        let mut lens = Vec::new();
        for snap in &history {
            let items = &snap.values.items;
            let k = items.len() as u64;
            assert!(
                items.iter().copied().eq(0..k),
                "{ctx}: {thread} items {items:?}"
            );
            assert_eq!(snap.values.checksum, (0..k).fold(0, next_checksum), "{ctx}");
            if let Some(p) = snap.checkpoint.parent {
                assert!(ids.contains(&p), "{ctx}: {thread}: parent {p} is missing");
            }
            let alone = g
                .get_state(thread, Some(snap.checkpoint.id))
                .await
                .unwrap_or_else(|e| panic!("{ctx}: get_state {}: {e}", snap.checkpoint.id))
                .expect("listed checkpoint loads");
            assert_eq!(alone.values.items, *items, "{ctx}: loaded alone");
            lens.push(k);
        }
        lens
    })
}

/// The failpoint matrix for fork, prune and copy (the rest of R-02): a child process (this
/// test binary, running [`failpoint_child_runs_fork_prune_copy`]) aborts at each hit of each
/// point, on a fresh file per case; after the crash the file passes `integrity_check` and every
/// checkpoint of both threads loads as a prefix of the reference run with its parent present
/// (a prune or a copy is all or nothing); then a clean child finishes the work and the end
/// state is the same as without a crash.
#[test]
fn failpoint_matrix_of_fork_prune_and_copy() {
    if !cfg!(debug_assertions) {
        eprintln!("failpoints are compiled out of release builds: matrix skipped");
        return;
    }
    const POINTS: [&str; 6] = [
        "put.after_values",
        "put.after_row",
        "group.before_commit",
        "group.after_commit",
        "prune.after_delete",
        "copy.after_checkpoints",
    ];
    let exe = std::env::current_exe().expect("test binary");
    let child = |db: &Path, spec: Option<&str>| {
        let mut cmd = Process::new(&exe);
        cmd.args([
            "--exact",
            "failpoint_child_runs_fork_prune_copy",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("STATEGRAPH_FAILPOINT_CHILD_DB", db)
        .env_remove("STATEGRAPH_FAILPOINT")
        .stdin(Stdio::null());
        if let Some(spec) = spec {
            cmd.env("STATEGRAPH_FAILPOINT", spec);
        }
        cmd.output().expect("run child")
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut crashes = 0;
    for point in POINTS {
        let mut reached = 0;
        for n in 1..=200u64 {
            let db = dir.path().join(format!("{point}-{n}.db"));
            let spec = format!("{point}@{n}");
            let out = child(&db, Some(&spec));
            let stdout = String::from_utf8_lossy(&out.stdout);
            if out.status.success() {
                assert!(stdout.contains("child done"), "{spec}: {stdout}");
                break;
            }
            assert_aborted(&out, &spec);
            reached = n;
            crashes += 1;
            assert_eq!(integrity_check(&db).0, "ok", "{spec}");
            verify_thread(&db, "main", &spec);
            verify_thread(&db, "copy", &spec);
            let out = child(&db, None);
            assert!(
                out.status.success(),
                "{spec}: the clean child failed: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(integrity_check(&db).0, "ok", "{spec}");
            let main = verify_thread(&db, "main", &spec);
            let copy = verify_thread(&db, "copy", &spec);
            assert_eq!(main.len(), 6, "{spec}: pruned to 6: {main:?}");
            assert_eq!(main.first(), Some(&CHILD_STEPS), "{spec}: head of main");
            assert_eq!(copy, main, "{spec}: the copy is the pruned thread");
        }
        assert!(reached >= 1, "{point} was never reached");
    }
    eprintln!("fork/prune/copy failpoint matrix: {crashes} crashes");
}
