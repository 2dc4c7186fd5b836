//! Decoding a state from the field values a checkpoint stores.

use stategraph_checkpoints::{FieldPart, LoadedCheckpoint, ThreadId};
use stategraph_reducers::StoredRef;

use crate::state::Field;
use crate::{RunError, State};

/// The stored parts of a field, borrowed in the form the state's decoder reads.
fn stored_refs(parts: &[FieldPart]) -> Vec<StoredRef<'_>> {
    parts
        .iter()
        .map(|p| match p {
            FieldPart::Whole(b) => StoredRef::Whole(b),
            FieldPart::Tail(b) => StoredRef::Tail(b),
        })
        .collect()
}

/// Move a state to a child checkpoint by applying what the child's step changed.
pub(super) fn apply_changes<S: State>(
    state: &mut S,
    fields: &[(String, Vec<FieldPart>)],
) -> Result<(), String> {
    for (name, parts) in fields {
        let field = S::Field::from_name(name).ok_or_else(|| format!("unknown field {name:?}"))?;
        let refs = stored_refs(parts);
        let result = match refs.first() {
            Some(StoredRef::Whole(_)) => state.decode_field(field, &refs),
            _ => state.extend_field(field, &refs),
        };
        result.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Decode a state from a loaded checkpoint.
pub(super) fn decode_state<S: State>(
    loaded: &LoadedCheckpoint,
    thread: &Option<ThreadId>,
) -> Result<S, RunError> {
    let mut state = S::default();
    for (name, parts) in &loaded.fields {
        let field = S::Field::from_name(name).ok_or_else(|| RunError::Decode {
            field: name.clone(),
            thread: thread.clone(),
            detail: "the checkpoint has a field the state type does not declare".to_owned(),
        })?;
        state
            .decode_field(field, &stored_refs(parts))
            .map_err(|e| RunError::Decode {
                field: name.clone(),
                thread: thread.clone(),
                detail: e.to_string(),
            })?;
    }
    Ok(state)
}
