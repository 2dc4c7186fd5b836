//! The control state of a run: which versions each channel has, what each node has seen,
//! and what is scheduled next; typed in memory, converted to and from the checkpoint's
//! [`Control`] record.

use std::collections::BTreeMap;
use std::sync::Arc;

use stategraph_checkpoints::{CheckpointId, Control, PendingSend, ThreadId, BRANCH_PREFIX};

use crate::command::START;
use crate::graph::{Channel, GraphInner};
use crate::state::Field;
use crate::{RunError, State};

/// A `Send` scheduled for the next step: the node it runs and its argument.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ScheduledSend {
    /// The node's index.
    pub(super) node: usize,
    pub(super) arg: Arc<serde_json::Value>,
}

/// The typed control state of one graph level (the fast in-memory form of [`Control`]).
#[derive(Clone)]
pub(super) struct ControlState<S: State> {
    /// Per state field, the version of its last write.
    pub(super) field_versions: Vec<u64>,
    /// Per node, the version of its trigger (`branch:to:<node>`).
    pub(super) branch_versions: Vec<u64>,
    /// Per join, the version of its last barrier change.
    pub(super) join_versions: Vec<u64>,
    /// Per node, the trigger version it consumed last.
    pub(super) seen_branch: Vec<u64>,
    /// Per join, the version its target consumed last.
    pub(super) seen_join: Vec<u64>,
    /// Per node, whether it is triggered for the next step.
    pub(super) branches: Vec<bool>,
    /// Per join, which of its sources have finished.
    pub(super) barriers: Vec<Vec<bool>>,
    /// `Send`s scheduled for the next step.
    pub(super) sends: Vec<ScheduledSend>,
    /// New input, applied by the `__start__` step.
    pub(super) start: Option<S::Update>,
    /// The highest version of any channel.
    pub(super) max_version: u64,
    /// The version static interrupts have acknowledged.
    pub(super) interrupt_seen: u64,
    /// The checkpoint that started this stretch of the branch (see [`Control::anchor`]).
    pub(super) anchor: Option<CheckpointId>,
}

impl<S: State> ControlState<S> {
    /// The control state of a graph that has not run.
    pub(super) fn new(g: &GraphInner<S>) -> Self {
        ControlState {
            field_versions: vec![0; S::Field::ALL.len()],
            branch_versions: vec![0; g.nodes.len()],
            join_versions: vec![0; g.joins.len()],
            seen_branch: vec![0; g.nodes.len()],
            seen_join: vec![0; g.joins.len()],
            branches: vec![false; g.nodes.len()],
            barriers: g
                .joins
                .iter()
                .map(|j| vec![false; j.sources.len()])
                .collect(),
            sends: Vec::new(),
            start: None,
            max_version: 0,
            interrupt_seen: 0,
            anchor: None,
        }
    }

    /// Whether every source of join `j` has finished.
    pub(super) fn join_ready(&self, j: usize) -> bool {
        self.barriers[j].iter().all(|s| *s)
    }

    /// Whether node `i` runs in the next step by an edge (its trigger or a ready join).
    pub(super) fn is_triggered(&self, g: &GraphInner<S>, i: usize) -> bool {
        self.branches[i]
            || g.joins
                .iter()
                .enumerate()
                .any(|(j, join)| join.target == i && self.join_ready(j))
    }

    /// The record form stored in a checkpoint.
    pub(super) fn to_control(&self, g: &GraphInner<S>) -> Result<Control, RunError> {
        let mut interrupt_seen = BTreeMap::new();
        if self.interrupt_seen > 0 {
            interrupt_seen.insert("*".to_owned(), self.interrupt_seen);
        }
        Ok(Control {
            versions: self.versions_record(g),
            versions_seen: self.seen_record(g),
            branches: g
                .nodes
                .iter()
                .zip(&self.branches)
                .filter(|(_, b)| **b)
                .map(|(n, _)| n.branch_channel.to_string())
                .collect(),
            barriers: self.barriers_record(g),
            sends: self.sends_record(g)?,
            interrupt_seen,
            anchor: self.anchor,
        })
    }

