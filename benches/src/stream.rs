//! The `stream` workload: a model's tokens through the `messages` stream mode.
//!
//! The model streams `--stream-chunks` one-word chunks (default 100,000) through
//! `stategraph_nodes::toolbox::model_node`, the path every agent's model call takes. Rows:
//!
//! - `stream_engine`: the run streamed in process with `StreamMode::messages()`, every event
//!   read: `chunks_per_s`. With `--lg-dev`, LangGraph's side in the same run
//!   (`benches/server/stream_lg.py`, `stream_mode="messages"` over a LangChain chat model
//!   streaming as many chunks) and the ratio.
//! - `stream_off`: one-chunk answers, 200,000 calls, each through `tokens::call_model` in a run
//!   that does not stream messages, against the same model invoked directly: `per_call_ns`
//!   of each (the fastest of five alternated runs) and the message events seen (none): what a
//!   call through the context costs when nobody listens: the check that nobody does, and the
//!   call's usage added to the run's.
//! - `stream_server`: the same run through `stategraph serve` (in this process, on a fresh
//!   SQLite file) as `messages-tuple`, read by a raw HTTP/1.0 client on loopback:
//!   `chunks_per_s` on the wire.
//! - `stream_latency`: 2,000 chunks, one every 500 µs, each carrying the time it left the
//!   model; the client reads each frame as it arrives: the time from a model's chunk to its
//!   frame read off the socket, `p50_ms`, `p99_ms`, `max_ms`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::{json, Value};
use stategraph::prelude::*;
use stategraph::{EventKind, List};
use stategraph_nodes::tokens::call_model;
use stategraph_nodes::toolbox::{model_node, Toolbox};
use stategraph_nodes::{
    impl_messages_state, AiMessage, ChatModel, Message, ModelChunk, ModelError, ModelRequest,
    ModelResponse,
};
use stategraph_server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::report::{round, Record};
use crate::{Args, ENGINE};

/// Chunks of the latency row, and the pause between two of them.
const PACED_CHUNKS: usize = 2_000;
const PACE: Duration = Duration::from_micros(500);
/// Calls of the `stream_off` row.
const OFF_CALLS: usize = 200_000;

/// The bench's conversation.
#[derive(State, Clone, Default, Debug)]
struct Talk {
    #[reduce(add_messages)]
    messages: List<Message>,
}
impl_messages_state!(Talk, messages);

/// The instant chunk times are measured from (one per process).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// A model that streams `chunks` words, each `"w "`, or with `pace` each `"t<µs since epoch> "`
/// after waiting `pace`.
#[derive(Clone, Copy)]
struct Words {
    chunks: usize,
    pace: Option<Duration>,
}

impl ChatModel for Words {
    fn name(&self) -> &str {
        "words"
    }

    fn invoke(&self, _: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        let text = "w ".repeat(self.chunks);
        Box::pin(async move { Ok(AiMessage::text(text).into()) })
    }

    fn stream(&self, _: ModelRequest) -> BoxStream<'_, Result<ModelChunk, ModelError>> {
        let pace = self.pace;
        let words = futures::stream::unfold(0usize, move |i| async move {
            if i == self.chunks {
                return None;
            }
            let delta = match pace {
                Some(p) => {
                    tokio::time::sleep(p).await;
                    format!("t{} ", epoch().elapsed().as_micros())
                }
                None => "w ".to_owned(),
            };
            Some((Ok(ModelChunk::Text { delta }), i + 1))
        });
        Box::pin(words)
    }
}

fn graph(model: Words) -> Result<CompiledGraph<Talk>, BoxError> {
    Ok(StateGraph::<Talk>::new()
        .add_node("model", model_node(model, &Toolbox::new()))
        .add_edge(START, "model")
        .add_edge("model", END)
        .compile()?)
}

fn input() -> TalkUpdate {
    Talk::update().messages(Message::human("go").into())
}

pub(crate) async fn run_stream(args: &Args) -> Result<(), BoxError> {
    let chunks = args.stream_chunks;
    engine_row(chunks, args).await?;
    off_row().await?;
    server_rows(chunks, &args.workdir).await?;
    Ok(())
}

