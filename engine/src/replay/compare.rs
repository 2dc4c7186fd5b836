//! What a replay reports as different, and the order in which a replayed step wrote its
//! fields.

use std::collections::BTreeMap;

use crate::diff::StateDiff;
use crate::state::Field;
use crate::State;

/// What differs at a [`Divergence`](super::Divergence).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DivergenceKind {
    /// The states differ (see [`Divergence::diff`](super::Divergence::diff)).
    State,
    /// The recording goes on where the replay ended or stopped.
    ReplayEnded,
    /// The replay pauses on other interrupts than the recording did: the nodes that paused,
    /// with the values they showed, on each side.
    Interrupts {
        /// Recorded `(node, value)` pairs.
        recorded: Vec<(String, serde_json::Value)>,
        /// Replayed `(node, value)` pairs.
        replayed: Vec<(String, serde_json::Value)>,
    },
    /// The states agree but the replay would run other nodes next.
    Next {
        /// What the recording runs next.
        recorded: Vec<String>,
        /// What the replay would run next.
        replayed: Vec<String>,
    },
    /// A replayed step failed (a node error, a timeout, a reducer or routing error).
    Failed {
        /// The error, as text.
        error: String,
    },
}

/// The first node that paused on one side only.
pub(super) fn first_odd_node(
    a: &[(String, serde_json::Value)],
    b: &[(String, serde_json::Value)],
) -> Option<String> {
    a.iter()
        .find(|x| !b.contains(x))
        .or_else(|| b.iter().find(|x| !a.contains(x)))
        .map(|(node, _)| node.clone())
}

/// The `(node, field)` writes of each replayed step, by step, in the order the engine
/// applied them.
#[derive(Debug, Default)]
pub(super) struct WriteOrder(pub(super) BTreeMap<i64, Vec<(String, &'static str)>>);

impl WriteOrder {
    /// Note that `node` wrote `field` in `step`.
    pub(super) fn note(&mut self, step: i64, node: &str, field: &'static str) {
        let writes = self.0.entry(step).or_default();
        if !writes.iter().any(|(n, f)| *f == field && n == node) {
            writes.push((node.to_owned(), field));
        }
    }

    /// Put `diff`'s fields in the order step `step` changed them: those it wrote first, in
    /// the order the engine merged them (by writing node in declaration order, `rank`; the
    /// fields of one update in declaration order), then the rest in the state's declaration
    /// order. Returns the node that wrote the first of them, if the step wrote it.
    ///
    /// Updates stream as tasks finish, so the notes come in finish order; ranking them by
    /// node makes the report independent of timing.
    pub(super) fn sort<S: State>(
        &self,
        step: i64,
        diff: &mut StateDiff,
        rank: impl Fn(&str) -> usize,
    ) -> Option<String> {
        let mut order: Vec<(String, &'static str)> =
            self.0.get(&step).map_or_else(Vec::new, Clone::clone);
        order.sort_by_key(|(node, _)| rank(node));
        // The first merged write of a field is the one that changed it first.
        let mut seen = Vec::new();
        order.retain(|(_, field)| {
            let first = !seen.contains(field);
            seen.push(*field);
            first
        });
        let at = |field: &str| order.iter().position(|(_, w)| *w == field);
        diff.fields.sort_by_key(|f| {
            let declared = S::Field::from_name(&f.field).map_or(usize::MAX, Field::index);
            (at(&f.field).unwrap_or(usize::MAX), declared)
        });
        let first = diff.fields.first()?;
        at(&first.field).map(|i| order[i].0.clone())
    }
}
