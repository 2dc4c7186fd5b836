//! Driving the `crash_resume` example as a process to kill: starting it, reading its report
//! line, its ledger of executions, and a seeded sequence of kill delays.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rusqlite::Connection;

/// splitmix64: a seeded, reproducible sequence.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// The environment variable `name` as a number, else `default`.
///
/// # Errors
/// A message naming the variable when it is set but not a number.
pub fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("{name} must be an integer, got {v:?}")),
        Err(_) => Ok(default),
    }
}

/// What `crash_resume` is asked to do: its file, thread, length and durability.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// The checkpoint file.
    pub db: &'a Path,
    /// The thread.
    pub thread: &'a str,
    /// Steps the thread runs to.
    pub steps: u64,
    /// `sync`, `async` or `exit`.
    pub durability: &'a str,
}

/// Start the example binary `bin` on `job`, its output piped.
///
/// # Errors
/// As [`spawn_with`].
pub fn spawn(bin: &Path, job: &Job<'_>) -> Result<Child, String> {
    spawn_with(bin, job, &[])
}

/// Start the example binary `bin` on `job` with the environment variables `env` (no
/// `STATEGRAPH_FAILPOINT` unless given there), its output piped.
///
/// # Errors
/// Why the process could not start (a copy of the binary another test still has open for
/// writing, in a child that has forked but not yet exec'd, is waited for, up to a second).
pub fn spawn_with(bin: &Path, job: &Job<'_>, env: &[(&str, &str)]) -> Result<Child, String> {
    const ETXTBSY: i32 = 26;
    let mut attempts = 0;
    loop {
        let spawned = Command::new(bin)
            .env_remove("STATEGRAPH_FAILPOINT")
            .envs(env.iter().copied())
            .arg("--db")
            .arg(job.db)
            .args(["--thread", job.thread, "--steps", &job.steps.to_string()])
            .args(["--durability", job.durability])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        match spawned {
            Ok(child) => return Ok(child),
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("spawn {}: {e}", bin.display())),
        }
    }
}

/// The example's final JSON line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// The thread's length.
    pub steps: u64,
    /// Items in its final state.
    pub items: u64,
    /// Its final checksum.
    pub checksum: u64,
    /// Ledger rows of the thread (executions of its steps, re-executions included).
    pub executions: u64,
}

/// The report of `thread` on the last line of `stdout`.
///
/// # Errors
/// What is wrong with the line.
pub fn parse_report(stdout: &str, thread: &str) -> Result<Report, String> {
    let line = stdout.lines().last().unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("bad report line {line:?}: {e}"))?;
    if v["thread"] != thread {
        return Err(format!("report of another thread: {line}"));
    }
    let field = |k: &str| {
        v[k].as_u64()
            .ok_or_else(|| format!("report lacks {k}: {line}"))
    };
    Ok(Report {
        steps: field("steps")?,
        items: field("items")?,
        checksum: field("checksum")?,
        executions: field("executions")?,
    })
}

/// The example's ledger (`FILE.executions`): a row per execution of a step, written before
/// the step's node returns.
#[derive(Debug)]
pub struct Ledger(Connection);

impl Ledger {
    /// Open the ledger of checkpoint file `db` (created by the example's first run).
    ///
    /// # Errors
    /// SQLite's.
    pub fn open(db: &Path) -> rusqlite::Result<Self> {
        let mut name = db.as_os_str().to_owned();
        name.push(".executions");
        let conn = Connection::open(PathBuf::from(name))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        Ok(Ledger(conn))
    }

    /// The highest step of `thread` executed so far (-1: none, or no ledger table yet).
    pub fn max_step(&self, thread: &str) -> i64 {
        self.0
            .query_row(
                "SELECT MAX(step) FROM executions WHERE thread = ?1",
                [thread],
                |r| r.get::<_, Option<i64>>(0),
            )
            .ok()
            .flatten()
            .unwrap_or(-1)
    }
}