/// Chunks per second of one in-process run streamed with the `messages` mode.
async fn engine_chunks_per_s(chunks: usize) -> Result<f64, BoxError> {
    let g = graph(Words { chunks, pace: None })?;
    let t0 = Instant::now();
    let mut stream = g.stream(input(), &RunConfig::new(), StreamMode::messages());
    let mut seen = 0usize;
    while let Some(ev) = stream.next().await {
        if matches!(ev.kind, EventKind::Messages { .. }) {
            seen += 1;
        }
    }
    stream.outcome().await?;
    let wall = t0.elapsed().as_secs_f64();
    // Each word, the last chunk, the whole message.
    if seen != chunks + 2 {
        return Err(format!("stream: {seen} message events for {chunks} chunks").into());
    }
    Ok(chunks as f64 / wall)
}

async fn engine_row(chunks: usize, args: &Args) -> Result<(), BoxError> {
    engine_chunks_per_s(1_000).await?; // warm-up
    let mut rates = Vec::new();
    for _ in 0..args.repeats {
        rates.push(engine_chunks_per_s(chunks).await?);
    }
    let ours = crate::report::median(&rates);
    let theirs = match &args.lg_dev {
        Some(exe) => Some(langgraph_chunks_per_s(exe, chunks.min(20_000)).await?),
        None => {
            eprintln!("# stream: LangGraph's side not run (give --lg-dev)");
            None
        }
    };
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "stream_engine")
        .kv("chunks", chunks)
        .kv("repeats", args.repeats)
        .kv("chunks_per_s", round(ours, 0))
        .kv("target_chunks_per_s", 200_000)
        .kv("langgraph_chunks_per_s", theirs.map(|t| round(t, 0)))
        .kv("vs_langgraph", theirs.map(|t| round(ours / t, 1)))
        .emit();
    Ok(())
}

