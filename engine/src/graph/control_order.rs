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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::future::{ready, Ready};

    use super::Channel;
    use crate::{BoxError, CompileError, NodeContext, StateGraph, END, START};

    #[derive(crate::State, Clone, Default, Debug)]
    struct Pair {
        zeta: u32,
        alpha: u32,
    }

    fn noop(
    ) -> impl Fn(Arc<Pair>, NodeContext) -> Ready<Result<PairUpdate, BoxError>> + Send + Sync + 'static
    {
        |_s, _c| ready(Ok(Pair::update()))
    }

    fn label(named: &(Arc<str>, Channel)) -> String {
        match named.1 {
            Channel::Field(i) => format!("{}=field{i}", named.0),
            Channel::Branch(i) => format!("{}=branch{i}", named.0),
            Channel::Join(i) => format!("{}=join{i}", named.0),
        }
    }

    #[test]
    fn channels_and_each_nodes_seen_channels_are_in_name_order() -> Result<(), CompileError> {
        let graph = StateGraph::<Pair>::new()
            .add_node("b", noop())
            .add_node("a", noop())
            .add_edge(START, "b")
            .add_edge(START, "a")
            .add_join(["b"], "a")
            .add_edge("a", END)
            .compile()?;
        let order = &graph.inner.control_order;
        let channels: Vec<String> = order.channels.iter().map(label).collect();
        assert_eq!(
            channels,
            [
                "alpha=field1",
                "branch:to:a=branch1",
                "branch:to:b=branch0",
                "join:b:a=join0",
                "zeta=field0",
            ]
        );
        let seen: Vec<(usize, Vec<String>)> = order
            .seen
            .iter()
            .map(|(node, chans)| (*node, chans.iter().map(label).collect()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    1,
                    vec!["branch:to:a=branch1".into(), "join:b:a=join0".into()]
                ),
                (0, vec!["branch:to:b=branch0".to_owned()]),
            ]
        );
        Ok(())
    }
}
