//! What the commands print and how: text or JSON, ANSI colour gated on a terminal and
//! `NO_COLOR`, the JSON shapes of headers, pending writes and runs, short value text.

use std::io::{IsTerminal, Write};

use serde_json::{json, Value};
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_checkpoints::{Checkpoint, PendingWrite, RunRecord, RunStatus, WriteKind};

use crate::ColorWhen;

// The JSON forms shared with the studio.
pub(crate) use stategraph_checkpoints::inspect::{header_json, pending_json};

/// What every command needs to know about its output: JSON or text, and the text's colours.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    /// One JSON document instead of text.
    pub(crate) json: bool,
    /// The colours of the text.
    pub(crate) style: Style,
}

/// Colours, or none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    on: bool,
}

impl Style {
    /// Decide from the option, whether stdout is a terminal, and `NO_COLOR`.
    pub(crate) fn new(when: ColorWhen) -> Self {
        let on = match when {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => {
                std::io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        Style { on }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub(crate) fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
    pub(crate) fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }
    pub(crate) fn red(self, text: &str) -> String {
        self.paint("31", text)
    }
    pub(crate) fn green(self, text: &str) -> String {
        self.paint("32", text)
    }
    pub(crate) fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }
    pub(crate) fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }

    /// A diff line coloured by its first character (`+` green, `-` red, `~` yellow).
    pub(crate) fn diff_line(self, line: &str) -> String {
        match line.chars().next() {
            Some('+') => self.green(line),
            Some('-') => self.red(line),
            Some('~') => self.yellow(line),
            _ => line.to_owned(),
        }
    }

    /// A thread status word, coloured.
    pub(crate) fn status(self, status: &str) -> String {
        match status {
            "done" => self.green(status),
            "interrupted" => self.yellow(status),
            "ready" => self.cyan(status),
            "error" => self.red(status),
            other => other.to_owned(),
        }
    }

    /// A run status word, coloured: success green, interrupted and cancelled yellow, error
    /// and timeout red.
    pub(crate) fn run_status(self, status: RunStatus) -> String {
        let word = status.as_str();
        match status {
            RunStatus::Success => self.green(word),
            RunStatus::Interrupted | RunStatus::Cancelled => self.yellow(word),
            RunStatus::Error | RunStatus::Timeout => self.red(word),
            RunStatus::Pending | RunStatus::Running => word.to_owned(),
        }
    }
}

/// Write `text` to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn emit(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// A value as one line of JSON, cut at `max` characters.
pub(crate) fn short(v: &Value, max: usize) -> String {
    let text = v.to_string();
    if text.chars().count() > max {
        let cut: String = text.chars().take(max.saturating_sub(3)).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// One text line about a pending write: a label (`interrupt`, `error`, `kept`, `resumed`)
/// and what it says.
#[derive(Debug, Clone)]
pub(crate) struct PendingLine {
    pub(crate) label: String,
    pub(crate) text: String,
}

/// Text lines for pending writes: interrupts, errors, kept outputs.
pub(crate) fn pending_lines(pending: &[PendingWrite], style: Style) -> Vec<PendingLine> {
    let line = |label: String, text: String| PendingLine { label, text };
    let mut out = Vec::new();
    for w in pending {
        match &w.kind {
            WriteKind::Interrupt { id, value } => out.push(line(
                style.yellow("interrupt"),
                format!("{}: {} (id {id})", w.node, short(value, 100)),
            )),
            WriteKind::Error(m) => out.push(line(style.red("error"), format!("{}: {m}", w.node))),
            WriteKind::Output(_) => out.push(line(
                "kept".to_owned(),
                format!("{}: output of a finished task (task {})", w.node, w.task_id),
            )),
            WriteKind::Resume(values) => out.push(line(
                "resumed".to_owned(),
                format!("{}: {} resume value(s) consumed", w.node, values.len()),
            )),
        }
    }
    out
}

/// Render a JSON document for `--json`.
pub(crate) fn json_text(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    s.push('\n');
    s
}

/// The nodes a checkpoint would run next, comma-separated, or `-`.
pub(crate) fn next_text(cp: &Checkpoint) -> String {
    let next = cp.next_nodes();
    if next.is_empty() {
        "-".to_owned()
    } else {
        next.join(", ")
    }
}

/// Length of text without ANSI escapes.
pub(crate) fn visible_len(text: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in text.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

/// A run as JSON, with whether it has a delivery receipt.
pub(crate) fn run_json(run: &RunRecord, has_receipt: bool) -> Value {
    json!({
        "run_id": run.run_id.as_str(),
        "thread": run.thread.as_str(),
        "status": run.status.as_str(),
        "reason": run.reason,
        "stop_reason": run.stop_reason,
        "created_at_ms": run.created_at_ms,
        "created_at": format_utc_ms(run.created_at_ms),
        "updated_at_ms": run.updated_at_ms,
        "updated_at": format_utc_ms(run.updated_at_ms),
        "metadata": run.metadata,
        "usage": run.usage,
        "receipt": has_receipt,
    })
}
