//! The kill soak (issue 18): the `crash_resume` example SIGKILLed at seeded random instants,
//! alternating between a `sync` and an `async` thread written to the same checkpoint files,
//! every kill landing on a running process (a process that finishes before its kill is
//! checked and a fresh thread takes its place; only kills that landed count). After every
//! kill:
//!
//! - the thread's newest checkpoint is a prefix of the uninterrupted run (items `0..c` and the
//!   reference checksum after `c`), read through a read-only saver;
//! - nothing is lost beyond the bound of docs/design.md's durability section: the steps whose
//!   node ran (the ledger row is written before the node returns) but whose checkpoint is not
//!   committed are at most 1 under `sync` (the running step), and at most `MAX_INFLIGHT` + 1
//!   under `async` (the 64 checkpoints in flight and the running step; while a 65th waits for
//!   the oldest, no step runs);
//! - `inspect::verify` (what `stategraph verify` runs: SQLite's `integrity_check`, every
//!   stored hash, every parent link, every checkpoint loaded by its delta) finds no problem.
//!
//! A thread that reaches its end must hold exactly the uninterrupted run's items and checksum,
//! and the file must verify. Files are replaced by a fresh one every few finished threads, so
//! a verify after each kill stays cheap.
//!
//! `STATEGRAPH_SOAK_KILLS=N` (default 20) sets the kills, `STATEGRAPH_SOAK_SEED=S` the seed;
//! the soak of the issue is `STATEGRAPH_SOAK_KILLS=1000` (see README's long runs).
//! `STATEGRAPH_KILL_VERBOSE=1` prints one line per kill.
#![cfg(unix)]
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stategraph::checkpoints::{inspect, CheckpointError, SqliteSaver};
use stategraph::run::MAX_INFLIGHT;
use stategraph_tests::kill::{self, env_u64, Job, Ledger, Rng};
use stategraph_tests::tally;

/// Kill delays after spawn, in milliseconds (inclusive).
const DELAY_MS: (u64, u64) = (2, 40);
/// Finished threads per checkpoint file before the next thread starts a fresh file.
const THREADS_PER_FILE: u64 = 6;

/// One durability's side of the soak: its current thread and what its kills cost.
#[derive(Debug)]
struct Lane {
    durability: &'static str,
    steps: u64,
    /// Steps a kill may lose (node ran, checkpoint not committed).
    bound: i64,
    /// The current thread's number and file.
    thread_no: u64,
    db: PathBuf,
    kills: u64,
    /// Kills after which the ledger showed the killed process had run a step.
    kills_mid_run: u64,
    threads: u64,
    max_lost: i64,
}

impl Lane {
    fn new(durability: &'static str, steps: u64, bound: i64, db: PathBuf) -> Self {
        Lane {
            durability,
            steps,
            bound,
            thread_no: 0,
            db,
            kills: 0,
            kills_mid_run: 0,
            threads: 0,
            max_lost: 0,
        }
    }

    fn thread(&self) -> String {
        format!("{}-{}", self.durability, self.thread_no)
    }
}

/// Where the soak is: its files and runtime, for the checks.
struct Soak {
    dir: tempfile::TempDir,
    bin: PathBuf,
    rt: tokio::runtime::Runtime,
    /// Threads finished over both lanes (which file new threads go to).
    finished: u64,
    verifies: u64,
    /// Kills that landed before a file was created or while it was.
    creations_cut_short: u64,
}

impl Soak {
    fn file(&self) -> PathBuf {
        self.dir
            .path()
            .join(format!("soak-{}.db", self.finished / THREADS_PER_FILE))
    }

    /// `inspect::verify` finds no problem in `db`.
    fn verify(&mut self, db: &Path, context: &str) {
        let report = self
            .rt
            .block_on(inspect::verify(db))
            .unwrap_or_else(|e| panic!("verify {}: {e}; {context}", db.display()));
        assert!(
            report.is_ok(),
            "verify found problems: {:?}; {context}",
            report.problems
        );
        self.verifies += 1;
    }

