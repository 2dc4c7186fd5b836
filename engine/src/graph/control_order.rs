//! The order control records list a graph's versioned channels and each node's seen channels
//! in, computed once at compile time.

use std::sync::Arc;

use super::compiled::{CompiledNode, Join};
use crate::State;

/// A versioned channel of a graph: a state field, a node's trigger channel or a join's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Channel {
    Field(usize),
    Branch(usize),
    Join(usize),
}

/// Every versioned channel in name order (field names shared by every control record), and for
/// each node the channels it can have seen in name order: a control record's maps are built
/// from these in one ordered pass (bulk-built, not inserted entry by entry).
pub(crate) struct ControlOrder {
    /// `(name, channel)`, sorted by name.
    pub(crate) channels: Vec<Named>,
    /// Node indices sorted by node name, each with the channels it can have seen (its trigger
    /// channel, the joins into it), sorted by name.
    pub(crate) seen: Vec<(usize, Vec<Named>)>,
}

/// A channel with its name.
pub(crate) type Named = (Arc<str>, Channel);

impl ControlOrder {
    pub(super) fn new<S: State>(
        field_names: &[Arc<str>],
        nodes: &[CompiledNode<S>],
        joins: &[Join],
    ) -> Self {
        let mut channels: Vec<Named> = field_names
            .iter()
            .enumerate()
            .map(|(i, n)| (Arc::clone(n), Channel::Field(i)))
            .chain(
                nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (Arc::clone(&n.branch_channel), Channel::Branch(i))),
            )
            .chain(
                joins
                    .iter()
                    .enumerate()
                    .map(|(j, join)| (Arc::clone(&join.channel), Channel::Join(j))),
            )
            .collect();
        channels.sort_by(|a, b| a.0.cmp(&b.0));
        let mut seen: Vec<(usize, Vec<Named>)> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut chans = vec![(Arc::clone(&n.branch_channel), Channel::Branch(i))];
                chans.extend(
                    joins
                        .iter()
                        .enumerate()
                        .filter(|(_, join)| join.target == i)
                        .map(|(j, join)| (Arc::clone(&join.channel), Channel::Join(j))),
                );
                chans.sort_by(|a, b| a.0.cmp(&b.0));
                (i, chans)
            })
            .collect();
        seen.sort_by(|a, b| nodes[a.0].name.cmp(&nodes[b.0].name));
        ControlOrder { channels, seen }
    }
}

/// The state's field names by field index (placed by `index()`, not by position in `ALL`).
pub(super) fn field_names<S: State>() -> Vec<Arc<str>> {
    use crate::state::Field;
    let all = <S::Field as Field>::ALL;
    let mut names: Vec<Arc<str>> = vec![Arc::from(""); all.len()];
    for f in all {
        if let Some(slot) = names.get_mut(f.index()) {
            *slot = Arc::from(f.name());
        }
    }
    names
}
