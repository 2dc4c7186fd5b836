//! State diffs for a graph's typed state: between two states, two checkpoints, or one step.
//!
//! Diffs are computed on the JSON form of each field (see
//! [`stategraph_checkpoints::diff`]), so they read the same in tests, in the inspector and in
//! a JSON Patch.
//!
//! ```
//! use stategraph::diff::diff_states;
//! use stategraph::State;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Chat { #[reduce(append)] log: Vec<String>, turns: u32 }
//!
//! let a = Chat { log: vec!["hi".into()], turns: 1 };
//! let b = Chat { log: vec!["hi".into(), "yo".into()], turns: 2 };
//! let d = diff_states(&a, &b)?;
//! assert_eq!(d.to_string(), "+ log[1]: \"yo\"\n~ turns: 1 -> 2\n");
//! # Ok::<(), stategraph::RunError>(())
//! ```

use serde_json::{Map, Value};
pub use stategraph_checkpoints::diff::{diff_values, FieldChange, FieldDiff, ListEdit, StateDiff};
use stategraph_checkpoints::{CheckpointError, CheckpointId, FieldPart, Namespace, ThreadId};

use crate::state::{Change, Field, Stored};
use crate::{CompiledGraph, RunError, State};

/// A state as a JSON object of its fields (each field in its stored JSON form).
///
/// # Errors
/// [`RunError::Encode`] if a field cannot be serialized.
pub fn state_to_json<S: State>(state: &S) -> Result<Value, RunError> {
    let mut out = Map::new();
    for f in S::Field::ALL {
        let stored =
            state
                .encode_field(*f, Change::Replaced)
                .map_err(|source| RunError::Encode {
                    field: f.name(),
                    source,
                })?;
        let bytes = match stored {
            Stored::Whole(b) | Stored::Tail(b) => b,
        };
        let value: Value = serde_json::from_slice(&bytes).map_err(|source| RunError::Encode {
            field: f.name(),
            source,
        })?;
        out.insert(f.name().to_owned(), value);
    }
    Ok(Value::Object(out))
}

/// The difference between two states, field by field.
///
/// # Errors
/// [`RunError::Encode`] if a field cannot be serialized.
pub fn diff_states<S: State>(a: &S, b: &S) -> Result<StateDiff, RunError> {
    Ok(diff_values(&state_to_json(a)?, &state_to_json(b)?))
}

impl<S: State> CompiledGraph<S> {
    /// The difference between two checkpoints of a thread. Each state is loaded on its own
    /// (O(fields)); the history between them is not read.
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] for an unknown checkpoint; storage and decode errors.
    pub async fn diff(
        &self,
        thread: &str,
        a: CheckpointId,
        b: CheckpointId,
    ) -> Result<StateDiff, RunError> {
        let sa = self
            .get_state(thread, Some(a))
            .await?
            .ok_or_else(|| not_found(thread, a))?;
        let sb = self
            .get_state(thread, Some(b))
            .await?
            .ok_or_else(|| not_found(thread, b))?;
        diff_states(&*sa.values, &*sb.values)
    }

    /// What the step that wrote checkpoint `id` changed, from what it stored: appended items
    /// come straight from the step's writes, replaced fields are compared with the parent's
    /// value.
    ///
    /// # Errors
    /// [`CheckpointError::NotFound`] for an unknown checkpoint; storage and decode errors.
    pub async fn step_diff(&self, thread: &str, id: CheckpointId) -> Result<StateDiff, RunError> {
        let saver = self.saver.clone().ok_or(RunError::MissingThread)?;
        let thread_id = ThreadId::new(thread)?;
        let root = Namespace::root();
        let changes = saver.changes(&thread_id, &root, id).await?;
        let parent = match changes.parent {
            Some(p) => saver.get(&thread_id, &root, Some(p)).await?,
            None => None,
        };
        // A field the parent did not store has its default value.
        let defaults = state_to_json(&S::default())?;
        let mut fields = Vec::new();
        for (name, parts) in &changes.fields {
            let from = match parent.as_ref().and_then(|p| p.fields.get(name)) {
                Some(b) => stategraph_checkpoints::diff::parts_to_json(b)
                    .map_err(|d| decode_error(thread, name, d))?,
                None => defaults.get(name).cloned().unwrap_or(Value::Null),
            };
            let change = match (parts.first(), &from) {
                (Some(FieldPart::Tail(_)), Value::Array(list)) => {
                    let items =
                        parts_items(parts).map_err(|detail| decode_error(thread, name, detail))?;
                    FieldChange::List {
                        edits: vec![ListEdit::Appended {
                            index: list.len(),
                            items,
                        }],
                    }
                }
                _ => {
                    let to = stategraph_checkpoints::diff::parts_to_json(parts)
                        .map_err(|d| decode_error(thread, name, d))?;
                    let one = |v: Value| Value::Object(Map::from_iter([(name.clone(), v)]));
                    match diff_values(&one(from), &one(to)).fields.pop() {
                        Some(d) => d.change,
                        None => continue,
                    }
                }
            };
            fields.push(FieldDiff {
                field: name.clone(),
                change,
            });
        }
        fields.sort_by(|a, b| a.field.cmp(&b.field));
        Ok(StateDiff { fields })
    }
}

fn parts_items(parts: &[FieldPart]) -> Result<Vec<Value>, String> {
    let mut items = Vec::new();
    for p in parts {
        match p {
            FieldPart::Tail(b) => {
                items.extend(serde_json::from_slice::<Vec<Value>>(b).map_err(|e| e.to_string())?);
            }
            FieldPart::Whole(_) => return Err("a whole part among appended items".to_owned()),
        }
    }
    Ok(items)
}

fn decode_error(thread: &str, field: &str, detail: String) -> RunError {
    RunError::Decode {
        field: field.to_owned(),
        thread: ThreadId::new(thread).ok(),
        detail,
    }
}

fn not_found(thread: &str, id: CheckpointId) -> RunError {
    match ThreadId::new(thread) {
        Ok(t) => RunError::Checkpoint(CheckpointError::NotFound {
            thread: t,
            ns: Namespace::root(),
            id,
        }),
        Err(e) => RunError::Checkpoint(e),
    }
}
