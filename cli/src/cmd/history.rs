//! `stategraph history FILE -t THREAD`: a thread's checkpoints, newest first, with what each
//! step wrote.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::diff::parts_to_json;
use stategraph_checkpoints::inspect::{short_suffix, short_suffix_len};
use stategraph_checkpoints::{Checkpoint, FieldPart, Saver, Source, StepChanges};

use crate::failure::Outcome;
use crate::file::{headers, namespace, open, thread_id};
use crate::output::{
    emit, header_json, json_text, next_text, pending_json, pending_lines, short, Output, Style,
};

/// What a step wrote, as short text (`count=2`, `log +1`) and as JSON.
#[derive(Debug, Default)]
struct StepSummary {
    text: Vec<String>,
    json: Vec<Value>,
}

/// Print the history of `(thread, ns)`, at most `limit` checkpoints.
pub(super) async fn run(
    out: Output,
    file: &Path,
    thread: &str,
    limit: Option<usize>,
    ns: &str,
) -> Outcome {
    let saver = open(file)?;
    let thread = thread_id(thread)?;
    let ns = namespace(ns);
    let all = headers(&saver, file, &thread, &ns).await?;
    let len = short_suffix_len(&all.iter().map(|c| c.id).collect::<Vec<_>>());
    let shown = &all[..limit.unwrap_or(all.len()).min(all.len())];
    let mut rows = Vec::new();
    let mut text = String::new();
    for cp in shown {
        let changes = saver.changes(&thread, &ns, cp.id).await?;
        let mut summary = summarize(&changes);
        if cp.source == Source::Input {
            if let Some(send) = cp.control.sends.iter().find(|s| s.node == "__start__") {
                summary
                    .text
                    .insert(0, format!("input {}", short(&send.arg, 40)));
            }
        }
        if out.json {
            let mut row = header_json(cp);
            row["writes"] = Value::Array(summary.json);
            row["pending"] = changes.pending.iter().map(pending_json).collect();
            rows.push(row);
        } else {
            history_line(&mut text, cp, len, &summary.text, &changes, out.style);
        }
    }
    saver.close();
    if out.json {
        return Ok(emit(&json_text(&Value::Array(rows)))?);
    }
    Ok(emit(&text)?)
}

/// One line of the text history: short id, step, source, next nodes, what was written and
/// the pending writes.
fn history_line(
    text: &mut String,
    cp: &Checkpoint,
    len: usize,
    summary: &[String],
    changes: &StepChanges,
    s: Style,
) {
    let summary = if summary.is_empty() {
        s.dim("(nothing written)")
    } else {
        summary.join(", ")
    };
    let source = cp.source.as_str();
    let _ = write!(
        text,
        "{}  step {:>3}  {}{}  next: {}  {summary}",
        s.yellow(&short_suffix(cp.id, len)),
        cp.step,
        s.cyan(source),
        " ".repeat(6usize.saturating_sub(source.len())),
        next_text(cp),
    );
    for line in pending_lines(&changes.pending, s) {
        let _ = write!(text, "  [{} {}]", line.label, line.text);
    }
    text.push('\n');
}

/// What a step wrote.
fn summarize(changes: &StepChanges) -> StepSummary {
    let mut out = StepSummary::default();
    for (field, parts) in &changes.fields {
        let appended = !parts.is_empty() && parts.iter().all(|p| matches!(p, FieldPart::Tail(_)));
        match parts_to_json(parts) {
            Ok(Value::Array(items)) if appended => {
                out.text.push(format!("{field} +{}", items.len()));
                out.json.push(json!({
                    "field": field, "kind": "appended", "items": items.len(), "values": items
                }));
            }
            Ok(value) => {
                out.text.push(format!("{field}={}", short(&value, 40)));
                out.json
                    .push(json!({ "field": field, "kind": "replaced", "value": value }));
            }
            Err(e) => {
                out.text.push(format!("{field} (unreadable)"));
                out.json
                    .push(json!({ "field": field, "kind": "unreadable", "error": e }));
            }
        }
    }
    out
}
