//! The `settlement` workload's agent rows (ours only): one whole agent invocation that writes a
//! report into its outputs and presents it, settled as every `Agent::invoke` is, over an
//! outputs folder that is empty (`agent_run_empty`) or holds 1,000 files of 4 KB
//! (`agent_run_1000_files`). The difference is what settlement costs a run over a large,
//! unchanged outputs folder: the first invocation hashes every file; later ones reuse the
//! hashes of the previous capture and read no unchanged file.

use std::path::Path;
use std::time::Instant;

use serde_json::json;
use stategraph::BoxError;
use stategraph_nodes::delivery::DeliveryStage;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxOptions, SandboxProvider};
use stategraph_nodes::sandbox_tools::{present_files, write_file};

use crate::report::{median, round, Record};
use crate::{Args, ENGINE};

/// Three model turns per invocation: write, present, answer.
fn script(invocations: usize) -> Vec<AiMessage> {
    (0..invocations)
        .flat_map(|i| {
            let path = format!("/mnt/user-data/outputs/report-{i}.md");
            [
                AiMessage::calls([ToolCall::new(
                    format!("w{i}"),
                    "write_file",
                    json!({"path": path, "content": format!("# Report {i}\n")}),
                )]),
                AiMessage::calls([ToolCall::new(
                    format!("p{i}"),
                    "present_files",
                    json!({"filepaths": [path]}),
                )]),
                AiMessage::text("done"),
            ]
        })
        .collect()
}

/// Invocations of one agent over `root`'s sandbox, with `files` files already in its outputs:
/// (ms of the first, ms of each later one).
async fn invocations(root: &Path, files: usize, n: usize) -> Result<(f64, Vec<f64>), BoxError> {
    let provider = LocalSandboxProvider::new(root);
    let id = provider.acquire("bench", "t1").await?;
    let outputs = provider
        .get(&id)
        .await?
        .ok_or("settlement: no sandbox")?
        .dirs
        .outputs;
    crate::settlement::populate_n(&outputs, files)?;
    let model = ScriptedModel::new("bench", script(n));
    let agent = AgentBuilder::new(model.clone())
        .tool(write_file())
        .tool(present_files())
        .sandbox(provider, SandboxOptions::lazy())
        .assemble(RunContext::new("t1", "bench"))
        .await?;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let out = agent.ask("write the report").await?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        let stage = out.settlement.receipt.verdict.as_ref().map(|v| v.stage);
        if stage != Some(DeliveryStage::Presented) {
            return Err(format!("settlement: a run was settled {stage:?}").into());
        }
    }
    model.verify()?;
    let first = times.remove(0);
    Ok((first, times))
}

pub(crate) async fn run_agent_settlement(args: &Args) -> Result<(), BoxError> {
    let n = args.repeats.max(1) * 10 + 1;
    for (variant, files) in [("agent_run_empty", 0), ("agent_run_1000_files", 1_000)] {
        let dir = tempfile::Builder::new()
            .prefix("settlement-run-")
            .tempdir_in(&args.workdir)?;
        let (first, later) = invocations(dir.path(), files, n).await?;
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "settlement")
            .kv("variant", variant)
            .kv("files", files)
            .kv("invocations", n)
            .kv("first_ms", round(first, 3))
            .kv("per_invocation_ms", round(median(&later), 3))
            .emit();
    }
    Ok(())
}
