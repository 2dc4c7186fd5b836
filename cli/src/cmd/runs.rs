//! `stategraph runs FILE --thread T`: a thread's runs, newest first, with their status and
//! whether each left a delivery receipt.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_checkpoints::RunRecord;

use crate::failure::Outcome;
use crate::file::{open_read, thread_id};
use crate::output::{emit, json_text, run_json, Output, Style};

/// A run with whether it has a receipt.
#[derive(Debug)]
struct ListedRun {
    run: RunRecord,
    has_receipt: bool,
}

/// List the runs of `thread` in `file`.
pub(super) async fn run(out: Output, file: &Path, thread: &str) -> Outcome {
    let thread = thread_id(thread)?;
    let saver = open_read(file).await?;
    let mut listed = Vec::new();
    for run in saver.list_runs(&thread).await? {
        let has_receipt = saver.get_receipt(&run.run_id).await?.is_some();
        listed.push(ListedRun { run, has_receipt });
    }
    saver.close()?;
    if out.json {
        let list: Vec<Value> = listed
            .iter()
            .map(|l| run_json(&l.run, l.has_receipt))
            .collect();
        return Ok(emit(&json_text(&Value::Array(list)))?);
    }
    if listed.is_empty() {
        return Ok(emit(&format!(
            "no runs of thread {thread} in {}\n",
            file.display()
        ))?);
    }
    Ok(emit(&table(&listed, out.style))?)
}

/// The text table: one row per run.
fn table(listed: &[ListedRun], s: Style) -> String {
    let width = listed
        .iter()
        .map(|l| l.run.run_id.as_str().chars().count())
        .max()
        .unwrap_or(0)
        .max("RUN".len());
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}",
        s.bold(&format!(
            "{:<width$}  {:<11}  {:<24}  {:<24}  {:<7}  REASON",
            "RUN", "STATUS", "CREATED", "UPDATED", "RECEIPT"
        ))
    );
    for l in listed {
        let r = &l.run;
        let pad = " ".repeat(11usize.saturating_sub(r.status.as_str().len()));
        let reason = match (&r.reason, &r.stop_reason) {
            (Some(reason), Some(stop)) => format!("{reason} (stopped: {stop})"),
            (Some(reason), None) => reason.clone(),
            (None, Some(stop)) => format!("(stopped: {stop})"),
            (None, None) => "-".to_owned(),
        };
        let _ = writeln!(
            text,
            "{:<width$}  {}{pad}  {:<24}  {:<24}  {:<7}  {}",
            r.run_id.as_str(),
            s.run_status(r.status),
            format_utc_ms(r.created_at_ms),
            format_utc_ms(r.updated_at_ms),
            if l.has_receipt { "yes" } else { "no" },
            cut(&reason, 60),
        );
    }
    text
}

/// `text` cut to at most `max` characters, ending in `...` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        let kept: String = text.chars().take(max.saturating_sub(3)).collect();
        format!("{kept}...")
    } else {
        text.to_owned()
    }
}