    fn version(&self, c: Channel) -> u64 {
        match c {
            Channel::Field(f) => self.field_versions[f],
            Channel::Branch(n) => self.branch_versions[n],
            Channel::Join(j) => self.join_versions[j],
        }
    }

    fn seen(&self, c: Channel) -> u64 {
        match c {
            Channel::Field(_) => 0,
            Channel::Branch(n) => self.seen_branch[n],
            Channel::Join(j) => self.seen_join[j],
        }
    }

    /// Built from entries already in key order: collecting sorted entries bulk-builds the
    /// map instead of inserting them one by one.
    ///
    /// Every state field is kept, a never-written one at version 0, so that a reader without
    /// the state's type (the inspector) knows the whole state; trigger channels at 0 are left
    /// out.
    fn versions_record(&self, g: &GraphInner<S>) -> BTreeMap<Arc<str>, u64> {
        g.control_order
            .channels
            .iter()
            .filter_map(|(name, c)| {
                let v = self.version(*c);
                (v > 0 || matches!(c, Channel::Field(_))).then(|| (Arc::clone(name), v))
            })
            .collect()
    }

    fn seen_record(&self, g: &GraphInner<S>) -> BTreeMap<Arc<str>, BTreeMap<Arc<str>, u64>> {
        g.control_order
            .seen
            .iter()
            .filter_map(|(node, chans)| {
                let m: BTreeMap<Arc<str>, u64> = chans
                    .iter()
                    .filter_map(|(name, c)| {
                        Some((Arc::clone(name), self.seen(*c))).filter(|e| e.1 > 0)
                    })
                    .collect();
                (!m.is_empty()).then(|| (Arc::clone(&g.nodes[*node].name), m))
            })
            .collect()
    }

    fn barriers_record(&self, g: &GraphInner<S>) -> BTreeMap<String, Vec<String>> {
        let mut barriers = BTreeMap::new();
        for (j, join) in g.joins.iter().enumerate() {
            let seen: Vec<String> = join
                .sources
                .iter()
                .zip(&self.barriers[j])
                .filter(|(_, s)| **s)
                .map(|(&src, _)| g.nodes[src].name.to_string())
                .collect();
            if !seen.is_empty() {
                barriers.insert(join.channel.to_string(), seen);
            }
        }
        barriers
    }

    fn sends_record(&self, g: &GraphInner<S>) -> Result<Vec<PendingSend>, RunError> {
        let mut sends: Vec<PendingSend> = Vec::new();
        if let Some(start) = &self.start {
            let arg = serde_json::to_value(start).map_err(|source| RunError::Encode {
                field: START,
                source,
            })?;
            sends.push(PendingSend {
                node: START.to_owned(),
                arg,
            });
        }
        sends.extend(self.sends.iter().map(|s| PendingSend {
            node: g.nodes[s.node].name.to_string(),
            arg: s.arg.as_ref().clone(),
        }));
        Ok(sends)
    }

    /// Read a checkpoint's record form back; a name this graph does not have is an error.
    pub(super) fn from_control(
        g: &GraphInner<S>,
        c: &Control,
        thread: &Option<ThreadId>,
    ) -> Result<Self, RunError> {
        let reader = RecordReader { g, thread };
        let mut ctl = ControlState::new(g);
        ctl.read_versions(&reader, c)?;
        ctl.read_schedule(&reader, c)?;
        ctl.read_sends(&reader, c)?;
        ctl.interrupt_seen = c.interrupt_seen.values().copied().max().unwrap_or(0);
        ctl.anchor = c.anchor;
        Ok(ctl)
    }

    fn read_versions(&mut self, r: &RecordReader<'_, S>, c: &Control) -> Result<(), RunError> {
        let g = r.g;
        for (name, &v) in &c.versions {
            self.max_version = self.max_version.max(v);
            if let Some(f) = S::Field::from_name(name.as_ref()) {
                self.field_versions[f.index()] = v;
            } else if let Some(node) = name.strip_prefix(BRANCH_PREFIX) {
                self.branch_versions[r.node("control", node, name)?] = v;
            } else if let Some(j) = g.joins.iter().position(|j| j.channel == *name) {
                self.join_versions[j] = v;
            } else {
                return Err(r.unknown("control", name));
            }
        }
        for (node, chans) in &c.versions_seen {
            let i = r.node("versions_seen", node, node)?;
            for (chan, &v) in chans {
                if *chan == g.nodes[i].branch_channel {
                    self.seen_branch[i] = v;
                } else if let Some(j) = g.joins.iter().position(|j| j.channel == *chan) {
                    self.seen_join[j] = v;
                }
            }
        }
        Ok(())
    }

