//! An agent that delivers a file: a scripted model reads an upload, writes a report into the
//! thread's outputs and presents it. The thread is checkpointed in a SQLite file and its
//! sandbox lives in a folder next to it; a second run on the same thread, with a new provider
//! over the same folder (as another process would have), finds the first run's files.
//!
//! Every tool call is printed with its virtual path as it runs (a tool layer), then the
//! capability trace with its Delivered line, then the run's status and delivery receipt.
//!
//! Run with `cargo run --release --example deliver_report [FOLDER]` (no network, no API key;
//! the folder defaults to `stategraph-deliver-report` in the system's temporary directory).

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph::checkpoints::{Saver, SqliteSaver, ThreadId};
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxOptions, SandboxProvider};
use stategraph_nodes::sandbox_tools::sandbox_tools;
use stategraph_nodes::{ToolError, ToolInvocation, ToolLayer, ToolNext};

type Error = Box<dyn std::error::Error + Send + Sync>;

const THREAD: &str = "quarterly-report";
const USER: &str = "ana";

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

/// Run 1: look at the uploads, read the upload, write the report, present it.
fn first_script() -> Vec<AiMessage> {
    vec![
        AiMessage::calls([call("c1", "ls", json!({"path": "/mnt/user-data/uploads"}))]),
        AiMessage::calls([call(
            "c2",
            "read_file",
            json!({"path": "/mnt/user-data/uploads/sales.csv"}),
        )]),
        AiMessage::calls([call(
            "c3",
            "write_file",
            json!({
                "path": "/mnt/user-data/outputs/report.md",
                "content": "# Q3 sales\n\nNorth 120, South 80, West 45: 245 in total.\n",
            }),
        )]),
        AiMessage::calls([call(
            "c4",
            "present_files",
            json!({"filepaths": ["/mnt/user-data/outputs/report.md"]}),
        )]),
        AiMessage::text("The report is in /mnt/user-data/outputs/report.md."),
    ]
}

/// Run 2: the same thread later: the report written by run 1 is still there.
fn second_script() -> Vec<AiMessage> {
    vec![
        AiMessage::calls([call("c5", "glob", json!({"pattern": "outputs/**"}))]),
        AiMessage::calls([call(
            "c6",
            "read_file",
            json!({"path": "/mnt/user-data/outputs/report.md", "limit": 1}),
        )]),
        AiMessage::text("Last quarter's report is still in your outputs."),
    ]
}

/// The virtual path (or paths, or pattern) a call names, as printed.
fn shown_args(args: &serde_json::Value) -> String {
    ["path", "filepaths", "pattern"]
        .iter()
        .filter_map(|key| args.get(key).map(|v| format!("{key}={v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints each tool call as it starts, with the virtual path it names, and the first line of
/// its result when it returns: what the run is doing, while it does it.
struct Progress;

impl ToolLayer for Progress {
    fn name(&self) -> &str {
        "progress"
    }

    fn call<'a>(
        &'a self,
        invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let name = invocation.call.name.clone();
            println!("call  {name:<14} {}", shown_args(&invocation.call.args));
            let out = next.run(invocation).await;
            if let Some(m) = out.as_ref().ok().and_then(ToolOutput::message) {
                let first = m.content.lines().next().unwrap_or_default();
                let error = if m.is_error() { "ERROR " } else { "" };
                println!("tool  {name:<14} {error}{first}");
            }
            out
        })
    }
}

/// Places the user's upload into the thread's uploads (what an upload endpoint would do).
async fn place_upload(provider: &LocalSandboxProvider) -> Result<(), Error> {
    let id = provider.acquire(USER, THREAD).await?;
    let sandbox = provider
        .get(&id)
        .await?
        .ok_or("the sandbox was not created")?;
    std::fs::write(
        sandbox.dirs.uploads.join("sales.csv"),
        "region,sales\nNorth,120\nSouth,80\nWest,45\n",
    )?;
    provider.release(&id).await?;
    Ok(())
}

/// One run of the agent on the thread, with a fresh provider over `folder`.
async fn run(
    folder: &Path,
    saver: Arc<SqliteSaver>,
    name: &str,
    script: Vec<AiMessage>,
) -> Result<(), Error> {
    let model = ScriptedModel::new("scripted-analyst", script);
    let mut builder = AgentBuilder::new(model.clone())
        .system_prompt("You turn uploads into reports.")
        .sandbox(
            LocalSandboxProvider::new(folder.join("sandboxes")),
            SandboxOptions::lazy(),
        );
    for tool in sandbox_tools() {
        builder = builder.tool_arc(tool);
    }
    builder = builder.tool_layer(Progress);
    // No run id in the context: each invocation gets a fresh one, so running the example
    // again (another process) records new runs on the same thread.
    let agent = builder
        .assemble(RunContext::new(THREAD, USER))
        .await?
        .with_checkpointer(saver);
    let config = agent.run_config().thread(THREAD);
    println!("== {name}: tool calls, as they run");
    let out = agent
        .invoke(
            ThreadState::human_input("Write the quarterly report."),
            &config,
        )
        .await?;
    model.verify()?;

    if let Some(answer) = out.state.last_ai() {
        println!("ai    {}", answer.content);
    }
    println!("artifacts: {:?}", out.state.artifacts);
    println!("\n== {name}: capability trace\n{}", agent.trace().render());
    let settled = &out.settlement;
    println!(
        "== {name}: run {} {}\nreceipt {}\n",
        settled.run_id,
        settled.status,
        serde_json::to_string_pretty(&settled.receipt)?
    );
    Ok(())
}

/// The whole example over `folder`: place the upload, then two runs on one thread.
///
/// # Errors
/// A storage, sandbox or run error.
pub(crate) async fn deliver_report(folder: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(folder)?;
    let saver = Arc::new(SqliteSaver::open(folder.join("threads.db"))?);
    place_upload(&LocalSandboxProvider::new(folder.join("sandboxes"))).await?;
    run(folder, Arc::clone(&saver), "run-1", first_script()).await?;
    run(folder, Arc::clone(&saver), "run-2", second_script()).await?;
    println!("== the thread's runs, newest first (`stategraph runs FILE --thread {THREAD}`)");
    for r in saver.list_runs(&ThreadId::new(THREAD)?).await? {
        println!("{} {}", r.run_id, r.status);
    }
    println!("thread {THREAD:?} lives in {}", folder.display());
    Ok(())
}

#[allow(dead_code)] // a test includes this file as a module and calls `deliver_report`
#[tokio::main]
async fn main() -> Result<(), Error> {
    let folder = std::env::args().nth(1).map_or_else(
        || std::env::temp_dir().join("stategraph-deliver-report"),
        Into::into,
    );
    deliver_report(&folder).await
}
