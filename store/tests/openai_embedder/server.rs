//! The fixture: a loopback HTTP server that records each request and answers each
//! connection with the next canned reply.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One canned answer.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(status: u16, value: &Value) -> Self {
        Reply {
            status,
            body: value.to_string(),
        }
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
    requests: Arc<Mutex<Vec<Recorded>>>,
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
}

async fn answer(mut socket: TcpStream, reply: Reply, seen: &Mutex<Vec<Recorded>>) {
    let mut buffer = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 8192];
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
        .map_or(0, |v| v.parse().unwrap());
    while buffer.len() < head_end + length {
        let mut chunk = [0u8; 8192];
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
    let head = format!(
        "HTTP/1.1 {} Canned\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        reply.status,
        reply.body.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(reply.body.as_bytes()).await;
    let _ = socket.shutdown().await;
}
