//! `stategraph threads FILE`: the threads of the file with their status and namespaces, each
//! named as `--ns` takes it.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_checkpoints::{ThreadId, ThreadInfo};

use crate::failure::Outcome;
use crate::file::{ns_name, open_read};
use crate::output::{emit, json_text, Output, Style};

/// A namespace of a thread with its number of checkpoints.
#[derive(Debug, Clone, Copy)]
struct Space<'a> {
    /// As stored: `""` for the root graph.
    ns: &'a str,
    checkpoints: usize,
}

/// List the threads of `file`.
pub(super) async fn run(out: Output, file: &Path) -> Outcome {
    let saver = open_read(file).await?;
    let infos = saver.list_threads().await?;
    let namespaces = crate::file::namespaces(&saver, file).await?;
    saver.close()?;
    let spaces = |t: &str| -> Vec<Space<'_>> {
        namespaces
            .iter()
            .filter(|(th, _, _)| th == t)
            .map(|(_, ns, n)| Space {
                ns: ns.as_str(),
                checkpoints: *n,
            })
            .collect()
    };
    let invalid = invalid_ids(&namespaces);
    if out.json {
        let mut list: Vec<Value> = infos
            .iter()
            .map(|i| thread_json(i, &spaces(i.thread.as_str())))
            .collect();
        list.extend(
            invalid
                .iter()
                .map(|(name, n)| json!({ "thread": name, "checkpoints": n, "status": INVALID_ID })),
        );
        return Ok(emit(&json_text(&Value::Array(list)))?);
    }
    if infos.is_empty() && invalid.is_empty() {
        return Ok(emit(&format!("no threads in {}\n", file.display()))?);
    }
    let per_thread: Vec<Vec<Space<'_>>> = infos.iter().map(|i| spaces(i.thread.as_str())).collect();
    let mut text = table(&infos, &per_thread, out.style);
    for (name, n) in &invalid {
        let _ = writeln!(
            text,
            "{}  {n:>11}  {:>5}  {INVALID_ID}: the name holds a control character or is not a \
             thread id (verify reports it)",
            name.escape_debug(),
            "-"
        );
    }
    Ok(emit(&text)?)
}

/// The status `threads` gives a thread whose stored name is not a valid thread id.
const INVALID_ID: &str = "invalid-id";

/// The threads whose stored name is not a valid thread id (an edited or damaged file), with
/// their checkpoints in every namespace: listed escaped, not failing the whole list.
fn invalid_ids(namespaces: &[(String, String, usize)]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for (thread, _, n) in namespaces {
        if ThreadId::new(thread.as_str()).is_ok() {
            continue;
        }
        match out.last_mut() {
            Some((name, total)) if name == thread => *total += n,
            _ => out.push((thread.clone(), *n)),
        }
    }
    out
}

/// `--json`: the thread's row; `namespaces` lists its subgraph namespaces (`ns` as stored,
/// `name` as `--ns` takes it).
fn thread_json(i: &ThreadInfo, spaces: &[Space<'_>]) -> Value {
    json!({
        "thread": i.thread.as_str(),
        "checkpoints": i.checkpoints,
        "last_step": i.last_step,
        "status": i.status.as_str(),
        "updated_at_ms": i.updated_at_ms,
        "updated_at": format_utc_ms(i.updated_at_ms),
        "namespaces": spaces
            .iter()
            .filter(|s| !s.ns.is_empty())
            .map(|s| json!({ "ns": s.ns, "name": ns_name(s.ns), "checkpoints": s.checkpoints }))
            .collect::<Vec<_>>(),
    })
}

/// The text table: one row per thread, then, when it has subgraph namespaces, one indented
/// line per namespace (the root as `(root)`) with its checkpoints, named as `--ns` takes it.
fn table(infos: &[ThreadInfo], spaces: &[Vec<Space<'_>>], s: Style) -> String {
    let width = infos
        .iter()
        .map(|i| i.thread.as_str().chars().count())
        .max()
        .unwrap_or(0)
        .max("THREAD".len());
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}",
        s.bold(&format!(
            "{:<width$}  {:>11}  {:>5}  {:<11}  {:<24}  NAMESPACES",
            "THREAD", "CHECKPOINTS", "STEP", "STATUS", "UPDATED"
        ))
    );
    for (i, spaces) in infos.iter().zip(spaces) {
        let status = i.status.as_str();
        let pad = " ".repeat(11usize.saturating_sub(status.len()));
        let subgraphs = spaces.iter().filter(|sp| !sp.ns.is_empty()).count();
        let count = match subgraphs {
            0 => "(root)".to_owned(),
            n => format!("(root) + {n} subgraph(s), --ns:"),
        };
        let _ = writeln!(
            text,
            "{:<width$}  {:>11}  {:>5}  {}{pad}  {:<24}  {count}",
            i.thread.as_str(),
            i.checkpoints,
            i.last_step,
            s.status(status),
            format_utc_ms(i.updated_at_ms),
        );
        if subgraphs > 0 {
            for sp in spaces {
                let _ = writeln!(
                    text,
                    "    {}  {} checkpoint(s)",
                    s.cyan(ns_name(sp.ns)),
                    sp.checkpoints
                );
            }
        }
    }
    text
}
