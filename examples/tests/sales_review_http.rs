//! `sales_review`'s HTTP search provider (feature `live`) against a fixture server on
//! 127.0.0.1 that answers like SearXNG: the query reaches it, its results come back as hits,
//! an error status is a typed error, and the whole review runs on it instead of the corpus.
#![cfg(feature = "live")]

#[path = "../sales_review.rs"]
mod example;

use std::sync::{Arc, Mutex};

use example::{HttpSearch, Script, SearchError, SearchProvider, Workspace, PDF};
use stategraph::checkpoints::RunStatus;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Error = Box<dyn std::error::Error + Send + Sync>;

const ANSWER: &str = r#"{"query": "q", "results": [
  {"title": "Fixture benchmark: regional sensor growth", "url": "http://fixture.test/bench",
   "content": "Fixture benchmark 2026: Nordics +4.4%, DACH +3.3%, Benelux -1.1%, Iberia +9.9%.",
   "engine": "fixture-engine", "publishedDate": "2026-12-01"},
  {"title": "Second result", "url": "http://fixture.test/two", "content": "More text.",
   "engine": "fixture-engine"}
]}"#;

/// Serves `ANSWER` on `/search`, a 500 elsewhere; records each request line.
async fn fixture() -> Result<(String, Arc<Mutex<Vec<String>>>), Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = vec![0u8; 8192];
            let mut len = 0;
            while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
                match socket.read(&mut buf[len..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => len += n,
                }
            }
            let head = String::from_utf8_lossy(&buf[..len]);
            let line = head.lines().next().unwrap_or_default().to_owned();
            let ok = line.starts_with("GET /search?");
            if let Ok(mut log) = log.lock() {
                log.push(line);
            }
            let (status, body) = if ok {
                ("200 OK", ANSWER)
            } else {
                ("500 Internal Server Error", "no")
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
        }
    });
    Ok((base, seen))
}

#[tokio::test]
async fn the_http_provider_returns_the_servers_results() -> Result<(), Error> {
    let (base, seen) = fixture().await?;
    let search = HttpSearch::new(&base)?;
    let hits = search.search("Iberia ports", 1).await?;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].title, "Fixture benchmark: regional sensor growth");
    assert_eq!(hits[0].url, "http://fixture.test/bench");
    assert_eq!(
        (hits[0].source.as_str(), hits[0].date.as_str()),
        ("fixture-engine", "2026-12-01")
    );
    let line = seen
        .lock()
        .map_err(|_| "poisoned")?
        .first()
        .cloned()
        .unwrap_or_default();
    assert!(
        line.contains("q=Iberia+ports") && line.contains("format=json"),
        "{line}"
    );

    let broken = HttpSearch::new(&format!("{base}/broken"))?;
    match broken.search("anything", 3).await {
        Err(SearchError::Http { url, reason }) => {
            assert!(url.ends_with("/broken/search"), "{url}");
            assert!(reason.contains("500"), "{reason}");
        }
        other => return Err(format!("expected an HTTP error, got {other:?}").into()),
    }
    Ok(())
}

#[tokio::test]
async fn the_review_runs_on_the_http_provider() -> Result<(), Error> {
    let (base, _) = fixture().await?;
    let tmp = tempfile::tempdir()?;
    let ws = Workspace::open_with(tmp.path(), Arc::new(HttpSearch::new(&base)?))?;
    let review = example::review(&ws, PDF, Script::Deliver).await?;
    assert_eq!(review.status, RunStatus::Success);
    assert_eq!(review.receipt["verdict"]["stage"], "presented");
    let report = std::fs::read_to_string(
        tmp.path()
            .join("sandboxes/threads/sales-review/user-data/outputs/sales-review.md"),
    )?;
    assert!(report.contains("source: fixture-engine, 2026-12-01, http://fixture.test/bench"));
    assert!(
        report.contains("- Iberia: ours +31.0%, market +9.9%"),
        "{report}"
    );
    Ok(())
}
