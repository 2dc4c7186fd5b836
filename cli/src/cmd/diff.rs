//! `stategraph diff FILE -t THREAD A B` (or `--since-parent C`): what changed between two
//! checkpoints of a thread.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::diff::{diff_values, parts_to_json, StateDiff};
use stategraph_checkpoints::{Checkpoint, FieldPart, LoadedCheckpoint, Namespace, Saver, ThreadId};

use crate::failure::{Failure, Outcome};
use crate::file::{headers, load, open_read, resolve, state_of, thread_id};
use crate::output::{emit, json_text, Output, Style};

/// Which two states `diff` compares.
#[derive(Debug, Clone)]
pub(crate) enum Comparison {
    /// Checkpoint A (older) to checkpoint B (newer).
    Between(String, String),
    /// A checkpoint's parent to the checkpoint: what its step changed.
    SinceParent(String),
}

impl Comparison {
    /// What `--since-parent C`, or `A B`, asks to compare.
    ///
    /// # Errors
    /// A usage failure when neither is given whole.
    pub(crate) fn of(
        since_parent: &Option<String>,
        a: &Option<String>,
        b: &Option<String>,
    ) -> Result<Comparison, Failure> {
        match (since_parent, a, b) {
            (Some(c), _, _) => Ok(Comparison::SinceParent(c.clone())),
            (None, Some(a), Some(b)) => Ok(Comparison::Between(a.clone(), b.clone())),
            _ => Err(Failure::usage(
                "diff needs two checkpoints A B, or --since-parent C",
            )),
        }
    }
}

/// The two sides of a diff: each checkpoint's header (none for the empty state before a
/// root checkpoint) and its state.
#[derive(Debug)]
struct Sides {
    from_cp: Option<Checkpoint>,
    from: Value,
    to_cp: Checkpoint,
    to: Value,
}

/// Diff the states `comparison` names in `(thread, ns)`.
pub(super) async fn run(
    out: Output,
    file: &Path,
    thread: &str,
    comparison: Comparison,
    ns: &str,
) -> Outcome {
    let saver = open_read(file).await?;
    let thread = thread_id(thread)?;
    let ns = crate::file::namespace(ns);
    let list = headers(&*saver, file, &thread, &ns).await?;
    let sides = match comparison {
        Comparison::Between(a, b) => {
            let a = resolve(&list, &a, &thread, &ns)?;
            let b = resolve(&list, &b, &thread, &ns)?;
            let la = load(&*saver, &thread, &ns, a).await?;
            let lb = load(&*saver, &thread, &ns, b).await?;
            let (sa, sb) = (state_of(&la)?, state_of(&lb)?);
            Sides {
                from_cp: Some(la.checkpoint),
                from: sa,
                to_cp: lb.checkpoint,
                to: sb,
            }
        }
        Comparison::SinceParent(c) => {
            let c = resolve(&list, &c, &thread, &ns)?;
            let lc = load(&*saver, &thread, &ns, c).await?;
            let to = state_of(&lc)?;
            let (from_cp, from) = parent_state(&*saver, &thread, &ns, &lc, &to, &list).await?;
            Sides {
                from_cp,
                from,
                to_cp: lc.checkpoint,
                to,
            }
        }
    };
    saver.close()?;
    let d = diff_values(&sides.from, &sides.to);
    if out.json {
        let doc = json!({
            "thread": thread.as_str(),
            "ns": ns.as_str(),
            "from": sides.from_cp.as_ref().map(|c| c.id.to_string()),
            "to": sides.to_cp.id.to_string(),
            "diff": diff_json(&d),
            "patch": d.to_json_patch(),
        });
        return Ok(emit(&json_text(&doc))?);
    }
    Ok(emit(&diff_text(&sides, &d, out.style))?)
}

/// `--- A`, `+++ B`, then one line per change, coloured by its kind.
fn diff_text(sides: &Sides, d: &StateDiff, s: Style) -> String {
    let describe = |c: &Checkpoint| format!("{} (step {}, {})", c.id, c.step, c.source.as_str());
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}",
        s.bold(&format!(
            "--- {}",
            sides
                .from_cp
                .as_ref()
                .map_or_else(|| "(no parent: empty state)".to_owned(), describe)
        ))
    );
    let _ = writeln!(
        text,
        "{}",
        s.bold(&format!("+++ {}", describe(&sides.to_cp)))
    );
    if d.is_empty() {
        let _ = writeln!(text, "{}", s.dim("(no changes)"));
    }
    for l in d.to_string().lines() {
        let _ = writeln!(text, "{}", s.diff_line(l));
    }
    text
}

/// A state diff as JSON: `{"fields": [{"field", "change": {"kind", ...}}]}`.
fn diff_json(d: &StateDiff) -> Value {
    serde_json::to_value(d).unwrap_or(Value::Null)
}

/// The state of `lc`'s parent: rebuilt from `lc`'s own state when its step only appended
/// (what `Saver::changes` tells without loading the parent), else loaded.
async fn parent_state(
    saver: &dyn Saver,
    thread: &ThreadId,
    ns: &Namespace,
    lc: &LoadedCheckpoint,
    to: &Value,
    list: &[Checkpoint],
) -> Result<(Option<Checkpoint>, Value), Failure> {
    let Some(parent) = lc.checkpoint.parent else {
        return Ok((None, json!({})));
    };
    let header = list.iter().find(|c| c.id == parent).cloned();
    let changes = saver.changes(thread, ns, lc.checkpoint.id).await?;
    let appends_only = changes
        .fields
        .iter()
        .all(|(_, parts)| parts.iter().all(|p| matches!(p, FieldPart::Tail(_))));
    if appends_only && header.is_some() {
        if let Some(from) = without_appends(to, &changes.fields) {
            return Ok((header, from));
        }
    }
    let lp = load(saver, thread, ns, parent).await?;
    let from = state_of(&lp)?;
    Ok((Some(lp.checkpoint), from))
}

/// `state` with the items each field's tail parts appended taken off again; `None` when a
/// field is not a list long enough (then the parent is loaded instead).
fn without_appends(state: &Value, fields: &[(String, Vec<FieldPart>)]) -> Option<Value> {
    let mut from = state.clone();
    for (field, parts) in fields {
        let added = match parts_to_json(parts) {
            Ok(Value::Array(items)) => items.len(),
            _ => return None,
        };
        match from.get_mut(field) {
            Some(Value::Array(list)) if list.len() >= added => {
                list.truncate(list.len() - added);
            }
            _ => return None,
        }
    }
    Some(from)
}
