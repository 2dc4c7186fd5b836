//! What the server's tests share: a server on a temporary file with the demo graphs, and a
//! small HTTP/1.1 client over a TCP socket (each request its own connection, read to the
//! end, chunked bodies decoded), so the tests see the bytes a client gets.

// A helper that cannot reach its server fails the test that called it.
#![allow(dead_code, unreachable_pub, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use stategraph_server::{demo, RunningServer, Server, ServerBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where `.ci/sdk-clients.sh` installed the SDK clients.
pub fn clients_dir() -> std::path::PathBuf {
    std::env::var_os("STATEGRAPH_SDK_CLIENTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/sdk-clients")
        })
}

/// `path` if it exists; otherwise `None` (the test skips), or a failure under `CI=true`,
/// where every client must be installed.
pub fn installed(what: &str, path: std::path::PathBuf) -> Option<std::path::PathBuf> {
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} is not installed at {}: run .ci/sdk-clients.sh",
        path.display()
    );
    eprintln!("skipped: {what} is not installed (run .ci/sdk-clients.sh)");
    None
}

/// Run one scenario of an SDK client script (`--ours`) against `url`; fail the test with
/// what the script printed if it fails.
pub async fn run_scenario(
    program: &std::path::Path,
    script: &std::path::Path,
    url: &str,
    scenario: &str,
) {
    let out = tokio::process::Command::new(program)
        .arg(script)
        .arg(url)
        .arg(scenario)
        .arg("--ours")
        .env("STATEGRAPH_SDK_CLIENTS", clients_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("the client runs");
    assert!(
        out.status.success(),
        "{} scenario {scenario} failed:\n{}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A server on a fresh file, with the demo graphs.
pub struct Served {
    pub server: RunningServer,
    pub dir: tempfile::TempDir,
}

impl Served {
    pub async fn start() -> Result<Served, Box<dyn std::error::Error>> {
        Self::start_with(|b| b).await
    }

    pub async fn start_with(
        f: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Result<Served, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let builder = Server::builder()
            .file(dir.path().join("server.db"))
            .addr("127.0.0.1:0".parse()?);
        let server = f(demo::register(builder)?).start().await?;
        Ok(Served { server, dir })
    }

    /// A server on a fresh schema of the PostgreSQL at `STATEGRAPH_PG_URL`, with the demo
    /// graphs; `None` (the test skips) without one, except under `CI=true`, where it fails.
    pub async fn start_postgres(schema: &str) -> Option<Served> {
        Self::start_postgres_with(schema, |b| b).await
    }

    /// [`Served::start_postgres`], with more options.
    pub async fn start_postgres_with(
        schema: &str,
        f: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Option<Served> {
        let url = pg_url()?;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = stategraph_server::ServerOptions::default();
        options.addr = "127.0.0.1:0".parse().expect("addr");
        options.postgres = Some(url);
        options.postgres_schema = Some(schema.to_owned());
        options.lease = Duration::from_secs(2);
        let builder = Server::builder().options(options);
        let server = f(demo::register(builder).expect("demo graphs"))
            .start()
            .await
            .expect("a server on PostgreSQL starts");
        Some(Served { server, dir })
    }

    pub fn api(&self) -> Api {
        Api {
            addr: self.server.addr(),
            headers: Vec::new(),
        }
    }

    pub fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("server.db")
    }
}

/// The PostgreSQL to test on, or `None` (skip) without one; under `CI=true` it must be set.
pub fn pg_url() -> Option<String> {
    if let Ok(url) = std::env::var("STATEGRAPH_PG_URL") {
        return Some(url);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "STATEGRAPH_PG_URL is not set and CI=true: start one with .ci/postgres.sh"
    );
    eprintln!("skipped: STATEGRAPH_PG_URL is not set (start one with .ci/postgres.sh)");
    None
}

/// A schema name of its own for one test (a fresh schema each run of it).
pub fn fresh_schema(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("srv_{test}_{}_{nanos}", std::process::id())
        .chars()
        .take(60)
        .collect()
}

/// An HTTP client of one server.
#[derive(Clone)]
pub struct Api {
    pub addr: SocketAddr,
    pub headers: Vec<(String, String)>,
}

/// A response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// LangGraph's recorded response `name` (`tests/fixtures/langgraph/`), parsed as a reply.
pub fn recorded(name: &str) -> Result<Reply, Box<dyn std::error::Error>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/langgraph")
        .join(name);
    let raw = std::fs::read_to_string(path)?;
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    Ok(Reply {
        status: 200,
        headers: Vec::new(),
        body: body.to_owned(),
    })
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The server-sent events of the body: (event, data, id).
    pub fn events(&self) -> Vec<(String, Value, Option<String>)> {
        let mut out = Vec::new();
        for block in self.body.split("\r\n\r\n") {
            let (mut event, mut data, mut id) = (None, None, None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).ok();
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_owned());
                }
            }
            if let (Some(e), Some(d)) = (event, data) {
                out.push((e, d, id));
            }
        }
        out
    }

    pub fn event_names(&self) -> Vec<String> {
        self.events().into_iter().map(|e| e.0).collect()
    }
}

impl Api {
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Send a request; read the whole response.
    pub async fn send(&self, method: &str, path: &str, body: Option<&str>) -> Reply {
        self.send_raw(method, path, body.map(str::as_bytes)).await
    }

    pub async fn send_raw(&self, method: &str, path: &str, body: Option<&[u8]>) -> Reply {
        let mut s = TcpStream::connect(self.addr).await.expect("connect");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).await.expect("write head");
        if let Some(b) = body {
            // A server may answer (413) before reading a large body whole.
            let _ = s.write_all(b).await;
        }
        let mut raw = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut raw)).await;
        parse(&raw)
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send("POST", path, Some(&body.to_string())).await
    }

    /// Create a thread; its id.
    pub async fn thread(&self) -> String {
        let r = self.post("/threads", serde_json::json!({})).await;
        r.json()["thread_id"]
            .as_str()
            .expect("thread id")
            .to_owned()
    }

    /// Open a stream and read only its head and first `n` bytes' worth of events, then drop
    /// the connection.
    pub async fn stream_prefix(&self, path: &str, body: Value, until: &str) -> String {
        let mut s = TcpStream::connect(self.addr).await.expect("connect");
        let body = body.to_string();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes()).await.expect("write");
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(until) {
            match tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    }
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v == "chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}
