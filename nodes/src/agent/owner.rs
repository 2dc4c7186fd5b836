//! Who runs a run: the owner stamp an invocation writes into its `running` record (run
//! metadata [`OWNER_KEY`]), the runs this process has in progress, and whether a stamped
//! run's owner is gone — so that a run left `running` can be told from one still running.
//!
//! The stamp names the process by a random id drawn once per process, its pid and, on Linux,
//! the boot (`/proc/sys/kernel/random/boot_id`), the pid namespace (`/proc/self/ns/pid`) and
//! the process's start time (`/proc/self/stat`). A run of another process counts as left
//! only when that process is known to be gone: same boot and pid namespace as this process,
//! and its pid no longer names the process that started it. Anything else (another machine,
//! another container, an earlier boot, no `/proc`) is unknown, and unknown runs are left alone.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use stategraph::checkpoints::{CheckpointId, RunId, RunRecord};

/// The run metadata key holding the process that runs an agent's run: `{"process": random
/// id, "pid": n}` and, on Linux, `"boot"`, `"pid_ns"` and `"started"` (clock ticks after
/// boot). Written with the `running` record; read when a thread is next opened, to tell a run
/// left `running` by an ended process from one still running.
pub const OWNER_KEY: &str = "owner";

/// The run metadata key the PostgreSQL run queue marks its runs with: their lease decides.
const QUEUED_KEY: &str = "queued";

/// A process, as a run's owner stamp names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Owner {
    process: String,
    pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boot: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid_ns: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started: Option<u64>,
}

/// Why a `running` run is known to be left: nothing will settle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Left {
    /// An invocation of this process that ended without settling its run.
    ByThisProcess,
    /// A process (its pid) that has ended.
    ByEndedProcess(u32),
}

impl Owner {
    /// This process.
    pub(super) fn this() -> &'static Owner {
        static THIS: OnceLock<Owner> = OnceLock::new();
        THIS.get_or_init(|| {
            let pid = std::process::id();
            Owner {
                process: CheckpointId::generate().to_string(),
                pid,
                boot: proc::boot(),
                pid_ns: proc::pid_ns(),
                started: proc::stat(pid).ok().flatten().map(|s| s.started),
            }
        })
    }

    /// The stamp as run metadata.
    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Whether this process can see this owner's pid: same boot, same pid namespace.
    fn shares_pids_with(&self, other: &Owner) -> bool {
        self.boot.is_some()
            && self.pid_ns.is_some()
            && self.boot == other.boot
            && self.pid_ns == other.pid_ns
    }

    /// Whether the process is known to have ended: its pid is unused, a zombie, or names a
    /// process started at another time.
    fn has_ended(&self) -> bool {
        let Some(started) = self.started else {
            return false;
        };
        if !Owner::this().shares_pids_with(self) {
            return false;
        }
        match proc::stat(self.pid) {
            Ok(None) => true,
            Ok(Some(stat)) => stat.ended || stat.started != started,
            Err(_) => false,
        }
    }
}

/// Whether `run`, stored as `running`, is known to be left, and by whom. A queued run (its
/// lease decides), an unstamped run, a run of this process still in progress and a run of a
/// process not known to have ended are not.
pub(super) fn left(run: &RunRecord) -> Option<Left> {
    if run.metadata.get(QUEUED_KEY).is_some_and(|q| *q != false) {
        return None;
    }
    let owner: Owner = serde_json::from_value(run.metadata.get(OWNER_KEY)?.clone()).ok()?;
    let this = Owner::this();
    if owner.process == this.process {
        return (!is_live(&run.run_id)).then_some(Left::ByThisProcess);
    }
    owner.has_ended().then_some(Left::ByEndedProcess(owner.pid))
}

/// Runs of this process from their `running` record until their settlement ends (or is
/// dropped): how many holds each has.
fn live() -> &'static Mutex<HashMap<RunId, usize>> {
    static LIVE: OnceLock<Mutex<HashMap<RunId, usize>>> = OnceLock::new();
    LIVE.get_or_init(Mutex::default)
}

fn is_live(run: &RunId) -> bool {
    live()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains_key(run)
}

