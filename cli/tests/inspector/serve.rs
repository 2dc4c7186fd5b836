//! `serve`: the binary serves the Agent Server API on the file it is given; killed with
//! SIGKILL during a background run, it finishes that run from its last checkpoint when it is
//! started again, and no step of it runs twice. Beyond loopback it refuses to start without
//! an API key. (The API itself is tested in `server/tests/`.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

/// `stategraph serve FILE --port 0 …` started: the child and its address.
fn start_serve(file: &std::path::Path, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stategraph"))
        .arg("serve")
        .arg(file)
        .args(["--port", "0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start serve");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the URL");
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        line.starts_with("stategraph serve: http://127.0.0.1:"),
        "{line}"
    );
    (child, addr)
}

/// One request; the status and the JSON body.
fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut out = String::new();
    stream.read_to_string(&mut out).expect("read");
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_killed_during_a_background_run_finishes_it_after_a_restart_running_no_step_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("served.db");
    let (mut first, addr) = start_serve(&file, &[]);
    let (_, thread) = call(&addr, "POST", "/threads", Some(json!({})));
    let thread = thread["thread_id"].as_str().expect("thread id").to_owned();
    let (status, run) = call(
        &addr,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({
            "assistant_id": "slow",
            "input": { "steps": 20, "delay_ms": 40 },
            "durability": "sync",
        })),
    );
    assert_eq!(status, 200, "{run}");
    let run = run["run_id"].as_str().expect("run id").to_owned();
    wait_for("five ticks", || {
        let (_, state) = call(&addr, "GET", &format!("/threads/{thread}/state"), None);
        state["values"]["log"]
            .as_array()
            .is_some_and(|l| l.len() >= 5)
    });
    first.kill().expect("SIGKILL");
    let _ = first.wait();
    let before = ticks_in_file(&file, &thread);
    assert!(
        (5..20).contains(&before),
        "the run was cut short ({before} ticks)"
    );

    let (mut second, addr) = start_serve(&file, &[]);
    // A client that had seen frame 3 of the first attempt reconnects: the run's new
    // attempt comes from its start, `metadata` saying attempt 2.
    let rejoined = stream_head(
        &addr,
        &format!("/threads/{thread}/runs/{run}/stream"),
        "1-3",
    );
    assert!(
        rejoined.contains("event: metadata\r\ndata: {\"attempt\":2"),
        "{rejoined}"
    );
    wait_for("the run to finish", || {
        let (_, r) = call(&addr, "GET", &format!("/threads/{thread}/runs/{run}"), None);
        r["status"] == "success"
    });
    let (_, state) = call(&addr, "GET", &format!("/threads/{thread}/state"), None);
    let expected: Vec<String> = (0..20).map(|i| format!("tick{i}")).collect();
    assert_eq!(state["values"]["log"], json!(expected));
    let steps = steps_of_run(&addr, &thread, &run);
    let _ = second.kill();
    let _ = second.wait();
    assert_eq!(
        steps,
        (1, (0..=20).collect()),
        "input checkpoints and steps"
    );
}

/// How many input checkpoints `run` wrote, and the steps of its loop checkpoints, sorted:
/// one input and each step once means nothing was run again from the start, and no step
/// that had been checkpointed was run again.
fn steps_of_run(addr: &str, thread: &str, run: &str) -> (usize, Vec<i64>) {
    let (_, history) = call(
        addr,
        "POST",
        &format!("/threads/{thread}/history"),
        Some(json!({ "limit": 1000, "metadata": { "run_id": run } })),
    );
    let items = history.as_array().cloned().unwrap_or_default();
    let inputs = items
        .iter()
        .filter(|h| h["metadata"]["source"] == "input")
        .count();
    let mut steps: Vec<i64> = items
        .iter()
        .filter(|h| h["metadata"]["source"] == "loop")
        .filter_map(|h| h["metadata"]["step"].as_i64())
        .collect();
    steps.sort_unstable();
    (inputs, steps)
}

