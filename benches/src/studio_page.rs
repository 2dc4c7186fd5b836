//! The `studio` workload: how fast `stategraph studio` opens a long thread. For each of
//! `--verify-steps` it builds the same thread as `verify` (one chain superstep per
//! checkpoint), serves the file read-only on loopback, and times over HTTP what the page
//! asks for when a user opens the thread: the thread list, the first history page (100
//! checkpoints), the head checkpoint with its state, and the graph. Target: the whole first
//! view under a second for 100,000 checkpoints.

use std::time::Instant;

use stategraph::BoxError;
use stategraph_studio::{Studio, StudioOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::report::{round, Record};
use crate::verify_scan::{build, THREAD};
use crate::{Args, ENGINE};

/// What the first view may take, in seconds.
const TARGET_S: f64 = 1.0;

/// `GET path` on `addr` with the token cookie; the body, and the seconds it took.
async fn get(
    addr: std::net::SocketAddr,
    token: &str,
    path: &str,
) -> Result<(String, f64), BoxError> {
    let t0 = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: sg_studio={token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let s = t0.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&response).into_owned();
    if !text.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {}", text.lines().next().unwrap_or_default()).into());
    }
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((body, s))
}

/// Build each thread, serve it, time the first view, print one row each.
pub(crate) async fn run_studio(args: &Args) -> Result<(), BoxError> {
    for &steps in &args.verify_steps {
        let db = build(args, steps).await?;
        let path = db.path.clone();
        db.saver.close()?;
        let t0 = Instant::now();
        let studio = Studio::open(StudioOptions::new(&path).read_only(true))?;
        let open_s = t0.elapsed().as_secs_f64();
        let token = studio.token().to_owned();
        let bound = studio.bind().await?;
        let addr = bound.local_addr();
        let server = tokio::spawn(bound.serve());
        let (_, threads_s) = get(addr, &token, "/api/threads").await?;
        let (page, page_s) = get(
            addr,
            &token,
            &format!("/api/threads/{THREAD}/history?limit=100"),
        )
        .await?;
        let page: serde_json::Value = serde_json::from_str(&page)?;
        let head = page["head"].as_str().unwrap_or_default().to_owned();
        let (_, cp_s) = get(
            addr,
            &token,
            &format!("/api/threads/{THREAD}/checkpoints/{head}"),
        )
        .await?;
        let (_, graph_s) = get(addr, &token, &format!("/api/threads/{THREAD}/graph")).await?;
        server.abort();
        let total = open_s + threads_s + page_s + cp_s + graph_s;
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "studio")
            .kv("supersteps", steps)
            .kv("page_rows", page["rows"].as_array().map_or(0, Vec::len))
            .kv("open_ms", round(open_s * 1e3, 2))
            .kv("threads_ms", round(threads_s * 1e3, 2))
            .kv("first_page_ms", round(page_s * 1e3, 2))
            .kv("head_checkpoint_ms", round(cp_s * 1e3, 2))
            .kv("graph_ms", round(graph_s * 1e3, 2))
            .kv("first_view_ms", round(total * 1e3, 2))
            .kv("target_s", TARGET_S)
            .kv("under_target", total <= TARGET_S)
            .emit();
        if !args.keep_db {
            crate::sqlite_db::remove_files(&path);
        }
    }
    Ok(())
}
