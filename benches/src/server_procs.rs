//! The processes of the `server` row: the Python client it drives each server with, and
//! LangGraph's `langgraph dev`, started in a copy of its app folder and stopped with its
//! whole process group.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use stategraph::BoxError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The client script the repository owns (`benches/server/client.py`).
pub(crate) fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("server/client.py")
}

/// How long `langgraph dev` may take to answer `/ok`.
const LG_START: Duration = Duration::from_secs(180);

/// How long a stopped `langgraph dev` may take to exit before its group is killed.
const LG_STOP: Duration = Duration::from_secs(10);

/// A loopback port nobody listens on: any (`base` 0) or the first free one from `base` on
/// (at most 100 tried), other than those in `taken`.
pub(crate) fn free_port(base: u16, taken: &[u16]) -> Result<u16, BoxError> {
    let try_bind = |port: u16| {
        TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .ok()
    };
    if base == 0 {
        return try_bind(0).ok_or_else(|| "no free loopback port".into());
    }
    (base..base.saturating_add(100))
        .filter(|p| !taken.contains(p))
        .find_map(try_bind)
        .ok_or_else(|| format!("no free loopback port in {base}..{}", base + 100).into())
}

/// Run the client script with `python` and `args`; its JSON line. (It runs on the blocking
/// pool, so that the server under test keeps every worker thread.)
pub(crate) async fn run_client(python: &Path, args: &[String]) -> Result<Value, BoxError> {
    let mut cmd = Command::new(python);
    cmd.arg(client_script()).args(args).stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await?
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "client.py {} failed ({}): {}",
            args.join(" "),
            out.status,
            tail(&stderr, 15)
        )
        .into());
    }
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|e| format!("client.py printed {line:?}, not a JSON line: {e}").into())
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether `GET /ok` on `addr` answers 200.
async fn answers_ok(addr: SocketAddr) -> bool {
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let req = format!("GET /ok HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).await?;
        Ok::<_, std::io::Error>(head.starts_with(b"HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), probe).await,
        Ok(Ok(true))
    )
}

/// CPU seconds (user and system) this process has used (`group` `None`), or every process
/// of process group `group` has (those alive now). Read from `/proc`, whose clock ticks are
/// 1/100 s (Linux's `USER_HZ`); elsewhere 0.
pub(crate) fn cpu_s(group: Option<u32>) -> f64 {
    match group {
        None => stat_cpu(Path::new("/proc/self/stat"), None).unwrap_or(0.0),
        Some(g) => std::fs::read_dir("/proc")
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .filter_map(|e| stat_cpu(&e.path().join("stat"), Some(g)))
                    .sum()
            })
            .unwrap_or(0.0),
    }
}

/// utime + stime of one `/proc/PID/stat`, if its process group is `group` (or any).
fn stat_cpu(path: &Path, group: Option<u32>) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name may hold spaces and parentheses: the fields follow its last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let pgrp: u32 = fields.get(2)?.parse().ok()?;
    if group.is_some_and(|g| g != pgrp) {
        return None;
    }
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// `langgraph dev` running on loopback; its process group is killed when it is dropped.
pub(crate) struct LgDev {
    child: Child,
    pgid: u32,
    port: u16,
    log: PathBuf,
    stopped: bool,
}

impl LgDev {
    /// Copy `app` (the folder with `langgraph.json`) into `workdir`, so that the state `dev`
    /// keeps beside it stays out of the source folder and starts empty; start
    /// `langgraph dev` there on `port`; wait until it answers `/ok`.
    pub(crate) async fn start(
        exe: &Path,
        app: &Path,
        workdir: &Path,
        port: u16,
    ) -> Result<LgDev, BoxError> {
        let dir = workdir.join("lg_app");
        copy_app(app, &dir)?;
        let log = workdir.join("langgraph-dev.log");
        let out = std::fs::File::create(&log)?;
        let child = Command::new(exe)
            .args(["dev", "--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--no-browser", "--no-reload"])
            .current_dir(&dir)
            .env("LANGGRAPH_CLI_NO_ANALYTICS", "1")
            .env("LANGSMITH_TRACING", "false")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let pgid = child.id();
        let mut dev = LgDev {
            child,
            pgid,
            port,
            log,
            stopped: false,
        };
        dev.wait_ok().await?;
        Ok(dev)
    }

    /// Its process group.
    pub(crate) fn group(&self) -> u32 {
        self.pgid
    }

    /// Its base URL.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn wait_ok(&mut self) -> Result<(), BoxError> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let t0 = Instant::now();
        while t0.elapsed() < LG_START {
            if answers_ok(addr).await {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(self.failed(&format!("exited ({status})")));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(self.failed(&format!("did not answer /ok within {LG_START:?}")))
    }

    fn failed(&self, what: &str) -> BoxError {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        format!(
            "langgraph dev {what}; the end of {}:\n{}",
            self.log.display(),
            tail(&text, 20)
        )
        .into()
    }

    /// Stop it: SIGTERM to its group, then SIGKILL to whatever of the group is left.
    pub(crate) async fn stop(mut self) {
        signal_group(self.pgid, "TERM");
        let t0 = Instant::now();
        while t0.elapsed() < LG_STOP && matches!(self.child.try_wait(), Ok(None)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        signal_group(self.pgid, "KILL");
        let _ = self.child.wait();
        self.stopped = true;
    }
}

impl Drop for LgDev {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pgid, "KILL");
            let _ = self.child.wait();
        }
    }
}

/// `kill -SIG -- -PGID` (an empty group is no error).
fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Copy the app folder `from` to `to` (fresh), leaving out what a past `dev` left there.
fn copy_app(from: &Path, to: &Path) -> Result<(), BoxError> {
    if !from.join("langgraph.json").is_file() {
        return Err(format!("--lg-app {}: no langgraph.json there", from.display()).into());
    }
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    copy_tree(from, to)
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), BoxError> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".langgraph_api" || name == "__pycache__" {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(&name))?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_cpu_seconds_even_with_parentheses_in_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stat");
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime ...
        std::fs::write(
            &path,
            "42 (py (x) y) S 1 77 77 0 -1 0 0 0 0 0 250 50 0 0 20 0",
        )
        .unwrap();
        assert_eq!(stat_cpu(&path, None), Some(3.0));
        assert_eq!(stat_cpu(&path, Some(77)), Some(3.0));
        assert_eq!(stat_cpu(&path, Some(78)), None);
    }

    #[test]
    fn a_free_port_from_a_base_skips_one_in_use_and_one_taken() {
        let held = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let base = held.local_addr().unwrap().port();
        let port = free_port(base, &[base + 1]).unwrap();
        assert!(port > base + 1 && port < base + 100, "{port} from {base}");
    }
}
