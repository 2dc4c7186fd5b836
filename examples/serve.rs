//! Serve stategraph graphs to the clients LangGraph users already have: LangGraph's Agent
//! Server API on loopback, with the sales-review agent (`sales_review`, a scripted model that
//! plays one review of the shipped PDF, every run recorded, settled and delivered) and a
//! three-node chain (`chain`). Threads, checkpoints and runs live in
//! `serve-data/serve.db`; the agent's sandbox beside it.
//!
//! Run with `cargo run --release --example serve [FOLDER] [--port P]`, then drive it with
//! `langgraph-sdk` (the snippet it prints) or point agent-chat-ui at the URL. Ctrl-C stops it;
//! started again on the same folder it picks up the runs it left.

#[path = "sales_review.rs"]
#[allow(dead_code)] // the serve example uses the lead and its workspace, not the review runs
mod sales_review;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use stategraph::prelude::*;
use stategraph::CompileError;
use stategraph_server::Server;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// `a → b → c`, each appending its name to `log`.
#[derive(State, Clone, Default, Debug)]
struct Log {
    #[reduce(append)]
    log: Vec<String>,
}

fn chain() -> Result<CompiledGraph<Log>, CompileError> {
    let mut graph = StateGraph::<Log>::new();
    for name in ["a", "b", "c"] {
        graph = graph.add_node(name, move |_s: Arc<Log>, _cx: NodeContext| async move {
            Ok::<_, BoxError>(Log::update().log(vec![name.to_owned()]))
        });
    }
    graph
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .compile()
}

/// The snippet that talks to the server at `url`.
fn snippet(url: &str) -> String {
    format!(
        r#"from langgraph_sdk import get_client
import asyncio

async def main():
    client = get_client(url="{url}")
    print(await client.runs.wait(None, "chain", input={{"log": []}}))
    await client.threads.create(thread_id="{thread}", if_exists="do_nothing")
    async for part in client.runs.stream(
        "{thread}", "sales_review", stream_mode="updates",
        input={{"messages": [{{"type": "human", "content": "{question}"}}]}},
    ):
        print(part.event, str(part.data)[:120])

asyncio.run(main())"#,
        thread = sales_review::THREAD,
        question = sales_review::REVIEW_QUESTION,
    )
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = match args.iter().position(|a| a == "--port") {
        Some(i) => args.get(i + 1).ok_or("--port needs a number")?.parse()?,
        None => stategraph_server::DEFAULT_PORT,
    };
    let folder = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--port"))
        .map_or_else(|| PathBuf::from("serve-data"), |(_, a)| PathBuf::from(a));
    let ws = sales_review::Workspace::open(&folder)?;
    let lead = sales_review::served_lead(&ws).await?;
    let server = Server::builder()
        .file(folder.join("serve.db"))
        .addr(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .runner("sales_review", lead)
        .graph("chain", &chain()?)
        .start()
        .await?;
    println!(
        "stategraph serve: {} (assistants: sales_review, chain)\n",
        server.url()
    );
    println!("{}\n", snippet(&server.url()));
    println!("Ctrl-C stops the server.");
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
