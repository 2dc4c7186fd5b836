//! `stategraph show FILE -t THREAD`: the state at a checkpoint with its header, or one value
//! of it.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_checkpoints::{CheckpointId, LoadedCheckpoint, Namespace, ThreadId};

use crate::failure::{Failure, Outcome};
use crate::file::{
    headers, load, open_read, resolve, state_of, stored_fields, thread_id, unwritten_fields,
};
use crate::output::{
    emit, header_json, json_text, next_text, pending_json, pending_lines, visible_len, Output,
    Style,
};

/// Which part of the state `show` prints.
#[derive(Debug, Clone)]
pub(crate) enum StatePart {
    /// The whole state with the checkpoint's header.
    All,
    /// One field's value (`--field`).
    Field(String),
    /// The value at a JSON pointer into the state (`--path`).
    Pointer(String),
}

impl StatePart {
    /// The part `--field` or `--path` asks for (`--field` first), or the whole state.
    pub(crate) fn of(field: &Option<String>, path: &Option<String>) -> StatePart {
        match (field, path) {
            (Some(f), _) => StatePart::Field(f.clone()),
            (None, Some(p)) => StatePart::Pointer(p.clone()),
            (None, None) => StatePart::All,
        }
    }
}

/// Show `part` of the state at `checkpoint` (the newest by default) of `(thread, ns)`.
pub(super) async fn run(
    out: Output,
    file: &Path,
    thread: &str,
    checkpoint: Option<&str>,
    part: StatePart,
    ns: &str,
) -> Outcome {
    if let StatePart::Pointer(p) = &part {
        if !p.is_empty() && !p.starts_with('/') {
            return Err(Failure::usage(format!(
                "--path `{p}`: a JSON pointer starts with '/', e.g. /log/0"
            )));
        }
    }
    let saver = open_read(file).await?;
    let thread = thread_id(thread)?;
    let ns = crate::file::namespace(ns);
    let list = headers(&*saver, file, &thread, &ns).await?;
    let id = match checkpoint {
        Some(text) => resolve(&list, text, &thread, &ns)?,
        None => list[0].id,
    };
    let loaded = load(&*saver, &thread, &ns, id).await?;
    saver.close()?;
    let state = state_of(&loaded)?;
    if let Some(v) = picked(&part, &state, &loaded, id)? {
        return Ok(emit(&json_text(&v))?);
    }
    if out.json {
        return Ok(emit(&json_text(&state_json(&thread, &ns, &loaded, state)))?);
    }
    Ok(emit(&state_text(&thread, &ns, &loaded, &state, out.style))?)
}

/// The value `part` names, or `None` for the whole state.
fn picked(
    part: &StatePart,
    state: &Value,
    loaded: &LoadedCheckpoint,
    id: CheckpointId,
) -> Result<Option<Value>, Failure> {
    Ok(match part {
        StatePart::All => None,
        StatePart::Field(f) if unwritten_fields(loaded).contains(f) => {
            return Err(Failure::runtime(format!(
                "field {f} has never been written at checkpoint {id} (it holds its type's default)"
            )))
        }
        StatePart::Field(f) => Some(state.get(f).cloned().ok_or_else(|| {
            Failure::runtime(format!(
                "field {f} has no stored value at checkpoint {id} (stored fields: {})",
                stored_fields(loaded)
            ))
        })?),
        StatePart::Pointer(p) => Some(state.pointer(p).cloned().ok_or_else(|| {
            Failure::runtime(format!(
                "nothing at {p} in the state at checkpoint {id} (stored fields: {})",
                stored_fields(loaded)
            ))
        })?),
    })
}

/// `--json`: the thread, the namespace, the header with pending writes and control state,
/// the state, and the fields never written (not in `state`).
fn state_json(thread: &ThreadId, ns: &Namespace, loaded: &LoadedCheckpoint, state: Value) -> Value {
    let cp = &loaded.checkpoint;
    let mut header = header_json(cp);
    header["pending"] = loaded.pending.iter().map(pending_json).collect();
    header["control"] = serde_json::to_value(&cp.control).unwrap_or(Value::Null);
    json!({
        "thread": thread.as_str(),
        "ns": ns.as_str(),
        "checkpoint": header,
        "state": state,
        "unwritten": unwritten_fields(loaded),
    })
}

/// The header as aligned `key  value` lines, a blank line, and the state as JSON.
fn state_text(
    thread: &ThreadId,
    ns: &Namespace,
    loaded: &LoadedCheckpoint,
    state: &Value,
    s: Style,
) -> String {
    let cp = &loaded.checkpoint;
    let mut text = String::new();
    let mut line = |k: &str, v: &str| {
        let pad = " ".repeat(12usize.saturating_sub(visible_len(k)));
        let _ = writeln!(text, "{}{pad}{v}", s.bold(k));
    };
    line("checkpoint", &s.yellow(&cp.id.to_string()));
    line("thread", thread.as_str());
    if !ns.is_root() {
        line("namespace", ns.as_str());
    }
    line(
        "parent",
        &cp.parent.map_or_else(|| "-".to_owned(), |p| p.to_string()),
    );
    line("step", &cp.step.to_string());
    line("source", cp.source.as_str());
    line("created", &format_utc_ms(cp.created_at_ms));
    line("next", &next_text(cp));
    let unwritten = unwritten_fields(loaded);
    if !unwritten.is_empty() {
        line(
            "unwritten",
            &format!(
                "{} (never written: the type's default)",
                unwritten.join(", ")
            ),
        );
    }
    for pending in pending_lines(&loaded.pending, s) {
        line(&pending.label, &pending.text);
    }
    if !cp.metadata.is_empty() {
        line(
            "metadata",
            &serde_json::to_string(&cp.metadata).unwrap_or_default(),
        );
    }
    text.push('\n');
    text.push_str(&json_text(state));
    text
}
