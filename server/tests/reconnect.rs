//! A stream dropped mid-run is resumed by the SDK's own reconnect: through a proxy that cuts
//! the first streaming connection after a few frames, Python's `langgraph-sdk` reconnects to
//! the stream's `Location` with `Last-Event-ID`, and gets every event once.

// The proxy fails its test when it cannot listen.
#![allow(clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{clients_dir, installed, run_scenario, Served};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Forward connections to `upstream` (keep-alive included); the first event stream is cut
/// once three `values` frames went through. Every request's head is recorded.
async fn cutting_proxy(
    upstream: std::net::SocketAddr,
) -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let heads = Arc::new(Mutex::new(Vec::new()));
    let cut_done = Arc::new(Mutex::new(false));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(upstream).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if ["GET ", "POST ", "PATCH ", "DELETE ", "PUT "]
                        .iter()
                        .any(|m| text.starts_with(m))
                    {
                        seen.lock().expect("lock").push(text);
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            let cut_done = cut_done.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut stream_text: Option<String> = None;
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]);
                    if stream_text.is_none() && text.contains("text/event-stream") {
                        let mut done = cut_done.lock().expect("lock");
                        if !*done {
                            *done = true;
                            stream_text = Some(String::new());
                        }
                    }
                    if let Some(passed) = &mut stream_text {
                        passed.push_str(&text);
                        if passed.matches("event: values").count() >= 3 {
                            // Drop both directions mid-stream, as a broken network would.
                            break;
                        }
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_run_is_resumed_by_the_sdk_with_no_event_lost_or_repeated() {
    let Some(python) = installed(
        "the Python langgraph-sdk",
        clients_dir().join("py/bin/python"),
    ) else {
        return;
    };
    let served = Served::start().await.expect("server starts");
    let (proxy, heads) = cutting_proxy(served.server.addr()).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/client.py");
    run_scenario(&python, &script, &format!("http://{proxy}"), "reconnect").await;
    // The cut happened, and the SDK came back for the rest with the id of what it had.
    let heads = heads.lock().expect("lock").clone();
    let rejoin = heads
        .iter()
        .find(|h| h.starts_with("GET") && h.contains("/stream"))
        .unwrap_or_else(|| panic!("no reconnect among {heads:#?}"));
    assert!(
        rejoin.to_ascii_lowercase().contains("last-event-id: "),
        "{rejoin}"
    );
}
