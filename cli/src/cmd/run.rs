//! `stategraph run FILE RUN_ID`: one run with its delivery receipt, pretty-printed.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::json;
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_checkpoints::RunId;

use crate::failure::{Failure, Outcome};
use crate::file::open_read;
use crate::output::{emit, json_text, run_json, Output};

/// Show run `run_id` of `file`.
pub(super) async fn run(out: Output, file: &Path, run_id: &str) -> Outcome {
    let run_id = RunId::new(run_id).map_err(|e| Failure::usage(e.to_string()))?;
    let saver = open_read(file).await?;
    let found = saver.get_run(None, &run_id).await?;
    let receipt = saver.get_receipt(&run_id).await?;
    saver.close()?;
    let Some(run) = found else {
        return Err(Failure::runtime(format!(
            "no run {run_id} in {}",
            file.display()
        )));
    };
    let receipt = receipt.map(|r| r.into_json());
    if out.json {
        let doc = json!({ "run": run_json(&run, receipt.is_some()), "receipt": receipt });
        return Ok(emit(&json_text(&doc))?);
    }
    let s = out.style;
    let mut text = String::new();
    let _ = writeln!(text, "{}", s.bold(&format!("run {}", run.run_id)));
    let _ = writeln!(text, "  thread       {}", run.thread);
    let _ = writeln!(text, "  status       {}", s.run_status(run.status));
    let _ = writeln!(
        text,
        "  reason       {}",
        run.reason.as_deref().unwrap_or("-")
    );
    let _ = writeln!(
        text,
        "  stop reason  {}",
        run.stop_reason.as_deref().unwrap_or("-")
    );
    match run.usage {
        Some(usage) => {
            let _ = writeln!(text, "  usage        {usage}");
        }
        None => {
            let _ = writeln!(text, "  usage        -");
        }
    }
    let _ = writeln!(text, "  created      {}", format_utc_ms(run.created_at_ms));
    let _ = writeln!(text, "  updated      {}", format_utc_ms(run.updated_at_ms));
    if !run.metadata.is_empty() {
        let _ = writeln!(text, "  metadata     {}", json!(run.metadata));
    }
    match &receipt {
        Some(r) => {
            let _ = writeln!(text, "{}", s.bold("delivery receipt"));
            let _ = writeln!(text, "{}", json_text(r).trim_end());
        }
        None => {
            let _ = writeln!(text, "{}", s.dim("no delivery receipt"));
        }
    }
    Ok(emit(&text)?)
}