/// A run of this process in progress, from before its `running` record is stored until the
/// guard is dropped (its settlement stored, or given up).
#[derive(Debug)]
pub(super) struct LiveRun {
    run: RunId,
}

impl LiveRun {
    /// Marks `run` as in progress in this process.
    pub(super) fn hold(run: &RunId) -> LiveRun {
        let mut live = live().lock().unwrap_or_else(|p| p.into_inner());
        *live.entry(run.clone()).or_insert(0) += 1;
        LiveRun { run: run.clone() }
    }
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        let mut live = live().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = live.get_mut(&self.run) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.run);
            }
        }
    }
}

/// What Linux's `/proc` says of processes (nothing, elsewhere).
mod proc {
    /// The fields of `/proc/<pid>/stat` an owner check reads.
    pub(super) struct Stat {
        /// Clock ticks after boot when the process started.
        pub(super) started: u64,
        /// A zombie or dead process: it has ended and not been reaped.
        pub(super) ended: bool,
    }

    /// This boot's id.
    pub(super) fn boot() -> Option<String> {
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Some(id.trim().to_owned()).filter(|id| !id.is_empty())
    }

    /// This process's pid namespace.
    pub(super) fn pid_ns() -> Option<String> {
        let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
        Some(link.to_string_lossy().into_owned())
    }

    /// The process `pid`'s stat: `Ok(None)` when no process has the pid.
    pub(super) fn stat(pid: u32) -> std::io::Result<Option<Stat>> {
        let text = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        // `pid (comm) state ...`: the command may hold spaces and parentheses.
        let fields: Vec<&str> = text
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let bad = || std::io::Error::other(format!("/proc/{pid}/stat does not read"));
        let state = fields.first().ok_or_else(bad)?;
        let started = fields
            .get(19)
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        Ok(Some(Stat {
            started,
            ended: matches!(*state, "Z" | "X" | "x"),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph::checkpoints::{RunStatus, ThreadId};

    fn stamped(owner: &Owner, run: &str) -> Result<RunRecord, Box<dyn std::error::Error>> {
        let mut r = RunRecord::new(RunId::new(run)?, ThreadId::new("t")?, RunStatus::Running, 1);
        r.metadata.insert(OWNER_KEY.to_owned(), owner.to_json());
        Ok(r)
    }

    #[test]
    fn a_run_of_this_process_is_left_once_it_is_no_longer_held(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let run = stamped(Owner::this(), "owner-unit-1")?;
        let held = LiveRun::hold(&run.run_id);
        let again = LiveRun::hold(&run.run_id);
        assert_eq!(left(&run), None);
        drop(held);
        assert_eq!(left(&run), None, "still held once");
        drop(again);
        assert_eq!(left(&run), Some(Left::ByThisProcess));
        Ok(())
    }

    #[test]
    fn unstamped_queued_and_unknown_runs_are_not_left() -> Result<(), Box<dyn std::error::Error>> {
        let mut run = stamped(Owner::this(), "owner-unit-2")?;
        run.metadata
            .insert(QUEUED_KEY.to_owned(), serde_json::Value::Bool(true));
        assert_eq!(left(&run), None, "a queued run is the queue's");
        run.metadata.clear();
        assert_eq!(left(&run), None, "an unstamped run");
        let elsewhere = Owner {
            process: "another".to_owned(),
            pid: 1,
            boot: Some("another boot".to_owned()),
            pid_ns: Owner::this().pid_ns.clone(),
            started: Some(1),
        };
        assert_eq!(left(&stamped(&elsewhere, "owner-unit-3")?), None);
        Ok(())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_run_of_a_live_process_is_not_left_and_of_an_ended_one_is(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let mut child = std::process::Command::new("sleep").arg("30").spawn()?;
        let started = proc::stat(child.id())?.map(|s| s.started);
        let owner = Owner {
            process: "another".to_owned(),
            pid: child.id(),
            started,
            ..Owner::this().clone()
        };
        let run = stamped(&owner, "owner-unit-4")?;
        assert_eq!(left(&run), None, "the child is running");
        child.kill()?;
        child.wait()?;
        assert_eq!(left(&run), Some(Left::ByEndedProcess(child.id())));
        Ok(())
    }
}
