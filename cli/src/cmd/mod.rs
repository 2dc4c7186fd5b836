//! The subcommands: each opens the file, does its work through the [`Saver`] API (and the
//! read-only helpers of `stategraph_checkpoints::inspect`), and prints text or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use stategraph_checkpoints::diff::{diff_values, fields_to_json, parts_to_json, StateDiff};
use stategraph_checkpoints::inspect::{
    self, format_utc_ms, resolve_prefix, short_id_len, PrefixError,
};
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, FieldPart, FieldWrite, ListOptions,
    LoadedCheckpoint, Namespace, PutCheckpoint, Retention, Saver, Source, SqliteSaver, StepChanges,
    ThreadId,
};

use crate::output::{emit, header_json, json_text, pending_json, pending_lines, short, Style};
use crate::{Cli, Cmd};

/// Why a command failed: exit code (1 run-time problem, 2 usage) and the message for stderr
/// (empty when everything was already printed).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            message: message.into(),
        }
    }

    fn runtime(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<CheckpointError> for Failure {
    fn from(e: CheckpointError) -> Self {
        Failure::runtime(e.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::runtime(format!("cannot write the output: {e}"))
    }
}

type Outcome = Result<(), Failure>;

/// What every command needs to know about the output.
#[derive(Debug, Clone, Copy)]
struct Out {
    json: bool,
    style: Style,
}

/// Run the command `cli` names.
pub(crate) async fn run(cli: &Cli) -> Outcome {
    let out = Out {
        json: cli.json,
        style: Style::new(cli.color),
    };
    match &cli.command {
        Cmd::Threads { file } => threads(out, file).await,
        Cmd::History {
            file,
            thread,
            limit,
            ns,
        } => history(out, file, thread, *limit, ns).await,
        Cmd::Show {
            file,
            thread,
            checkpoint,
            field,
            path,
            ns,
        } => {
            let pick = match (field, path) {
                (Some(f), _) => Pick::Field(f.clone()),
                (None, Some(p)) => Pick::Pointer(p.clone()),
                (None, None) => Pick::All,
            };
            show(out, file, thread, checkpoint.as_deref(), pick, ns).await
        }
        Cmd::Diff {
            file,
            thread,
            a,
            b,
            since_parent,
            ns,
        } => {
            let which = match (since_parent, a, b) {
                (Some(c), _, _) => Which::SinceParent(c.clone()),
                (None, Some(a), Some(b)) => Which::Between(a.clone(), b.clone()),
                _ => {
                    return Err(Failure::usage(
                        "diff needs two checkpoints A B, or --since-parent C",
                    ))
                }
            };
            diff(out, file, thread, which, ns).await
        }
        Cmd::Fork {
            file,
            thread,
            checkpoint,
            to,
            set,
        } => fork(out, file, thread, checkpoint, to, set).await,
        Cmd::Verify { file } => verify(out, file).await,
        Cmd::Prune { file, thread, keep } => prune(out, file, thread, *keep).await,
    }
}

// ---------------------------------------------------------------------------------------
// Shared steps.

/// Check that the file exists (never create it) and open it as a saver.
fn open(file: &Path) -> Result<SqliteSaver, Failure> {
    exists(file)?;
    inspect::open_existing(file).map_err(|e| file_error(file, e))
}

fn exists(file: &Path) -> Outcome {
    if file.is_dir() {
        return Err(Failure::runtime(format!(
            "{}: is a directory, not a checkpoint file",
            file.display()
        )));
    }
    if !file.is_file() {
        return Err(Failure::runtime(format!(
            "{}: no such file",
            file.display()
        )));
    }
    Ok(())
}

fn file_error(file: &Path, e: CheckpointError) -> Failure {
    match e {
        CheckpointError::Integrity { blob, detail, .. } if blob == "sg_meta" => {
            Failure::runtime(format!("{}: {detail}", file.display()))
        }
        CheckpointError::Storage(inner) => Failure::runtime(format!("{}: {inner}", file.display())),
        other => Failure::runtime(format!("{}: {other}", file.display())),
    }
}

fn thread_id(text: &str) -> Result<ThreadId, Failure> {
    ThreadId::new(text).map_err(|e| Failure::usage(e.to_string()))
}

fn where_(thread: &ThreadId, ns: &Namespace) -> String {
    if ns.is_root() {
        format!("thread {:?}", thread.as_str())
    } else {
        format!("thread {:?} (namespace {:?})", thread.as_str(), ns.as_str())
    }
}

/// Every checkpoint header of `(thread, ns)`, newest first; an unknown thread is an error.
async fn headers(
    saver: &SqliteSaver,
    file: &Path,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<Vec<Checkpoint>, Failure> {
    let list = saver.list(thread, ns, ListOptions::default()).await?;
    if list.is_empty() {
        let what = if ns.is_root() {
            format!("no thread {:?} in {}", thread.as_str(), file.display())
        } else {
            format!(
                "thread {:?} has no checkpoints in namespace {:?} in {}",
                thread.as_str(),
                ns.as_str(),
                file.display()
            )
        };
        return Err(Failure::runtime(what));
    }
    Ok(list)
}

/// The checkpoint `text` names among `list` (full id or unique prefix).
fn resolve(
    list: &[Checkpoint],
    text: &str,
    thread: &ThreadId,
    ns: &Namespace,
) -> Result<CheckpointId, Failure> {
    resolve_prefix(list.iter().map(|c| c.id), text).map_err(|e| match e {
        PrefixError::Invalid(_) => Failure::usage(e.to_string()),
        PrefixError::NotFound(p) => {
            Failure::runtime(format!("no checkpoint {p} in {}", where_(thread, ns)))
        }
        PrefixError::Ambiguous { .. } => Failure::usage(format!("{e}; give more digits")),
    })
}

async fn load(
    saver: &SqliteSaver,
    thread: &ThreadId,
    ns: &Namespace,
    id: CheckpointId,
) -> Result<LoadedCheckpoint, Failure> {
    saver
        .get(thread, ns, Some(id))
        .await?
        .ok_or_else(|| Failure::runtime(format!("no checkpoint {id} in {}", where_(thread, ns))))
}

fn state_of(loaded: &LoadedCheckpoint) -> Result<Value, Failure> {
    fields_to_json(&loaded.fields).map_err(|e| {
        Failure::runtime(format!(
            "checkpoint {}: a stored value is not readable: {e}",
            loaded.checkpoint.id
        ))
    })
}

fn short_id(id: CheckpointId, len: usize) -> String {
    id.to_string()[..len].to_string()
}

fn next_text(cp: &Checkpoint) -> String {
    let next = cp.next_nodes();
    if next.is_empty() {
        "-".to_string()
    } else {
        next.join(", ")
    }
}

// ---------------------------------------------------------------------------------------
// threads

async fn threads(out: Out, file: &Path) -> Outcome {
    let saver = open(file)?;
    let infos = saver.list_threads().await?;
    let namespaces = inspect::namespaces(file).map_err(|e| file_error(file, e))?;
    saver.close();
    let sub = |t: &str| -> Vec<(&str, usize)> {
        namespaces
            .iter()
            .filter(|(th, ns, _)| th == t && !ns.is_empty())
            .map(|(_, ns, n)| (ns.as_str(), *n))
            .collect()
    };
    if out.json {
        let list: Vec<Value> = infos
            .iter()
            .map(|i| {
                json!({
                    "thread": i.thread.as_str(),
                    "checkpoints": i.checkpoints,
                    "last_step": i.last_step,
                    "status": i.status.as_str(),
                    "updated_at_ms": i.updated_at_ms,
                    "updated_at": format_utc_ms(i.updated_at_ms),
                    "namespaces": sub(i.thread.as_str())
                        .iter()
                        .map(|(ns, n)| json!({ "ns": ns, "checkpoints": n }))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        return Ok(emit(&json_text(&Value::Array(list)))?);
    }
    if infos.is_empty() {
        return Ok(emit(&format!("no threads in {}\n", file.display()))?);
    }
    let s = out.style;
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
    for i in &infos {
        let status = i.status.as_str();
        let pad = " ".repeat(11usize.saturating_sub(status.len()));
        let subs = sub(i.thread.as_str());
        let subs = if subs.is_empty() {
            "-".to_string()
        } else {
            format!("{} namespace(s)", subs.len())
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
    Ok(emit(&text)?)
}

// ---------------------------------------------------------------------------------------
// history

/// What a step wrote, as short text and as JSON.
fn summarize(changes: &StepChanges) -> (Vec<String>, Vec<Value>) {
    let mut text = Vec::new();
    let mut data = Vec::new();
    for (field, parts) in &changes.fields {
        let appended = !parts.is_empty() && parts.iter().all(|p| matches!(p, FieldPart::Tail(_)));
        match parts_to_json(parts) {
            Ok(Value::Array(items)) if appended => {
                text.push(format!("{field} +{}", items.len()));
                data.push(json!({
                    "field": field, "kind": "appended", "items": items.len(), "values": items
                }));
            }
            Ok(value) => {
                text.push(format!("{field}={}", short(&value, 40)));
                data.push(json!({ "field": field, "kind": "replaced", "value": value }));
            }
            Err(e) => {
                text.push(format!("{field} (unreadable)"));
                data.push(json!({ "field": field, "kind": "unreadable", "error": e }));
            }
        }
    }
    (text, data)
}

async fn history(out: Out, file: &Path, thread: &str, limit: Option<usize>, ns: &str) -> Outcome {
    let saver = open(file)?;
    let thread = thread_id(thread)?;
    let ns = Namespace::parse(ns);
    let all = headers(&saver, file, &thread, &ns).await?;
    let len = short_id_len(&all.iter().map(|c| c.id).collect::<Vec<_>>());
    let shown = &all[..limit.unwrap_or(all.len()).min(all.len())];
    let s = out.style;
    let mut rows = Vec::new();
    let mut text = String::new();
    for cp in shown {
        let changes = saver.changes(&thread, &ns, cp.id).await?;
        let (mut summary, writes) = summarize(&changes);
        if cp.source == Source::Input {
            if let Some(send) = cp.control.sends.iter().find(|s| s.node == "__start__") {
                summary.insert(0, format!("input {}", short(&send.arg, 40)));
            }
        }
        if out.json {
            let mut row = header_json(cp);
            row["writes"] = Value::Array(writes);
            row["pending"] = changes.pending.iter().map(pending_json).collect();
            rows.push(row);
            continue;
        }
        let marks: Vec<String> = pending_lines(&changes.pending, s)
            .into_iter()
            .map(|(k, v)| format!("[{k} {v}]"))
            .collect();
        let summary = if summary.is_empty() {
            s.dim("(nothing written)")
        } else {
            summary.join(", ")
        };
        let source = cp.source.as_str();
        let _ = write!(
            text,
            "{}  step {:>3}  {}{}  next: {}  {summary}",
            s.yellow(&short_id(cp.id, len)),
            cp.step,
            s.cyan(source),
            " ".repeat(6usize.saturating_sub(source.len())),
            next_text(cp),
        );
        for m in marks {
            let _ = write!(text, "  {m}");
        }
        text.push('\n');
    }
    saver.close();
    if out.json {
        return Ok(emit(&json_text(&Value::Array(rows)))?);
    }
    Ok(emit(&text)?)
}

// ---------------------------------------------------------------------------------------
// show

/// Which part of the state `show` prints.
enum Pick {
    All,
    Field(String),
    Pointer(String),
}

async fn show(
    out: Out,
    file: &Path,
    thread: &str,
    checkpoint: Option<&str>,
    pick: Pick,
    ns: &str,
) -> Outcome {
    if let Pick::Pointer(p) = &pick {
        if !p.is_empty() && !p.starts_with('/') {
            return Err(Failure::usage(format!(
                "--path {p:?}: a JSON pointer starts with '/', e.g. /log/0"
            )));
        }
    }
    let saver = open(file)?;
    let thread = thread_id(thread)?;
    let ns = Namespace::parse(ns);
    let list = headers(&saver, file, &thread, &ns).await?;
    let id = match checkpoint {
        Some(text) => resolve(&list, text, &thread, &ns)?,
        None => list[0].id,
    };
    let loaded = load(&saver, &thread, &ns, id).await?;
    saver.close();
    let state = state_of(&loaded)?;
    let value = match &pick {
        Pick::All => None,
        Pick::Field(f) => Some(state.get(f).cloned().ok_or_else(|| {
            Failure::runtime(format!(
                "field {f:?} has no stored value at checkpoint {id} (stored fields: {})",
                stored_fields(&loaded)
            ))
        })?),
        Pick::Pointer(p) => Some(state.pointer(p).cloned().ok_or_else(|| {
            Failure::runtime(format!(
                "nothing at {p} in the state at checkpoint {id} (stored fields: {})",
                stored_fields(&loaded)
            ))
        })?),
    };
    if let Some(v) = value {
        return Ok(emit(&json_text(&v))?);
    }
    let cp = &loaded.checkpoint;
    if out.json {
        let mut header = header_json(cp);
        header["pending"] = loaded.pending.iter().map(pending_json).collect();
        header["control"] = serde_json::to_value(&cp.control).unwrap_or(Value::Null);
        let doc = json!({
            "thread": thread.as_str(),
            "ns": ns.as_str(),
            "checkpoint": header,
            "state": state,
        });
        return Ok(emit(&json_text(&doc))?);
    }
    let s = out.style;
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
        &cp.parent.map_or_else(|| "-".to_string(), |p| p.to_string()),
    );
    line("step", &cp.step.to_string());
    line("source", cp.source.as_str());
    line("created", &format_utc_ms(cp.created_at_ms));
    line("next", &next_text(cp));
    for (k, v) in pending_lines(&loaded.pending, s) {
        line(&k, &v);
    }
    if !cp.metadata.is_empty() {
        line(
            "metadata",
            &serde_json::to_string(&cp.metadata).unwrap_or_default(),
        );
    }
    text.push('\n');
    text.push_str(&json_text(&state));
    Ok(emit(&text)?)
}

/// Length of text without ANSI escapes.
fn visible_len(text: &str) -> usize {
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

fn stored_fields(loaded: &LoadedCheckpoint) -> String {
    if loaded.fields.is_empty() {
        "none".to_string()
    } else {
        loaded
            .fields
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

// ---------------------------------------------------------------------------------------
// diff

/// Which two states `diff` compares.
enum Which {
    Between(String, String),
    SinceParent(String),
}

async fn diff(out: Out, file: &Path, thread: &str, which: Which, ns: &str) -> Outcome {
    let saver = open(file)?;
    let thread = thread_id(thread)?;
    let ns = Namespace::parse(ns);
    let list = headers(&saver, file, &thread, &ns).await?;
    let (from_cp, from, to_cp, to) = match which {
        Which::Between(a, b) => {
            let a = resolve(&list, &a, &thread, &ns)?;
            let b = resolve(&list, &b, &thread, &ns)?;
            let la = load(&saver, &thread, &ns, a).await?;
            let lb = load(&saver, &thread, &ns, b).await?;
            let (sa, sb) = (state_of(&la)?, state_of(&lb)?);
            (Some(la.checkpoint), sa, lb.checkpoint, sb)
        }
        Which::SinceParent(c) => {
            let c = resolve(&list, &c, &thread, &ns)?;
            let lc = load(&saver, &thread, &ns, c).await?;
            let to = state_of(&lc)?;
            let (parent_cp, from) = parent_state(&saver, &thread, &ns, &lc, &to, &list).await?;
            (parent_cp, from, lc.checkpoint, to)
        }
    };
    saver.close();
    let d = diff_values(&from, &to);
    if out.json {
        let doc = json!({
            "thread": thread.as_str(),
            "ns": ns.as_str(),
            "from": from_cp.as_ref().map(|c| c.id.to_string()),
            "to": to_cp.id.to_string(),
            "diff": diff_json(&d),
            "patch": d.to_json_patch(),
        });
        return Ok(emit(&json_text(&doc))?);
    }
    let s = out.style;
    let describe = |c: &Checkpoint| format!("{} (step {}, {})", c.id, c.step, c.source.as_str());
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}",
        s.bold(&format!(
            "--- {}",
            from_cp
                .as_ref()
                .map_or_else(|| "(no parent: empty state)".to_string(), describe)
        ))
    );
    let _ = writeln!(text, "{}", s.bold(&format!("+++ {}", describe(&to_cp))));
    if d.is_empty() {
        let _ = writeln!(text, "{}", s.dim("(no changes)"));
    }
    for l in d.to_string().lines() {
        let _ = writeln!(text, "{}", s.diff_line(l));
    }
    Ok(emit(&text)?)
}

/// A state diff as JSON: `{"fields": [{"field", "change": {"kind", ...}}]}`.
fn diff_json(d: &StateDiff) -> Value {
    serde_json::to_value(d).unwrap_or(Value::Null)
}

/// The state of `lc`'s parent: rebuilt from `lc`'s own state when its step only appended
/// (what `Saver::changes` tells without loading the parent), else loaded.
async fn parent_state(
    saver: &SqliteSaver,
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
        let mut from = to.clone();
        let mut ok = true;
        for (field, parts) in &changes.fields {
            let added = match parts_to_json(parts) {
                Ok(Value::Array(items)) => items.len(),
                _ => {
                    ok = false;
                    break;
                }
            };
            match from.get_mut(field) {
                Some(Value::Array(list)) if list.len() >= added => {
                    list.truncate(list.len() - added);
                }
                _ => {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            return Ok((header, from));
        }
    }
    let lp = load(saver, thread, ns, parent).await?;
    let from = state_of(&lp)?;
    Ok((Some(lp.checkpoint), from))
}

// ---------------------------------------------------------------------------------------
// fork

/// One `--set PATH=JSON`.
struct SetOp {
    path: String,
    field: String,
    /// The pointer inside the field's value (`""` for the whole field).
    inner: String,
    value: Value,
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn parse_set(raw: &str) -> Result<SetOp, Failure> {
    let (path, text) = raw.split_once('=').ok_or_else(|| {
        Failure::usage(format!(
            "--set {raw:?}: expected PATH=JSON, e.g. --set /count=3"
        ))
    })?;
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Failure::usage(format!(
            "--set {raw:?}: the path must be a JSON pointer to a field, starting with '/' (e.g. /count)"
        )));
    };
    let (token, inner) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let field = unescape(token);
    if field.is_empty() {
        return Err(Failure::usage(format!(
            "--set {raw:?}: the path names no field"
        )));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        Failure::usage(format!(
            "--set {path}: the value is not JSON ({e}); a string needs quotes, e.g. --set '{path}=\"text\"'"
        ))
    })?;
    Ok(SetOp {
        path: path.to_string(),
        field,
        inner: inner.to_string(),
        value,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Set `value` at pointer `inner` inside `target` (an existing object key or array index, a
/// new object key, or the end of an array: index = length or `-`).
fn set_in(target: &mut Value, inner: &str, value: Value) -> Result<(), String> {
    let Some((parent, last)) = inner.rsplit_once('/') else {
        *target = value;
        return Ok(());
    };
    let last = unescape(last);
    let container = target
        .pointer_mut(parent)
        .ok_or_else(|| format!("nothing at {parent:?} inside the field"))?;
    match container {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            if last == "-" {
                items.push(value);
                return Ok(());
            }
            let i: usize = last
                .parse()
                .map_err(|_| format!("{last:?} is not an array index"))?;
            match i.cmp(&items.len()) {
                std::cmp::Ordering::Less => items[i] = value,
                std::cmp::Ordering::Equal => items.push(value),
                std::cmp::Ordering::Greater => {
                    return Err(format!(
                        "index {i} is past the end of an array of {}",
                        items.len()
                    ))
                }
            }
            Ok(())
        }
        other => Err(format!(
            "{} is a {}, not an object or array",
            if parent.is_empty() {
                "the field"
            } else {
                parent
            },
            kind(other)
        )),
    }
}

async fn fork(
    out: Out,
    file: &Path,
    thread: &str,
    checkpoint: &str,
    to: &str,
    sets: &[String],
) -> Outcome {
    // Everything the user typed is checked before the file is touched.
    let ops: Vec<SetOp> = sets
        .iter()
        .map(|s| parse_set(s))
        .collect::<Result<_, _>>()?;
    let from = thread_id(thread)?;
    let to = thread_id(to)?;
    if from == to {
        return Err(Failure::usage(
            "--to must name a new thread, not the one forked",
        ));
    }
    let saver = open(file)?;
    let root = Namespace::root();
    let list = headers(&saver, file, &from, &root).await?;
    let c = resolve(&list, checkpoint, &from, &root)?;
    let taken = inspect::namespaces(file)
        .map_err(|e| file_error(file, e))?
        .iter()
        .any(|(t, _, _)| t == to.as_str());
    if taken {
        return Err(Failure::runtime(format!(
            "thread {:?} already exists in {}; fork needs a new thread",
            to.as_str(),
            file.display()
        )));
    }
    let loaded = load(&saver, &from, &root, c).await?;
    let state = state_of(&loaded)?;
    let mut changed: BTreeMap<String, Value> = BTreeMap::new();
    for op in &ops {
        let known = loaded.fields.contains_key(&op.field)
            || loaded
                .checkpoint
                .control
                .versions
                .contains_key(op.field.as_str());
        if !known || op.field.contains(':') {
            return Err(Failure::usage(format!(
                "--set {}: no field {:?} at checkpoint {c} (stored fields: {})",
                op.path,
                op.field,
                stored_fields(&loaded)
            )));
        }
        let current = changed
            .get(&op.field)
            .or_else(|| state.get(&op.field))
            .cloned();
        let mut value = match (current, op.inner.is_empty()) {
            (_, true) => Value::Null,
            (Some(v), false) => v,
            (None, false) => {
                return Err(Failure::usage(format!(
                    "--set {}: field {:?} has no stored value to change inside; set it whole with --set /{}=JSON",
                    op.path, op.field, op.field
                )))
            }
        };
        set_in(&mut value, &op.inner, op.value.clone())
            .map_err(|e| Failure::usage(format!("--set {}: {e}", op.path)))?;
        if let Some(old) = state.get(&op.field) {
            if kind(old) != kind(&value) {
                eprintln!(
                    "stategraph: warning: --set {}: field {:?} was a {} and is now a {}; the program's type must accept it",
                    op.path,
                    op.field,
                    kind(old),
                    kind(&value)
                );
            }
        }
        changed.insert(op.field.clone(), value);
    }
    let mut writes = Vec::new();
    for (field, value) in &changed {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| Failure::runtime(format!("cannot encode {field:?}: {e}")))?;
        writes.push(FieldWrite {
            field: field.clone(),
            part: FieldPart::Whole(bytes),
        });
    }
    let id = CheckpointId::generate();
    let mut control = loaded.checkpoint.control.clone();
    if !changed.is_empty() {
        // The changed fields get one new version, as a step's writes do.
        let next = control.versions.values().copied().max().unwrap_or(0) + 1;
        for field in changed.keys() {
            control.versions.insert(field.as_str().into(), next);
        }
    }
    control.anchor = Some(id);
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "forked_from".to_string(),
        json!({ "thread": from.as_str(), "checkpoint": c.to_string() }),
    );
    if !ops.is_empty() {
        metadata.insert(
            "set".to_string(),
            Value::Array(ops.iter().map(|o| Value::String(o.path.clone())).collect()),
        );
    }
    let put = PutCheckpoint {
        thread: to.clone(),
        ns: root.clone(),
        checkpoint: Checkpoint {
            id,
            parent: Some(c),
            step: loaded.checkpoint.step,
            source: Source::Fork,
            created_at_ms: id.created_at_ms(),
            control,
            metadata,
        },
        writes,
    };
    saver.copy_thread(&from, &to).await?;
    if let Err(e) = saver.put(put).await {
        // Leave nothing half-made behind.
        let _ = saver.delete_thread(&to).await;
        saver.close();
        return Err(Failure::runtime(format!("fork failed: {e}")));
    }
    saver.close();
    if out.json {
        let doc = json!({
            "thread": to.as_str(),
            "checkpoint": id.to_string(),
            "parent": c.to_string(),
            "from_thread": from.as_str(),
            "set": ops.iter().map(|o| json!({ "path": o.path, "value": o.value })).collect::<Vec<_>>(),
        });
        return Ok(emit(&json_text(&doc))?);
    }
    let s = out.style;
    let mut text = format!(
        "forked thread {:?} at {c} into thread {:?}\nnew checkpoint {}\n",
        from.as_str(),
        to.as_str(),
        s.yellow(&id.to_string())
    );
    for op in &ops {
        let _ = writeln!(text, "  set {} = {}", op.path, short(&op.value, 100));
    }
    Ok(emit(&text)?)
}

// ---------------------------------------------------------------------------------------
// verify

async fn verify(out: Out, file: &Path) -> Outcome {
    exists(file)?;
    let report = inspect::verify(file)
        .await
        .map_err(|e| file_error(file, e))?;
    let n = report.problems.len();
    if out.json {
        let doc = json!({
            "file": file.display().to_string(),
            "ok": report.is_ok(),
            "counts": report.counts,
            "problems": report.problems,
        });
        emit(&json_text(&doc))?;
    } else {
        let s = out.style;
        let c = &report.counts;
        let mut text = String::new();
        let _ = writeln!(text, "{}", s.bold(&format!("verified {}", file.display())));
        let _ = writeln!(
            text,
            "  sqlite integrity_check  {}",
            if c.sqlite_ok {
                s.green("ok")
            } else {
                s.red("FAILED")
            }
        );
        let _ = writeln!(text, "  blobs                   {}", c.blobs);
        let _ = writeln!(
            text,
            "  logs                    {} ({} parts)",
            c.logs, c.log_parts
        );
        let _ = writeln!(
            text,
            "  checkpoints             {} in {} thread/namespace pair(s), {} loaded whole",
            c.checkpoints, c.namespaces, c.loaded
        );
        let _ = writeln!(text, "  pending writes          {}", c.writes);
        if report.is_ok() {
            let _ = writeln!(text, "{}", s.green("ok: no problems found"));
        } else {
            let _ = writeln!(text, "{}", s.red(&format!("{n} problem(s):")));
            for p in &report.problems {
                let _ = writeln!(text, "  {}  {}: {}", s.red(&p.table), p.key, p.detail);
            }
        }
        emit(&text)?;
    }
    if report.is_ok() {
        Ok(())
    } else {
        let first = &report.problems[0];
        Err(Failure::runtime(format!(
            "{}: {n} problem(s) found; first: {} {}: {}",
            file.display(),
            first.table,
            first.key,
            first.detail
        )))
    }
}

// ---------------------------------------------------------------------------------------
// prune

async fn prune(out: Out, file: &Path, thread: &str, keep: u64) -> Outcome {
    let saver = open(file)?;
    let thread = thread_id(thread)?;
    let root = Namespace::root();
    let before = headers(&saver, file, &thread, &root).await?.len();
    let keep = usize::try_from(keep).unwrap_or(usize::MAX);
    let deleted = saver.prune(&thread, Retention::KeepLast(keep)).await?;
    let left = saver
        .list(&thread, &root, ListOptions::default())
        .await?
        .len();
    saver.close();
    if out.json {
        let doc = json!({
            "thread": thread.as_str(),
            "deleted": deleted,
            "before": before,
            "kept": left,
        });
        return Ok(emit(&json_text(&doc))?);
    }
    Ok(emit(&format!(
        "pruned thread {:?}: deleted {deleted} checkpoint(s) (all namespaces); {left} of {before} left in its root namespace\n",
        thread.as_str()
    ))?)
}
