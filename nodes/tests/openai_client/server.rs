//! The test server: a loopback HTTP server that records what the client sent and answers
//! with canned bodies, streams in several writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One canned answer.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    /// The body, written as one piece each (as HTTP chunks when `chunked`).
    pub(crate) parts: Vec<Vec<u8>>,
    pub(crate) chunked: bool,
    /// Wait before answering at all.
    pub(crate) hold: Duration,
}

impl Reply {
    pub(crate) fn json(value: Value) -> Self {
        Reply::raw(200, "application/json", &value.to_string())
    }

    pub(crate) fn error(status: u16, value: Value) -> Self {
        Reply::raw(status, "application/json", &value.to_string())
    }

    pub(crate) fn raw(status: u16, content_type: &'static str, body: &str) -> Self {
        Reply {
            status,
            content_type,
            parts: vec![body.as_bytes().to_vec()],
            chunked: false,
            hold: Duration::ZERO,
        }
    }

    /// An event stream written in the given pieces, a few milliseconds apart.
    pub(crate) fn sse_bytes(parts: Vec<Vec<u8>>) -> Self {
        Reply {
            status: 200,
            content_type: "text/event-stream",
            parts,
            chunked: true,
            hold: Duration::ZERO,
        }
    }

    /// An event stream of `data:` events, one write per event.
    pub(crate) fn sse_events(events: &[Value]) -> Self {
        let mut parts: Vec<Vec<u8>> = events
            .iter()
            .map(|e| format!("data: {e}\n\n").into_bytes())
            .collect();
        parts.push(b"data: [DONE]\n\n".to_vec());
        Reply::sse_bytes(parts)
    }

    pub(crate) fn held_for(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }
}

/// What the client sent.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) request_line: String,
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Value,
}

pub(crate) struct Server {
    pub(crate) base_url: String,
    pub(crate) requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    /// A server on `127.0.0.1:0` answering one connection per reply, in order.
    pub(crate) async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            for reply in replies {
                let (socket, _) = listener.accept().await.unwrap();
                answer(socket, reply, &seen).await;
            }
        });
        Server { base_url, requests }
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    pub(crate) fn only_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "{requests:?}");
        requests.into_iter().next().unwrap()
    }
}

pub(crate) async fn answer(mut socket: TcpStream, reply: Reply, seen: &Mutex<Vec<Recorded>>) {
    // Read the head, then a Content-Length body.
    let mut buffer = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "client closed before sending a request");
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap().to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .map(|v| v.parse().unwrap())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "client closed in the middle of the body");
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or(Value::Null);
    seen.lock().unwrap().push(Recorded {
        request_line,
        headers,
        body,
    });

    tokio::time::sleep(reply.hold).await;
    let mut head = format!(
        "HTTP/1.1 {} Canned\r\nContent-Type: {}\r\nConnection: close\r\n",
        reply.status, reply.content_type
    );
    if reply.chunked {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for part in &reply.parts {
            let mut frame = format!("{:x}\r\n", part.len()).into_bytes();
            frame.extend_from_slice(part);
            frame.extend_from_slice(b"\r\n");
            if socket.write_all(&frame).await.is_err() {
                return;
            }
            let _ = socket.flush().await;
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        let _ = socket.write_all(b"0\r\n\r\n").await;
    } else {
        let body = reply.parts.concat();
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(&body).await;
    }
    let _ = socket.shutdown().await;
}
