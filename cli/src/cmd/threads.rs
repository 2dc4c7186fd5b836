//! `stategraph threads FILE`: the threads of the file with their status and subgraph
//! namespaces.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::inspect::{self, format_utc_ms};
use stategraph_checkpoints::{Saver, ThreadInfo};

use crate::failure::Outcome;
use crate::file::{file_error, open};
use crate::output::{emit, json_text, Output, Style};

/// A subgraph namespace of a thread with its number of checkpoints.
#[derive(Debug, Clone, Copy)]
struct Subgraph<'a> {
    ns: &'a str,
    checkpoints: usize,
}

/// List the threads of `file`.
pub(super) async fn run(out: Output, file: &Path) -> Outcome {
    let saver = open(file)?;
    let infos = saver.list_threads().await?;
    let namespaces = inspect::namespaces(file).map_err(|e| file_error(file, e))?;
    saver.close();
    let subgraphs = |t: &str| -> Vec<Subgraph<'_>> {
        namespaces
            .iter()
            .filter(|(th, ns, _)| th == t && !ns.is_empty())
            .map(|(_, ns, n)| Subgraph {
                ns: ns.as_str(),
                checkpoints: *n,
            })
            .collect()
    };
    if out.json {
        let list: Vec<Value> = infos
            .iter()
            .map(|i| thread_json(i, &subgraphs(i.thread.as_str())))
            .collect();
        return Ok(emit(&json_text(&Value::Array(list)))?);
    }
    if infos.is_empty() {
        return Ok(emit(&format!("no threads in {}\n", file.display()))?);
    }
    let counts: Vec<usize> = infos
        .iter()
        .map(|i| subgraphs(i.thread.as_str()).len())
        .collect();
    Ok(emit(&table(&infos, &counts, out.style))?)
}

fn thread_json(i: &ThreadInfo, subgraphs: &[Subgraph<'_>]) -> Value {
    json!({
        "thread": i.thread.as_str(),
        "checkpoints": i.checkpoints,
        "last_step": i.last_step,
        "status": i.status.as_str(),
        "updated_at_ms": i.updated_at_ms,
        "updated_at": format_utc_ms(i.updated_at_ms),
        "namespaces": subgraphs
            .iter()
            .map(|s| json!({ "ns": s.ns, "checkpoints": s.checkpoints }))
            .collect::<Vec<_>>(),
    })
}

/// The text table: one row per thread; `subgraphs[i]` is thread `i`'s number of subgraph
/// namespaces.
fn table(infos: &[ThreadInfo], subgraphs: &[usize], s: Style) -> String {
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
            "{:<width$}  {:>11}  {:>5}  {:<11}  {:<24}  SUBGRAPHS",
            "THREAD", "CHECKPOINTS", "STEP", "STATUS", "UPDATED"
        ))
    );
    for (i, &n) in infos.iter().zip(subgraphs) {
        let status = i.status.as_str();
        let pad = " ".repeat(11usize.saturating_sub(status.len()));
        let subs = if n == 0 {
            "-".to_owned()
        } else {
            format!("{n} namespace(s)")
        };
        let _ = writeln!(
            text,
            "{:<width$}  {:>11}  {:>5}  {}{pad}  {:<24}  {subs}",
            i.thread.as_str(),
            i.checkpoints,
            i.last_step,
            s.status(status),
            format_utc_ms(i.updated_at_ms),
        );
    }
    text
}