/// The first bytes of a `GET` stream sent with `Last-Event-ID: last`.
fn stream_head(addr: &str, path: &str, last: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nLast-Event-ID: {last}\r\n\r\n"
    )
    .expect("send");
    let mut buf = vec![0u8; 4096];
    let mut seen = String::new();
    while !seen.contains("event: metadata") {
        let Ok(n) = stream.read(&mut buf) else { break };
        if n == 0 {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    seen
}

/// How many ticks the file holds for `thread` (read with the inspector).
fn ticks_in_file(file: &std::path::Path, thread: &str) -> usize {
    let shown = sg(&["show", p(file), "-t", thread, "--field", "log", "--json"]).ok();
    let shown = shown.json();
    let log = shown.get("value").unwrap_or(&shown);
    log.as_array().map_or(0, Vec::len)
}

#[test]
fn serve_beyond_loopback_without_an_api_key_refuses_to_start_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("served.db");
    let ran = sg(&["serve", p(&file), "--host", "0.0.0.0", "--port", "0"]).fails(2);
    assert!(ran.stderr.contains("API key"), "{}", ran.stderr);
}

/// The PostgreSQL to test on, or `None` (skip) without one; under `CI=true` it must be set.
fn pg_url() -> Option<String> {
    match std::env::var("STATEGRAPH_PG_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("STATEGRAPH_PG_URL is not set and CI=true: start one with .ci/postgres.sh")
        }
        Err(_) => {
            eprintln!("skipped: STATEGRAPH_PG_URL is not set (start one with .ci/postgres.sh)");
            None
        }
    }
}

/// The whole `GET` stream sent with `Last-Event-ID: last`, read until the server ends it.
fn stream_to_end(addr: &str, path: &str, last: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nLast-Event-ID: {last}\r\n\r\n"
    )
    .expect("send");
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn on_postgres_the_other_server_takes_over_a_killed_servers_run_and_a_reconnecting_stream_sees_its_end(
) {
    let Some(url) = pg_url() else { return };
    let schema = format!("cli_serve_takeover_{}", std::process::id());
    let args = ["--schema", schema.as_str(), "--lease", "2s"];
    let (mut first, first_addr) = start_serve(std::path::Path::new(&url), &args);
    let (mut second, second_addr) = start_serve(std::path::Path::new(&url), &args);
    let (_, thread) = call(&first_addr, "POST", "/threads", Some(json!({})));
    let thread = thread["thread_id"].as_str().expect("thread id").to_owned();
    let (status, run) = call(
        &first_addr,
        "POST",
        &format!("/threads/{thread}/runs"),
        Some(json!({
            "assistant_id": "slow",
            "input": { "steps": 20, "delay_ms": 100 },
            "durability": "sync",
            "stream_resumable": true,
        })),
    );
    assert_eq!(status, 200, "{run}");
    let run = run["run_id"].as_str().expect("run id").to_owned();
    wait_for("five ticks", || {
        let (_, state) = call(
            &first_addr,
            "GET",
            &format!("/threads/{thread}/state"),
            None,
        );
        state["values"]["log"]
            .as_array()
            .is_some_and(|l| l.len() >= 5)
    });
    // Kill whichever server's worker holds the run; the client goes to the other.
    let worker: String = runtime().block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        let text = format!("SELECT worker FROM \"{schema}\".sg_run_queue WHERE run_id = $1");
        let row = client.query_one(&text, &[&run]).await.expect("the run");
        row.get(0)
    });
    let first_runs_it = worker.starts_with(&format!("serve-{}-", first.id()));
    let (victim, survivor, addr) = if first_runs_it {
        (&mut first, &mut second, second_addr)
    } else {
        (&mut second, &mut first, first_addr)
    };
    victim.kill().expect("SIGKILL");
    let _ = victim.wait();
    // A client that had seen frame 3 reconnects to the survivor: it gets the frames of the
    // first attempt it missed, then the second attempt's, to the run's end.
    let rest = stream_to_end(
        &addr,
        &format!("/threads/{thread}/runs/{run}/stream"),
        "1-3",
    );
    assert!(
        rest.contains("event: metadata\r\ndata: {\"attempt\":2"),
        "{rest}"
    );
    assert!(
        !rest.contains("id: 1-3\r\n"),
        "frame 1-3 was sent again: {rest}"
    );
    let (_, r) = call(&addr, "GET", &format!("/threads/{thread}/runs/{run}"), None);
    assert_eq!(r["status"], "success", "{r}");
    let (_, state) = call(&addr, "GET", &format!("/threads/{thread}/state"), None);
    let expected: Vec<String> = (0..20).map(|i| format!("tick{i}")).collect();
    assert_eq!(state["values"]["log"], json!(expected));
    let steps = steps_of_run(&addr, &thread, &run);
    let _ = survivor.kill();
    let _ = survivor.wait();
    runtime().block_on(async {
        if let Ok((client, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await;
        }
    });
    assert_eq!(
        steps,
        (1, (0..=20).collect()),
        "input checkpoints and steps"
    );
}