    fn read_schedule(&mut self, r: &RecordReader<'_, S>, c: &Control) -> Result<(), RunError> {
        let g = r.g;
        for b in &c.branches {
            let node = b.strip_prefix(BRANCH_PREFIX).unwrap_or(b);
            self.branches[r.node("branches", node, b)?] = true;
        }
        for (chan, seen) in &c.barriers {
            let j = g
                .joins
                .iter()
                .position(|j| *j.channel == **chan)
                .ok_or_else(|| r.unknown("barriers", chan))?;
            for s in seen {
                let i = r.node("barriers", s, s)?;
                if let Some(pos) = g.joins[j].sources.iter().position(|&x| x == i) {
                    self.barriers[j][pos] = true;
                }
            }
        }
        Ok(())
    }

    fn read_sends(&mut self, r: &RecordReader<'_, S>, c: &Control) -> Result<(), RunError> {
        for s in &c.sends {
            if s.node == START {
                let u = serde_json::from_value(s.arg.clone()).map_err(|e| RunError::Decode {
                    field: START.to_owned(),
                    thread: r.thread.clone(),
                    detail: e.to_string(),
                })?;
                self.start = Some(u);
            } else {
                self.sends.push(ScheduledSend {
                    node: r.node("sends", &s.node, &s.node)?,
                    arg: Arc::new(s.arg.clone()),
                });
            }
        }
        Ok(())
    }
}

/// What reading a [`Control`] record needs to name what it does not know.
struct RecordReader<'a, S: State> {
    g: &'a GraphInner<S>,
    thread: &'a Option<ThreadId>,
}