    /// Items in the newest checkpoint of `thread` (a prefix of the uninterrupted run), `None`
    /// when it has none; `Err` when the file's creation was cut short: the file is not there
    /// yet, its tables are not committed, or a hot journal needs a writer to roll it back
    /// (the next process does).
    fn committed(&self, db: &Path, thread: &str, steps: u64) -> Result<Option<u64>, String> {
        if !db.exists() {
            return Err(format!("{}: not created yet", db.display()));
        }
        let saver = match SqliteSaver::open_read_only(db) {
            Ok(s) => s,
            Err(e) if e.to_string().contains("last write was cut short") => {
                return Err(e.to_string())
            }
            Err(e @ CheckpointError::Integrity { .. }) if e.to_string().contains("no sg_meta") => {
                return Err(e.to_string())
            }
            Err(e) => panic!("open {} read-only: {e}", db.display()),
        };
        let graph = tally::graph(steps)
            .expect("tally graph")
            .with_checkpointer(Arc::new(saver));
        let snap = self
            .rt
            .block_on(graph.get_state(thread, None))
            .unwrap_or_else(|e| panic!("get_state of {thread}: {e}"));
        Ok(snap.map(|s| tally::check(&s.values, thread).unwrap_or_else(|e| panic!("{e}"))))
    }
}

/// A process of `lane` ended by itself: it must have finished the thread exactly as an
/// uninterrupted run does, and its file must verify. The lane moves on to a fresh thread.
fn finished(soak: &mut Soak, lane: &mut Lane, out: std::process::Output, context: &str) {
    let thread = lane.thread();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "crash_resume on {thread} failed ({}): {stdout}\n{}; {context}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report = kill::parse_report(&stdout, &thread).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (report.items, report.checksum),
        (lane.steps, tally::reference_checksum(lane.steps)),
        "{thread} resumed to another state than an uninterrupted run; {context}"
    );
    let db = lane.db.clone();
    soak.verify(&db, context);
    lane.threads += 1;
    lane.thread_no += 1;
    soak.finished += 1;
    lane.db = soak.file();
}

/// The highest step of `thread` the ledger beside `db` records (-1: none).
fn executed(db: &Path, thread: &str) -> i64 {
    Ledger::open(db).map_or(-1, |l| l.max_step(thread))
}

/// After a kill of `lane`'s process, which started when the ledger was at step `from`: the
/// committed prefix, the loss bound, verify.
fn after_kill(soak: &mut Soak, lane: &mut Lane, from: i64, context: &str) {
    let thread = lane.thread();
    let db = lane.db.clone();
    let executed = executed(&db, &thread);
    lane.kills_mid_run += u64::from(executed > from);
    let committed = match soak.committed(&db, &thread, lane.steps) {
        Ok(c) => c,
        Err(cut_short) => {
            // Killed while the file was being created: no step can have run.
            assert_eq!(executed, -1, "{cut_short}; {context}");
            soak.creations_cut_short += 1;
            return;
        }
    };
    if committed.is_none() && lane.bound == 1 {
        // Under sync the input and start checkpoints commit before the first node runs.
        assert_eq!(
            executed, -1,
            "{thread}: a step ran with nothing committed; {context}"
        );
    }
    // Steps whose node ran but whose checkpoint is not committed (the first checkpoints
    // hold no items, so `None` counts as 0 committed items).
    let lost = executed + 1 - committed.map_or(0, |c| c as i64);
    assert!(
        (0..=lane.bound).contains(&lost),
        "{thread}: the ledger reached step {executed} but the thread holds {committed:?} \
         items ({lost} lost, bound {}); {context}",
        lane.bound
    );
    lane.max_lost = lane.max_lost.max(lost);
    soak.verify(&db, context);
}

