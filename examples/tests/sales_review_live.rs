//! `sales_review` on `OpenAiModel` (feature `live`) against an OpenAI-compatible fixture
//! server on 127.0.0.1 that answers with a fixed conversation: the lead and the analyst (who
//! inherits the lead's model) reach the server, the deferred tool appears in the request only
//! after `tool_search`, the same policies deny and narrow, and the run is settled with a
//! satisfied receipt.
#![cfg(feature = "live")]

#[path = "../sales_review.rs"]
mod example;

use std::sync::{Arc, Mutex};

use example::Workspace;
use serde_json::{json, Value};
use stategraph::checkpoints::RunStatus;
use stategraph_nodes::{OpenAiConfig, OpenAiModel, Stage, Verdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Error = Box<dyn std::error::Error + Send + Sync>;

const REPORT: &str = "/mnt/user-data/outputs/sales-review.md";

fn completion(message: Value, finish: &str) -> Value {
    json!({"id": "fx", "object": "chat.completion", "model": "fixture-model",
           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
}

fn call(name: &str, args: Value) -> Value {
    let id = format!("call-{name}");
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
               "function": {"name": name, "arguments": args.to_string()}}]}),
        "tool_calls",
    )
}

fn text(content: &str) -> Value {
    completion(json!({"role": "assistant", "content": content}), "stop")
}

/// The answers, in the order the runs ask: the review (with the analyst's two turns inside
/// the lead's `task` call), then the follow-up.
fn conversation() -> Vec<Value> {
    vec![
        call("ls", json!({"path": "/mnt/user-data/uploads"})),
        call(
            "read_file",
            json!({"path": "/mnt/user-data/uploads/sales-notes.md"}),
        ),
        call("tool_search", json!({"query": "select:web_search"})),
        call("web_search", json!({"query": "Iberia port automation"})),
        call(
            "bash",
            json!({"command": "rm -rf /mnt/user-data/uploads/*"}),
        ),
        call(
            "task",
            json!({"description": "Benchmarks", "prompt": "Compare Iberia with the market.",
                   "subagent_type": "industry-analyst"}),
        ),
        call(
            "web_search",
            json!({"query": "regional benchmark growth 2026"}),
        ),
        text("Iberia: market +11.2% (Kestrel Market Research)."),
        call(
            "write_file",
            json!({"path": REPORT, "content": "# Sales review\n\nIberia leads.\n"}),
        ),
        call("present_files", json!({"filepaths": [REPORT]})),
        text("Done: sales-review.md."),
        call("read_file", json!({"path": REPORT})),
        text("We recommended growing Iberia."),
    ]
}

/// Reads one HTTP request (headers, then `content-length` bytes of body).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Some((head, buf[head_end..head_end + length].to_vec()))
}

/// Serves `answers` in order on any path; records each request's head and JSON body.
async fn fixture(answers: Vec<Value>) -> Result<(String, Arc<Mutex<Vec<(String, Value)>>>), Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/v1", listener.local_addr()?);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut answers = answers.into_iter();
        while let Ok((mut socket, _)) = listener.accept().await {
            let Some((head, body)) = read_request(&mut socket).await else {
                continue;
            };
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if let Ok(mut log) = log.lock() {
                log.push((head, body));
            }
            let (status, answer) = match answers.next() {
                Some(a) => ("200 OK", a.to_string()),
                None => (
                    "500 Internal Server Error",
                    "{\"error\": \"script over\"}".into(),
                ),
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
        }
    });
    Ok((base, seen))
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_job_runs_on_an_openai_compatible_server() -> Result<(), Error> {
    let answers = conversation();
    let expected = answers.len();
    let (base, seen) = fixture(answers).await?;
    let config = OpenAiConfig::new(base, "fixture-model")
        .with_api_key("fixture-key")
        .with_proxy_env(false);
    let tmp = tempfile::tempdir()?;
    let ws = Workspace::open(tmp.path())?;
    let (review, follow_up) =
        example::live_review(&ws, Arc::new(OpenAiModel::new(config)?)).await?;

    assert_eq!(review.status, RunStatus::Success);
    assert_eq!(review.receipt["verdict"]["stage"], "presented");
    assert_eq!(review.receipt["verdict"]["satisfied"], true);
    assert_eq!(review.artifacts, [REPORT]);
    assert_eq!(follow_up.status, RunStatus::Success);
    assert_eq!(follow_up.answer, "We recommended growing Iberia.");
    // The same policies as offline: the guardrail denied bash, the role kept email_report out.
    let denied = review.trace.iter().any(|e| {
        e.tool == "bash"
            && e.stage == Stage::Executed
            && matches!(e.verdict, Verdict::Denied { .. })
    });
    assert!(denied);
    assert!(!review
        .trace
        .iter()
        .any(|e| e.tool == "email_report" && e.passed() && e.stage == Stage::Authorized));
    assert_eq!(review.delegations.len(), 1);
    assert_eq!(
        review.delegations[0].model.as_deref(),
        Some("fixture-model")
    );

    let seen = seen.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(seen.len(), expected, "every answer was asked for, no more");
    for (head, body) in &seen {
        assert!(head.starts_with("post /v1/chat/completions"), "{head}");
        assert!(head.contains("authorization: bearer fixture-key"), "{head}");
        assert_eq!(body["model"], "fixture-model");
    }
    // Deferred until tool_search: web_search is offered from the fourth lead request on;
    // skill-narrowed and unauthorized tools never are.
    let first = tool_names(&seen[0].1);
    assert!(first.contains(&"tool_search".to_owned()) && !first.contains(&"web_search".to_owned()));
    assert!(tool_names(&seen[3].1).contains(&"web_search".to_owned()));
    for (_, body) in &seen[..6] {
        let names = tool_names(body);
        assert!(
            !names
                .iter()
                .any(|n| n == "str_replace" || n == "email_report"),
            "{names:?}"
        );
    }
    // The analyst's requests (the 7th and 8th) carry its own read-only pool.
    let analyst = tool_names(&seen[6].1);
    assert!(analyst.contains(&"web_search".to_owned()));
    assert!(
        !analyst
            .iter()
            .any(|n| n == "write_file" || n == "present_files"),
        "{analyst:?}"
    );
    Ok(())
}