impl<S: State> RecordReader<'_, S> {
    fn unknown(&self, what: &str, name: &str) -> RunError {
        RunError::Decode {
            field: what.to_owned(),
            thread: self.thread.clone(),
            detail: format!("checkpoint names {name:?}, which this graph does not have"),
        }
    }

    /// The index of node `node`, named `name` in the record's `what`.
    fn node(&self, what: &str, node: &str, name: &str) -> Result<usize, RunError> {
        self.g
            .index
            .get(node)
            .copied()
            .ok_or_else(|| self.unknown(what, name))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{BoxError, NodeContext, StateGraph, END};

    #[derive(crate::State, Clone, Default, Debug)]
    struct Doc {
        n: u32,
        #[reduce(append)]
        log: Vec<String>,
    }

    type Error = Box<dyn std::error::Error>;

    /// a and b run from the start and join into c.
    fn graph() -> Result<crate::CompiledGraph<Doc>, Error> {
        let node =
            |s: Arc<Doc>, _: NodeContext| async move { Ok::<_, BoxError>(Doc::update().n(s.n)) };
        Ok(StateGraph::<Doc>::new()
            .add_node("a", node)
            .add_node("b", node)
            .add_node("c", node)
            .add_edge(START, "a")
            .add_edge(START, "b")
            .add_join(["a", "b"], "c")
            .add_edge("c", END)
            .compile()?)
    }

    /// A control state with something in every part.
    fn busy(g: &GraphInner<Doc>) -> ControlState<Doc> {
        let mut ctl = ControlState::new(g);
        ctl.field_versions = vec![3, 5];
        ctl.branch_versions[0] = 2;
        ctl.branch_versions[2] = 6;
        ctl.join_versions[0] = 4;
        ctl.seen_branch[0] = 2;
        ctl.seen_join[0] = 4;
        ctl.branches[2] = true;
        ctl.barriers[0][1] = true;
        ctl.sends.push(ScheduledSend {
            node: 1,
            arg: Arc::new(serde_json::json!({"k": 7})),
        });
        ctl.start = Some(Doc::update().n(9));
        ctl.max_version = 6;
        ctl.interrupt_seen = 5;
        ctl.anchor = Some(CheckpointId::from_u128(42));
        ctl
    }

    #[test]
    fn the_record_form_reads_back_the_same() -> Result<(), Error> {
        let compiled = graph()?;
        let g = &compiled.inner;
        let ctl = busy(g);
        let record = ctl.to_control(g)?;
        let back = ControlState::from_control(g, &record, &None)?;
        assert_eq!(back.field_versions, ctl.field_versions);
        assert_eq!(back.branch_versions, ctl.branch_versions);
        assert_eq!(back.join_versions, ctl.join_versions);
        assert_eq!(back.seen_branch, ctl.seen_branch);
        assert_eq!(back.seen_join, ctl.seen_join);
        assert_eq!(back.branches, ctl.branches);
        assert_eq!(back.barriers, ctl.barriers);
        assert_eq!(back.sends, ctl.sends);
        assert_eq!(
            serde_json::to_value(&back.start)?,
            serde_json::to_value(&ctl.start)?
        );
        assert_eq!(back.max_version, ctl.max_version);
        assert_eq!(back.interrupt_seen, ctl.interrupt_seen);
        assert_eq!(back.anchor, ctl.anchor);
        // And the record of what was read back is the same record.
        assert_eq!(back.to_control(g)?, record);
        Ok(())
    }

    #[test]
    fn the_record_names_every_field_and_leaves_out_zero_triggers() -> Result<(), Error> {
        let compiled = graph()?;
        let g = &compiled.inner;
        let record = busy(g).to_control(g)?;
        let names: Vec<&str> = record.versions.keys().map(|k| k.as_ref()).collect();
        assert!(names.contains(&"n") && names.contains(&"log"), "{names:?}");
        assert!(names.contains(&"branch:to:a") && names.contains(&"branch:to:c"));
        assert!(
            !names.contains(&"branch:to:b"),
            "a zero version is left out"
        );
        assert_eq!(record.branches, ["branch:to:c"]);
        assert_eq!(record.barriers.values().collect::<Vec<_>>(), [&["b"]]);
        assert_eq!(record.sends[0].node, START);
        assert_eq!(record.sends[1].node, "b");
        assert_eq!(record.interrupt_seen.get("*"), Some(&5));
        let empty = ControlState::new(g).to_control(g)?;
        // Fields are named even before they are written; nothing else is.
        assert!(empty
            .versions
            .iter()
            .all(|(k, v)| *v == 0 && !k.contains(':')));
        assert!(empty.versions.contains_key("n") && empty.versions_seen.is_empty());
        assert!(empty.branches.is_empty() && empty.barriers.is_empty());
        assert!(empty.sends.is_empty() && empty.interrupt_seen.is_empty());
        Ok(())
    }

    #[test]
    fn a_name_the_graph_does_not_have_is_an_error() -> Result<(), Error> {
        let compiled = graph()?;
        let g = &compiled.inner;
        let mut record = ControlState::new(g).to_control(g)?;
        record.branches.push("branch:to:gone".to_owned());
        let e = ControlState::from_control(g, &record, &None)
            .err()
            .ok_or("accepted")?;
        assert!(
            matches!(&e, RunError::Decode { field, .. } if field == "branches"),
            "{e}"
        );
        assert!(e.to_string().contains("branch:to:gone"), "{e}");
        Ok(())
    }

    #[test]
    fn a_join_is_ready_when_all_its_sources_finished() -> Result<(), Error> {
        let compiled = graph()?;
        let g = &compiled.inner;
        let mut ctl = ControlState::new(g);
        assert!(!ctl.is_triggered(g, 2));
        ctl.barriers[0][0] = true;
        assert!(!ctl.join_ready(0) && !ctl.is_triggered(g, 2));
        ctl.barriers[0][1] = true;
        assert!(ctl.join_ready(0) && ctl.is_triggered(g, 2));
        assert!(!ctl.is_triggered(g, 0));
        Ok(())
    }
}
