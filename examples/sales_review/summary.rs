//! What the example prints after each run: the answer, the capability trace per tool, the
//! delegation, the artifacts, the receipt; and at the end the commands to inspect the file.

use stategraph_nodes::{Stage, TraceEntry, Verdict};

use super::{Review, Workspace, THREAD};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Each tool of `entries` (in order of first appearance) with the stages it passed and, when
/// it stopped before `Delivered`, the first entry that stopped it.
pub(crate) fn tool_lines(entries: &[TraceEntry]) -> Vec<String> {
    let mut tools: Vec<&str> = Vec::new();
    for e in entries {
        if !tools.contains(&e.tool.as_str()) {
            tools.push(&e.tool);
        }
    }
    tools
        .into_iter()
        .map(|tool| {
            let of: Vec<&TraceEntry> = entries.iter().filter(|e| e.tool == tool).collect();
            let furthest = of.iter().filter(|e| e.passed()).map(|e| e.stage).max();
            let chain = furthest.map_or("-".to_owned(), |last| {
                STAGES
                    .iter()
                    .filter(|s| **s <= last)
                    .map(Stage::to_string)
                    .collect::<Vec<_>>()
                    .join(" > ")
            });
            let stop = of
                .iter()
                .find(|e| !e.passed() && furthest.is_none_or(|f| e.stage > f))
                .map(|e| format!("  [stopped at {}: {}]", e.stage, why(&e.verdict)))
                .unwrap_or_default();
            format!("{tool:<14} {chain}{stop}{}", hidden_before(&of))
        })
        .collect()
}

/// For a tool shown on some model calls and hidden on others: on which, and by whom.
fn hidden_before(of: &[&TraceEntry]) -> String {
    let shown = of.iter().any(|e| e.stage == Stage::Visible && e.passed());
    let hidden: Vec<(u32, &str)> = of
        .iter()
        .filter(|e| e.stage == Stage::Visible)
        .filter_map(|e| match (&e.verdict, e.model_call) {
            (Verdict::Removed { by, .. }, Some(n)) => Some((n, by.as_str())),
            _ => None,
        })
        .collect();
    match hidden.first() {
        Some((_, by)) if shown => {
            let calls: Vec<String> = hidden.iter().map(|(n, _)| n.to_string()).collect();
            format!("  [hidden on model calls {} by {by}]", calls.join(", "))
        }
        _ => String::new(),
    }
}

const STAGES: [Stage; 6] = [
    Stage::Available,
    Stage::Authorized,
    Stage::Visible,
    Stage::Executed,
    Stage::Returned,
    Stage::Delivered,
];

fn why(v: &Verdict) -> String {
    match v {
        Verdict::Passed => "passed".into(),
        Verdict::Removed { by, reason } => format!("removed by {by}: {reason}"),
        Verdict::Denied { by, reason } => format!("denied by {by}: {reason}"),
        Verdict::Failed { reason } => format!("failed: {reason}"),
        Verdict::Unverified { reason } => format!("unverified: {reason}"),
    }
}

/// Prints one run's outcome.
///
/// # Errors
/// The receipt cannot be rendered.
pub(crate) fn print_run(ws: &Workspace, review: &Review) -> Result<(), Error> {
    println!("\nlead: {}", review.answer);
    println!("\ncapability trace (each tool through delivered, or why not):");
    let (own, child): (Vec<TraceEntry>, Vec<TraceEntry>) =
        review.trace.iter().cloned().partition(TraceEntry::is_own);
    for line in tool_lines(&own) {
        println!("  {line}");
    }
    for d in &review.delegations {
        println!(
            "delegation {} ({}): {}, model {}",
            d.id,
            d.request.subagent_type,
            d.outcome.status.as_str(),
            d.model.as_deref().unwrap_or("-")
        );
        if let Some(pool) = &d.pool {
            println!("  pool: {}", pool.names().join(", "));
        }
        let under: Vec<TraceEntry> = child
            .iter()
            .filter(|e| e.parent_call.as_deref() == Some(d.id.as_str()))
            .cloned()
            .collect();
        let entries = if under.is_empty() { &d.trace } else { &under };
        for line in tool_lines(entries) {
            println!("    {line}");
        }
    }
    println!("artifacts: {:?}", review.artifacts);
    println!(
        "run {} {}{}",
        review.run_id,
        review.status,
        review
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    );
    println!("receipt {}", serde_json::to_string_pretty(&review.receipt)?);
    println!(
        "thread {THREAD:?}: {} checkpoints, newest at step {}, in {}",
        review.history,
        review.last_step,
        ws.db.display()
    );
    Ok(())
}

/// Prints the `stategraph` commands that inspect what the review left in the file.
///
/// # Errors
/// The checkpoint file cannot be read.
pub(crate) fn print_commands(ws: &Workspace, review: &Review) -> Result<(), Error> {
    let db = ws.db.display();
    println!("\ncheckpoint rows per thread and namespace (the subagent wrote none):");
    for (thread, ns, rows) in ws.checkpoint_rows()? {
        let ns = if ns.is_empty() { "(root)" } else { ns.as_str() };
        println!("  {thread} {ns}: {rows}");
    }
    println!(
        "\n== inspect it (`stategraph` is `cargo run --release --bin stategraph --` here, or \
         `cargo install --path cli`)"
    );
    println!("stategraph history {db} -t {THREAD}");
    if let Some(p) = review.presented_step {
        println!(
            "stategraph diff {db} -t {THREAD} step:{} step:{p}   # what presenting the report changed",
            p - 1
        );
        println!("stategraph fork {db} -t {THREAD} -c step:{p} --to {THREAD}-from-step-{p}");
    }
    println!(
        "stategraph run {db} {}   # the run and its delivery receipt",
        review.run_id
    );
    Ok(())
}