/// Kill `kills` processes, alternating lanes; returns the lanes and the soak's counters.
fn soak(kills: u64, seed: u64) -> (Vec<Lane>, Soak) {
    let dir = tempfile::tempdir().expect("tempdir");
    // A private copy: a concurrent build may replace the shared one.
    let bin = dir.path().join("crash_resume");
    let built = stategraph_tests::build_target("stategraph-examples", "--example", "crash_resume");
    std::fs::copy(built.unwrap_or_else(|e| panic!("{e}")), &bin).expect("copy the example");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut soak = Soak {
        dir,
        bin,
        rt,
        finished: 0,
        verifies: 0,
        creations_cut_short: 0,
    };
    let async_bound = MAX_INFLIGHT as i64 + 1;
    let mut lanes = vec![
        Lane::new("sync", 100, 1, soak.file()),
        Lane::new("async", 2000, async_bound, soak.file()),
    ];
    let mut rng = Rng(seed);
    let mut total = 0;
    let verbose = std::env::var_os("STATEGRAPH_KILL_VERBOSE").is_some();
    while total < kills {
        let lane = &mut lanes[(total % 2) as usize];
        let thread = lane.thread();
        let context = format!(
            "seed {seed}, kill {total}, {} thread {thread}",
            lane.durability
        );
        let job = Job {
            db: &lane.db,
            thread: &thread,
            steps: lane.steps,
            durability: lane.durability,
        };
        let from = executed(&lane.db, &thread);
        let mut child = kill::spawn(&soak.bin, &job).unwrap_or_else(|e| panic!("{e}"));
        let delay = rng.between(DELAY_MS.0, DELAY_MS.1);
        std::thread::sleep(Duration::from_millis(delay));
        if child.try_wait().expect("try_wait").is_none() {
            child.kill().expect("kill");
        }
        let out = child.wait_with_output().expect("wait");
        if out.status.signal() != Some(9) {
            finished(&mut soak, lane, out, &context);
            continue;
        }
        total += 1;
        lane.kills += 1;
        after_kill(&mut soak, lane, from, &context);
        if verbose {
            eprintln!(
                "kill {total} after {delay} ms: {thread}, max lost {}",
                lane.max_lost
            );
        }
    }
    finish_lanes(&mut soak, &mut lanes);
    (lanes, soak)
}

/// Run each lane's current thread to its end without kills: it resumes to the state of an
/// uninterrupted run.
fn finish_lanes(soak: &mut Soak, lanes: &mut [Lane]) {
    for lane in lanes {
        let thread = lane.thread();
        let job = Job {
            db: &lane.db,
            thread: &thread,
            steps: lane.steps,
            durability: lane.durability,
        };
        let out = kill::spawn(&soak.bin, &job)
            .and_then(|c| c.wait_with_output().map_err(|e| e.to_string()))
            .unwrap_or_else(|e| panic!("{e}"));
        finished(
            soak,
            lane,
            out,
            &format!("last {} thread {thread}", lane.durability),
        );
    }
}

#[test]
fn kill_soak_over_sync_and_async_loses_at_most_the_bound_and_verifies() {
    let kills = env_u64("STATEGRAPH_SOAK_KILLS", 20).unwrap_or_else(|e| panic!("{e}"));
    let seed = env_u64("STATEGRAPH_SOAK_SEED", 0x50A4_0018).unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let (lanes, soak) = soak(kills, seed);
    for lane in &lanes {
        eprintln!(
            "kill soak {}: {} kills ({} after a step ran) over {} threads, max {} steps lost \
             per kill (bound {})",
            lane.durability,
            lane.kills,
            lane.kills_mid_run,
            lane.threads,
            lane.max_lost,
            lane.bound
        );
    }
    eprintln!(
        "kill soak: seed {seed}, {kills} kills, {} verifies, {} during a file's creation, {:.1} s",
        soak.verifies,
        soak.creations_cut_short,
        started.elapsed().as_secs_f64()
    );
    let landed: u64 = lanes.iter().map(|l| l.kills).sum();
    assert_eq!(
        landed, kills,
        "every counted kill landed on a running process"
    );
    assert!(
        lanes.iter().all(|l| l.threads >= 1),
        "each lane finished a thread: {lanes:?}"
    );
}
