//! Checkpoints and field writes built by hand, for the tests that talk to a saver directly.

use std::collections::BTreeMap;

use stategraph_checkpoints::{
    Checkpoint, CheckpointId, Control, FieldPart, FieldWrite, Namespace, PutCheckpoint, Source,
    ThreadId,
};

/// A checkpoint header with id `id`, no metadata and an empty control state.
pub fn header_at(
    id: CheckpointId,
    parent: Option<CheckpointId>,
    step: i64,
    source: Source,
) -> Checkpoint {
    Checkpoint {
        id,
        parent,
        step,
        source,
        created_at_ms: id.created_at_ms(),
        control: Control::default(),
        metadata: BTreeMap::new(),
    }
}

/// A checkpoint header with a new id.
pub fn header(parent: Option<CheckpointId>, step: i64, source: Source) -> Checkpoint {
    header_at(CheckpointId::generate(), parent, step, source)
}

/// A root-namespace checkpoint of `t` after `parent` (an input checkpoint when there is
/// none) at `step`, writing `writes`.
pub fn put_of(
    t: &ThreadId,
    parent: Option<CheckpointId>,
    step: i64,
    writes: Vec<FieldWrite>,
) -> PutCheckpoint {
    let source = if parent.is_some() {
        Source::Loop
    } else {
        Source::Input
    };
    PutCheckpoint {
        thread: t.clone(),
        ns: Namespace::root(),
        checkpoint: header(parent, step, source),
        writes,
    }
}

/// `field` replaced by the JSON `json`.
pub fn whole(field: &str, json: impl AsRef<[u8]>) -> FieldWrite {
    FieldWrite {
        field: field.to_owned(),
        part: FieldPart::Whole(json.as_ref().to_vec()),
    }
}

/// The JSON array `json` appended to the list `field`.
pub fn tail(field: &str, json: impl AsRef<[u8]>) -> FieldWrite {
    FieldWrite {
        field: field.to_owned(),
        part: FieldPart::Tail(json.as_ref().to_vec()),
    }
}
