//! The offline model's side of the job: the lead's turns for the review and the follow-up, and
//! the exploring subagent's turns. Turns that depend on earlier results read them from the
//! request, so every figure, source and finding in the report comes from a tool.

use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::ModelRequest;

use super::playbook::{fixed, last_human, last_result, Turn};
use super::report::{self, Sources};

/// The converted upload.
pub(crate) const UPLOAD: &str = "/mnt/user-data/uploads/sales-notes.md";
/// The report.
pub(crate) const REPORT: &str = "/mnt/user-data/outputs/sales-review.md";
/// The subagent type the lead delegates to.
pub(crate) const ANALYST: &str = "industry-analyst";

/// Which review script the lead plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Script {
    /// Read, search, delegate, write, present.
    Deliver,
    /// The same, but the report is never presented (the run must end in error).
    NeverPresent,
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

/// Every result of tool `name` since the newest human message.
fn results_since_human<'r>(request: &'r ModelRequest, name: &str) -> Vec<&'r str> {
    let mut found: Vec<&str> = request
        .messages
        .iter()
        .rev()
        .take_while(|m| !matches!(m, Message::Human { .. }))
        .filter_map(|m| match m {
            Message::Tool(t) if t.name == name && !t.is_error() => Some(t.content.as_str()),
            _ => None,
        })
        .collect();
    found.reverse();
    found
}

/// How many human messages the conversation holds (the review's number on the thread).
fn reviews(request: &ModelRequest) -> usize {
    request
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Human { content, .. } if content.starts_with("/sales-review Review")))
        .count()
}

/// Searches for the regions that moved most (read from the converted PDF).
fn search_turn(request: &ModelRequest) -> AiMessage {
    let regions = report::regions(last_result(request, "read_file"));
    let Some((best, worst)) = report::best_and_worst(&regions) else {
        return AiMessage::text("The upload has no revenue table; nothing to search for.");
    };
    AiMessage::calls([
        call(
            "search-1",
            "web_search",
            json!({"query": format!("{} manufacturing sensor budgets 2026", worst.name)}),
        ),
        call(
            "search-2",
            "web_search",
            json!({"query": format!("{} automation sensor budgets 2026", best.name)}),
        ),
    ])
}

/// Delegates the benchmark comparison, naming the regions and our changes.
fn delegate_turn(request: &ModelRequest) -> AiMessage {
    let ours: Vec<String> = report::regions(last_result(request, "read_file"))
        .iter()
        .map(|r| format!("{} {:+.1}%", r.name, r.change()))
        .collect();
    AiMessage::calls([call(
        "delegate-1",
        "task",
        json!({
            "description": "Industry benchmark per region",
            "prompt": format!(
                "Find the 2026 market growth benchmark for condition-monitoring sensors per \
                 region and compare it with our Q1-to-Q4 change: {}.", ours.join(", ")),
            "subagent_type": ANALYST,
        }),
    )])
}

/// Writes the report from the PDF's text, the search results and the subagent's findings.
fn write_turn(request: &ModelRequest) -> AiMessage {
    let sources = Sources {
        pdf: last_result(request, "read_file"),
        evidence: results_since_human(request, "web_search"),
        findings: last_result(request, "task"),
        review: reviews(request),
    };
    AiMessage::calls([call(
        "write-1",
        "write_file",
        json!({"path": REPORT, "content": report::compose(&sources)}),
    )])
}

/// The lead's review: look, read, find `web_search`, search, try to clean up with `bash`
/// (denied), delegate, write, present (unless `script` says not), answer.
pub(crate) fn review(script: Script) -> Vec<Turn> {
    let mut turns: Vec<Turn> = vec![
        fixed(AiMessage::calls([call(
            "ls-1",
            "ls",
            json!({"path": "/mnt/user-data/uploads"}),
        )])),
        fixed(AiMessage::calls([call(
            "read-1",
            "read_file",
            json!({"path": UPLOAD}),
        )])),
        fixed(AiMessage::calls([call(
            "find-1",
            "tool_search",
            json!({"query": "select:web_search"}),
        )])),
        Box::new(search_turn),
        fixed(AiMessage::calls([call(
            "cleanup-1",
            "bash",
            json!({"command": "rm -rf /mnt/user-data/uploads/*"}),
        )])),
        Box::new(delegate_turn),
        Box::new(write_turn),
    ];
    if script == Script::Deliver {
        turns.push(fixed(AiMessage::calls([call(
            "present-1",
            "present_files",
            json!({"filepaths": [REPORT]}),
        )])));
    }
    turns.push(Box::new(|request: &ModelRequest| {
        let report = last_result(request, "write_file");
        AiMessage::text(format!("The sales review is ready: {REPORT} ({report})."))
    }));
    turns
}

/// The follow-up on the same thread: the first run's report is still in the workspace.
pub(crate) fn follow_up() -> Vec<Turn> {
    vec![
        fixed(AiMessage::calls([call(
            "ls-2",
            "ls",
            json!({"path": "/mnt/user-data/outputs"}),
        )])),
        fixed(AiMessage::calls([call(
            "read-2",
            "read_file",
            json!({"path": REPORT}),
        )])),
        Box::new(|request: &ModelRequest| {
            let report = last_result(request, "read_file");
            let advice = report
                .split_once("## Recommendation")
                .map_or("The report has no recommendation.", |(_, r)| r.trim());
            AiMessage::text(format!(
                "You asked: {:?}. From {REPORT}, written earlier on this thread:\n{advice}",
                last_human(request)
            ))
        }),
    ]
}

/// The exploring subagent: search the benchmark, read our figures, compare.
pub(crate) fn analyst() -> Vec<Turn> {
    vec![
        fixed(AiMessage::calls([call(
            "bench-1",
            "web_search",
            json!({"query": "regional benchmark growth condition-monitoring 2026", "limit": 2}),
        )])),
        fixed(AiMessage::calls([call(
            "ours-1",
            "read_file",
            json!({"path": UPLOAD}),
        )])),
        Box::new(findings_turn),
    ]
}

/// The subagent's answer: each region's benchmark beside our change, with the source.
fn findings_turn(request: &ModelRequest) -> AiMessage {
    let search = last_result(request, "web_search");
    let source = search
        .lines()
        .find_map(|l| l.trim().strip_prefix("source: "))
        .unwrap_or("no source found");
    let mut out = String::from("Benchmark against our Q1-to-Q4 change:\n");
    for r in report::regions(last_result(request, "read_file")) {
        let bench = report::benchmark(search, &r.name).unwrap_or("no benchmark found");
        out.push_str(&format!(
            "- {}: ours {:+.1}%, market {bench}\n",
            r.name,
            r.change()
        ));
    }
    out.push_str(&format!("Source: {source}."));
    AiMessage::text(out)
}
