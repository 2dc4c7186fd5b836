//! The JSON forms tools show checkpoints in (the `stategraph` CLI's `--json`, the studio's
//! API): one form each, so every tool prints a header or a pending write the same way.

use serde_json::{json, Value};

use super::format_utc_ms;
use crate::{Checkpoint, PendingWrite, WriteKind};

/// A checkpoint header as JSON: `id`, `parent`, `step`, `source`, `created_at_ms`,
/// `created_at` (ISO-8601 UTC), `next` (the nodes its control state plans) and `metadata`.
///
/// ```
/// use stategraph_checkpoints::inspect::header_json;
/// use stategraph_checkpoints::{Checkpoint, CheckpointId, Control, Source};
/// let id = CheckpointId::from_u128(1);
/// let cp = Checkpoint {
///     id,
///     parent: None,
///     step: -1,
///     source: Source::Input,
///     created_at_ms: 0,
///     control: Control::default(),
///     metadata: Default::default(),
/// };
/// let json = header_json(&cp);
/// assert_eq!(json["source"], "input");
/// assert_eq!(json["created_at"], "1970-01-01T00:00:00.000Z");
/// ```
pub fn header_json(cp: &Checkpoint) -> Value {
    json!({
        "id": cp.id.to_string(),
        "parent": cp.parent.map(|p| p.to_string()),
        "step": cp.step,
        "source": cp.source.as_str(),
        "created_at_ms": cp.created_at_ms,
        "created_at": format_utc_ms(cp.created_at_ms),
        "next": cp.next_nodes(),
        "metadata": cp.metadata,
    })
}

/// A pending write as JSON: `{task, node, kind, ...}` with `value` (an output), `message`
/// (an error), `id` and `value` (an interrupt) or `values` (resume values).
///
/// ```
/// use stategraph_checkpoints::inspect::pending_json;
/// use stategraph_checkpoints::{PendingWrite, TaskId, WriteKind};
/// let w = PendingWrite {
///     task_id: TaskId::from_u128(7),
///     node: "grade".into(),
///     kind: WriteKind::Error("boom".into()),
/// };
/// assert_eq!(pending_json(&w)["message"], "boom");
/// ```
pub fn pending_json(w: &PendingWrite) -> Value {
    let task = w.task_id.to_string();
    match &w.kind {
        WriteKind::Output(v) => {
            json!({ "task": task, "node": w.node, "kind": "output", "value": v })
        }
        WriteKind::Error(m) => {
            json!({ "task": task, "node": w.node, "kind": "error", "message": m })
        }
        WriteKind::Interrupt { id, value } => json!({
            "task": task, "node": w.node, "kind": "interrupt", "id": id, "value": value
        }),
        WriteKind::Resume(values) => {
            json!({ "task": task, "node": w.node, "kind": "resume", "values": values })
        }
    }
}