/// LangGraph's chunks per second for the same run (the python beside `langgraph`).
async fn langgraph_chunks_per_s(lg_dev: &std::path::Path, chunks: usize) -> Result<f64, BoxError> {
    let python = lg_dev.with_file_name("python");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("server/stream_lg.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(chunks.to_string())
        .output()
        .await?;
    if !out.status.success() {
        return Err(format!(
            "stream_lg.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let line: Value = serde_json::from_slice(&out.stdout)?;
    line["chunks_per_s"]
        .as_f64()
        .ok_or_else(|| format!("stream_lg.py printed {line}").into())
}

/// `call_model` in a run that does not stream messages, against the model invoked directly.
async fn off_row() -> Result<(), BoxError> {
    let model = Words {
        chunks: 1,
        pace: None,
    };
    let direct = StateGraph::<Talk>::new()
        .add_node("model", move |_s: Arc<Talk>, _cx: NodeContext| async move {
            for _ in 0..OFF_CALLS {
                std::hint::black_box(model.invoke(ModelRequest::default()).await?);
            }
            Ok::<_, BoxError>(Talk::update())
        })
        .add_edge(START, "model")
        .add_edge("model", END)
        .compile()?;
    let through = StateGraph::<Talk>::new()
        .add_node("model", move |_s: Arc<Talk>, cx: NodeContext| async move {
            for _ in 0..OFF_CALLS {
                std::hint::black_box(call_model(&cx, &model, ModelRequest::default()).await?);
            }
            Ok::<_, BoxError>(Talk::update())
        })
        .add_edge(START, "model")
        .add_edge("model", END)
        .compile()?;
    // Alternated five times; each side's fastest run (the least disturbed by the machine).
    let (mut direct_ns, mut through_ns, mut events) = (f64::MAX, f64::MAX, 0usize);
    for round_ in 0..10 {
        let g = if round_ % 2 == 0 { &direct } else { &through };
        let t0 = Instant::now();
        let mut stream = g.stream(Talk::update(), &RunConfig::new(), StreamMode::default());
        while let Some(ev) = stream.next().await {
            events += usize::from(matches!(ev.kind, EventKind::Messages { .. }));
        }
        stream.outcome().await?;
        let per_call = t0.elapsed().as_nanos() as f64 / OFF_CALLS as f64;
        let best = if round_ % 2 == 0 {
            &mut direct_ns
        } else {
            &mut through_ns
        };
        *best = best.min(per_call);
    }
    Record::new()
        .kv("engine", ENGINE)
        .kv("workload", "stream_off")
        .kv("calls", OFF_CALLS)
        .kv("invoke_per_call_ns", round(direct_ns, 0))
        .kv("call_model_per_call_ns", round(through_ns, 0))
        .kv("overhead_per_call_ns", round(through_ns - direct_ns, 0))
        .kv("message_events", events)
        .emit();
    Ok(())
}

async fn server_rows(chunks: usize, workdir: &std::path::Path) -> Result<(), BoxError> {
    let file = workdir.join(format!("stream-{}.db", std::process::id()));
    let server = Server::builder()
        .graph("words", &graph(Words { chunks, pace: None })?)
        .graph(
            "paced",
            &graph(Words {
                chunks: PACED_CHUNKS,
                pace: Some(PACE),
            })?,
        )
        .file(&file)
        .addr(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .start()
        .await?;
    let addr = server.addr();
    let result = async {
        stream_through(addr, "words", None).await?; // warm-up
        let t0 = Instant::now();
        let frames = stream_through(addr, "words", None).await?;
        let wall = t0.elapsed().as_secs_f64();
        if frames != chunks + 1 {
            return Err(format!("stream: {frames} frames for {chunks} chunks").into());
        }
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "stream_server")
            .kv("checkpointer", "sqlite")
            .kv("chunks", chunks)
            .kv("chunks_per_s", round(chunks as f64 / wall, 0))
            .emit();
        let mut lags = Vec::with_capacity(PACED_CHUNKS);
        stream_through(addr, "paced", Some(&mut lags)).await?;
        lags.sort_by(f64::total_cmp);
        let at = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "stream_latency")
            .kv("checkpointer", "sqlite")
            .kv("chunks", lags.len())
            .kv("pace_us", PACE.as_micros() as u64)
            .kv("p50_ms", round(at(0.5), 3))
            .kv("p99_ms", round(at(0.99), 3))
            .kv("max_ms", round(at(1.0), 3))
            .kv("target_p99_ms", 1.0)
            .emit();
        Ok::<_, BoxError>(())
    }
    .await;
    server.shutdown().await;
    crate::sqlite_db::remove_files(&file);
    result
}

/// One `messages-tuple` run of `graph` on a new thread, read frame by frame off the socket:
/// the `messages` frames seen; with `lags`, each paced chunk's time from the model to here.
async fn stream_through(
    addr: SocketAddr,
    graph: &str,
    mut lags: Option<&mut Vec<f64>>,
) -> Result<usize, BoxError> {
    let body = json!({
        "assistant_id": graph,
        "input": {"messages": [{"type": "human", "content": "go"}]},
        "stream_mode": "messages-tuple",
    })
    .to_string();
    // HTTP/1.0: the body ends when the server closes, with no chunked framing to undo.
    let request = format!(
        "POST /runs/stream HTTP/1.0\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = tokio::net::TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?;
    socket.write_all(request.as_bytes()).await?;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut read = vec![0u8; 1 << 16];
    let mut scanned = 0;
    let mut frames = 0;
    loop {
        let n = socket.read(&mut read).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&read[..n]);
        while let Some(end) = find(&buf[scanned..], b"\r\n\r\n") {
            let frame = &buf[scanned..scanned + end];
            scanned += end + 4;
            if !frame.starts_with(b"event: messages\r\n") {
                continue;
            }
            frames += 1;
            if let Some(lags) = lags.as_deref_mut() {
                if let Some(sent) = sent_at(frame) {
                    let now = epoch().elapsed().as_micros() as f64;
                    lags.push((now - sent) / 1000.0);
                }
            }
        }
        if scanned > 1 << 20 {
            buf.drain(..scanned);
            scanned = 0;
        }
    }
    Ok(frames)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The µs since the epoch a paced chunk's frame says it left the model at.
fn sent_at(frame: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(frame).ok()?;
    let data = text.split("\r\ndata: ").nth(1)?;
    let value: Value = serde_json::from_str(data.lines().next()?).ok()?;
    let content = value[0]["content"].as_str()?;
    content.strip_prefix('t')?.trim().parse().ok()
}
