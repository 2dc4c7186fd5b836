//! `stategraph history FILE -t THREAD [--tree]`: a thread's checkpoints, newest first (or
//! as the tree of their branches), with their branch and what each step wrote.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::diff::parts_to_json;
use stategraph_checkpoints::inspect::{short_suffix, short_suffix_len};
use stategraph_checkpoints::tree::BranchTree;
use stategraph_checkpoints::{Checkpoint, CheckpointId, FieldPart, Source, StepChanges};

use crate::failure::Outcome;
use crate::file::{headers, namespace, open_read, thread_id};
use crate::output::{
    emit, header_json, json_text, next_text, pending_json, pending_lines, short, Output, Style,
};

/// What a step wrote, as short text (`count=2`, `log +1`) and as JSON.
#[derive(Debug, Default)]
struct StepSummary {
    text: Vec<String>,
    json: Vec<Value>,
}

/// Which checkpoints, in which order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// Newest first, at most this many.
    Newest(Option<usize>),
    /// Every checkpoint under its parent, oldest first.
    Tree,
}

impl Shape {
    /// The shape `--tree` and `--limit` ask for.
    pub(crate) fn of(tree: bool, limit: Option<usize>) -> Shape {
        if tree {
            Shape::Tree
        } else {
            Shape::Newest(limit)
        }
    }
}

/// Print the history of `(thread, ns)` in `shape`.
pub(super) async fn run(out: Output, file: &Path, thread: &str, shape: Shape, ns: &str) -> Outcome {
    let saver = open_read(file).await?;
    let thread = thread_id(thread)?;
    let ns = namespace(ns);
    let all = headers(&*saver, file, &thread, &ns).await?;
    // Newest first, as the saver lists them.
    let ids: Vec<CheckpointId> = all.iter().map(|c| c.id).collect();
    let len = short_suffix_len(&ids);
    let tree = BranchTree::new(all);
    // (checkpoint, tree prefix, branch end) in the order shown.
    let shown: Vec<(&Checkpoint, &str, bool)> = match shape {
        Shape::Newest(limit) => ids[..limit.unwrap_or(ids.len()).min(ids.len())]
            .iter()
            .filter_map(|id| Some((tree.checkpoint(*id)?, "", false)))
            .collect(),
        Shape::Tree => tree
            .rows()
            .iter()
            .filter_map(|r| Some((tree.checkpoint(r.id)?, r.prefix.as_str(), r.head)))
            .collect(),
    };
    let mut rows = Vec::new();
    let mut text = String::new();
    for (cp, prefix, head) in shown {
        let changes = saver.changes(&thread, &ns, cp.id).await?;
        let mut summary = summarize(&changes);
        if cp.source == Source::Input {
            if let Some(send) = cp.control.sends.iter().find(|s| s.node == "__start__") {
                summary
                    .text
                    .insert(0, format!("input {}", short(&send.arg, 40)));
            }
        }
        summary.text.splice(0..0, answers(cp));
        let branch = tree.node(cp.id).map_or(0, |n| n.branch);
        if out.json {
            let mut row = header_json(cp);
            row["branch"] = json!(branch);
            row["writes"] = Value::Array(summary.json);
            row["pending"] = changes.pending.iter().map(pending_json).collect();
            if matches!(shape, Shape::Tree) {
                row["branch_end"] = json!(head);
            }
            rows.push(row);
        } else {
            let line = Line {
                cp,
                prefix,
                branch,
                end: head,
            };
            history_line(&mut text, &line, len, &summary.text, &changes, out.style);
        }
    }
    saver.close()?;
    if out.json {
        return Ok(emit(&json_text(&Value::Array(rows)))?);
    }
    Ok(emit(&text)?)
}

/// What a history line shows of a checkpoint's place.
struct Line<'a> {
    cp: &'a Checkpoint,
    /// The tree drawing before its id (empty when listed newest first).
    prefix: &'a str,
    branch: usize,
    /// A branch ends here (drawn trees only).
    end: bool,
}

/// One line of the text history: short id, branch, step, source, next nodes, what was
/// written and the pending writes.
fn history_line(
    text: &mut String,
    line: &Line<'_>,
    len: usize,
    summary: &[String],
    changes: &StepChanges,
    s: Style,
) {
    let cp = line.cp;
    let summary = if summary.is_empty() {
        s.dim("(nothing written)")
    } else {
        summary.join(", ")
    };
    let source = cp.source.as_str();
    let _ = write!(
        text,
        "{}{}  b{:<2} step {:>3}  {}{}  next: {}  {summary}",
        s.dim(line.prefix),
        s.yellow(&short_suffix(cp.id, len)),
        line.branch,
        cp.step,
        s.cyan(source),
        " ".repeat(6usize.saturating_sub(source.len())),
        next_text(cp),
    );
    for p in pending_lines(&changes.pending, s) {
        let _ = write!(text, "  [{} {}]", p.label, p.text);
    }
    if line.end {
        let _ = write!(
            text,
            "  {}",
            s.dim(&format!("(end of branch {})", line.branch))
        );
    }
    text.push('\n');
}

/// The answers a resumed step was given (its `resumed` metadata), as short text.
fn answers(cp: &Checkpoint) -> Vec<String> {
    let tasks = cp
        .metadata
        .get("resumed")
        .and_then(|r| r.get("tasks"))
        .and_then(Value::as_array);
    tasks
        .into_iter()
        .flatten()
        .map(|t| {
            let node = t.get("node").and_then(Value::as_str).unwrap_or("?");
            let values = t.get("values").cloned().unwrap_or(Value::Null);
            format!("answered {node}: {}", short(&values, 40))
        })
        .collect()
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
