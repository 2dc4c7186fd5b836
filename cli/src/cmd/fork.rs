//! `stategraph fork FILE -t THREAD -c CHECKPOINT [--to NEW] [--set PATH=JSON]...`: a new
//! branch from a checkpoint, in the thread or in a new thread holding a copy of that branch,
//! made by the library's [`ForkPlan`](stategraph_checkpoints::fork::ForkPlan) (the fork
//! `CompiledGraph::fork` makes too).

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::fork::{EditError, FieldEdit, FieldPath, ForkError, ForkPlan, Retyped};
use stategraph_checkpoints::shape::Fit;
use stategraph_checkpoints::{CheckpointId, Namespace, ThreadId};

use crate::failure::{Failure, Outcome};
use crate::file::{headers, load, open, resolve, thread_id};
use crate::output::{emit, json_text, short, Output};

/// Fork `thread` at `checkpoint` into a new branch (in the new thread `to`, if given), with
/// the `--set` edits `sets`; with `force`, also when an edit does not fit its field's
/// recorded shape.
pub(super) async fn run(
    out: Output,
    file: &Path,
    thread: &str,
    checkpoint: &str,
    to: Option<&str>,
    sets: &[String],
    force: bool,
) -> Outcome {
    // Everything the user typed is checked before the file is touched.
    let edits: Vec<FieldEdit> = sets
        .iter()
        .map(|s| parse_set(s))
        .collect::<Result<_, _>>()?;
    let from = thread_id(thread)?;
    let to_given = to.is_some();
    let to = match to {
        Some(to) => thread_id(to)?,
        None => from.clone(),
    };
    if to == from && to_given {
        return Err(Failure::usage(
            "--to must name a new thread; leave it out to branch inside the forked thread",
        ));
    }
    let saver = open(file).await?;
    let root = Namespace::root();
    let list = headers(&*saver, file, &from, &root).await?;
    let c = resolve(&list, checkpoint, &from, &root)?;
    let taken = to != from
        && crate::file::namespaces(&saver, file)
            .await?
            .iter()
            .any(|(t, _, _)| t == to.as_str());
    if taken {
        return Err(Failure::runtime(format!(
            "thread {to} already exists in {}; fork needs a new thread",
            file.display()
        )));
    }
    let loaded = load(&*saver, &from, &root, c).await?;
    let shapes = saver.field_shapes(&from, &root).await?;
    let mut plan = ForkPlan::new(&from, loaded, &to).map_err(fork_failure)?;
    for edit in &edits {
        let retyped = plan
            .edit(edit)
            .map_err(|source| edit_failure(&edit.path, source))?;
        let field = edit.path.field();
        let fit = shapes
            .get(field)
            .zip(plan.value(field))
            .map(|(shape, value)| shape.fit(value));
        match fit {
            Some(Fit::Misfit(why)) if !force => {
                return Err(Failure::runtime(format!(
                    "--set {}: field {field}: {why}, so the program's type would fail to load \
                     the branch; nothing was written (--force forks anyway)",
                    edit.path
                )));
            }
            Some(Fit::Misfit(why) | Fit::Doubt(why)) => {
                eprintln!(
                    "stategraph: warning: --set {}: field {field}: {why}",
                    edit.path
                );
            }
            Some(Fit::Fits) => {}
            // No shape recorded (a file from an older build): only the JSON type is known.
            None => warn_retyped(retyped),
        }
    }
    let written = plan.write(&*saver).await;
    saver.close()?;
    let id = written.map_err(fork_failure)?;
    Ok(emit(&report(out, &from, c, &to, id, &edits))?)
}

/// Warn that an edit changed its field's JSON type.
fn warn_retyped(retyped: Option<Retyped>) {
    if let Some(r) = retyped {
        eprintln!(
            "stategraph: warning: --set {}: field {} was a {} and is now a {}; the program's type must accept it",
            r.path,
            r.path.field(),
            r.was,
            r.now
        );
    }
}

/// One `--set PATH=JSON`.
fn parse_set(raw: &str) -> Result<FieldEdit, Failure> {
    let (path, text) = raw.split_once('=').ok_or_else(|| {
        Failure::usage(format!(
            "--set `{raw}`: expected PATH=JSON, e.g. --set /count=3"
        ))
    })?;
    let path = FieldPath::parse(path).map_err(|e| Failure::usage(format!("--set `{raw}`: {e}")))?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        Failure::usage(format!(
            "--set {path}: the value is not JSON ({e}); a string needs quotes, e.g. --set '{path}=\"text\"'"
        ))
    })?;
    Ok(FieldEdit { path, value })
}

/// An edit that cannot be made is a usage error.
fn edit_failure(path: &FieldPath, e: EditError) -> Failure {
    match e {
        EditError::NothingInside { field } => Failure::usage(format!(
            "--set {path}: field {field} has no stored value to change inside; set it whole with --set /{field}=JSON"
        )),
        other => Failure::usage(format!("--set {path}: {other}")),
    }
}

/// A fork that could not be read or written is a run-time problem.
fn fork_failure(e: ForkError) -> Failure {
    match e {
        ForkError::Copy(e) => Failure::from(e),
        other => Failure::runtime(other.to_string()),
    }
}

/// What was made: the new thread and checkpoint, and the edits.
fn report(
    out: Output,
    from: &ThreadId,
    c: CheckpointId,
    to: &ThreadId,
    id: CheckpointId,
    edits: &[FieldEdit],
) -> String {
    if out.json {
        let doc = json!({
            "thread": to.as_str(),
            "checkpoint": id.to_string(),
            "parent": c.to_string(),
            "from_thread": from.as_str(),
            "set": edits
                .iter()
                .map(|e| json!({ "path": e.path.as_str(), "value": e.value }))
                .collect::<Vec<_>>(),
        });
        return json_text(&doc);
    }
    let into = if to == from {
        format!("a new branch of thread {to}")
    } else {
        format!("thread {to} (a copy of the forked branch)")
    };
    let mut text = format!(
        "forked thread {from} at {c} into {into}\nnew checkpoint {}\n",
        out.style.yellow(&id.to_string())
    );
    for e in edits {
        let _ = writeln!(text, "  set {} = {}", e.path, short(&e.value, 100));
    }
    text
}
